"""One process of the device-loop A/B: median of 7 cold streams per case, device input.

    RH_CUDA_LIBRARY=.../librh_cuda.so python3 interleaved_ab.py LABEL 0|1

Run from the root of a tree with device-loop.patch applied (its cuda_cold_streams.stream takes
the cuda_graphs flag); the second argument is that flag. Prints one JSON line per case with the
engine's feature counters (requested, enabled, captures, replays, fallbacks).
"""

import json
import statistics
import sys
import time

import cupy as cp

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream  # noqa: E402
from benchmarks.profiles import shapes_of  # noqa: E402

CASES = [("wide", "float64", "none"), ("wide", "float64", "l1"), ("wide", "float32", "none"),
         ("streaming", "float64", "none"), ("reference", "float64", "none")]

label, graphs = sys.argv[1], sys.argv[2] == "1"
for name, dtype, penalty in CASES:
    shape = shapes_of("standard", [name])[0]
    X, y = shape_data(shape)
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    for _ in range(2):
        stream(cp, shape, Xd, yd, dtype, penalty, graphs)
    walls = []
    for _ in range(7):
        cp.cuda.Device().synchronize()
        began = time.perf_counter()
        model, iterations = stream(cp, shape, Xd, yd, dtype, penalty, graphs)
        walls.append(time.perf_counter() - began)
    features = model._backend._engine.features()
    print(json.dumps({"label": label, "case": f"{name}:{dtype}:{penalty}",
                      "ms": round(1e3 * statistics.median(walls), 3), "iters": iterations,
                      "features": features}), flush=True)
