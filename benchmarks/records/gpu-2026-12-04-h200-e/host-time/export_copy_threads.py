"""The export's host copy: default copy team against one thread (RH_CUDA_STAGING_THREADS=1 in
the test build), device input, streams alternating; engine-call time per later batch and wall."""

import os
import statistics
import sys
import time

import cupy as cp

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream
from benchmarks.profiles import shapes_of

from renewable_huber import _engine

calls = []
orig = _engine.EngineHandle.update


def update(self, *a, **k):
    t = time.perf_counter_ns()
    r = orig(self, *a, **k)
    calls.append(time.perf_counter_ns() - t)
    return r


_engine.EngineHandle.update = update
rounds = int(sys.argv[1])
for case in sys.argv[2:]:
    name, dtype, pen = case.split(":")
    shape = shapes_of("large" if name.startswith("large") else "standard", [name])[0]
    X, y = shape_data(shape)
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    modes = {"team": None, "two": "2", "one": "1"}
    res = {m: ([], []) for m in modes}
    for r in range(rounds + 1):
        for mode in list(modes) if r % 2 else list(modes)[::-1]:
            if modes[mode]:
                os.environ["RH_CUDA_STAGING_THREADS"] = modes[mode]
            else:
                os.environ.pop("RH_CUDA_STAGING_THREADS", None)
            calls.clear()
            t = time.perf_counter()
            _, it = stream(cp, shape, Xd, yd, dtype, pen)
            w = time.perf_counter() - t
            if r:
                res[mode][0].append(w * 1e3)
                res[mode][1].extend(c / 1e3 for c in calls[1:])
    os.environ.pop("RH_CUDA_STAGING_THREADS", None)
    line = [
        f"{m}: wall {statistics.median(res[m][0]):.3f} ms, "
        f"later engine calls {statistics.median(res[m][1]):.1f} us"
        for m in res
    ]
    print(f"{case} ({it} iterations): " + "; ".join(line))
