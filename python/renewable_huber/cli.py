"""The `renewable-huber` command line: demo (the default), fit, predict, inspect, info,
conformance.

Every failure a user can cause ends as one line `renewable-huber: error: ...` on stderr and a
non-zero exit status; RH_DEBUG=1 shows the traceback instead. `fit` reports every batch that
did not converge as one line `renewable-huber: warning: batch K did not converge after I
iterations (reason)` on stderr (K: the batch's index in the stream) plus a summary line at the
end; with --strict it stops at the first such batch with exit status 3 instead.

`fit --checkpoint` records in the checkpoint which file it read and how many of its rows the
model holds (checkpoint.validate_source), so `fit --resume` continues the same file where it
stopped and refuses to fold rows in twice; docs/cli.md gives the rules.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import threading
import time
import warnings

import numpy as np

from ._backend_facts import BACKEND_CHOICES, BACKENDS
from .diagnostics import COLLINEAR_REMEDY, L1_SCALE_ADVICE
from .exceptions import (
    BackendUnavailableError,
    ConvergenceWarning,
    EngineError,
    FeatureScaleWarning,
    PrecisionWarning,
    RenewableHuberError,
    RenewableHuberWarning,
)

PROG = "renewable-huber"
# fit's rows per batch when --batch-size is not given
DEFAULT_BATCH_ROWS = 10_000
EXIT_ERROR = 1
EXIT_USAGE = 2
# fit --strict: a batch did not converge (the checkpoint, if any, holds the batches before it).
EXIT_NOT_CONVERGED = 3
EXIT_INTERRUPTED = 130
# fit --checkpoint without --checkpoint-every: the model is written at most this often (plus at
# the end and on Ctrl-C). Writing after every batch doubled the run time of small batches (an
# fsync each); every 30 s costs nothing measurable and a crash loses at most 30 s of work.
DEFAULT_CHECKPOINT_SECONDS = 30.0
# The line of fit's summary and inspect's text that marks a standardised stream.
STANDARDIZED_NOTE = ("features: standardised with the centre and scale of the stream's first "
                     "batch (kept in the checkpoint); the coefficients and standard errors "
                     "below are in the data's units")


class UsageError(Exception):
    """Bad command-line syntax or option value (argparse's own errors end up here)."""


class DataBatchError(RenewableHuberError):
    """A batch of a data file was refused; the message says which rows and why."""


class EngineProblem(RenewableHuberError):
    """An engine is missing or failed: the data are not at fault."""


class StrictStop(RenewableHuberError):
    """fit --strict met a batch that did not converge; the message says which batch and what
    the checkpoint holds."""


class Interrupted(RenewableHuberError):
    """fit was interrupted (Ctrl-C); the message says what was saved and how to resume."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage block: one line is the rule
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _int_at_least(minimum: int, wording: str):
    """An argparse type: an integer >= minimum, refused with `wording` in the message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected {wording}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "an integer >= 0")


def _n_jobs_option(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(f"expected -1 or a positive integer, got {text!r}")
    return value


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if value <= 0.0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    value = _finite_float(text)
    if value < 0.0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _tau_option(text: str) -> float | str:
    """--tau: a number in the target's units, or 'auto' (chosen from the first batch)."""
    return "auto" if text.strip() == "auto" else _finite_float(text)


def _column_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _column_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a column name, got ''")
    return text.strip()


def package_version() -> str:
    from . import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Streaming robust (Huber) regression. Without a "
                     "command, runs the demo.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = commands.add_parser("demo", help="stream a built-in contaminated data set and "
                               "compare with the oracle Huber fit and OLS (default)")
    demo.add_argument("--rows", type=_positive_int, default=200_000, help="default 200000")
    demo.add_argument("--features", type=_positive_int, default=10, help="default 10")
    demo.add_argument("--batch-size", type=_positive_int, default=10_000, metavar="B",
                      help="rows per batch (default 10000)")
    demo.add_argument("--seed", type=_non_negative_int, default=0, help="default 0")
    demo.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    demo.add_argument("--plot", metavar="FILE.png", help="write the coefficient trajectory")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")

    fit = commands.add_parser("fit", help="stream a CSV or Parquet file through the estimator")
    fit.add_argument("data", metavar="DATA", nargs="+",
                     help="a .csv (with header) or .parquet file; with --dask, Parquet files, "
                     "globs or directories read by the workers")
    fit.add_argument("--target", required=True, type=_column_name, metavar="COL",
                     help="the response column")
    fit.add_argument("--features", type=_column_list, metavar="A,B,C",
                     help="feature columns (default: every numeric column but the target and "
                     "the weight column)")
    fit.add_argument("--weight-column", type=_column_name, metavar="COL",
                     help="per-row sample weights (>= 0) from this column")
    fit.add_argument("--batch-size", type=_positive_int, metavar="B",
                     help=f"rows per batch (default {DEFAULT_BATCH_ROWS}; with --dask: rows of "
                     "the dataset, instead of --partitions-per-batch)")
    fit.add_argument("--dask", metavar="ADDRESS|local:N",
                     help="fit on a Dask cluster: a scheduler address, or local:N for a local "
                     "cluster of N worker processes (the [dask] extra; docs/dask.md)")
    fit.add_argument("--partitions-per-batch", type=_positive_int, metavar="K",
                     help="with --dask: dataset partitions per batch (default: one per worker)")
    fit.add_argument("--partition-engine", choices=_partition_engines(),
                     help="with --dask: how the workers sum their partitions (default: "
                     "$RH_DASK_PARTITION_ENGINE, else chosen by --backend; docs/dask.md)")
    fit.add_argument("--penalty", choices=("none", "l1"), help="default none")
    fit.add_argument("--lambda-scale", type=_non_negative_float, metavar="X",
                     help="multiplier of the L1 strength (default 1)")
    fit.add_argument("--no-intercept", action="store_true", help="fit without an intercept")
    fit.add_argument("--tau", type=_tau_option, metavar="TAU|auto",
                     help="Huber threshold in the target's units (default 1.345, which suits a "
                     "standardised target); 'auto': 1.345 x a robust residual scale of the "
                     "first batch")
    fit.add_argument("--backend", choices=BACKEND_CHOICES, help="default auto")
    fit.add_argument("--dtype", choices=("float64", "float32"), help="default float64")
    fit.add_argument("--n-jobs", type=_n_jobs_option, metavar="N",
                     help="engine threads (native_cpu): -1 for all cores (default: the "
                     "engine's, OMP_NUM_THREADS)")
    fit.add_argument("--max-iter", type=_positive_int, metavar="N",
                     help="solver iterations per batch (default 100)")
    fit.add_argument("--tol", type=_positive_float, metavar="TOL",
                     help="solver step tolerance (default 1e-6)")
    fit.add_argument("--inference", action="store_true",
                     help="accumulate what standard errors need and print them (penalty none; "
                          "costs up to ~1.6x per batch on native_cpu)")
    fit.add_argument("--standardize", action="store_true",
                     help="centre and scale the features by the first batch's mean and "
                     "standard deviation, fixed for the stream and stored in the checkpoint "
                     "(coefficients are still reported in the data's units); needed by "
                     "--penalty l1 on features in raw units")
    fit.add_argument("--strict", action="store_true",
                     help="stop with exit status 3 at the first batch that does not converge; "
                     "the checkpoint then holds the batches before it")
    fit.add_argument("--checkpoint", metavar="OUT.npz",
                     help="save the model (and how far into DATA it got) here")
    fit.add_argument("--checkpoint-seconds", type=_non_negative_float, metavar="S",
                     help=f"save at most every S seconds, and at the end (default "
                     f"{DEFAULT_CHECKPOINT_SECONDS:g} unless --checkpoint-every is given; 0: off)")
    fit.add_argument("--checkpoint-every", type=_non_negative_int, metavar="K",
                     help="save every K batches (0: only at the end)")
    fit.add_argument("--resume", metavar="IN.npz",
                     help="continue the stream of a saved model: on the file it recorded, after "
                     "the rows it holds")
    fit.add_argument("--new-data", action="store_true",
                     help="with --resume: DATA is another file, of rows the model has not seen "
                     "(it starts at row 1)")
    fit.add_argument("--skip-rows", type=_non_negative_int, metavar="N",
                     help="start after the first N data rows (with --resume, never fewer than "
                     "the model already holds of this file)")
    fit.add_argument("--json", action="store_true",
                     help="print one JSON document instead of the summary table")
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")

    predict = commands.add_parser("predict", help="predict a file's rows with a checkpoint")
    predict.add_argument("checkpoint", metavar="CHECKPOINT", help="a .npz saved by fit")
    predict.add_argument("data", metavar="DATA", help="a .csv (with header) or .parquet file")
    predict.add_argument("--output", metavar="OUT.csv", help="default: standard output")
    predict.add_argument("--features", type=_column_list, metavar="A,B,C",
                         help="feature columns, when the checkpoint has no feature names")
    predict.add_argument("--batch-size", type=_positive_int, default=10_000, metavar="B",
                         help="rows per chunk (default 10000)")
    predict.add_argument("--backend", choices=BACKEND_CHOICES, help="default: the checkpoint's")
    predict.add_argument("--no-progress", action="store_true", help="no progress bar")

    inspect = commands.add_parser("inspect", help="what a checkpoint holds (no engine needed)")
    inspect.add_argument("checkpoint", metavar="CHECKPOINT", help="a .npz saved by fit or save")
    inspect.add_argument("--json", action="store_true", help="print one JSON document")

    info = commands.add_parser("info", help="versions, engines that load, GPU and CUDA")
    where = info.add_mutually_exclusive_group()
    where.add_argument("--include-dir", action="store_true",
                       help="print only the folder holding rh_cuda.h (installed package)")
    where.add_argument("--cmake-dir", action="store_true",
                       help="print only the folder to put on CMAKE_PREFIX_PATH (installed "
                       "package)")
    commands.add_parser("conformance", add_help=False,
                        help="replay the golden corpora against an engine (see "
                        f"'{PROG} conformance --help')")
    return parser


# ---------------------------------------------------------------------------------- demo


def command_demo(args) -> int:
    from .demo import format_report, plot_trajectory, run_demo

    result = run_demo(n_rows=args.rows, n_features=args.features, batch_size=args.batch_size,
                      seed=args.seed, backend=args.backend, show_progress=not args.no_progress)
    print(format_report(result))
    if args.plot:
        plot_trajectory(result, args.plot)
        print(f"coefficient trajectory written to {args.plot}")
    return 0


# ----------------------------------------------------------------------------------- fit


def _check_fit_options(args) -> None:
    """Combinations refused before any file is opened."""
    if args.resume is not None:
        fixed = [flag for flag, given in (("--tau", args.tau is not None),
                                          ("--penalty", args.penalty is not None),
                                          ("--lambda-scale", args.lambda_scale is not None),
                                          ("--no-intercept", args.no_intercept),
                                          ("--inference", args.inference),
                                          ("--standardize", args.standardize)) if given]
        if fixed:
            raise UsageError(f"{', '.join(fixed)} cannot be combined with --resume: the "
                             "checkpoint fixes the configuration")
    elif args.new_data:
        raise UsageError("--new-data only applies with --resume (a new fit starts at row 1 "
                         "anyway)")
    if args.checkpoint is None:
        given = [flag for flag, value in (("--checkpoint-every", args.checkpoint_every),
                                          ("--checkpoint-seconds", args.checkpoint_seconds))
                 if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} needs --checkpoint")


def _engine_message(exc: BaseException, what: str) -> str:
    return f"{what}: {_one_line(exc)} (see '{PROG} info' for the engines that load here)"


def _new_or_resumed_model(args):
    """The model and, when resuming, the checkpoint's source record (None if it has none)."""
    from .estimator import RenewableHuberRegressor

    limits = {k: v for k, v in (("max_iter", args.max_iter), ("tol", args.tol))
              if v is not None}
    if args.resume is None:
        params = {k: v for k, v in (("tau", args.tau), ("penalty", args.penalty),
                                    ("lambda_scale", args.lambda_scale),
                                    ("backend", args.backend), ("dtype", args.dtype),
                                    ("n_jobs", args.n_jobs)) if v is not None}
        if args.no_intercept:
            params["fit_intercept"] = False
        if args.inference:
            params["inference"] = True
        if args.standardize:
            params["standardize"] = True
        model = RenewableHuberRegressor(**params, **limits)
        _check_configuration(model)
        _check_engine(model)
        return model, None
    from .checkpoint import load_checkpoint

    source = load_checkpoint(args.resume).get("source")
    try:
        model = RenewableHuberRegressor.load(args.resume, backend=args.backend, dtype=args.dtype)
    except BackendUnavailableError as exc:
        hint = "" if args.backend else "; --backend moves the stream to another engine"
        raise EngineProblem(_engine_message(exc, f"cannot resume {args.resume}") + hint) \
            from exc
    if args.n_jobs is not None:
        model = _with_n_jobs(model, args.n_jobs)
    # The solver limits may change on resume: plain assignment, because set_params would
    # start a new stream; the estimator validates them at the next batch.
    for name, value in limits.items():
        setattr(model, name, value)
    _check_configuration(model)
    return model, source


def _check_configuration(model) -> None:
    """The estimator checks its parameters at the first batch; checked here, before the file
    is read, a bad --tau is reported as the option it is, not as a fault of the first rows."""
    from ._validation import validate_params

    validate_params(model.get_params())


def _with_n_jobs(model, n_jobs: int):
    """The resumed stream on a new engine with another thread count. n_jobs is fixed for the
    life of an engine, and load() does not take it, so the model goes through its own pickle
    protocol: the state moves bit for bit, only the parameter changes."""
    state = model.__getstate__()
    state["params"]["n_jobs"] = n_jobs
    moved = type(model).__new__(type(model))
    moved.__setstate__(state)
    return moved


def _check_engine(model) -> None:
    """A named backend that cannot load here fails before the file is read, as an engine
    problem (not at the first batch, where it would look like a fault of those rows)."""
    backend = model.get_params()["backend"]
    if backend == "auto":
        return
    from .backends import unavailable_reason

    reason = unavailable_reason(backend)
    if reason is not None:
        raise EngineProblem(f"engine unavailable: backend {backend!r} cannot be used here: "
                            f"{' '.join(reason.split())} (see '{PROG} info' for the engines "
                            "that load here)")


class _NamedColumns:
    """A minimal table (to_numpy() plus string column names) so the estimator records the
    file's feature names and predict can later find them in another file."""

    def __init__(self, values: np.ndarray, columns: list[str]):
        self._values = values
        self.columns = list(columns)

    def to_numpy(self, dtype=None, copy=False):
        return self._values if dtype is None else self._values.astype(dtype, copy=copy)

    @property
    def shape(self):
        return self._values.shape


def _note_left_out(table, used: list[str]) -> None:
    """The columns the default feature choice left out, and why: once, when the run has
    succeeded (a failed run's stderr is its one error line)."""
    from .datafile import left_out_columns

    left_out = left_out_columns(table, used)
    if left_out:
        listed = ", ".join(f"{name} ({why})" for name, why in left_out)
        print(f"{PROG}: note: {table.path}: not numeric, left out of the features: {listed}",
              file=sys.stderr)


def _starting_row(args, table, source) -> tuple[int, int]:
    """(start, held): the data row of DATA after which this run starts, and how many of its
    leading rows the resumed checkpoint already holds. Refuses anything that would fold rows
    the checkpoint holds into it again (docs/cli.md, "Resuming after a stop")."""
    skip = args.skip_rows
    if args.resume is None or source is None:
        return skip or 0, 0
    held, recorded = source["rows"], source["path"]
    if table.resume_at(source):
        if args.new_data:
            raise ResumeRefused(
                f"{args.data} is not new data: it starts with the {held:,} rows {args.resume} "
                f"already holds (recorded source {recorded}); drop --new-data to continue "
                f"after row {held:,}")
        if skip is not None and skip < held:
            raise ResumeRefused(
                f"--skip-rows {skip:,} would fold rows {skip + 1:,}-{held:,} of {args.data} "
                f"into {args.resume} a second time: it already holds the first {held:,} "
                f"(recorded source {recorded}); drop --skip-rows to continue after row "
                f"{held:,}")
        return max(skip or 0, held), held
    if args.new_data and "files" in source:
        # A checkpoint of fit --dask lists its dataset's files: this file may be one of them.
        from .checkpoint import local_file_fingerprint

        if local_file_fingerprint(args.data) in set(source["files"]):
            raise ResumeRefused(
                f"{args.data} is not new data: it is a file of the dataset {args.resume} was "
                f"fitted on ({recorded}: same size and last 64 KiB); pass a file the model "
                f"has not seen")
    if not args.new_data:
        how = ("is shorter than the part it read" if table.size < source["prefix_bytes"]
               else f"differs in its first {source['prefix_bytes']:,} bytes")
        raise ResumeRefused(
            f"{args.data} is not the file {args.resume} was fitted on ({recorded}, "
            f"{held:,} data rows read; {args.data} {how}): to continue that file pass it "
            f"instead; if {args.data} holds only rows the model has not seen, add --new-data")
    return skip or 0, 0


class ResumeRefused(RenewableHuberError):
    """fit --resume would count rows twice (or cannot tell that it would not)."""


def _partition_engines() -> tuple[str, ...]:
    from .dask.partitions import PARTITION_ENGINES

    return PARTITION_ENGINES


def command_fit(args) -> int:
    from .datafile import open_table, select_columns

    if args.dask is not None:
        from .dask.command import command_fit_on_cluster

        return command_fit_on_cluster(args)
    if len(args.data) > 1:
        raise UsageError(f"fit reads one DATA file, got {len(args.data)}; several files, globs "
                         "or directories need --dask")
    for flag, value in (("--partitions-per-batch", args.partitions_per_batch),
                        ("--partition-engine", getattr(args, "partition_engine", None))):
        if value is not None:
            raise UsageError(f"{flag} needs --dask")
    args.data = args.data[0]
    if args.batch_size is None:
        args.batch_size = DEFAULT_BATCH_ROWS
    _check_fit_options(args)
    table = open_table(args.data, args.batch_size)
    try:
        model, source = _new_or_resumed_model(args)
        rows_before = int(getattr(model, "n_samples_seen_", 0) or 0)
        names = getattr(model, "feature_names_in_", None)
        if args.resume is not None and args.features is None and names is not None:
            features = list(names)
        else:
            features = args.features
        chosen = select_columns(table, target=args.target, features=features,
                                weight=args.weight_column)
        start, held = _starting_row(args, table, source)
        run = _FitRun(args, model, table, chosen, start, held)
        run.stream()
        if features is None:
            _note_left_out(table, chosen)
    finally:
        table.close()
    if run.unconverged:
        first = run.unconverged[0]["batch"]
        if model.penalty != "l1":
            advice = ("raise --max-iter, loosen --tol, or give --tau in the target's units "
                      "(--tau auto)")
        elif model.standardize:
            # Scale is not the cause: what is left is collinearity or too few iterations.
            advice = ("the features are standardised (--standardize), so the design is nearly "
                      "collinear or the batches need more iterations: raise --max-iter, or "
                      f"{COLLINEAR_REMEDY}")
        else:
            advice = (f"{L1_SCALE_ADVICE}: fit again with --standardize, then raise "
                      "--max-iter if it still stops")
        _warn(f"{len(run.unconverged)} of {run.batches} batches did not converge "
              f"(first: batch {first}); their coefficients are the solver's last step, not the "
              f"optimum: {advice}")
    if args.json:
        print(json.dumps(_fit_document(args, model, chosen, rows_before, run), indent=2,
                         default=_plain))
    else:
        print(_fit_summary(args, model, chosen, rows_before, run))
    return 0


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _fit_one_batch(model, X, y, sample_weight=None) -> list:
    """partial_fit, returning the package's warnings instead of letting Python print them
    (each becomes one `renewable-huber: warning:` line); any other warning is passed on to
    the interpreter's own filters."""
    with warnings.catch_warnings(record=True) as caught:
        # Recorded whatever the interpreter's filters say (even "error"): the CLI decides.
        warnings.simplefilter("always", RenewableHuberWarning)
        model.partial_fit(X, y, sample_weight)
    ours = []
    for record in caught:
        if isinstance(record.message, RenewableHuberWarning):
            ours.append(record.message)
        else:
            warnings.warn_explicit(record.message, record.category, record.filename,
                                   record.lineno)
    return ours


def _strict_stop_message(model, where: str, checkpoint, previous, save, holds: str) -> str:
    """fit --strict met a batch that did not converge: saves `previous` (the state before that
    batch) through `save` when there is a checkpoint to keep, and says what it holds; `holds`
    tells what the checkpoint's source record covers (rows of a file, partitions of a
    dataset)."""
    diagnostics = model.diagnostics_
    text = (f"batch {model.state_.batch_count} ({where}) did not converge after "
            f"{diagnostics['iterations']} iterations ({diagnostics['stop_reason']}); "
            "stopped by --strict")
    if not checkpoint:
        return text + "; no checkpoint requested"
    if previous is None:
        return (text + f"; {checkpoint} not written: no batch of this stream converged "
                "before it")
    save(previous)
    return (text + f"; {checkpoint} holds the stream through batch "
            f"{previous['batch_count']} ({previous['n_samples_seen']:,} rows), without this "
            f"batch; continue with --resume {checkpoint} ({holds})")


class _SaveCadence:
    """When `fit` (and `fit --dask`) writes its checkpoint: never without one (path None),
    else after every `every` batches and/or once `seconds` have passed since the last save,
    checked after each batch; counts saves."""

    def __init__(self, path: str | None, every: int | None, seconds: float | None):
        self.path = path
        self.every = every or 0
        self.seconds = seconds or 0.0
        self.saves = 0
        self.since_save = 0
        self.last_save = time.monotonic()

    def start(self) -> None:
        self.last_save = time.monotonic()

    def batch_done(self) -> None:
        self.since_save += 1

    def due(self) -> bool:
        if not self.path:
            return False
        if self.every and self.since_save >= self.every:
            return True
        return bool(self.seconds) and time.monotonic() - self.last_save >= self.seconds

    def saved(self) -> None:
        self.saves += 1
        self.since_save = 0
        self.last_save = time.monotonic()

    def failure_note(self, holds: str | None) -> str:
        """The end of an error line: what the checkpoint holds after the failure (nothing is
        written because of one); `holds` None when this run wrote none."""
        if not self.path:
            return ""
        if holds is None:
            return f"; {self.path} was not written by this run"
        return f"; {self.path} holds {holds} (continue with --resume {self.path})"

    def interrupted(self, done: str, holds: str | None, again: str, resume: str) -> Interrupted:
        """The error of a run stopped by Ctrl-C: `done` says what ran, `holds` what the
        checkpoint holds now (None when this run wrote none), `again` the command line that
        starts over and `resume` the one that continues."""
        if not self.path:
            return Interrupted(f"{done}; nothing was saved (no --checkpoint): rerun with "
                               "--checkpoint FILE to be able to resume")
        if holds is None:
            return Interrupted(f"{done}; {self.path} was not written; start again with: {again}")
        return Interrupted(f"{done}; {self.path} holds {holds}; resume with: {resume}")


class _FitRun:
    """One pass of `fit` over DATA: the batches, the checkpoint cadence, --strict, Ctrl-C."""

    def __init__(self, args, model, table, features: list[str], start: int, held: int = 0):
        self.args, self.model, self.table, self.features = args, model, table, features
        self.held = held  # leading rows of DATA the resumed checkpoint already held
        self.columns = [*features, args.target] + ([args.weight_column]
                                                   if args.weight_column else [])
        self.start = start
        self.rows_done = start  # leading data rows of DATA the model holds (or skipped)
        self.batches = self.rows = 0
        self.unconverged: list[dict] = []
        self.saved_rows: int | None = None  # rows_done of the checkpoint this run wrote
        every, seconds = args.checkpoint_every, args.checkpoint_seconds
        if seconds is None:
            seconds = DEFAULT_CHECKPOINT_SECONDS if every is None else 0.0
        self.cadence = _SaveCadence(args.checkpoint, every, seconds)
        self.seconds_taken = 0.0
        # Set by the first Ctrl-C: the batch under way finishes, the model is saved, the run
        # stops; `consistent` is False while the model may hold a batch the counters do not.
        self.interrupt_requested = False
        self.consistent = True

    # -- the loop -----------------------------------------------------------------------

    def stream(self) -> None:
        args, table = self.args, self.table
        bar = _progress(table.progress_total, "fit", args.no_progress, table.progress_unit)
        shown = 0
        keep_previous = args.strict and args.checkpoint
        # --strict --checkpoint: the state before the current batch, saved if the batch does
        # not converge, so the checkpoint never holds an unconverged batch.
        previous = (self.model.state_dict()
                    if keep_previous and hasattr(self.model, "coef_") else None)
        began = time.perf_counter()
        self.cadence.start()
        try:
            with self._deferred_interrupt():
                for chunk in self._chunks():
                    self._fit(chunk, previous)
                    bar.update(table.progress_position - shown)
                    shown = table.progress_position
                    if self.cadence.due():
                        self._save()
                    if keep_previous:
                        previous = self.model.state_dict()
                    if self.interrupt_requested:
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise self._interrupted() from None
        finally:
            bar.close()
        self.seconds_taken = time.perf_counter() - began
        if self.batches == 0:
            raise DataBatchError(self._nothing_to_fit())
        if args.checkpoint and self.saved_rows != self.rows_done:
            self._save()

    def _chunks(self):
        """The table's chunks; a file error met on the way also says what the checkpoint
        holds."""
        from .datafile import DataFileError

        chunks = self.table.batches(self.columns, skip=self.start)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except DataFileError as exc:
                raise DataBatchError(f"{exc}{self._checkpoint_state()}") from exc
            yield chunk

    def _fit(self, chunk, previous) -> None:
        args, model = self.args, self.model
        p = len(self.features)
        values = chunk.values
        weights = values[:, p + 1] if args.weight_column else None
        where = f"{args.data} {self.table.span(chunk.first, chunk.last)}"
        self.consistent = False
        try:
            reported = _fit_one_batch(model, _NamedColumns(values[:, :p], self.features),
                                      values[:, p], weights)
        except BackendUnavailableError as exc:
            raise EngineProblem(_engine_message(exc, "engine unavailable")) from exc
        except EngineError as exc:
            raise EngineProblem(f"the {model.backend_} engine failed on batch "
                                f"{self.batches + 1} of this run ({where}): {_one_line(exc)}"
                                f"{self._checkpoint_state()}") from exc
        except (RenewableHuberError, ValueError) as exc:
            self.consistent = True  # a refused batch leaves the model as it was
            raise DataBatchError(f"{where} (batch {self.batches + 1} of this run): "
                                 f"{_one_line(exc)}{self._checkpoint_state()}") from exc
        diagnostics = model.diagnostics_
        for warning in reported:
            if isinstance(warning, FeatureScaleWarning):
                # The estimator's advice names its parameter; here it is an option.
                _warn(" ".join(str(warning).split()) + "; here: fit again with --standardize")
            elif isinstance(warning, PrecisionWarning):
                _warn(" ".join(str(warning).split())
                      + "; here: fit again with --dtype float64 or --standardize")
            elif not isinstance(warning, ConvergenceWarning):
                _warn(" ".join(str(warning).split()))
        if not diagnostics["converged"] and args.strict:
            raise StrictStop(self._strict_message(previous, where))
        for warning in reported:
            if isinstance(warning, ConvergenceWarning):
                _warn(f"batch {warning.batch} did not converge after {warning.iterations} "
                      f"iterations ({warning.reason})")
        self.batches += 1
        self.cadence.batch_done()
        self.rows += values.shape[0]
        self.rows_done = chunk.rows_through
        if not diagnostics["converged"]:
            self.unconverged.append({
                "batch": int(model.state_.batch_count), "first": chunk.first,
                "last": chunk.last, "iterations": int(diagnostics["iterations"]),
                "reason": diagnostics["stop_reason"]})
        self.consistent = True

    # -- checkpoints --------------------------------------------------------------------

    def _save(self, payload=None, rows=None) -> None:
        from .checkpoint import save_checkpoint

        rows = self.rows_done if rows is None else rows
        payload = self.model.state_dict() if payload is None else payload
        save_checkpoint(self.args.checkpoint, payload, source=self.table.source_record(rows))
        self.cadence.saved()
        self.saved_rows = rows

    def _checkpoint_state(self) -> str:
        return self.cadence.failure_note(
            None if self.saved_rows is None
            else f"the first {self.saved_rows:,} data rows of {self.args.data}")

    def _strict_message(self, previous, where: str) -> str:
        """Saves the last converged state (--checkpoint) and says what the checkpoint holds."""
        return _strict_stop_message(
            self.model, where, self.args.checkpoint, previous,
            lambda state: self._save(state, self.rows_done),
            f"it records the rows of {self.args.data} it holds")

    def _nothing_to_fit(self) -> str:
        args, read = self.args, self.table.rows_read
        if self.held and read <= self.held:
            return (f"nothing new to fit: {args.resume} already holds all {read:,} data rows "
                    f"of {args.data}")
        if self.start:
            return (f"{args.data} has no data rows after the first {self.start:,} (it has "
                    f"{read:,})")
        return f"{args.data} has no data rows"

    # -- Ctrl-C -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _deferred_interrupt(self):
        """The first Ctrl-C lets the batch under way finish so that the model saved is one the
        counters describe; a second one interrupts at once. Before the first batch (nothing to
        save), or without --checkpoint, Ctrl-C interrupts at once. Only the main thread can
        handle signals, and an embedding program's own handler is left alone."""
        if (threading.current_thread() is not threading.main_thread()
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
            yield
            return

        def handler(signum, frame):
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if self.batches and self.args.checkpoint:
                self.interrupt_requested = True
            else:
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _interrupted(self) -> Interrupted:
        args = self.args
        if (args.checkpoint and self.consistent and self.batches
                and self.saved_rows != self.rows_done):
            self._save()
        done = (f"interrupted after {self.rows:,} rows of {args.data} in {self.batches:,} "
                "batches")
        holds = (None if self.saved_rows is None
                 else f"the first {self.saved_rows:,} data rows of {args.data}")
        return self.cadence.interrupted(done, holds, _fit_command(args),
                                        _fit_command(args, resume=args.checkpoint))


def _fit_command(args, resume: str | None = None, *, source: list[str] | None = None,
                 batching: list[str] | None = None) -> str:
    """The `fit` command line of this run, or (resume=CHECKPOINT) the one that continues it:
    the checkpoint then fixes the configuration and records where DATA stopped, so the
    configuration options, --skip-rows and --new-data are left out. `source` and `batching`
    replace DATA and --batch-size (fit --dask: the cluster, the dataset's files and
    --partitions-per-batch)."""
    parts = [PROG, "fit", *(source if source is not None else [args.data]),
             "--target", args.target]
    if args.features is not None:
        parts += ["--features", ",".join(args.features)]
    if args.weight_column is not None:
        parts += ["--weight-column", args.weight_column]
    parts += batching if batching is not None else ["--batch-size", str(args.batch_size)]
    if resume is None:
        for flag, value in (("--penalty", args.penalty), ("--lambda-scale", args.lambda_scale),
                            ("--tau", args.tau)):
            if value is not None:
                parts += [flag, value if isinstance(value, str) else repr(value)]
        parts += [flag for flag, on in (("--no-intercept", args.no_intercept),
                                        ("--inference", args.inference),
                                        ("--standardize", args.standardize)) if on]
    for flag, value in (("--backend", args.backend), ("--dtype", args.dtype),
                        ("--n-jobs", args.n_jobs), ("--max-iter", args.max_iter),
                        ("--tol", args.tol),
                        ("--partition-engine", getattr(args, "partition_engine", None)),
                        ("--checkpoint", args.checkpoint),
                        ("--checkpoint-seconds", args.checkpoint_seconds),
                        ("--checkpoint-every", args.checkpoint_every)):
        if value is not None:
            parts += [flag, value if isinstance(value, str) else repr(value)]
    if args.strict:
        parts.append("--strict")
    if resume is not None:
        parts += ["--resume", resume]
    else:
        if args.resume is not None:
            parts += ["--resume", args.resume]
        if args.skip_rows is not None:
            parts += ["--skip-rows", str(args.skip_rows)]
        if args.new_data:
            parts.append("--new-data")
    parts += [flag for flag, on in (("--json", args.json), ("--no-progress", args.no_progress))
              if on]
    return " ".join(shlex.quote(str(part)) for part in parts)


def _coefficient_names(names, n_features: int) -> list[str]:
    # Unnamed features are called x0, x1, ... as scikit-learn does.
    return list(names) if names is not None else [f"x{j}" for j in range(n_features)]


def _fit_summary(args, model, features, rows_before, run: _FitRun) -> str:
    diag = model.diagnostics_
    lines = [
        f"data: {args.data}  target: {args.target}  backend: {model.backend_}"
        + (f"  weights: {args.weight_column}" if args.weight_column else ""),
        f"this run: {run.rows:,} rows in {run.batches:,} batches, {run.seconds_taken:.3f} s"
        + (f" (resumed from {rows_before:,} rows)" if args.resume else ""),
    ]
    if run.start:
        lines.append(f"started after data row {run.start:,} of {args.data}")
    lines += [
        f"rows seen in total: {int(model.n_samples_seen_):,}",
        f"batches not converged: {len(run.unconverged)}",
        f"tau: {model.tau_:.6g}" + (" (auto, from the first batch)"
                                    if model.get_params()["tau"] == "auto" else ""),
        *([STANDARDIZED_NOTE] if model.get_params()["standardize"] else []),
        "last batch: "
        f"iterations={diag['iterations']} converged={diag['converged']} "
        + ("" if diag["converged"] else f"stop_reason={diag['stop_reason']!r} ")
        + f"objective={diag['objective']:.6g} lambda={diag['lambda_value']:.6g} "
        f"bandwidth={diag['bandwidth']:.6g} fallback={diag['used_regularized_fallback']}",
        "",
    ]
    fit_intercept = model.get_params()["fit_intercept"]
    names = [*features] + (["(intercept)"] if fit_intercept else [])
    lines += _coefficient_table(names, model._parameters().tolist())
    lines += _inference_table(names, model, model.get_params()["penalty"],
                              model.state_dict()["config"]["inference"])
    if args.checkpoint:
        lines.append("")
        saves = run.cadence.saves
        lines.append(f"checkpoint: {args.checkpoint} (written {saves} time"
                     f"{'s' if saves != 1 else ''}; holds the first {run.saved_rows:,} "
                     f"data rows of {args.data})")
    return "\n".join(lines)


def _coefficient_table(names: list[str], values: list[float]) -> list[str]:
    width = max(len("feature"), *(len(n) for n in names))
    lines = [f"{'feature':<{width}}  {'coefficient':>14}", f"{'-' * width}  {'-' * 14}"]
    lines.extend(f"{name:<{width}}  {value:>14.6g}"
                 for name, value in zip(names, values, strict=True))
    return lines


def _estimates(fitted, penalty: str, requested: bool):
    """(parameters, standard errors, None), or (parameters, None, the reason the stream has no
    standard errors): coefficients then the intercept, in the data's units, as the estimator
    reports them (coef_, intercept_, bse_). requested: the stream's inference setting."""
    from . import inference
    from .exceptions import InferenceUnavailableError

    parameters = fitted._parameters()
    if penalty != "none" or not requested:
        # Nothing is computed for these two: the reason, in the command line's words.
        return (parameters, *inference.standard_errors_of(fitted.state_, penalty, requested))
    try:
        return parameters, fitted.bse_, None
    except InferenceUnavailableError as error:  # no K, a singular J, n <= P
        return parameters, None, str(error)


def _inference_table(names: list[str], fitted, penalty: str, requested: bool) -> list[str]:
    """Standard errors, z, P>|z| and 95% intervals under the coefficient table, or the reason
    the stream has none (fitted: the estimator, see _estimates; requested: the stream's
    inference setting)."""
    from . import inference

    parameters, standard_errors, reason = _estimates(fitted, penalty, requested)
    if standard_errors is None:
        if not requested and penalty == "none":
            return ["", f"standard errors: {reason}"]
        return ["", f"standard errors: unavailable: {reason}"]
    rows = inference.summary_rows(names, parameters, standard_errors, 0.05)
    width = max(len("feature"), *(len(n) for n in names))
    lines = ["", "inference (sandwich covariance n/(n-P) J^-1 K J^-1, 95% Wald intervals):",
             f"{'feature':<{width}}  {'std err':>12} {'z':>9} {'P>|z|':>9} "
             f"{'[0.025':>13} {'0.975]':>13}"]
    lines.extend(
        f"{row['name']:<{width}}  {row['std_err']:>12.6g} {row['z']:>9.3f} "
        f"{row['p_value']:>9.3g} {row['lower']:>13.6g} {row['upper']:>13.6g}"
        for row in rows
    )
    return lines


def _inference_document(names: list[str], fitted, penalty: str, requested: bool) -> dict:
    """The JSON members: standard_errors by name (the intercept as "(intercept)"), or null
    with inference_unavailable giving the reason (fitted: the estimator, see _estimates)."""
    _, standard_errors, reason = _estimates(fitted, penalty, requested)
    if standard_errors is None:
        return {"standard_errors": None, "inference_unavailable": reason}
    return {"standard_errors": dict(zip(names, standard_errors.tolist(), strict=True)),
            "inference_unavailable": None}


def _plain(value):
    """json.dumps's fallback: NumPy scalars and arrays as Python numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _fit_document(args, model, features, rows_before, run: _FitRun) -> dict:
    state = model.state_dict()
    coef = np.asarray(model.coef_, dtype=np.float64).tolist()
    return {
        "data": args.data,
        "target": args.target,
        "features": list(features),
        "weight_column": args.weight_column,
        "backend": model.backend_,
        "dtype": state["config"]["dtype"],
        "n_jobs": model.n_jobs_,
        "config": state["config"],
        "coefficients": dict(zip(features, coef, strict=True)),
        "intercept": float(model.intercept_),
        "fit_intercept": state["fit_intercept"],
        "n_samples_seen": state["n_samples_seen"],
        "batch_count": state["batch_count"],
        "weight_sum": state["weight_sum"],
        "run": {
            "rows": run.rows,
            "batches": run.batches,
            "seconds": run.seconds_taken,
            "started_after_row": run.start,
            "rows_through": run.rows_done,
            "resumed_from_rows": rows_before if args.resume else None,
            "checkpoint": args.checkpoint,
            "checkpoint_writes": run.cadence.saves,
        },
        "not_converged": len(run.unconverged),
        "unconverged_batches": run.unconverged,
        "last_batch": dict(model.diagnostics_),
        **_inference_document([*features] + (["(intercept)"] if state["fit_intercept"] else []),
                              model, state["config"]["penalty"],
                              state["config"]["inference"]),
    }


def _progress(total, desc: str, no_progress: bool, unit: str = "rows"):
    from .progress import progress_bar

    return progress_bar(total, desc=desc, unit=unit, enabled=not no_progress)


# ------------------------------------------------------------------------------- predict


def command_predict(args) -> int:
    from .datafile import open_table, select_columns
    from .estimator import RenewableHuberRegressor

    table = open_table(args.data, args.batch_size)
    try:
        try:
            model = RenewableHuberRegressor.load(args.checkpoint, backend=args.backend)
        except BackendUnavailableError as exc:
            raise EngineProblem(_engine_message(exc, f"cannot load {args.checkpoint}")) from exc
        names = getattr(model, "feature_names_in_", None)
        if args.features is not None:
            features = args.features
        elif names is not None:
            features = list(names)
        else:
            features = None
        chosen = select_columns(table, target=None, features=features)
        if len(chosen) != model.n_features_in_:
            raise ValueError(
                f"the checkpoint expects {model.n_features_in_} features but {args.data} gives "
                f"{len(chosen)} numeric columns ({', '.join(chosen)}); name them with "
                "--features A,B,C")
        if args.output is None:
            _stream_predict(args, model, table, chosen, sys.stdout)
        else:
            _write_atomically(args.output,
                              lambda out: _stream_predict(args, model, table, chosen, out))
        if features is None:
            _note_left_out(table, chosen)
    finally:
        table.close()
    return 0


def _write_atomically(path: str, write) -> None:
    """A failure half-way leaves no truncated prediction file behind."""
    partial = f"{path}.partial-{os.getpid()}"
    try:
        with open(partial, "w", newline="", encoding="utf-8") as out:
            write(out)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _stream_predict(args, model, table, features, out) -> None:
    bar = _progress(table.progress_total, "predict", args.no_progress, table.progress_unit)
    named = getattr(model, "feature_names_in_", None) is not None
    shown = 0
    out.write("prediction\n")
    try:
        for chunk in table.batches(features):
            X = _NamedColumns(chunk.values, features) if named else chunk.values
            predictions = np.asarray(model.predict(X), dtype=np.float64)
            # repr is the shortest text that parses back to the same float.
            out.write("".join(f"{value!r}\n" for value in predictions.tolist()))
            bar.update(table.progress_position - shown)
            shown = table.progress_position
    finally:
        bar.close()


# ------------------------------------------------------------------------------- inspect


def command_inspect(args) -> int:
    """Reads the checkpoint with its full checks but creates no engine of its backend, so a
    checkpoint of a GPU stream can be inspected anywhere: the numbers come from the stream
    restored on the NumPy backend, so they are the estimator's own (in the data's units, also
    for a standardised stream)."""
    from .checkpoint import load_checkpoint
    from .estimator import RenewableHuberRegressor

    payload = load_checkpoint(args.checkpoint)
    config = payload["config"]
    n_features = payload["n_features_in"]
    names = _coefficient_names(payload["feature_names_in"], n_features)
    # The stream restored on the NumPy backend, whatever engine it ran on: the estimator's own
    # numbers (in the data's units, also for a standardised stream) without creating its engine.
    model = RenewableHuberRegressor._from_payload(payload, backend="numpy")
    coefficients = model._parameters().tolist()
    intercept = coefficients[n_features] if payload["fit_intercept"] else None
    source = payload.get("source")
    table_names = names + (["(intercept)"] if intercept is not None else [])
    scaling = payload["feature_scaling"]
    if args.json:
        document = {
            "checkpoint": args.checkpoint,
            "format_version": payload["format_version"],
            "backend": config["backend"],
            "dtype": config["dtype"],
            "config": config,
            "n_features_in": n_features,
            "feature_names": payload["feature_names_in"],
            "coefficients": dict(zip(names, coefficients[:n_features], strict=True)),
            "intercept": intercept,
            "fit_intercept": payload["fit_intercept"],
            "n_samples_seen": payload["n_samples_seen"],
            "batch_count": payload["batch_count"],
            "weight_sum": payload["weight_sum"],
            "previous_lambda": payload["previous_lambda"],
            "source": source,
            # standardize true: each feature's centre and scale, fixed by the first batch.
            "feature_scaling": None if scaling is None else {
                key: dict(zip(names, scaling[key], strict=True)) for key in ("center", "scale")},
            **_inference_document(table_names, model, config["penalty"], config["inference"]),
        }
        print(json.dumps(document, indent=2, default=_plain))
        return 0
    settings = " ".join(f"{key}={config[key]}" for key in (
        "tau", "penalty", "lambda_scale", "fit_intercept", "max_iter", "tol", "n_jobs",
        "inference") + (("standardize",) if config["standardize"] else ()))
    lines = [
        f"checkpoint: {args.checkpoint} (format {payload['format_version']})",
        f"backend: {config['backend']} (the configuration's; fit --resume and predict may "
        "choose another with --backend)",
        f"dtype: {config['dtype']}",
        f"rows seen: {payload['n_samples_seen']:,} in {payload['batch_count']:,} batches "
        f"(weight sum {payload['weight_sum']:.17g}, previous lambda "
        f"{payload['previous_lambda']:.6g})",
        f"config: {settings}",
    ]
    if source is not None:
        if "partitions" in source:  # a dataset fitted with fit --dask
            lines.append(f"source: {source['path']}: holds its first {source['partitions']:,} "
                         f"partitions, {source['rows']:,} data rows (the files had "
                         f"{source['size']:,} bytes)")
        else:
            lines.append(f"source: {source['path']}: holds its first {source['rows']:,} data "
                         f"rows (the file had {source['size']:,} bytes)")
    else:
        lines.append("source: not recorded (saved by the Python API, or by an older `fit`)")
    if scaling is not None:
        lines.append(STANDARDIZED_NOTE)
    lines.append("")
    lines += _coefficient_table(table_names, coefficients)
    lines += _inference_table(table_names, model, config["penalty"], config["inference"])
    print("\n".join(lines))
    return 0


# ---------------------------------------------------------------------------------- info


def command_info(args) -> int:
    if args.include_dir or args.cmake_dir:
        from . import paths

        # FileNotFoundError (a source checkout) becomes one error line in main().
        print(paths.get_include() if args.include_dir else paths.get_cmake_dir())
        return 0
    print(f"renewable-huber {package_version()}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    print(f"ABI version (binding): {_binding_abi_version()}")
    print("engines:")
    for name in BACKENDS:
        print(f"  {name:<12} {_engine_status(name)}")
    print(f"CUDA: {_cuda_runtime_summary()}")
    return 0


def _binding_abi_version() -> str:
    try:
        from . import _abi
    except ImportError as exc:
        return f"unknown (the ctypes binding is not importable: {exc})"
    return str(_abi.ABI_VERSION)


def _engine_status(name: str) -> str:
    try:
        from .backends import unavailable_reason
    except ImportError as exc:
        return f"unknown (backends registry not importable: {exc})"
    try:
        reason = unavailable_reason(name)
    except Exception as exc:  # a probing bug must not hide the other engines' status
        return f"unknown (probe failed: {type(exc).__name__}: {exc})"
    return "available" if reason is None else f"unavailable: {reason}"


def _cuda_version_text(encoded: int) -> str:
    """CUDA encodes versions as 1000 * major + 10 * minor (12040 is 12.4)."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}" if encoded > 0 else "none"


def _cuda_runtime_summary() -> str:
    """Asks librh_cuda itself (rh_cuda_runtime_info): the runtime it was built with and the
    driver it found are what decide whether native_cuda works here."""
    import ctypes

    try:
        from . import _abi, _loader

        library = _loader.load_engine_library("native_cuda")
        info = _abi.make(_abi.RhCudaRuntimeInfo)
        _abi.check(library, library.rh_cuda_runtime_info(ctypes.byref(info)),
                   "rh_cuda_runtime_info")
    except Exception as exc:  # no librh_cuda, no driver: report, never fail `info`
        return f"not available ({_one_line(exc)})"
    summary = (f"runtime {_cuda_version_text(info.runtime_version)}, driver "
               f"{_cuda_version_text(info.driver_version)}, {info.device_count} device(s)")
    names = _gpu_names(info.device_count)
    return summary + (f": {', '.join(names)}" if names else "")


def _gpu_names(count: int) -> list[str]:
    """Device names through CuPy when it is installed (the ABI reports counts only)."""
    if count <= 0:
        return []
    try:
        import cupy

        return [cupy.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(count)]
    except Exception:  # CuPy is optional; the name is a nicety
        return []


# --------------------------------------------------------------------------- conformance


def command_conformance(argv: list[str]) -> int:
    try:
        from .conformance import main as conformance_main
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"the conformance runner is not available in this installation ({exc})") from exc
    return int(conformance_main(argv) or 0)


# ---------------------------------------------------------------------------------- main


def _with_default_command(argv: list[str]) -> list[str]:
    """No command means demo; demo's own options may be given without the word 'demo'."""
    if not argv:
        return ["demo"]
    first = argv[0]
    if first.startswith("-") and first not in ("-h", "--help", "--version"):
        return ["demo", *argv]
    return argv


def _run(argv: list[str]) -> int:
    argv = _with_default_command(argv)
    if argv[0] == "conformance":
        return command_conformance(argv[1:])
    args = build_parser().parse_args(argv)
    handlers = {"demo": command_demo, "fit": command_fit, "predict": command_predict,
                "inspect": command_inspect, "info": command_info}
    return handlers[args.command](args)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _fail(message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = os.environ.get("RH_DEBUG", "") not in ("", "0")
    try:
        return _run(argv)
    except SystemExit as exc:  # --help and --version end through argparse's exit
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`... | head`): like any Unix filter, stop quietly. Pointing
        # stdout at devnull keeps the interpreter's final flush from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except UsageError as exc:
        if debug:
            raise
        return _fail(str(exc), EXIT_USAGE)
    except StrictStop as exc:
        if debug:
            raise
        return _fail(str(exc), EXIT_NOT_CONVERGED)
    except Interrupted as exc:
        if debug:
            raise
        return _fail(str(exc), EXIT_INTERRUPTED)
    except (RenewableHuberError, OSError, ValueError, ImportError) as exc:
        if debug:
            raise
        return _fail(_one_line(exc), EXIT_ERROR)
    except Exception as exc:
        if debug:
            raise
        return _fail(f"unexpected {type(exc).__name__}: {_one_line(exc)} (rerun with "
                     "RH_DEBUG=1 for the traceback)", EXIT_ERROR)
