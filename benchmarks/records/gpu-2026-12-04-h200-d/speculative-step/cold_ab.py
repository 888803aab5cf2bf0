"""Cold standard streams (device input, no penalty) with Newton's speculative whole step (the
default) against the line search at every iteration (RH_CUDA_TEST_NEWTON_STEP=line-search,
read when an engine is made), alternating stream by stream in one process. Run from the
repository root with RH_CUDA_LIBRARY set to the test build of the engine (librh_cuda_testing.so,
which reads the switch); needs CuPy.

    python3 cold_ab.py [REPETITIONS]

Prints per case the median wall time of each mode, the ratio, and the iterations and first
coefficient of each mode's last stream. A script, not a test: nothing is asserted."""
import os
import statistics
import sys
import time

import cupy as cp

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream  # noqa: E402
from benchmarks.profiles import shapes_of  # noqa: E402

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 9
for name in ("streaming", "reference", "wide", "latency"):
    shape = shapes_of("standard", [name])[0]
    X, y = shape_data(shape)
    for dtype in ("float64", "float32"):
        Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
        times = {"spec": [], "search": []}
        info = {}
        for rep in range(reps + 1):
            for mode in (("spec", "search") if rep % 2 == 0 else ("search", "spec")):
                if mode == "search":
                    os.environ["RH_CUDA_TEST_NEWTON_STEP"] = "line-search"
                else:
                    os.environ.pop("RH_CUDA_TEST_NEWTON_STEP", None)
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                model, iterations = stream(cp, shape, Xd, yd, dtype, "none")
                elapsed = time.perf_counter() - t0
                if rep:
                    times[mode].append(elapsed * 1e3)
                info[mode] = (iterations, float(model.coef_[0]))
        os.environ.pop("RH_CUDA_TEST_NEWTON_STEP", None)
        s, q = statistics.median(times["spec"]), statistics.median(times["search"])
        print(f"{name} {dtype} none: speculative {s:.3f} ms, line search {q:.3f} ms, "
              f"ratio {q / s:.3f}; iterations {info['spec'][0]} / {info['search'][0]}; "
              f"coef[0] {info['spec'][1]!r} / {info['search'][1]!r}", flush=True)
