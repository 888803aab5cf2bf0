"""Where a cold stream's first batch goes (65,536 x 32 float64): the constructor, the first and
the second partial_fit of 40 cold estimators (device, then host input), then cProfile of 40 cold
first batches on device input. A measurement script: nothing is asserted.

    RH_CUDA_LIBRARY=.../librh_cuda.so PYTHONPATH=python python3 cold_first_batch.py
"""

import cProfile
import io
import pstats
import statistics
import time

import cupy as cp
import numpy as np

from renewable_huber import RenewableHuberRegressor

ROWS, FEATURES = 65_536, 32


def new_model():
    return RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype="float64")


def cold(X, y):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    model = new_model()
    t1 = time.perf_counter()
    model.partial_fit(X, y)
    t2 = time.perf_counter()
    model.partial_fit(X, y)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def first_batches(X, y):
    for _ in range(40):
        new_model().partial_fit(X, y)
    cp.cuda.Device().synchronize()


def main():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((ROWS, FEATURES))
    y = X @ rng.standard_normal(FEATURES) + rng.standard_t(3, ROWS)
    sides = {"device": (cp.asarray(X), cp.asarray(y)), "host": (X, y)}
    for side, (xs, ys) in sides.items():
        for _ in range(5):
            cold(xs, ys)
        runs = [cold(xs, ys) for _ in range(40)]
        parts = [f"{name} {statistics.median(run[i] for run in runs) * 1e6:.1f} us"
                 for i, name in enumerate(("ctor", "first", "second"))]
        print(side, " ".join(parts))
    profile = cProfile.Profile()
    profile.enable()
    first_batches(*sides["device"])
    profile.disable()
    for key, lines in (("cumtime", 45), ("tottime", 25)):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(key).print_stats(lines)
        print(text.getvalue())


if __name__ == "__main__":
    main()
