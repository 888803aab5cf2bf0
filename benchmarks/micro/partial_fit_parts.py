"""Where a native engine's partial_fit spends its host time, part by part, in cold streams
(a new estimator per stream, every batch of the shape folded in): timers around the package's
own steps and around the engine library's calls, the first batch (which creates the engine)
apart from the later ones.

    PYTHONPATH=python RH_CUDA_LIBRARY=build/.../librh_cuda.so \
        python3 benchmarks/micro/partial_fit_parts.py [--backend native_cuda] \
        [--rows 1000000 --features 32 --batch-rows 62500] [--dtype float64] [--streams 20]

native_cuda reads CuPy arrays (device input) when CuPy imports, else host arrays; native_cpu
(RH_CPU_LIBRARY) host arrays. Prints, per part, its median time per call in the first batch
and in the later batches of a stream (medians over --streams streams after --warmups), and
how many calls a stream made. Parts nest: the whole partial_fit holds the others, a new
backend holds the engine's creation and its first restore. Each timer costs a fraction of a
microsecond, so small parts read a little high. A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# Run as a script from anywhere: the repository root holds the benchmarks package.
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from renewable_huber import RenewableHuberRegressor, _dlpack, _engine  # noqa: E402
from renewable_huber import estimator as _estimator  # noqa: E402

# (label, owner, attribute): the package's steps, in the order a batch meets them.
PACKAGE_PARTS = (
    ("parameter validation", RenewableHuberRegressor, "_validated_params"),
    ("batch validation", _estimator, "validate_batch"),
    ("new backend", _estimator, "_new_backend"),
    ("CuPy pointers and stream order", _dlpack.CupyBatchReader, "pointers"),
    ("exported state handed out", _engine.StateLanding, "committed"),
    ("fitted attributes (_commit)", RenewableHuberRegressor, "_commit"),
    ("warnings (_report)", RenewableHuberRegressor, "_report"),
)
# The engine library's calls a stream's partial_fit calls make.
ENGINE_CALLS = (
    ("engine: create", "rh_cuda_engine_create"),
    ("engine: restore", "rh_cuda_engine_restore"),
    ("engine: update (host input)", "rh_cuda_engine_update_host_with_state"),
    ("engine: update (device input)", "rh_cuda_engine_update_device_with_state"),
)
WHOLE = "partial_fit, whole"


class PartTimes:
    """Nanoseconds per call of each part, filed under the batch being fitted (0: the first)."""

    def __init__(self):
        self.batch = 0
        self.calls: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)

    def record(self, label: str, nanoseconds: int) -> None:
        self.calls[label].append((self.batch, nanoseconds))

    def timed(self, label: str, function):
        def timer(*args, **kwargs):
            began = time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                self.record(label, time.perf_counter_ns() - began)

        return timer


@contextlib.contextmanager
def timers(times: PartTimes, lib):
    """Every part of PACKAGE_PARTS and ENGINE_CALLS (those `lib` has) timed into `times`;
    the originals are put back on exit."""
    replaced = []
    for label, owner, name in PACKAGE_PARTS:
        replaced.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, times.timed(label, getattr(owner, name)))
    for label, name in ENGINE_CALLS:
        if hasattr(lib, name):
            replaced.append((lib, name, getattr(lib, name)))
            setattr(lib, name, times.timed(label, getattr(lib, name)))
    try:
        yield
    finally:
        for owner, name, original in reversed(replaced):
            setattr(owner, name, original)


def cold_stream(X, y, batch_rows: int, options: dict, times: PartTimes | None = None):
    """A new estimator with `options` fed every batch of (X, y); each partial_fit timed whole
    into `times` when given."""
    model = RenewableHuberRegressor(**options)
    for number, start in enumerate(range(0, X.shape[0], batch_rows)):
        if times is not None:
            times.batch = number
        began = time.perf_counter_ns()
        model.partial_fit(X[start:start + batch_rows], y[start:start + batch_rows])
        if times is not None:
            times.record(WHOLE, time.perf_counter_ns() - began)
    return model


def summary(times: PartTimes, streams: int) -> list[str]:
    """One line per part that ran: median us per call in the first batch, in the later ones,
    and calls per stream."""
    def median_us(values):
        return f"{statistics.median(values) / 1e3:9.1f}" if values else "        -"

    order = [WHOLE] + [label for label, _, _ in PACKAGE_PARTS] + [label for label, _ in
                                                                 ENGINE_CALLS]
    lines = [f"{'part':34s} {'first batch us':>14s} {'later us':>9s} {'calls/stream':>12s}"]
    for label in order:
        calls = times.calls.get(label)
        if not calls:
            continue
        first = [ns for batch, ns in calls if batch == 0]
        later = [ns for batch, ns in calls if batch > 0]
        lines.append(f"{label:34s} {median_us(first):>14s} {median_us(later):>9s} "
                     f"{len(calls) / streams:12.1f}")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="native_cuda", choices=("native_cuda", "native_cpu"))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--batch-rows", type=int, default=62_500)
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--warmups", type=int, default=3)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.features)).astype(args.dtype)
    y = (X @ rng.uniform(-1, 1, args.features) + rng.standard_t(3, args.rows)).astype(args.dtype)
    options = {"backend": args.backend, "dtype": args.dtype}
    sync = None
    where = "host"
    if args.backend == "native_cuda":
        options["device"] = "cuda"
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            X, y = cupy.asarray(X), cupy.asarray(y)
            sync = cupy.cuda.Device().synchronize
            where = "device (CuPy)"
    else:
        options["n_jobs"] = 1

    for _ in range(args.warmups):
        model = cold_stream(X, y, args.batch_rows, options)
    lib = model._backend._engine.lib
    times = PartTimes()
    with timers(times, lib):
        for _ in range(args.streams):
            if sync is not None:
                sync()
            cold_stream(X, y, args.batch_rows, options, times)
    print(f"{args.backend}: {args.rows:,} x {args.features} {args.dtype} in batches of "
          f"{args.batch_rows:,} rows, {where} input, {args.streams} cold streams after "
          f"{args.warmups}")
    print("\n".join(summary(times, args.streams)))


if __name__ == "__main__":
    main()
