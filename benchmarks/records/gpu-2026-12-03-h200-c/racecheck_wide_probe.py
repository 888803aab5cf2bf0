# ruff: noqa
# As run for racecheck-block-barrier.txt (from the repository root): one update at P = 257, 289, 384.
import sys, numpy as np
sys.path.insert(0, "python")
from renewable_huber import RenewableHuberRegressor
rng = np.random.default_rng(3)
for p in (256, 288, 383):
    X = rng.standard_normal((3000, p)); y = X @ rng.uniform(-1, 1, p) + rng.standard_t(3, 3000)
    m = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype="float64", max_iter=3)
    m.partial_fit(X, y)
    print(p, m.n_iter_, float(np.abs(m.coef_).sum()))
