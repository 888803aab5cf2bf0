"""`renewable-huber fit --dask ADDRESS|local:N DATA...`: a partitioned Parquet dataset streamed
through the estimator in batches of partitions, each read and kept on the workers.

The files are opened by dask.dataframe.read_parquet: this process reads the schema and the
footers to plan the partitions, the workers read the rows. Batch k is partitions
[kK, (k+1)K) of the dataset in its order (K = --partitions-per-batch, by default the
cluster's number of workers), fitted with partial_fit on the dask collection.

The checkpoint's source record names the dataset by a fingerprint of its files (their sizes
and Parquet footers, in order) and counts the partitions the model holds, so that
`--resume` continues after them, and refuses another dataset.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time

import numpy as np

from ..cli import (
    PROG,
    DataBatchError,
    EngineProblem,
    ResumeRefused,
    StrictStop,
    UsageError,
    _check_fit_options,
    _coefficient_table,
    _fit_one_batch,
    _new_or_resumed_model,
    _one_line,
    _plain,
    _progress,
    _strict_stop_message,
    _warn,
)
from ..exceptions import BackendUnavailableError, ConvergenceWarning, EngineError
from .batch import _modules

# Options of `fit` that follow rows of one file (row positions, row batches), not defined for a
# partitioned dataset.
_FILE_ONLY = (("--skip-rows", "skip_rows"), ("--new-data", "new_data"),
              ("--batch-size", "batch_size"),
              ("--checkpoint-every", "checkpoint_every"),
              ("--checkpoint-seconds", "checkpoint_seconds"))


def _check_options(args) -> None:
    given = [flag for flag, name in _FILE_ONLY if getattr(args, name) not in (None, False)]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be combined with --dask (a dataset on a "
                         "cluster is streamed in batches of partitions: --partitions-per-batch)")
    _check_fit_options(args)


@contextlib.contextmanager
def _connected(address: str):
    """A Client on the scheduler at `address`, or on a new LocalCluster for local:N."""
    _, distributed = _modules()
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"--dask {address}: local:N needs a worker count N >= 1")
        cluster = distributed.LocalCluster(
            n_workers=int(count), threads_per_worker=1, processes=True, dashboard_address=None
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
    with _connected(args.dask) as client:
        try:
            table = dd.read_parquet(args.data)
            dataset = _Dataset(args.data, table.npartitions)
        except (OSError, ValueError) as exc:
            raise DataBatchError(f"{', '.join(args.data)}: {_one_line(exc)}") from exc
        start, rows_held = _first_partition(args, dataset, source)
        features = _columns(args, table)
        per_batch = args.partitions_per_batch or max(1, len(client.scheduler_info()["workers"]))
        run = _run_batches(args, model, table, features, per_batch, dataset,
                           {"partitions": start, "rows": rows_held})
    document = _document(args, model, features, per_batch, run)
    print(json.dumps(document, indent=2, default=_plain) if args.json else _summary(document))
    return 0


class _Dataset:
    """The files of DATA as a checkpoint's source record names them: the path for people, the
    total size, and a SHA-256 over each file's size and last bytes (a Parquet file ends with
    its footer: schema, row groups, their row counts and offsets), in DATA's order and each
    directory's sorted order. Reading the footers only keeps this cheap for large datasets."""

    TAIL_BYTES = 1 << 16

    def __init__(self, data: list[str], npartitions: int):
        self.npartitions = npartitions
        digest = hashlib.sha256()
        size = 0
        for fs, path in _files(data):
            length = int(fs.size(path))
            with fs.open(path, "rb") as handle:
                handle.seek(max(0, length - self.TAIL_BYTES))
                tail = handle.read()
            digest.update(length.to_bytes(8, "little") + tail)
            size += length
        digest.update(npartitions.to_bytes(8, "little"))
        self.size, self.sha256 = size, digest.hexdigest()
        named = " ".join(os.path.abspath(d) if "://" not in d else d for d in data)
        self.path = named if len(named) <= 4096 else named[:4093] + "..."

    def record(self, partitions: int, rows: int) -> dict:
        return {"path": self.path, "size": self.size, "prefix_bytes": max(1, self.size),
                "prefix_sha256": self.sha256, "rows": rows, "partitions": partitions}

    def same(self, source: dict) -> bool:
        return source["size"] == self.size and source["prefix_sha256"] == self.sha256


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


def _first_partition(args, dataset: _Dataset, source) -> tuple[int, int]:
    """(partitions, rows) of the dataset the model already holds: none for a new fit or a
    checkpoint without a source record; those its record counts when it was fitted on this
    dataset; another dataset is refused."""
    if args.resume is None or source is None:
        return 0, 0
    data = " ".join(args.data)
    if "partitions" not in source:
        raise ResumeRefused(
            f"{args.resume} was fitted on the file {source['path']}, not on a dataset with "
            f"--dask: --resume --dask continues the dataset a checkpoint of fit --dask records")
    if not dataset.same(source):
        raise ResumeRefused(
            f"{data} is not the dataset {args.resume} was fitted on ({source['path']}, "
            f"{source['partitions']:,} partitions, {source['rows']:,} rows read; the files "
            f"differ in number, size or content): to continue that dataset pass it instead")
    if source["partitions"] >= dataset.npartitions:
        raise DataBatchError(f"nothing new to fit: {args.resume} already holds all "
                             f"{dataset.npartitions:,} partitions of {data}")
    return source["partitions"], source["rows"]


def _run_batches(args, model, table, features, per_batch, dataset, held) -> dict:
    """Fits the batches after the `held` partitions; `held` follows what the model holds."""
    from ..checkpoint import save_checkpoint

    columns = features + [args.target] + ([args.weight_column] if args.weight_column else [])
    n_partitions, start, rows_held = table.npartitions, held["partitions"], held["rows"]
    bar = _progress(n_partitions - start, "fit", args.no_progress, "partitions")
    run = {"batches": 0, "rows": 0, "unconverged": [], "seconds": 0.0, "start": start}

    def save(state, partitions: int, rows: int) -> None:
        save_checkpoint(args.checkpoint, state, source=dataset.record(partitions, rows))

    # --strict --checkpoint: the state before the current batch, saved if the batch does not
    # converge, so the checkpoint never holds an unconverged batch.
    keep_previous = args.strict and args.checkpoint
    previous = model.state_dict() if keep_previous and hasattr(model, "coef_") else None
    rows_before = int(getattr(model, "n_samples_seen_", 0) or 0)
    began = time.perf_counter()
    try:
        for first in range(start, n_partitions, per_batch):
            last = min(first + per_batch, n_partitions) - 1
            where = f"partitions {first}-{last} of {n_partitions}"
            part = table.partitions[first:last + 1]
            try:
                reported = _fit_one_batch(model, part[columns], args.target,
                                          args.weight_column)
            except BackendUnavailableError as exc:
                raise EngineProblem(f"engine unavailable: {_one_line(exc)}") from exc
            except EngineError as exc:
                raise EngineProblem(f"batch {run['batches'] + 1} ({where}) failed: "
                                    f"{_one_line(exc)}{_saved(args, run)}") from exc
            except (ValueError, TypeError) as exc:
                raise DataBatchError(f"{where} (batch {run['batches'] + 1} of this run): "
                                     f"{_one_line(exc)}{_saved(args, run)}") from exc
            for warning in reported:
                if not isinstance(warning, ConvergenceWarning):
                    _warn(" ".join(str(warning).split()))
            if args.strict and not model.diagnostics_["converged"]:
                raise StrictStop(_strict_stop_message(
                    model, where, args.checkpoint, previous,
                    lambda state, kept=held: save(state, kept["partitions"], kept["rows"]),
                    f"it records the {held['partitions']:,} partitions of the dataset it "
                    "holds"))
            run["batches"] += 1
            run["rows"] = int(model.n_samples_seen_) - rows_before
            held = {"partitions": last + 1, "rows": rows_held + run["rows"]}
            for warning in reported:
                if isinstance(warning, ConvergenceWarning):
                    run["unconverged"].append({"batch": warning.batch, "partitions": where,
                                               "reason": warning.reason})
                    _warn(f"batch {warning.batch} ({where}) did not converge after "
                          f"{warning.iterations} iterations ({warning.reason})")
            if args.checkpoint:
                save(model.state_dict(), held["partitions"], held["rows"])
                run["saved_batches"] = run["batches"]
            if keep_previous:
                previous = model.state_dict()
            bar.update(last + 1 - first)
    finally:
        bar.close()
    run["seconds"] = time.perf_counter() - began
    return run


def _saved(args, run) -> str:
    if not args.checkpoint:
        return ""
    if not run.get("saved_batches"):
        return f"; {args.checkpoint} was not written by this run"
    return f"; {args.checkpoint} holds the first {run['saved_batches']} batches"


def _document(args, model, features, per_batch, run) -> dict:
    state = model.state_dict()
    return {
        "data": list(args.data),
        "dask": args.dask,
        "partitions_per_batch": per_batch,
        "target": args.target,
        "features": list(features),
        "weight_column": args.weight_column,
        "backend": model.backend_,
        "config": state["config"],
        "coefficients": dict(zip(features, np.asarray(model.coef_).tolist(), strict=True)),
        "intercept": float(model.intercept_),
        "fit_intercept": state["fit_intercept"],
        "n_samples_seen": state["n_samples_seen"],
        "batch_count": state["batch_count"],
        "weight_sum": state["weight_sum"],
        "run": {"batches": run["batches"], "rows": run["rows"], "seconds": run["seconds"],
                "first_partition": run["start"], "resume": args.resume,
                "checkpoint": args.checkpoint},
        "not_converged": len(run["unconverged"]),
        "unconverged_batches": run["unconverged"],
        "last_batch": dict(model.diagnostics_),
    }


def _summary(document: dict) -> str:
    diag = document["last_batch"]
    names = list(document["features"])
    values = list(document["coefficients"].values())
    if document["fit_intercept"]:
        names.append("(intercept)")
        values.append(document["intercept"])
    lines = [
        f"data: {' '.join(document['data'])}  target: {document['target']}  "
        f"cluster: {document['dask']}",
        f"this run: {document['run']['rows']:,} rows in {document['run']['batches']:,} "
        f"batches of {document['partitions_per_batch']} partitions, "
        f"{document['run']['seconds']:.3f} s"
        + (f" (resumed after partition {document['run']['first_partition']}, "
           f"{document['n_samples_seen']:,} rows in all)" if document["run"]["resume"] else ""),
        f"batches not converged: {document['not_converged']}",
        f"last batch: iterations={diag['iterations']} converged={diag['converged']} "
        f"objective={diag['objective']:.6g}",
        "",
        *_coefficient_table(names, values),
    ]
    if document["run"]["checkpoint"]:
        lines += ["", f"checkpoint: {document['run']['checkpoint']}"]
    return "\n".join(lines)
