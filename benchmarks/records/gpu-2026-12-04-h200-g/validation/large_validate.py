# One partial_fit of a large-stream batch (262,144 x 128) on device input, each dtype, inside an
# NVTX range "measure" (after a warm-up fit), for ncu's per-launch validation times.
import cupy as cp
import numpy as np
from cupy.cuda import nvtx

from renewable_huber import RenewableHuberRegressor

rng = np.random.default_rng(5)
X = rng.standard_normal((262144, 128))
y = X @ rng.uniform(-1, 1, 128) + rng.standard_t(3, 262144)
for dtype in ("float64", "float32"):
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype=dtype).partial_fit(Xd, yd)
    m = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype=dtype)
    nvtx.RangePush("measure")
    m.partial_fit(Xd, yd)
    cp.cuda.Device().synchronize()
    nvtx.RangePop()
    print(dtype, m.n_iter_, float(m.coef_[0]))
