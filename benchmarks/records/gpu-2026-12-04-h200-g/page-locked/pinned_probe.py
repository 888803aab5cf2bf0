# Host-input cold streams (standard streaming shape 1,000,000 x 32 in 65,536-row batches, and
# large-stream-like 1,048,576 x 128 in 262,144-row batches) from pageable NumPy arrays and from
# the same arrays page-locked with cudaHostRegister, alternating, 5 rounds x 3 streams a side.
import statistics
import time

import cupy as cp
import numpy as np

from renewable_huber import RenewableHuberRegressor


def stream(X, y, bs, dtype):
    m = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype=dtype)
    t = time.perf_counter()
    for s in range(0, X.shape[0], bs):
        m.partial_fit(X[s:s + bs], y[s:s + bs])
    return (time.perf_counter() - t) * 1e3, float(m.coef_[0])

rng = np.random.default_rng(11)
for (n, p, bs) in ((1_000_000, 32, 65_536), (1_048_576, 128, 262_144)):
    X = rng.standard_normal((n, p))
    y = X @ rng.uniform(-1, 1, p) + rng.standard_t(3, n)
    for dtype in ("float64", "float32"):
        Xd, yd = np.ascontiguousarray(X, dtype=dtype), np.ascontiguousarray(y, dtype=dtype)
        stream(Xd, yd, bs, dtype)
        res = {"pageable": [], "page-locked": []}
        coef = {}
        for r in range(5):
            order = ("pageable", "page-locked") if r % 2 == 0 else ("page-locked", "pageable")
            for side in order:
                if side == "page-locked":
                    cp.cuda.runtime.hostRegister(Xd.ctypes.data, Xd.nbytes, 0)
                    cp.cuda.runtime.hostRegister(yd.ctypes.data, yd.nbytes, 0)
                for _ in range(3):
                    ms, c0 = stream(Xd, yd, bs, dtype)
                    res[side].append(ms)
                    coef[side] = c0
                if side == "page-locked":
                    cp.cuda.runtime.hostUnregister(Xd.ctypes.data)
                    cp.cuda.runtime.hostUnregister(yd.ctypes.data)
        a, b = statistics.median(res["pageable"]), statistics.median(res["page-locked"])
        same = coef["pageable"] == coef["page-locked"]
        print(f"{n} x {p} ({bs}-row batches) {dtype}: pageable {a:.2f} ms, page-locked {b:.2f} ms "
              f"({a / b:.2f}x; {Xd.nbytes / 1e9:.2f} GB), coef0 equal: {same}", flush=True)
