"""`renewable-huber fit --dask ADDRESS|local:N DATA...`: a partitioned Parquet dataset streamed
through the estimator in batches of partitions, each read and kept on the workers.

The files are opened by dask.dataframe.read_parquet: this process reads the schema and the
footers to plan the partitions, the workers read the rows. Batch k is partitions
[kK, (k+1)K) of the dataset in its order (K = --partitions-per-batch, by default the
cluster's number of workers), or with --batch-size B rows [kB, (k+1)B) of the dataset (the
partitions' lengths counted on the workers first, a batch cut from the partitions it spans),
fitted with partial_fit on the dask collection.

The checkpoint's source record names the dataset by a fingerprint of its files (their sizes
and Parquet footers, in order) and counts the partitions the model holds, so that
`--resume` continues after them, and refuses another dataset unless --new-data says it holds
new rows. --skip-rows, --new-data and the checkpoint cadence mean what they mean for one file,
the dataset's rows counted in its order: a run equals the in-process fit of one file holding
the same rows in batches of the same rows (docs/cli.md, "fit --dask").
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time

import numpy as np

from ..checkpoint import FINGERPRINT_TAIL_BYTES, MAX_SOURCE_FILES, file_fingerprint
from ..cli import (
    PROG,
    STANDARDIZED_NOTE,
    DataBatchError,
    EngineProblem,
    Interrupted,
    ResumeRefused,
    StrictStop,
    UsageError,
    _check_fit_options,
    _coefficient_table,
    _fit_command,
    _fit_one_batch,
    _inference_document,
    _inference_table,
    _new_or_resumed_model,
    _one_line,
    _plain,
    _progress,
    _SaveCadence,
    _strict_stop_message,
    _warn,
)
from ..exceptions import BackendUnavailableError, ConvergenceWarning, EngineError
from .batch import _modules
from .partitions import PARTITION_ENGINE_VARIABLE, partition_engine_mode


def _check_options(args) -> None:
    if args.batch_size is not None and args.partitions_per_batch is not None:
        raise UsageError("--batch-size and --partitions-per-batch cannot be combined: batches "
                         "are either B rows of the dataset or K partitions")
    _check_fit_options(args)


@contextlib.contextmanager
def _connected(address: str):
    """A Client on the scheduler at `address`, or on a new LocalCluster for local:N."""
    _, distributed = _modules()
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"--dask {address}: local:N needs a worker count N >= 1")
        # The scheduler serves HTTP (health, metrics) even without a dashboard, on port 8787
        # unless told otherwise, and warns on stderr when that port is taken: any free port.
        cluster = distributed.LocalCluster(
            n_workers=int(count), threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        with cluster, distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise EngineProblem(f"cannot connect to the dask scheduler at {address}: "
                            f"{_one_line(exc)}") from exc
    with client:
        yield client


@contextlib.contextmanager
def _partition_engine(engine: str | None):
    """--partition-engine: RH_DASK_PARTITION_ENGINE of this process for the run (the client
    reads it when each batch is prepared), restored afterwards."""
    if engine is None:
        yield
        return
    previous = os.environ.get(PARTITION_ENGINE_VARIABLE)
    os.environ[PARTITION_ENGINE_VARIABLE] = engine
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PARTITION_ENGINE_VARIABLE, None)
        else:
            os.environ[PARTITION_ENGINE_VARIABLE] = previous


def _columns(args, table) -> list[str]:
    """The features: --features, or every numeric column but the target and the weight."""
    columns = list(table.columns)
    named = [args.target] + ([args.weight_column] if args.weight_column else [])
    for name in named + list(args.features or []):
        if name not in columns:
            raise DataBatchError(f"{', '.join(args.data)}: no column {name!r} (columns: "
                                 f"{', '.join(map(str, columns))})")
    if args.features is not None:
        return list(args.features)
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    dtypes = table.dtypes
    features = [c for c in columns if c not in named
                and is_numeric_dtype(dtypes[c]) and not is_bool_dtype(dtypes[c])]
    left_out = [c for c in columns if c not in named and c not in features]
    if left_out:
        print(f"{PROG}: note: not numeric, left out of the features: {', '.join(left_out)}",
              file=sys.stderr)
    if not features:
        raise DataBatchError(f"{', '.join(args.data)}: no numeric feature columns besides "
                             f"the target {args.target!r}")
    return features


def command_fit_on_cluster(args) -> int:
    _check_options(args)
    import dask.dataframe as dd

    model, source = _new_or_resumed_model(args)
    names = getattr(model, "feature_names_in_", None)
    if args.resume is not None and args.features is None and names is not None:
        args.features = list(names)
    engine = getattr(args, "partition_engine", None)
    with _connected(args.dask) as client, _partition_engine(engine):
        try:
            table = dd.read_parquet(args.data)
            dataset = _Dataset(args.data, table.npartitions)
        except (OSError, ValueError) as exc:
            raise DataBatchError(f"{', '.join(args.data)}: {_one_line(exc)}") from exc
        start, rows_held, cut = _first_partition(args, dataset, source, table)
        features = _columns(args, table)
        per_batch = None if args.batch_size is not None else (
            args.partitions_per_batch or max(1, len(client.scheduler_info()["workers"])))
        begin = _after_skipped_rows(args, table, start, rows_held, cut)
        run = _ClusterRun(args, model, table, features, per_batch, dataset, begin)
        run.stream()
    if run.unconverged:
        _warn(f"{len(run.unconverged)} of {run.batches} batches did not converge (first: batch "
              f"{run.unconverged[0]['batch']}); their coefficients are the solver's last step, "
              "not the optimum: raise --max-iter, loosen --tol, or give --tau in the target's "
              "units (--tau auto)")
    document = _document(args, model, features, per_batch, run)
    print(json.dumps(document, indent=2, default=_plain) if args.json
          else _summary(document, model))
    return 0


class _Dataset:
    """The files of DATA as a checkpoint's source record names them: the path for people, the
    total size, and a SHA-256 over each file's size and last bytes (a Parquet file ends with
    its footer: schema, row groups, their row counts and offsets), in DATA's order and each
    directory's sorted order; and each file's own fingerprint (the first 16 hexadecimal digits
    of a SHA-256 over its size and last bytes), so --new-data can tell a file the recorded
    dataset had. Reading the footers only keeps this cheap for large datasets."""

    TAIL_BYTES = FINGERPRINT_TAIL_BYTES

    def __init__(self, data: list[str], npartitions: int):
        self.npartitions = npartitions
        self.files = list(_files(data))
        digest = hashlib.sha256()
        size = 0
        self.fingerprints: list[str] = []
        for fs, path in self.files:
            length = int(fs.size(path))
            with fs.open(path, "rb") as handle:
                handle.seek(max(0, length - self.TAIL_BYTES))
                tail = handle.read()
            digest.update(length.to_bytes(8, "little") + tail)
            self.fingerprints.append(file_fingerprint(length, tail))
            size += length
        digest.update(npartitions.to_bytes(8, "little"))
        self.size, self.sha256 = size, digest.hexdigest()
        named = " ".join(os.path.abspath(d) if "://" not in d else d for d in data)
        self.path = named if len(named) <= 4096 else named[:4093] + "..."

    def record(self, partitions: int, rows: int, cut: int = 0) -> dict:
        """The source record of a model holding the first `partitions` partitions and the
        first `cut` rows of the next one: `rows` rows of the dataset in all."""
        record = {"path": self.path, "size": self.size, "prefix_bytes": max(1, self.size),
                  "prefix_sha256": self.sha256, "rows": rows, "partitions": partitions}
        if cut:
            record["partition_rows"] = cut
        if 0 < len(self.fingerprints) <= MAX_SOURCE_FILES:
            record["files"] = list(self.fingerprints)
        return record

    def shared_files(self, source: dict) -> list[str]:
        """DATA's files whose fingerprint the record lists (none when it lists none)."""
        recorded = set(source.get("files", ()))
        return [path for (_, path), fingerprint in zip(self.files, self.fingerprints,
                                                       strict=True)
                if fingerprint in recorded]

    def same(self, source: dict) -> bool:
        return source["size"] == self.size and source["prefix_sha256"] == self.sha256

    def extends(self, source: dict) -> bool:
        """DATA's files begin with every file the record lists, in the same order, and go on
        (a dataset that has gained files since)."""
        recorded = list(source.get("files", ()))
        return 0 < len(recorded) < len(self.fingerprints) and \
            self.fingerprints[:len(recorded)] == recorded


def _files(data: list[str]):
    """(filesystem, path) of every file DATA names, as dask.dataframe.read_parquet finds them
    (files whose name starts with '_' or '.', such as _metadata or _SUCCESS, left out)."""
    import fsspec

    for entry in data:
        fs, _, paths = fsspec.core.get_fs_token_paths(entry)
        for path in sorted(paths):
            if not fs.isdir(path):
                yield fs, path
                continue
            for name in sorted(fs.find(path)):
                parts = name[len(path):].replace("\\", "/").split("/")
                if not any(p.startswith(("_", ".")) for p in parts if p):
                    yield fs, name


def _first_partition(args, dataset: _Dataset, source, table) -> tuple[int, int, int]:
    """(partitions, rows, cut) of the dataset the model already holds (cut: rows of the next
    partition held too, after a --batch-size batch that ended inside it): none for a new fit,
    a checkpoint without a source record, or --new-data; those its record counts when it was
    fitted on this dataset, or on its first files (a dataset that has gained files since,
    checked by the rows of the partitions held). Anything that would fold rows in twice, or
    that cannot be told apart from that, is refused (docs/cli.md, "fit --dask")."""
    if args.resume is None or source is None:
        return 0, 0, 0
    data = " ".join(args.data)
    add_new_data = ("; if DATA holds only rows the model has not seen, add --new-data")
    if "partitions" not in source:
        if args.new_data:
            read = _file_already_read(dataset, source)
            if read is not None:
                raise ResumeRefused(
                    f"{data} is not new data: its file {read} starts with the bytes of "
                    f"{source['path']}, of which {args.resume} already holds the first "
                    f"{source['rows']:,} data rows; leave that file out of DATA")
            return 0, 0, 0
        raise ResumeRefused(
            f"{args.resume} was fitted on the file {source['path']}, not on a dataset with "
            f"--dask: --resume --dask continues the dataset a checkpoint of fit --dask "
            f"records{add_new_data}")
    if not dataset.same(source):
        if args.new_data:
            shared = dataset.shared_files(source)
            if shared:
                more = f" (and {len(shared) - 1:,} more)" if len(shared) > 1 else ""
                raise ResumeRefused(
                    f"{data} is not new data: its file {shared[0]}{more} is a file of the "
                    f"dataset {args.resume} was fitted on ({source['path']}: same size and "
                    f"last 64 KiB); pass only files the model has not seen, or resume that "
                    f"dataset without --new-data")
            return 0, 0, 0
        if dataset.extends(source):
            _check_rows_held(args, table, source)
            return source["partitions"], source["rows"], source.get("partition_rows", 0)
        raise ResumeRefused(
            f"{data} is not the dataset {args.resume} was fitted on ({source['path']}, "
            f"{source['partitions']:,} partitions, {source['rows']:,} rows read; the files "
            f"differ in number, size or content): to continue that dataset pass it "
            f"instead{add_new_data}")
    if args.new_data:
        raise ResumeRefused(
            f"{data} is not new data: it is the dataset {args.resume} was fitted on "
            f"({source['path']}), of which it holds the first {source['partitions']:,} "
            f"partitions ({source['rows']:,} rows); drop --new-data to continue after them")
    if source["partitions"] >= dataset.npartitions:
        raise DataBatchError(f"nothing new to fit: {args.resume} already holds all "
                             f"{dataset.npartitions:,} partitions of {data}")
    return source["partitions"], source["rows"], source.get("partition_rows", 0)


def _partition_lengths(table, target: str, first: int, stop: int) -> list[int]:
    """The rows of partitions first .. stop - 1, counted on the workers (each partition's
    target column read)."""
    import dask

    return [int(length) for length in dask.compute(
        *[table.partitions[i][[target]].shape[0] for i in range(first, stop)])]


def _check_rows_held(args, table, source: dict) -> None:
    """A dataset that begins with the recorded dataset's files, in order, and has more: the
    model's partitions must be the first ones of the new dataset. Their rows are counted on
    the workers (the target column of each) and must add up to the recorded rows, and the
    next partition must hold the recorded cut; otherwise the partitioning moved (the files
    were re-read into other partitions) and resuming could fold rows in twice."""
    held, cut = source["partitions"], source.get("partition_rows", 0)
    wanted = held + (1 if cut else 0)
    lengths = _partition_lengths(table, args.target, 0, min(wanted, table.npartitions))
    whole = sum(lengths[:held])
    if len(lengths) < wanted or whole + cut != source["rows"] or (cut and lengths[held] < cut):
        raise ResumeRefused(
            f"{' '.join(args.data)} begins with the files of the dataset {args.resume} was "
            f"fitted on, but its first {held:,} partitions hold {whole:,} rows, not the "
            f"{source['rows'] - cut:,} the checkpoint records: the files are split into "
            f"partitions differently now, so where to continue cannot be told")


# A record of one file (fit without --dask) whose prefix is longer than this names a CSV
# file's rows: a Parquet file, which begins with its magic bytes, never starts with them (the
# CSV reader refuses such files), so only shorter prefixes are compared with DATA's files.
_COMPARED_PREFIX_BYTES = 1 << 16


def _file_already_read(dataset: _Dataset, source: dict) -> str | None:
    """The first file of the dataset that begins with the bytes a one-file record covers (the
    file it recorded, or a copy of it), or None."""
    length = source["prefix_bytes"]
    if length > _COMPARED_PREFIX_BYTES:
        return None
    for fs, path in dataset.files:
        if int(fs.size(path)) < length:
            continue
        with fs.open(path, "rb") as handle:
            head = handle.read(length)
        if hashlib.sha256(head).hexdigest() == source["prefix_sha256"]:
            return path
    return None


@dataclasses.dataclass(frozen=True)
class _Begin:
    """Where a run starts: `partition` (its index in the dataset) after its first `cut` rows,
    `rows` leading data rows of the dataset held or skipped before that point, and `origin`,
    the partition from which this run counts its batches of K partitions."""

    partition: int
    cut: int
    rows: int
    origin: int
    #: the cut comes from --skip-rows (rows dropped), not from a checkpoint (rows held)
    skipped: bool = False


@dataclasses.dataclass(frozen=True)
class _Span:
    """One batch: partitions [first, end), cut to `slices` ((partition, from row, to row) of
    each; None: the partitions whole, after the run's first cut), and what the model holds
    after it: `after` = (whole partitions, rows of the next one); its rows follow from the
    model."""

    first: int
    end: int
    slices: tuple | None
    after: tuple[int, int]
    label: str


def _after_skipped_rows(args, table, start: int, held: int, cut: int = 0) -> _Begin:
    """The start of this run: after the `start` partitions and `cut` rows of the next (`held`
    rows in all) the checkpoint holds, or after --skip-rows N rows of the dataset, which may
    not be fewer than those."""
    skip = args.skip_rows
    if skip is None or skip == held:
        return _Begin(start, cut, held, start)
    data = " ".join(args.data)
    if skip < held:
        raise ResumeRefused(
            f"--skip-rows {skip:,} would fold rows {skip + 1:,}-{held:,} of {data} into "
            f"{args.resume} a second time: it already holds the first {held:,} (the first "
            f"{start:,} partitions); drop --skip-rows to continue after row {held:,}")
    # Partition lengths, counted a few partitions at a time from `start` (whose first row is
    # row held - cut + 1), until the one that holds row skip + 1.
    rows, partition, step = held - cut, start, 16
    while partition < table.npartitions:
        stop = min(partition + step, table.npartitions)
        for length in _partition_lengths(table, args.target, partition, stop):
            if rows + length > skip:
                return _Begin(partition, skip - rows, skip, start, skipped=True)
            rows += length
            partition += 1
    raise DataBatchError(f"{data} has no data rows after the first {skip:,} (it has "
                         f"{rows:,})")


class _ClusterRun:
    """One pass of `fit --dask` over the dataset: batches of K partitions, the checkpoint
    cadence of `fit`, --strict and Ctrl-C."""

    def __init__(self, args, model, table, features, per_batch: int | None, dataset,
                 begin: _Begin):
        self.args, self.model, self.table, self.dataset = args, model, table, dataset
        self.columns = features + [args.target] + ([args.weight_column]
                                                   if args.weight_column else [])
        # per_batch None: batches of args.batch_size rows
        self.per_batch, self.begin = per_batch, begin
        self.batches = self.rows = 0
        self.unconverged: list[dict] = []
        self.seconds = 0.0
        # What the model holds after its last completed batch: leading partitions, rows of
        # the dataset held or skipped, and rows of the next partition held (--batch-size);
        # `saved` is that triple for the last checkpoint written.
        self.held = (begin.partition, begin.rows, 0 if begin.skipped else begin.cut)
        self.saved: tuple[int, int, int] | None = None
        self.lengths: list[int] | None = None
        every, seconds = args.checkpoint_every, args.checkpoint_seconds
        if every is None and seconds is None:
            # A cluster batch costs far more than writing the model: after every batch.
            every, seconds = 1, 0.0
        self.cadence = _SaveCadence(args.checkpoint, every, seconds)

    def _groups(self):
        """The batches (_Span). K partitions counted from the run's origin, the first batch the
        rest of the group that holds the starting partition; or, with --batch-size B, rows
        [kB, (k+1)B) of the dataset (as for one file, the first batch is the rest of the
        group of B rows that holds the starting row)."""
        n, begin = self.table.npartitions, self.begin
        if self.per_batch is None:
            yield from self._row_groups()
            return
        K = self.per_batch
        first = begin.partition
        while first < n:
            end = min(begin.origin + ((first - begin.origin) // K + 1) * K, n)
            label = f"partitions {first}-{end - 1} of {n}"
            if first == begin.partition and begin.cut:
                label += f" (after the first {begin.cut:,} rows of partition {first})"
            yield _Span(first, end, None, (end, 0), label)
            first = end

    def _count_rows(self) -> list[int]:
        """The lengths of partitions begin.partition .. n - 1, counted on the workers (their
        target column read), once per run."""
        if self.lengths is None:
            self.lengths = _partition_lengths(self.table, self.args.target,
                                              self.begin.partition, self.table.npartitions)
        return self.lengths

    def _row_groups(self):
        B, begin, n = self.args.batch_size, self.begin, self.table.npartitions
        lengths = self._count_rows()
        # the dataset row (counted from 0) where partition begin.partition starts
        offset = begin.rows - begin.cut
        total = offset + sum(lengths)
        position, partition, within = begin.rows, begin.partition, begin.cut
        while position < total:
            stop = min((position // B + 1) * B, total)
            slices, start = [], position
            while position < stop:
                length = lengths[partition - begin.partition]
                take = min(length - within, stop - position)
                if take > 0:
                    slices.append((partition, within, within + take))
                within += take
                position += take
                if within == length:
                    partition, within = partition + 1, 0
            first, end = slices[0][0], slices[-1][0] + 1
            spans = f"s {first}-{end - 1}" if end - first > 1 else f" {first}"
            label = f"rows {start + 1:,}-{stop:,} of the dataset (partition{spans} of {n})"
            yield _Span(first, end, tuple(slices), (partition, within), label)

    def _total_units(self) -> tuple[int, str]:
        """What the progress bar counts: partitions, or rows with --batch-size."""
        if self.per_batch is None:
            return sum(self._count_rows()) - self.begin.cut, "rows"
        return self.table.npartitions - self.begin.partition, "partitions"

    def _batch(self, span: _Span):
        import dask.dataframe as dd

        if span.slices is not None:
            pieces = []
            for partition, lo, hi in span.slices:
                piece = self.table.partitions[partition][self.columns]
                pieces.append(piece.map_partitions(lambda frame, lo=lo, hi=hi: frame.iloc[lo:hi],
                                                   meta=piece._meta))
            return pieces[0] if len(pieces) == 1 else dd.concat(pieces)
        first, end = span.first, span.end
        part = self.table.partitions[first:end][self.columns]
        if first != self.begin.partition or not self.begin.cut:
            return part
        cut = self.begin.cut
        head = part.partitions[0].map_partitions(lambda frame: frame.iloc[cut:],
                                                 meta=part._meta)
        return head if end - first == 1 else dd.concat([head, part.partitions[1:]])

    def stream(self) -> None:
        args, model = self.args, self.model
        units, unit_name = self._total_units()
        bar = _progress(units, "fit", args.no_progress, unit_name)
        # --strict --checkpoint: the state before the current batch, saved if the batch does
        # not converge, so the checkpoint never holds an unconverged batch. With a checkpoint
        # the state after the last completed batch is also what Ctrl-C saves.
        keep = bool(args.checkpoint)
        previous = model.state_dict() if keep and hasattr(model, "coef_") else None
        rows_before = int(getattr(model, "n_samples_seen_", 0) or 0)
        began = time.perf_counter()
        self.cadence.start()
        try:
            for span in self._groups():
                where = span.label
                try:
                    reported = _fit_one_batch(model, self._batch(span), args.target,
                                              args.weight_column)
                except BackendUnavailableError as exc:
                    raise EngineProblem(f"engine unavailable: {_one_line(exc)}") from exc
                except EngineError as exc:
                    raise EngineProblem(f"batch {self.batches + 1} ({where}) failed: "
                                        f"{_one_line(exc)}{self._saved_text()}") from exc
                except (ValueError, TypeError) as exc:
                    raise DataBatchError(f"{where} (batch {self.batches + 1} of this run): "
                                         f"{_one_line(exc)}{self._saved_text()}") from exc
                for warning in reported:
                    if not isinstance(warning, ConvergenceWarning):
                        _warn(" ".join(str(warning).split()))
                if args.strict and not model.diagnostics_["converged"]:
                    kept, holds = self.held, (f"it records the {self.held[0]:,} partitions "
                                              "of the dataset it holds"
                                              + (f" and the first {self.held[2]:,} rows of "
                                                 f"partition {self.held[0]}"
                                                 if self.held[2] else ""))
                    if self.begin.skipped and self.begin.cut and not self.batches:
                        # A source record counts whole partitions: rows skipped inside the
                        # first one are not recorded until a batch after them completes.
                        kept = (self.begin.partition, self.begin.rows - self.begin.cut, 0)
                        holds = (f"it records the {kept[0]:,} partitions before the one "
                                 f"holding row {self.begin.rows + 1:,}; give --skip-rows "
                                 f"{args.skip_rows} again")
                    raise StrictStop(_strict_stop_message(
                        model, where, args.checkpoint, previous,
                        lambda state, kept=kept: self._save(state, kept), holds))
                self.batches += 1
                self.cadence.batch_done()
                self.rows = int(model.n_samples_seen_) - rows_before
                self.held = (span.after[0], self.begin.rows + self.rows, span.after[1])
                for warning in reported:
                    if isinstance(warning, ConvergenceWarning):
                        self.unconverged.append({"batch": warning.batch, "partitions": where,
                                                 "reason": warning.reason})
                        _warn(f"batch {warning.batch} ({where}) did not converge after "
                              f"{warning.iterations} iterations ({warning.reason})")
                if keep:
                    previous = model.state_dict()
                if self.cadence.due():
                    self._save(previous, self.held)
                bar.update(sum(hi - lo for _, lo, hi in span.slices)
                           if span.slices is not None else span.end - span.first)
        except KeyboardInterrupt:
            raise self._interrupted(previous) from None
        finally:
            bar.close()
        self.seconds = time.perf_counter() - began
        if args.checkpoint and self.saved != self.held:
            self._save(previous, self.held)

    def _save(self, state, held: tuple[int, int, int]) -> None:
        from ..checkpoint import save_checkpoint

        save_checkpoint(self.args.checkpoint, state, source=self.dataset.record(*held))
        self.cadence.saved()
        self.saved = held

    def _holds(self) -> str | None:
        """What the checkpoint holds (None: this run wrote none)."""
        if self.saved is None:
            return None
        return f"the first {self.saved[0]:,} partitions ({self.saved[1]:,} rows) of the dataset"

    def _saved_text(self) -> str:
        return self.cadence.failure_note(self._holds())

    def _interrupted(self, last_state) -> Interrupted:
        """Ctrl-C stops at once; the batch under way is dropped, the batches completed before
        it are saved (when the cadence had not saved them yet)."""
        args = self.args
        if args.checkpoint and self.batches and self.saved != self.held:
            self._save(last_state, self.held)
        done = (f"interrupted after {self.rows:,} rows in {self.batches:,} batches of "
                f"{' '.join(args.data)}")
        return self.cadence.interrupted(
            done, self._holds(), _cluster_command(args, self.per_batch),
            _cluster_command(args, self.per_batch, args.checkpoint))


def _cluster_command(args, per_batch: int | None, resume: str | None = None) -> str:
    """The `fit --dask` command line of this run, or (resume=CHECKPOINT) the one that
    continues it (cli._fit_command with the cluster, the files and --partitions-per-batch or
    --batch-size)."""
    batching = (["--batch-size", str(args.batch_size)] if per_batch is None
                else ["--partitions-per-batch", str(per_batch)])
    return _fit_command(args, resume, source=["--dask", args.dask, *args.data],
                        batching=batching)


def _document(args, model, features, per_batch, run) -> dict:
    state = model.state_dict()
    return {
        "data": list(args.data),
        "dask": args.dask,
        "partitions_per_batch": per_batch,
        "batch_size": args.batch_size,
        "target": args.target,
        "features": list(features),
        "weight_column": args.weight_column,
        "backend": model.backend_,
        "partition_engine": partition_engine_mode(getattr(args, "partition_engine", None),
                                                  backend=model.backend_),
        "dtype": state["config"]["dtype"],
        "n_jobs": model.n_jobs_,
        "config": state["config"],
        "coefficients": dict(zip(features, np.asarray(model.coef_).tolist(), strict=True)),
        "intercept": float(model.intercept_),
        "fit_intercept": state["fit_intercept"],
        "n_samples_seen": state["n_samples_seen"],
        "batch_count": state["batch_count"],
        "weight_sum": state["weight_sum"],
        "run": {"batches": run.batches, "rows": run.rows, "seconds": run.seconds,
                "first_partition": run.begin.partition, "started_after_row": run.begin.rows,
                "rows_through": run.held[1], "partitions_through": run.held[0],
                "resume": args.resume, "new_data": bool(args.new_data),
                "checkpoint": args.checkpoint, "checkpoint_writes": run.cadence.saves},
        "not_converged": len(run.unconverged),
        "unconverged_batches": run.unconverged,
        "last_batch": dict(model.diagnostics_),
        **_inference_document(_names(features, state["fit_intercept"]), model,
                              state["config"]["penalty"], state["config"]["inference"]),
    }


def _names(features, fit_intercept: bool) -> list[str]:
    return [*features] + (["(intercept)"] if fit_intercept else [])


def _summary(document: dict, model) -> str:
    diag, run = document["last_batch"], document["run"]
    names = list(document["features"])
    values = list(document["coefficients"].values())
    if document["fit_intercept"]:
        names.append("(intercept)")
        values.append(document["intercept"])
    lines = [
        f"data: {' '.join(document['data'])}  target: {document['target']}  "
        f"cluster: {document['dask']}",
        f"this run: {run['rows']:,} rows in {run['batches']:,} "
        + (f"batches of {document['partitions_per_batch']} partitions"
           if document["partitions_per_batch"] is not None
           else f"batches of {document['batch_size']:,} rows")
        + f", {run['seconds']:.3f} s"
        + (f" (resumed, {document['n_samples_seen']:,} rows in all)" if run["resume"] else ""),
    ]
    if run["started_after_row"]:
        lines.append(f"started after data row {run['started_after_row']:,} of the dataset "
                     f"(in partition {run['first_partition']})")
    lines += [
        f"batches not converged: {document['not_converged']}",
        *([STANDARDIZED_NOTE] if document["config"]["standardize"] else []),
        f"last batch: iterations={diag['iterations']} converged={diag['converged']} "
        f"objective={diag['objective']:.6g}",
        "",
        *_coefficient_table(names, values),
    ]
    lines += _inference_table(names, model, document["config"]["penalty"],
                              document["config"]["inference"])
    if run["checkpoint"]:
        writes = run["checkpoint_writes"]
        lines += ["", f"checkpoint: {run['checkpoint']} (written {writes} time"
                  f"{'s' if writes != 1 else ''}; holds the first {run['partitions_through']:,} "
                  f"partitions, {run['rows_through']:,} rows, of the dataset)"]
    return "\n".join(lines)
