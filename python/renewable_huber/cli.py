"""The `renewable-huber` command line: demo (the default), fit, predict, info, conformance.

Every failure a user can cause ends as one line `renewable-huber: error: ...` on stderr and a
non-zero exit status; RH_DEBUG=1 shows the traceback instead. `fit` reports every batch that
did not converge as one line `renewable-huber: warning: batch K did not converge after I
iterations (reason)` on stderr (K: the batch's index in the stream) plus a summary line at the
end; with --strict it stops at the first such batch with exit status 3 instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

from .exceptions import ConvergenceWarning, RenewableHuberError, RenewableHuberWarning

PROG = "renewable-huber"
BACKENDS = ("auto", "numpy", "cupy", "native_cpu", "native_cuda")
ENGINES = ("numpy", "cupy", "native_cpu", "native_cuda")
EXIT_ERROR = 1
EXIT_USAGE = 2
# fit --strict: a batch did not converge (the checkpoint, if any, holds the batches before it).
EXIT_NOT_CONVERGED = 3


class UsageError(Exception):
    """Bad command-line syntax or option value (argparse's own errors end up here)."""


class DataBatchError(RenewableHuberError):
    """A batch of a data file was refused; the message says which rows and why."""


class StrictStop(RenewableHuberError):
    """fit --strict met a batch that did not converge; the message says which batch and what
    the checkpoint holds."""


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


def _tau_option(text: str) -> float | str:
    """--tau: a number in the target's units, or 'auto' (chosen from the first batch)."""
    return "auto" if text.strip() == "auto" else _finite_float(text)


def _column_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


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
    demo.add_argument("--batch-size", type=_positive_int, default=10_000, help="default 10000")
    demo.add_argument("--seed", type=_non_negative_int, default=0, help="default 0")
    demo.add_argument("--backend", choices=BACKENDS, default="auto")
    demo.add_argument("--plot", metavar="FILE.png", help="write the coefficient trajectory")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")

    fit = commands.add_parser("fit", help="stream a CSV or Parquet file through the estimator")
    fit.add_argument("data", metavar="DATA", help="a .csv (with header) or .parquet file")
    fit.add_argument("--target", required=True, metavar="COL", help="the response column")
    fit.add_argument("--features", type=_column_list, metavar="A,B,C",
                     help="feature columns (default: every numeric column but the target)")
    fit.add_argument("--batch-size", type=_positive_int, default=10_000, help="default 10000")
    fit.add_argument("--penalty", choices=("none", "l1"), help="default none")
    fit.add_argument("--tau", type=_tau_option, metavar="TAU|auto",
                     help="Huber threshold in the target's units (default 1.345, which suits a "
                     "standardised target); 'auto': 1.345 x a robust residual scale of the "
                     "first batch")
    fit.add_argument("--backend", choices=BACKENDS, help="default auto")
    fit.add_argument("--dtype", choices=("float64", "float32"), help="default float64")
    fit.add_argument("--max-iter", type=_positive_int, metavar="N",
                     help="solver iterations per batch (default 100)")
    fit.add_argument("--tol", type=_positive_float, metavar="TOL",
                     help="solver step tolerance (default 1e-6)")
    fit.add_argument("--strict", action="store_true",
                     help="stop with exit status 3 at the first batch that does not converge; "
                     "the checkpoint then holds the batches before it")
    fit.add_argument("--checkpoint", metavar="OUT.npz", help="save the model here")
    fit.add_argument("--checkpoint-every", type=_non_negative_int, default=1, metavar="K",
                     help="save every K batches (default 1; 0: only at the end)")
    fit.add_argument("--resume", metavar="IN.npz",
                     help="continue the stream of a saved model with this file's rows")
    fit.add_argument("--skip-rows", type=_non_negative_int, default=0, metavar="N",
                     help="skip the first N data rows (restart an interrupted run)")
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")

    predict = commands.add_parser("predict", help="predict a file's rows with a checkpoint")
    predict.add_argument("checkpoint", metavar="CHECKPOINT", help="a .npz saved by fit")
    predict.add_argument("data", metavar="DATA", help="a .csv (with header) or .parquet file")
    predict.add_argument("--output", metavar="OUT.csv", help="default: standard output")
    predict.add_argument("--features", type=_column_list, metavar="A,B,C",
                         help="feature columns, when the checkpoint has no feature names")
    predict.add_argument("--batch-size", type=_positive_int, default=10_000)
    predict.add_argument("--backend", choices=BACKENDS, help="default: the checkpoint's")
    predict.add_argument("--no-progress", action="store_true", help="no progress bar")

    commands.add_parser("info", help="versions, engines that load, GPU and CUDA")
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


def _new_or_resumed_model(args):
    from .estimator import RenewableHuberRegressor

    limits = {k: v for k, v in (("max_iter", args.max_iter), ("tol", args.tol))
              if v is not None}
    if args.resume is None:
        params = {k: v for k, v in (("tau", args.tau), ("penalty", args.penalty),
                                    ("backend", args.backend), ("dtype", args.dtype))
                  if v is not None}
        return RenewableHuberRegressor(**params, **limits)
    fixed = [f"--{name}" for name in ("tau", "penalty") if getattr(args, name) is not None]
    if fixed:
        raise UsageError(f"{', '.join(fixed)} cannot be combined with --resume: the checkpoint "
                         "fixes the configuration")
    model = RenewableHuberRegressor.load(args.resume, backend=args.backend, dtype=args.dtype)
    # The solver limits may change on resume: plain assignment, because set_params would
    # start a new stream; the estimator validates them at the next batch.
    for name, value in limits.items():
        setattr(model, name, value)
    return model


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


def command_fit(args) -> int:
    from .datafile import open_table, select_columns

    table = open_table(args.data, args.batch_size)
    try:
        model = _new_or_resumed_model(args)
        rows_before = int(getattr(model, "n_samples_seen_", 0) or 0)
        if args.resume is not None and args.features is None \
                and getattr(model, "feature_names_in_", None) is not None:
            features = list(model.feature_names_in_)
        else:
            features = args.features
        features = select_columns(table, target=args.target, features=features)
        summary = _stream_fit(args, model, table, features)
    finally:
        table.close()
    every = args.checkpoint_every
    if args.checkpoint and (every == 0 or summary["batches"] % every != 0):
        model.save(args.checkpoint)
    if summary["not_converged"]:
        _warn(f"{summary['not_converged']} of {summary['batches']} batches did not converge "
              f"(first: batch {summary['first_not_converged']}); their coefficients are the "
              "solver's last step, not the optimum: raise --max-iter, loosen --tol, or give "
              "--tau in the target's units (--tau auto)")
    print(_fit_summary(args, model, features, rows_before, summary))
    return 0


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _fit_one_batch(model, X, y) -> list:
    """partial_fit, returning the package's warnings instead of letting Python print them
    (each becomes one `renewable-huber: warning:` line); any other warning is passed on to
    the interpreter's own filters."""
    with warnings.catch_warnings(record=True) as caught:
        # Recorded whatever the interpreter's filters say (even "error"): the CLI decides.
        warnings.simplefilter("always", RenewableHuberWarning)
        model.partial_fit(X, y)
    ours = []
    for record in caught:
        if isinstance(record.message, RenewableHuberWarning):
            ours.append(record.message)
        else:
            warnings.warn_explicit(record.message, record.category, record.filename,
                                   record.lineno)
    return ours


def _stream_fit(args, model, table, features: list[str]) -> dict:
    columns = [*features, args.target]
    to_skip = args.skip_rows
    total = None if table.total_rows is None else max(table.total_rows - to_skip, 0)
    bar = _progress(total, "fit", args.no_progress)
    batches = rows = not_converged = 0
    first_not_converged = None
    # --strict --checkpoint: the state before the current batch, saved if the batch does not
    # converge, so the checkpoint never holds an unconverged batch.
    keep_previous = args.strict and args.checkpoint
    previous = model.state_dict() if keep_previous and hasattr(model, "coef_") else None
    start = time.perf_counter()
    try:
        for first, last, block in table.batches(columns):
            if to_skip:
                dropped = min(to_skip, block.shape[0])
                to_skip -= dropped
                block = block[dropped:]
                first += dropped
                if block.shape[0] == 0:
                    continue
            try:
                reported = _fit_one_batch(model, _NamedColumns(block[:, :-1], features),
                                          block[:, -1])
            except (RenewableHuberError, ValueError) as exc:
                raise DataBatchError(f"{args.data} lines {first}-{last} (batch "
                                     f"{batches + 1}): {exc}") from exc
            diagnostics = model.diagnostics_
            for warning in reported:
                if not isinstance(warning, ConvergenceWarning):
                    _warn(" ".join(str(warning).split()))
            if not diagnostics["converged"] and args.strict:
                raise StrictStop(_strict_message(args, model, previous, first, last,
                                                 args.skip_rows + rows))
            for warning in reported:
                if isinstance(warning, ConvergenceWarning):
                    _warn(f"batch {warning.batch} did not converge after {warning.iterations} "
                          f"iterations ({warning.reason})")
            batches += 1
            rows += block.shape[0]
            if not diagnostics["converged"]:
                not_converged += 1
                if first_not_converged is None:
                    first_not_converged = model.state_.batch_count
            bar.update(block.shape[0])
            if args.checkpoint and args.checkpoint_every and batches % args.checkpoint_every == 0:
                model.save(args.checkpoint)
            if keep_previous:
                previous = model.state_dict()
    finally:
        bar.close()
    if batches == 0:
        raise ValueError(f"{args.data} has no data rows"
                         + (f" after skipping {args.skip_rows}" if args.skip_rows else ""))
    return {"batches": batches, "rows": rows, "not_converged": not_converged,
            "first_not_converged": first_not_converged,
            "seconds": time.perf_counter() - start}


def _strict_message(args, model, previous, first: int, last: int, rows_done: int) -> str:
    """Saves the last converged state (--checkpoint) and says what the checkpoint holds."""
    from .checkpoint import save_checkpoint

    diagnostics = model.diagnostics_
    number = model.state_.batch_count
    text = (f"batch {number} ({args.data} lines {first}-{last}) did not converge after "
            f"{diagnostics['iterations']} iterations ({diagnostics['stop_reason']}); stopped "
            "by --strict")
    if not args.checkpoint:
        return text + "; no checkpoint requested"
    if previous is None:
        return (text + f"; {args.checkpoint} not written: no batch of this stream converged "
                "before it")
    save_checkpoint(args.checkpoint, previous)
    return (text + f"; {args.checkpoint} holds the stream through batch "
            f"{previous['batch_count']} ({previous['n_samples_seen']:,} rows), without this "
            f"batch; continue with --resume {args.checkpoint} --skip-rows {rows_done}")


def _fit_summary(args, model, features, rows_before, summary) -> str:
    diag = model.diagnostics_
    lines = [
        f"data: {args.data}  target: {args.target}  backend: {model.backend_}",
        f"this run: {summary['rows']:,} rows in {summary['batches']:,} batches, "
        f"{summary['seconds']:.3f} s"
        + (f" (resumed from {rows_before:,} rows)" if args.resume else ""),
        f"rows seen in total: {int(model.n_samples_seen_):,}",
        f"batches not converged: {summary['not_converged']}",
        f"tau: {model.tau_:.6g}" + (" (auto, from the first batch)"
                                    if model.get_params()["tau"] == "auto" else ""),
        "last batch: "
        f"iterations={diag['iterations']} converged={diag['converged']} "
        + ("" if diag["converged"] else f"stop_reason={diag['stop_reason']!r} ")
        + f"objective={diag['objective']:.6g} lambda={diag['lambda_value']:.6g} "
        f"bandwidth={diag['bandwidth']:.6g} fallback={diag['used_regularized_fallback']}",
        "",
    ]
    names = [*features, "(intercept)"]
    values = [*np.asarray(model.coef_, dtype=np.float64).tolist(), float(model.intercept_)]
    width = max(len("feature"), *(len(n) for n in names))
    lines.append(f"{'feature':<{width}}  {'coefficient':>14}")
    lines.append(f"{'-' * width}  {'-' * 14}")
    lines.extend(f"{name:<{width}}  {value:>14.6g}"
                 for name, value in zip(names, values, strict=True))
    if args.checkpoint:
        lines.append("")
        lines.append(f"checkpoint: {args.checkpoint}")
    return "\n".join(lines)


def _progress(total, desc: str, no_progress: bool):
    from .progress import progress_bar

    return progress_bar(total, desc=desc, unit="rows", enabled=not no_progress)


# ------------------------------------------------------------------------------- predict


def command_predict(args) -> int:
    from .datafile import open_table, select_columns
    from .estimator import RenewableHuberRegressor

    table = open_table(args.data, args.batch_size)
    try:
        model = RenewableHuberRegressor.load(args.checkpoint, backend=args.backend)
        names = getattr(model, "feature_names_in_", None)
        if args.features is not None:
            features = args.features
        elif names is not None:
            features = list(names)
        else:
            features = None
        features = select_columns(table, target=None, features=features)
        if len(features) != model.n_features_in_:
            raise ValueError(
                f"the checkpoint expects {model.n_features_in_} features but {args.data} gives "
                f"{len(features)} numeric columns ({', '.join(features)}); name them with "
                "--features A,B,C")
        if args.output is None:
            _stream_predict(args, model, table, features, sys.stdout)
        else:
            _write_atomically(args.output,
                              lambda out: _stream_predict(args, model, table, features, out))
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
    bar = _progress(table.total_rows, "predict", args.no_progress)
    named = getattr(model, "feature_names_in_", None) is not None
    out.write("prediction\n")
    try:
        for _first, _last, block in table.batches(features):
            X = _NamedColumns(block, features) if named else block
            predictions = np.asarray(model.predict(X), dtype=np.float64)
            # repr is the shortest text that parses back to the same float.
            out.write("".join(f"{value!r}\n" for value in predictions.tolist()))
            bar.update(block.shape[0])
    finally:
        bar.close()


# ---------------------------------------------------------------------------------- info


def command_info(args) -> int:
    print(f"renewable-huber {package_version()}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    print(f"ABI version (binding): {_binding_abi_version()}")
    print("engines:")
    for name in ENGINES:
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
                "info": command_info}
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
        return _fail("interrupted", 130)
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
    except (RenewableHuberError, OSError, ValueError, ImportError) as exc:
        if debug:
            raise
        return _fail(_one_line(exc), EXIT_ERROR)
    except Exception as exc:
        if debug:
            raise
        return _fail(f"unexpected {type(exc).__name__}: {_one_line(exc)} (rerun with "
                     "RH_DEBUG=1 for the traceback)", EXIT_ERROR)
