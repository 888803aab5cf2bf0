"""Two short updates per one-block Cholesky size, for compute-sanitizer (the second from a fitted
beta0: the speculative step's candidate). Float64, host input, three iterations at most.

    RH_CUDA_LIBRARY=.../librh_cuda.so compute-sanitizer --tool racecheck python3 oneblock_paths.py
"""

import warnings

import numpy as np

from renewable_huber import RenewableHuberRegressor

rng = np.random.default_rng(5)
for parameters in (2, 5, 17, 33, 64, 65, 91, 129, 160):
    features = parameters - 1
    X = rng.standard_normal((3000, features))
    y = X @ rng.uniform(-1, 1, features) + rng.standard_t(3, 3000)
    model = RenewableHuberRegressor(backend="native_cuda", device="cuda", max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.partial_fit(X[:1500], y[:1500])
        model.partial_fit(X[1500:], y[1500:])
    print(parameters, "ok", flush=True)
