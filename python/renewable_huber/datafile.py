"""Chunked reading of CSV and Parquet files for the command line: a file is never held in
memory whole, only one batch of rows at a time.

CSV uses the standard library only (the base install has no pandas), so the command line
behaves identically with or without the optional extras. Parquet needs pyarrow (the
`parquet` extra) and streams row groups through ParquetFile.iter_batches.

The rules (docs/cli.md, "Data files"):

* The schema is fixed once per file. A CSV column is numeric when its cell in the first data
  row is a finite number; Parquet integer and floating columns are numeric. Only the default
  feature choice uses this rule: a column named by the user (target, --features,
  --weight-column) is read as numbers whatever its first cell holds.
* Every cell of every column that is read must then be a finite number: anything else stops
  the run naming the file, the line (Parquet: the row), the column and the value. Which cells
  are checked never depends on the batch size.
* Chunks are aligned to the file: chunk k holds data rows k*B+1 .. (k+1)*B, so a run that
  starts after R rows (R a multiple of B, as a checkpoint written by `fit` always records)
  reads exactly the batches an uninterrupted run reads.
* A table can fingerprint what it has read (source_record) and recognise a file by such a
  fingerprint (resume_at), which is how `fit --resume` knows where to continue.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import math
import operator
import os
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np


class DataFileError(ValueError):
    """A data file cannot be read as a table of numbers; the message names the file and,
    where it applies, the line and column."""


class Chunk(NamedTuple):
    """One batch of rows: where it is in the file, its values, and how many data rows of the
    file lie at or before its last row."""

    first: int  # CSV: physical line of its first row (the header is line 1); Parquet: row
    last: int
    values: np.ndarray  # float64, one column per requested column
    rows_through: int


# Parquet is fingerprinted by its first bytes only (a Parquet file is written whole, never
# appended to); 64 KiB holds the magic number and the start of the first column's pages.
PARQUET_PREFIX_BYTES = 1 << 16
# How much of a CSV file is examined for binary content before any parsing.
_SNIFF_BYTES = 1 << 16
_HASH_BLOCK = 1 << 20
_BOM = b"\xef\xbb\xbf"
# Leading bytes of files that are often given a .csv name by mistake.
_NOT_CSV = (
    (b"PAR1", "a Parquet file: give it the .parquet suffix"),
    (b"\x1f\x8b", "gzip-compressed: decompress it first"),
    (b"PK\x03\x04", "a zip archive (an .xlsx workbook is one): export the sheet as CSV"),
    (b"\xff\xfe", "UTF-16 text: save it as UTF-8"),
    (b"\xfe\xff", "UTF-16 text: save it as UTF-8"),
)


class _Prefix:
    """SHA-256 of a file's leading bytes, extended on demand through a handle of its own (the
    parser's buffered handle is never moved)."""

    def __init__(self, path: str):
        self._path = path
        self._handle = None
        self._hasher = hashlib.sha256()
        self.length = 0
        self.newlines = 0

    def extend_to(self, offset: int) -> str:
        """The hex digest of bytes [0, offset); re-hashes from the start only if asked for a
        shorter prefix than already hashed (never in `fit`'s order of calls)."""
        if offset < self.length:
            self._hasher, self.length, self.newlines = hashlib.sha256(), 0, 0
        if self._handle is None:
            self._handle = open(self._path, "rb")
        self._handle.seek(self.length)
        while self.length < offset:
            block = self._handle.read(min(_HASH_BLOCK, offset - self.length))
            if not block:
                break
            self._hasher.update(block)
            self.newlines += block.count(b"\n")
            self.length += len(block)
        return self._hasher.hexdigest()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


class _Table:
    """What CSV and Parquet tables share: the size, the source record and its check."""

    path: str
    size: int
    columns: list[str]
    location: str  # "line" (CSV) or "row" (Parquet), for messages

    def span(self, first: int, last: int) -> str:
        return f"{self.location}s {first}-{last}" if first != last else f"{self.location} {first}"

    def _prefix_for(self, rows: int) -> int:
        raise NotImplementedError

    def source_record(self, rows: int) -> dict:
        """The checkpoint's source record for a model that holds the file's first `rows` data
        rows; `rows` must be a position this table has reached (the start or a chunk's end)."""
        prefix_bytes = self._prefix_for(rows)
        return {"path": os.path.abspath(self.path), "size": self.size,
                "prefix_bytes": prefix_bytes,
                "prefix_sha256": self._prefix.extend_to(prefix_bytes), "rows": rows}

    def same_source(self, record: dict) -> bool:
        """Whether this file starts with the bytes `record` fingerprinted."""
        if self.size < record["prefix_bytes"]:
            return False
        return self._prefix.extend_to(record["prefix_bytes"]) == record["prefix_sha256"]


class CsvTable(_Table):
    """A CSV file with a header row, read as UTF-8 (a byte order mark is skipped)."""

    location = "line"

    def __init__(self, path: str, chunk_rows: int):
        self.path = path
        self._chunk_rows = chunk_rows
        self._prefix = _Prefix(path)
        self._file = open(path, "rb")
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            self._offset = 0  # bytes handed to the csv parser so far
            self._line_base = 0  # physical lines before the parser's first line
            self._pending = []  # rows read ahead, not yet delivered
            self._sniff()
            self._reader = csv.reader(self._lines())
            header = self._read_rows(1, width=None)
            if not header:
                raise DataFileError(f"{path} is empty: a CSV file needs a header row")
            self.columns = [name.strip() for name in header[0][1]]
            _reject_duplicate_columns(path, [name for name in self.columns if name])
            # data rows -> the byte offset just after them (see _mark); 0 rows: the header
            self._marks = {0: self._offset}
            first = self._read_rows(1)
            if not first:
                raise DataFileError(f"{path} has a header row but no data rows")
        except BaseException:
            self.close()
            raise
        self._first_line, self._first_row = first[0]
        self._pending = first  # read for the schema, delivered with the first chunk
        self._position = 0  # data rows delivered or skipped
        self.total_rows = None
        self.progress_total, self.progress_unit = self.size, "B"

    # -- reading ------------------------------------------------------------------------

    def _sniff(self) -> None:
        head = self._file.read(_SNIFF_BYTES)
        for magic, what in _NOT_CSV:
            if head.startswith(magic):
                raise DataFileError(f"{self.path} is not a CSV file: it is {what}")
        nul = head.find(b"\0")
        if nul >= 0:
            raise DataFileError(f"{self.path} is not a CSV file: it holds binary data (a NUL "
                                f"byte at offset {nul})")
        self._file.seek(0)
        if head.startswith(_BOM):
            self._file.seek(len(_BOM))
            self._offset = len(_BOM)

    def _lines(self) -> Iterator[str]:
        # Lines are split and decoded here, not by a text-mode file, so that the byte offset of
        # every row is known (the fingerprint and the progress bar need it) and an undecodable
        # line is reported with its number.
        for raw in self._file:
            self._offset += len(raw)
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = self._line_base + self._reader.line_num + 1
                raise DataFileError(
                    f"{self.path} line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                    f"position {exc.start + 1}); save the file as UTF-8") from None

    _WIDTH_OF_HEADER = -1

    def _read_rows(self, n: int, width: int | None = _WIDTH_OF_HEADER
                   ) -> list[tuple[int, list[str]]]:
        """Up to n non-blank rows as (line, fields), the rows read ahead first, each checked
        to have the header's field count (width=None: the header itself, any count)."""
        out, self._pending = self._pending, []
        if width == self._WIDTH_OF_HEADER:
            width = len(self.columns)
        reader = self._reader
        try:
            while len(out) < n:
                want = n - len(out)
                got = 0
                for row in itertools.islice(reader, want):
                    got += 1
                    if not row:  # a blank line
                        continue
                    line = self._line_base + reader.line_num
                    if width is not None and len(row) != width:
                        raise DataFileError(f"{self.path} line {line}: {len(row)} fields, but "
                                            f"the header has {width}")
                    out.append((line, row))
                if got < want:
                    break
        except csv.Error as exc:
            line = self._line_base + reader.line_num
            raise DataFileError(f"{self.path} line {line}: {exc}") from None
        return out

    def _mark(self) -> None:
        """Remembers the byte offset after the rows delivered so far; only the last few
        positions can be fingerprinted (the start, the last chunks), which is all `fit`
        asks for. While the first data row is still read ahead, the parser is past it, and
        position 0 keeps the offset recorded after the header."""
        if self._pending:
            return
        self._marks[self._position] = self._offset
        while len(self._marks) > 4:
            del self._marks[next(iter(self._marks))]

    def _prefix_for(self, rows: int) -> int:
        try:
            offset = self._marks[rows]
        except KeyError:
            raise ValueError(f"position {rows} is not one this table has reached") from None
        return offset

    @property
    def progress_position(self) -> int:
        return self._offset

    @property
    def rows_read(self) -> int:
        return self._position

    def resume_at(self, record: dict) -> bool:
        """Continue after the rows `record` says were read, if this file starts with the bytes
        it fingerprinted: the parser jumps there without re-reading them. False (and nothing
        moved) when the file is another one."""
        if self._position != 0 or not self.same_source(record):
            return False
        self._file.seek(record["prefix_bytes"])
        self._offset = record["prefix_bytes"]
        self._line_base = self._prefix.newlines
        self._reader = csv.reader(self._lines())
        self._pending = []
        self._position = record["rows"]
        self._mark()
        return True

    def batches(self, columns: list[str], skip: int = 0) -> Iterator[Chunk]:
        """Chunks of the requested columns after the first `skip` data rows (counted from the
        start of the file, whatever resume_at already passed)."""
        indices = [self.columns.index(c) for c in columns]
        size = self._chunk_rows
        while self._position < skip:  # skipped rows are parsed for their lines, not converted
            want = min(size - self._position % size, skip - self._position)
            rows = self._read_rows(want)
            self._position += len(rows)
            if len(rows) < want:
                break
        self._mark()
        while True:
            rows = self._read_rows(size - self._position % size)
            if not rows:
                return
            values = self._to_array(rows, indices)
            self._position += len(rows)
            self._mark()
            yield Chunk(rows[0][0], rows[-1][0], values, self._position)

    def _to_array(self, rows, indices: list[int]) -> np.ndarray:
        if len(indices) == 1:
            (j,) = indices
            cells = (row[j] for _, row in rows)
        else:
            pick = operator.itemgetter(*indices)
            cells = itertools.chain.from_iterable(pick(row) for _, row in rows)
        try:
            # float() per cell is three times faster than NumPy's string-array conversion.
            values = np.fromiter(map(float, cells), dtype=np.float64,
                                 count=len(rows) * len(indices))
        except ValueError:
            self._raise_first_bad_cell(rows, indices)
            raise
        values = values.reshape(len(rows), len(indices))
        if not np.isfinite(values).all():
            i, k = np.argwhere(~np.isfinite(values))[0]
            line, row = rows[i]
            raise DataFileError(f"{self.path} line {line}: column {self.columns[indices[k]]!r} "
                                f"holds {row[indices[k]].strip()!r}, which is not a finite "
                                "number")
        return values

    def _raise_first_bad_cell(self, rows, indices: list[int]) -> None:
        for line, row in rows:
            for j in indices:
                cell = row[j].strip()
                if not cell:
                    raise DataFileError(f"{self.path} line {line}: missing value in column "
                                        f"{self.columns[j]!r}")
                if not _parses_as_float(cell):
                    raise DataFileError(f"{self.path} line {line}: column {self.columns[j]!r} "
                                        f"holds {cell!r}, which is not a number")

    # -- the schema ---------------------------------------------------------------------

    @property
    def numeric_columns(self) -> list[str]:
        return [name for name in self.columns if name and self._why_not(name) is None]

    def _why_not(self, column: str) -> str | None:
        if not column:
            return "no name in the header"
        cell = self._first_row[self.columns.index(column)].strip()
        if not cell:
            return f"empty in line {self._first_line}"
        if not _is_finite_number(cell):
            return f"{cell!r} in line {self._first_line}"
        return None

    def not_numeric(self) -> list[tuple[str, str]]:
        """(column, why) for every column the default feature choice leaves out for its
        content; unnamed columns appear as '(column K)'."""
        out = []
        for k, name in enumerate(self.columns, start=1):
            why = self._why_not(name)
            if why is not None:
                out.append((name or f"(column {k})", why))
        return out

    def check_readable(self, column: str) -> None:
        """A column the user named: its first cell must already be a number."""
        self._to_array([(self._first_line, self._first_row)], [self.columns.index(column)])

    def close(self) -> None:
        self._prefix.close()
        if getattr(self, "_file", None) is not None:
            self._file.close()


class ParquetTable(_Table):
    """A Parquet file read one record batch at a time. Integer and floating columns count as
    numeric; nulls and non-finite values are refused rather than guessed."""

    location = "row"

    def __init__(self, path: str, chunk_rows: int):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ModuleNotFoundError(
                "reading Parquet needs pyarrow: pip install 'renewable-huber[parquet]'"
            ) from exc
        self.path = path
        self._chunk_rows = chunk_rows
        self._prefix = _Prefix(path)
        self.size = os.path.getsize(path)
        try:
            self._file = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"{path} is not a readable Parquet file: "
                                f"{' '.join(str(exc).split())}") from None
        schema = self._file.schema_arrow
        self.columns = list(schema.names)
        _reject_duplicate_columns(path, self.columns)
        self._types = {field.name: field.type for field in schema}
        self._numeric = {name for name, t in self._types.items()
                         if pa.types.is_integer(t) or pa.types.is_floating(t)}
        self.total_rows = self._file.metadata.num_rows
        if self.total_rows == 0:
            self._file.close()
            raise DataFileError(f"{path} has a schema but no data rows")
        self.progress_total, self.progress_unit = self.total_rows, "rows"
        self._position = 0

    @property
    def numeric_columns(self) -> list[str]:
        return [c for c in self.columns if c in self._numeric]

    def not_numeric(self) -> list[tuple[str, str]]:
        return [(c, f"type {self._types[c]}") for c in self.columns if c not in self._numeric]

    def check_readable(self, column: str) -> None:
        if column not in self._numeric:
            raise DataFileError(f"{self.path}: column {column!r} is not numeric (its Parquet "
                                f"type is {self._types[column]})")

    def _prefix_for(self, rows: int) -> int:
        return min(self.size, PARQUET_PREFIX_BYTES)

    @property
    def progress_position(self) -> int:
        return self._position

    @property
    def rows_read(self) -> int:
        return self._position

    def resume_at(self, record: dict) -> bool:
        if self._position != 0 or not self.same_source(record):
            return False
        self._position = min(record["rows"], self.total_rows)
        return True

    def batches(self, columns: list[str], skip: int = 0) -> Iterator[Chunk]:
        """Chunks aligned to the file (see the module's docstring), rows counted from 1; row
        groups wholly before the first wanted row are not read."""
        start = max(skip, self._position)
        metadata = self._file.metadata
        groups, row = [], 0  # row: the rows before the first group read
        for g in range(metadata.num_row_groups):
            group_rows = metadata.row_group(g).num_rows
            if not groups and row + group_rows <= start:
                row += group_rows
                continue
            groups.append(g)
        self._position = min(start, self.total_rows)
        if not groups:
            return
        size = self._chunk_rows
        pending: list[np.ndarray] = []
        pending_rows = 0
        for record_batch in self._file.iter_batches(batch_size=size, row_groups=groups,
                                                    columns=columns):
            block = self._to_array(record_batch, columns, row)
            row += block.shape[0]
            if row <= start:
                continue
            if row - block.shape[0] < start:
                block = block[start - (row - block.shape[0]):]
            pending.append(block)
            pending_rows += block.shape[0]
            while pending_rows >= size - self._position % size:
                take = size - self._position % size
                yield self._emit(pending, take)
                pending_rows -= take
        if pending_rows:
            yield self._emit(pending, pending_rows)

    def _emit(self, pending: list[np.ndarray], take: int) -> Chunk:
        joined = np.concatenate(pending) if len(pending) > 1 else pending[0]
        values, rest = joined[:take], joined[take:]
        pending[:] = [rest] if rest.shape[0] else []
        first = self._position + 1
        self._position += take
        return Chunk(first, self._position, values, self._position)

    def _to_array(self, record_batch, columns: list[str], row: int) -> np.ndarray:
        """float64 values of a record batch whose first row is row + 1."""
        out = np.empty((record_batch.num_rows, len(columns)), dtype=np.float64)
        for j, name in enumerate(columns):
            array = record_batch.column(j)
            if array.null_count:
                first_null = int(np.flatnonzero(array.is_null().to_numpy(
                    zero_copy_only=False))[0])
                raise DataFileError(f"{self.path} row {row + first_null + 1}: missing value "
                                    f"(null) in column {name!r}")
            out[:, j] = array.to_numpy(zero_copy_only=False)
        if not np.isfinite(out).all():
            i, k = np.argwhere(~np.isfinite(out))[0]
            raise DataFileError(f"{self.path} row {row + i + 1}: column {columns[k]!r} holds "
                                f"{float(out[i, k])!r}, which is not a finite number")
        return out

    def close(self) -> None:
        self._prefix.close()
        self._file.close()


def open_table(path: str, chunk_rows: int) -> CsvTable | ParquetTable:
    """Open `path` by its suffix (.csv, or .parquet/.pq)."""
    if not os.path.isfile(path):
        if os.path.exists(path):
            raise DataFileError(f"{path} is not a regular file")
        raise FileNotFoundError(2, "No such file or directory", path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".csv":
        return CsvTable(path, chunk_rows)
    if suffix in (".parquet", ".pq"):
        return ParquetTable(path, chunk_rows)
    raise DataFileError(f"{path}: unsupported file type {suffix or '(no suffix)'!r}; "
                        "use .csv or .parquet")


def select_columns(table, *, target: str | None, features: list[str] | None,
                   weight: str | None = None) -> list[str]:
    """The feature columns: `features` when given, else every numeric column except the
    target and the weight column, in file order. Every named column must exist and hold a
    number in the first data row (later rows are checked as they are read)."""
    named = [name for name in (target, weight) if name is not None] + (features or [])
    for name in named:
        if name not in table.columns:
            raise DataFileError(f"{table.path} has no column {name!r}; its columns are: "
                                f"{', '.join(table.columns)}")
    if weight is not None and weight == target:
        raise DataFileError(f"--weight-column {weight!r} is the target column")
    if features is not None:
        if len(set(features)) != len(features):
            raise DataFileError(f"--features names a column twice: {', '.join(features)}")
        if target in features:
            raise DataFileError(f"--features must not include the target column {target!r}")
        if weight is not None and weight in features:
            raise DataFileError(f"--features must not include the weight column {weight!r}")
        chosen = list(features)
    else:
        chosen = [c for c in table.numeric_columns if c not in (target, weight)]
    for name in named:
        table.check_readable(name)
    if not chosen:
        raise DataFileError(f"{table.path} has no numeric feature columns besides the target"
                            + (" and the weight column" if weight is not None else ""))
    return chosen


def left_out_columns(table, used: list[str]) -> list[tuple[str, str]]:
    """(column, why) for the columns the default feature choice left out for their content
    (not the ones the user chose or that are in use)."""
    return [(name, why) for name, why in table.not_numeric() if name not in used]


def _reject_duplicate_columns(path: str, columns: list[str]) -> None:
    seen = set()
    for name in columns:
        if name in seen:
            raise DataFileError(f"{path}: column name {name!r} appears twice in the header")
        seen.add(name)


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_finite_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
