"""The Python cost of one partial_fit on a native engine: the estimator's call against the bare
engine call it makes.

    PYTHONPATH=python RH_CPU_LIBRARY=build/.../librh_cpu.so \
        python3 benchmarks/micro/python_overhead.py [--rows 256 --features 16 --dtype float64]

Both sides fold the same cycle of batches, in the same order, into their own engine of the
same kind, so call k of either side does the same engine work: the estimator's partial_fit
(validation, bookkeeping, the ABI structs, the exported state, diagnostics), and the bare
rh_cuda_engine_update_{host,device}_with_state call on structs built once, outside the timer.
The sides alternate in blocks of --block calls; every call is timed alone (GC disabled during a
block). Printed per backend: the median and 10th/90th percentiles of each side and the median
difference, the Python cost per batch. native_cuda runs when its engine is usable here, on
CuPy arrays when CuPy is installed (device input) or on host arrays with --cuda-input host.
A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import gc
import io
import platform
import pstats
import statistics
import sys
import time

import numpy as np

from renewable_huber import RenewableHuberRegressor, _abi
from renewable_huber._engine import HOST_DEVICE_ID, StateLanding, engine_options, state_view
from renewable_huber._loader import load_engine_library
from renewable_huber.backends.native import unavailable_reason
from renewable_huber.state import RenewableState


def _batches(count: int, rows: int, features: int, dtype: str, seed: int = 11):
    rng = np.random.default_rng(seed)
    beta = rng.standard_normal(features)
    out = []
    for _ in range(count):
        X = rng.standard_normal((rows, features))
        y = X @ beta + 0.5 + 0.3 * rng.standard_t(3, rows)
        out.append((np.ascontiguousarray(X, dtype=dtype), np.ascontiguousarray(y, dtype=dtype)))
    return out


class BareEngine:
    """One engine of `kind` and, per batch, the ABI structs its update call reads and writes."""

    def __init__(self, kind: str, batches, dtype: str, n_threads: int | None, device: bool,
                 cuda_graphs: bool = False):
        self.lib = load_engine_library(kind)
        rows, features = batches[0][0].shape
        P = features + 1
        handle = _abi.RhCudaEngine_p()
        options = engine_options(
            dtype, P, HOST_DEVICE_ID if kind == "native_cpu" else 0,
            _abi.RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS if cuda_graphs else 0,
        )
        # native_cpu: the thread count the estimator's backend sets before every call.
        self._threads, self._n_threads = None, n_threads
        if n_threads is not None and hasattr(self.lib, "omp_set_num_threads"):
            self._threads = self.lib.omp_set_num_threads
            self._threads.argtypes, self._threads.restype = [ctypes.c_int], None
            self._threads(n_threads)
        status = self.lib.rh_cuda_engine_create(ctypes.byref(options), ctypes.byref(handle))
        _abi.check(self.lib, status, "rh_cuda_engine_create")
        self.engine = handle
        empty, _arrays = state_view(RenewableState.empty(P, dtype, with_meat=False), dtype, P)
        self._call("rh_cuda_engine_restore", ctypes.byref(empty))
        self.config = _abi.make(
            _abi.RhCudaUpdateConfig, n_features_in=features, max_iter=100, tau=1.345,
            bandwidth_scale=1.0, tolerance=1e-6, ridge=1e-8,
            penalty=_abi.RH_CUDA_PENALTY_NONE, reserved0=0, lambda_scale=1.0,
        )
        self.diagnostics = _abi.make(_abi.RhCudaDiagnostics)
        self.landing = StateLanding(P, dtype)
        batch_type = _abi.RhCudaDeviceBatch if device else _abi.RhCudaHostBatch
        self.function = getattr(
            self.lib,
            "rh_cuda_engine_update_device_with_state" if device
            else "rh_cuda_engine_update_host_with_state",
        )
        self.structs = []
        for X, y in batches:
            x_pointer = X.data.ptr if device else X.ctypes.data
            y_pointer = y.data.ptr if device else y.ctypes.data
            self.structs.append(ctypes.byref(_abi.make(
                batch_type, x_design=x_pointer, y=y_pointer, sample_weight=None,
                n_rows=rows, n_columns=features, batch_weight=float(rows),
            )))
        self.arguments = (
            ctypes.byref(self.config),
            ctypes.byref(self.diagnostics),
            ctypes.byref(self.landing.struct),
        )

    def _call(self, name: str, *arguments) -> None:
        _abi.check(self.lib, getattr(self.lib, name)(self.engine, *arguments), name, self.engine)

    def update(self, index: int) -> None:
        if self._threads is not None:
            self._threads(self._n_threads)
        status = self.function(self.engine, self.structs[index], *self.arguments)
        if status != _abi.RH_CUDA_SUCCESS:
            _abi.check(self.lib, status, "update", self.engine)

    def close(self) -> None:
        self.lib.rh_cuda_engine_destroy(self.engine)


def _percentile(samples, q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(kind: str, args) -> None:
    device = kind == "native_cuda" and args.cuda_input == "device"
    host_batches = _batches(args.distinct_batches, args.rows, args.features, args.dtype)
    if device:
        import cupy

        batches = [(cupy.asarray(X), cupy.asarray(y)) for X, y in host_batches]
        cupy.cuda.Device().synchronize()  # the bare engine reads them on its own stream
    else:
        batches = host_batches
    graphs = args.cuda_graphs and kind == "native_cuda"
    model = RenewableHuberRegressor(
        backend=kind, dtype=args.dtype, n_jobs=args.n_jobs if kind == "native_cpu" else None,
        cuda_graphs=graphs,
    )
    model.partial_fit(*batches[0])
    n_threads = model.n_jobs_ if kind == "native_cpu" else None
    bare = BareEngine(kind, batches, args.dtype, n_threads, device, graphs)
    bare.update(0)
    count = len(batches)
    sides = {"partial_fit": [], "engine": []}
    position = {"partial_fit": 1, "engine": 1}
    clock = time.perf_counter_ns

    def run(side: str, calls: int, record: bool) -> None:
        times = sides[side]
        k = position[side]
        for _ in range(calls):
            X, y = batches[k % count]
            if side == "partial_fit":
                start = clock()
                model.partial_fit(X, y)
                elapsed = clock() - start
            else:
                start = clock()
                bare.update(k % count)
                elapsed = clock() - start
            if record:
                times.append(elapsed / 1000.0)
            k += 1
        position[side] = k

    run("partial_fit", args.warmup, False)
    run("engine", args.warmup, False)
    done = 0
    while done < args.calls:
        block = min(args.block, args.calls - done)
        for side in ("partial_fit", "engine"):
            gc.collect()
            gc.disable()
            try:
                run(side, block, True)
            finally:
                gc.enable()
        done += block
    bare.close()
    medians = {side: statistics.median(times) for side, times in sides.items()}
    source = "device (CuPy)" if device else "host (NumPy)"
    print(f"{kind}: {args.rows} x {args.features} {args.dtype}, {source} input"
          + (", CUDA Graphs" if graphs else "") + ", "
          f"{args.calls} calls per side after {args.warmup} warm-up calls"
          + (f", {n_threads} OpenMP thread(s)" if n_threads is not None else ""))
    for side, times in sides.items():
        print(f"  {side:<12} median {medians[side]:8.1f} us   p10 "
              f"{_percentile(times, 0.1):8.1f}   p90 {_percentile(times, 0.9):8.1f}")
    low = {side: _percentile(times, 0.1) for side, times in sides.items()}
    print(f"  python cost  {medians['partial_fit'] - medians['engine']:8.1f} us per batch "
          f"(median partial_fit - median engine call; {low['partial_fit'] - low['engine']:.1f} "
          f"between the 10th percentiles, less exposed to a busy machine)")
    print(f"  x{args.stream_batches} batches: "
          f"{args.stream_batches * medians['partial_fit'] / 1000:.3f} ms partial_fit, "
          f"{args.stream_batches * medians['engine'] / 1000:.3f} ms engine")
    if args.profile:
        # Where the Python cost goes: the estimator's calls under cProfile (which slows them;
        # read the shares, not the times), the functions ordered by their own time.
        profiler = cProfile.Profile()
        profiler.enable()
        run("partial_fit", args.calls, False)
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.profile)
        print(f"  cProfile of {args.calls} partial_fit calls, by own time:")
        print(text.getvalue())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per side")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--block", type=int, default=50, help="calls per side before switching")
    parser.add_argument("--distinct-batches", type=int, default=16)
    parser.add_argument("--stream-batches", type=int, default=16,
                        help="batches of the stream whose total is printed")
    parser.add_argument("--n-jobs", type=int, default=None, help="native_cpu threads")
    parser.add_argument("--backends", default="native_cpu,native_cuda")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="native_cuda engines (both sides) with CUDA Graphs")
    parser.add_argument("--cuda-input", choices=("device", "host"), default=None,
                        help="native_cuda input (default: device when CuPy imports)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="then profile the estimator's calls: the N functions of most own time")
    args = parser.parse_args(argv)
    if args.cuda_input is None:
        try:
            import cupy  # noqa: F401

            args.cuda_input = "device"
        except ImportError:
            args.cuda_input = "host"
    print(f"Python {platform.python_version()}, NumPy {np.__version__}, "
          f"{platform.machine()} {platform.processor() or ''}".rstrip())
    for kind in args.backends.split(","):
        reason = unavailable_reason(kind)
        if reason is not None:
            print(f"{kind}: skipped ({reason})")
            continue
        measure(kind, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
