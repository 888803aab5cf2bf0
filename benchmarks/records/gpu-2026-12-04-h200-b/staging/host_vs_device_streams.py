"""The standard streaming stream (16 batches of 65,536 x 32) through partial_fit, host (NumPy)
and device (CuPy) input alternating in one process, for staging settings of the engine's test
build (librh_cuda_testing reads RH_CUDA_STAGING and RH_CUDA_STAGING_THREADS at engine creation).

    RH_CUDA_LIBRARY=.../librh_cuda_testing.so PYTHONPATH=python \
        python3 host_vs_device_streams.py float64 default,4,8,16,plain

Prints, per setting and side, the stream's median and lowest wall time over rounds 3-9, and the
median first and later batch. A measurement script: nothing is asserted.
"""

import os
import statistics
import sys
import time

import cupy as cp
import numpy as np

from renewable_huber import RenewableHuberRegressor

ROWS, FEATURES, BATCH = 1_000_000, 32, 65_536


def stream(X, y, dtype, per_batch):
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    model = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype=dtype)
    for lo in range(0, ROWS, BATCH):
        t = time.perf_counter()
        model.partial_fit(X[lo:lo + BATCH], y[lo:lo + BATCH])
        per_batch.append(time.perf_counter() - t)
    cp.cuda.Device().synchronize()
    return time.perf_counter() - start


def configure(setting):
    os.environ.pop("RH_CUDA_STAGING", None)
    os.environ.pop("RH_CUDA_STAGING_THREADS", None)
    if setting == "plain":
        os.environ["RH_CUDA_STAGING"] = "plain"
    elif setting != "default":
        os.environ["RH_CUDA_STAGING_THREADS"] = setting


def main():
    dtype = sys.argv[1] if len(sys.argv) > 1 else "float64"
    settings = sys.argv[2].split(",") if len(sys.argv) > 2 else ["default"]
    rng = np.random.default_rng(1)
    X = rng.standard_normal((ROWS, FEATURES)).astype(dtype)
    y = (X @ rng.standard_normal(FEATURES) + rng.standard_t(3, ROWS)).astype(dtype)
    sides = {"host": (X, y), "device": (cp.asarray(X), cp.asarray(y))}
    results = {}
    for rounds in range(9):
        for setting in settings:
            configure(setting)
            for side, (xs, ys) in sides.items():
                per_batch = []
                seconds = stream(xs, ys, dtype, per_batch)
                if rounds >= 2:
                    results.setdefault((setting, side), []).append((seconds, per_batch))
    for (setting, side), runs in results.items():
        walls = [seconds for seconds, _ in runs]
        first = statistics.median(per[0] for _, per in runs)
        later = statistics.median(statistics.median(per[1:]) for _, per in runs)
        print(f"{dtype} {setting:8s} {side:6s} stream median {statistics.median(walls) * 1e3:7.3f}"
              f" ms min {min(walls) * 1e3:7.3f}  first batch {first * 1e6:7.1f} us  later batch"
              f" median {later * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
