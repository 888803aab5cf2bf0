"""Chunked reading of CSV and Parquet files for the command line: a file is never held in
memory whole, only one batch of rows at a time.

CSV uses the standard library only (the base install has no pandas), so the command line
behaves identically with or without the optional extras. Parquet needs pyarrow (the
`parquet` extra) and streams row groups through ParquetFile.iter_batches.
"""

from __future__ import annotations

import csv
import itertools
import os
from collections.abc import Iterator

import numpy as np


class DataFileError(ValueError):
    """A data file cannot be read as a table of numbers; the message names the file and,
    where it applies, the line and column."""


class CsvTable:
    """A CSV file with a header row. Column types are inferred from the first chunk: a column
    is numeric when all its non-empty cells there parse as numbers."""

    def __init__(self, path: str, chunk_rows: int):
        self.path = path
        self.total_rows: int | None = None
        self._chunk_rows = chunk_rows
        self._file = open(path, newline="", encoding="utf-8")
        try:
            self._reader = csv.reader(self._file)
            header = next(self._reader, None)
            if header is None:
                raise DataFileError(f"{path} is empty: a CSV file needs a header row")
            self.columns = [name.strip() for name in header]
            _reject_duplicate_columns(path, self.columns)
            self._first_chunk = self._read_raw_chunk()
            self._first_bad_cell = self._first_non_numeric_cells(self._first_chunk)
        except BaseException:
            self._file.close()
            raise

    @property
    def numeric_columns(self) -> list[str]:
        return [c for c in self.columns if c not in self._first_bad_cell]

    def why_not_numeric(self, column: str) -> str:
        line, value = self._first_bad_cell[column]
        if line is None:
            return "it has no values in the first chunk"
        return f"line {line} holds {value!r}"

    def _read_raw_chunk(self) -> list[tuple[int, list[str]]]:
        chunk = []
        for row in itertools.islice(self._reader, self._chunk_rows):
            line = self._reader.line_num
            if len(row) != len(self.columns):
                if not row:
                    continue
                raise DataFileError(f"{self.path} line {line}: {len(row)} fields, but the "
                                    f"header has {len(self.columns)}")
            chunk.append((line, row))
        return chunk

    def _first_non_numeric_cells(self, chunk) -> dict[str, tuple[int | None, str]]:
        bad: dict[str, tuple[int | None, str]] = {}
        for j, name in enumerate(self.columns):
            seen_value = False
            for line, row in chunk:
                cell = row[j].strip()
                if not cell:
                    continue
                seen_value = True
                if not _parses_as_float(cell):
                    bad[name] = (line, cell)
                    break
            if not seen_value and name not in bad:
                bad[name] = (None, "")
        return bad

    def batches(self, columns: list[str]) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield (first line, last line, float64 array of the requested columns) per chunk."""
        indices = [self.columns.index(c) for c in columns]
        chunk = self._first_chunk
        self._first_chunk = []
        while chunk:
            yield chunk[0][0], chunk[-1][0], self._to_array(chunk, indices)
            chunk = self._read_raw_chunk()

    def _to_array(self, chunk, indices: list[int]) -> np.ndarray:
        cells = np.array([[row[j] for j in indices] for _, row in chunk], dtype=str)
        try:
            return cells.astype(np.float64)
        except ValueError:
            self._raise_first_bad_cell(chunk, indices)
            raise

    def _raise_first_bad_cell(self, chunk, indices: list[int]) -> None:
        for line, row in chunk:
            for j in indices:
                cell = row[j].strip()
                if not cell:
                    raise DataFileError(f"{self.path} line {line}: missing value in column "
                                        f"{self.columns[j]!r}")
                if not _parses_as_float(cell):
                    raise DataFileError(f"{self.path} line {line}: column {self.columns[j]!r} "
                                        f"holds {cell!r}, which is not a number")

    def close(self) -> None:
        self._file.close()


class ParquetTable:
    """A Parquet file read one record batch at a time. Integer and floating columns count as
    numeric; nulls are refused rather than guessed."""

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
        try:
            self._file = pq.ParquetFile(path)
        except pa.ArrowInvalid as exc:
            raise DataFileError(f"{path} is not a readable Parquet file: {exc}") from exc
        schema = self._file.schema_arrow
        self.columns = list(schema.names)
        _reject_duplicate_columns(path, self.columns)
        self._types = {field.name: field.type for field in schema}
        self._numeric = {name for name, t in self._types.items()
                         if pa.types.is_integer(t) or pa.types.is_floating(t)}
        self.total_rows = self._file.metadata.num_rows

    @property
    def numeric_columns(self) -> list[str]:
        return [c for c in self.columns if c in self._numeric]

    def why_not_numeric(self, column: str) -> str:
        return f"its Parquet type is {self._types[column]}"

    def batches(self, columns: list[str]) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield (first row, last row, float64 array) per chunk; rows count from 1."""
        first = 1
        for record_batch in self._file.iter_batches(batch_size=self._chunk_rows,
                                                    columns=columns):
            out = np.empty((record_batch.num_rows, len(columns)), dtype=np.float64)
            for j, name in enumerate(columns):
                array = record_batch.column(j)
                if array.null_count:
                    raise DataFileError(f"{self.path}: column {name!r} has null values in "
                                        f"rows {first}-{first + record_batch.num_rows - 1}")
                out[:, j] = array.to_numpy(zero_copy_only=False)
            last = first + record_batch.num_rows - 1
            yield first, last, out
            first = last + 1

    def close(self) -> None:
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


def select_columns(table, *, target: str | None, features: list[str] | None) -> list[str]:
    """The feature columns: `features` when given, else every numeric column except the
    target, in file order. Every named column must exist and be numeric."""
    named = ([target] if target is not None else []) + (features or [])
    for name in named:
        if name not in table.columns:
            raise DataFileError(f"{table.path} has no column {name!r}; its columns are: "
                                f"{', '.join(table.columns)}")
        if name not in table.numeric_columns:
            raise DataFileError(f"{table.path}: column {name!r} is not numeric "
                                f"({table.why_not_numeric(name)})")
    if features is not None:
        if len(set(features)) != len(features):
            raise DataFileError(f"--features names a column twice: {', '.join(features)}")
        if target in features:
            raise DataFileError(f"--features must not include the target column {target!r}")
        return list(features)
    chosen = [c for c in table.numeric_columns if c != target]
    if not chosen:
        raise DataFileError(f"{table.path} has no numeric feature columns besides the target")
    return chosen


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
