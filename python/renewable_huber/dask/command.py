"""`renewable-huber fit --dask ADDRESS|local:N DATA...`: a partitioned Parquet dataset streamed
through the estimator in batches of partitions, each read and kept on the workers.

The files are opened by dask.dataframe.read_parquet: this process reads the schema and the
footers to plan the partitions, the workers read the rows. Batch k is partitions
[kK, (k+1)K) of the dataset in its order (K = --partitions-per-batch, by default the
cluster's number of workers), fitted with partial_fit on the dask collection.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time

import numpy as np

from ..cli import (
    PROG,
    DataBatchError,
    EngineProblem,
    UsageError,
    _coefficient_table,
    _fit_one_batch,
    _new_or_resumed_model,
    _one_line,
    _plain,
    _progress,
    _warn,
)
from ..exceptions import BackendUnavailableError, ConvergenceWarning, EngineError
from .batch import _modules

# Options of `fit` that follow rows of one file (resume positions, row batches), not yet
# defined for a partitioned dataset.
_FILE_ONLY = (("--resume", "resume"), ("--skip-rows", "skip_rows"), ("--new-data", "new_data"),
              ("--batch-size", "batch_size"), ("--strict", "strict"),
              ("--checkpoint-every", "checkpoint_every"),
              ("--checkpoint-seconds", "checkpoint_seconds"))


def _check_options(args) -> None:
    given = [flag for flag, name in _FILE_ONLY if getattr(args, name) not in (None, False)]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be combined with --dask (a dataset on a "
                         "cluster is streamed in batches of partitions: --partitions-per-batch)")


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

    model, _ = _new_or_resumed_model(args)
    with _connected(args.dask) as client:
        try:
            table = dd.read_parquet(args.data)
        except (OSError, ValueError) as exc:
            raise DataBatchError(f"{', '.join(args.data)}: {_one_line(exc)}") from exc
        features = _columns(args, table)
        per_batch = args.partitions_per_batch or max(1, len(client.scheduler_info()["workers"]))
        run = _run_batches(args, model, table, features, per_batch)
    document = _document(args, model, features, per_batch, run)
    print(json.dumps(document, indent=2, default=_plain) if args.json else _summary(document))
    return 0


def _run_batches(args, model, table, features, per_batch) -> dict:
    columns = features + [args.target] + ([args.weight_column] if args.weight_column else [])
    n_partitions = table.npartitions
    bar = _progress(n_partitions, "fit", args.no_progress, "partitions")
    run = {"batches": 0, "rows": 0, "unconverged": [], "seconds": 0.0}
    began = time.perf_counter()
    try:
        for first in range(0, n_partitions, per_batch):
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
            run["batches"] += 1
            run["rows"] = int(model.n_samples_seen_)
            for warning in reported:
                if isinstance(warning, ConvergenceWarning):
                    run["unconverged"].append({"batch": warning.batch, "partitions": where,
                                               "reason": warning.reason})
                    _warn(f"batch {warning.batch} ({where}) did not converge after "
                          f"{warning.iterations} iterations ({warning.reason})")
                else:
                    _warn(" ".join(str(warning).split()))
            if args.checkpoint:
                model.save(args.checkpoint)
                run["saved_batches"] = run["batches"]
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
        "run": {"batches": run["batches"], "seconds": run["seconds"],
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
        f"this run: {document['n_samples_seen']:,} rows in {document['run']['batches']:,} "
        f"batches of {document['partitions_per_batch']} partitions, "
        f"{document['run']['seconds']:.3f} s",
        f"batches not converged: {document['not_converged']}",
        f"last batch: iterations={diag['iterations']} converged={diag['converged']} "
        f"objective={diag['objective']:.6g}",
        "",
        *_coefficient_table(names, values),
    ]
    if document["run"]["checkpoint"]:
        lines += ["", f"checkpoint: {document['run']['checkpoint']}"]
    return "\n".join(lines)
