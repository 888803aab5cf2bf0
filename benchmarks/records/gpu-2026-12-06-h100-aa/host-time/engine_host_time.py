"""Where librh_cuda's host time goes in an update, from stamps a diagnostic build prints: cold
native_cuda streams of one shape on device (CuPy) input, 12 streams, the stamps of the last 10.

    git apply engine-host-time.patch    # or engine-host-time-polling.patch
    cmake -S . -B build/diag -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=OFF && cmake --build build/diag
    git apply -R engine-host-time.patch
    RH_CUDA_LIBRARY=build/diag/engines/cuda/librh_cuda.so PYTHONPATH=python \\
        python3 engine_host_time.py wide float32 2> wide-float32.txt

With RH_DIAG set, the patched transition() prints one line per update: `pre` from its entry to
the first launch, `solve` from there to the return of the solve's last synchronisation, `post`
from there to the end of the state's export into the caller's arrays (microseconds). The last
line holds each stream's wall time (ms). The polling patch also keeps the copy threads polling
for work instead of sleeping. A measurement, not a test: nothing is asserted.
"""

import os
import sys
import time

import cupy as cp
import numpy as np

from renewable_huber import RenewableHuberRegressor

SHAPES = {  # rows, features, batch rows
    "wide": (16384, 256, 4096),
    "streaming": (1000000, 32, 65536),
    "large-wide": (200000, 1024, 50000),
}


def main(shape: str, dtype: str) -> None:
    rows, p, batch = SHAPES[shape]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, p)).astype(dtype)
    y = (X @ rng.standard_normal(p) + rng.standard_t(3, rows)).astype(dtype)
    X_device, y_device = cp.asarray(X), cp.asarray(y)
    walls = []
    for stream in range(12):
        cp.cuda.Device().synchronize()
        if stream >= 2:
            os.environ["RH_DIAG"] = "1"
        start = time.perf_counter()
        model = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype=dtype)
        for lo in range(0, rows, batch):
            model.partial_fit(X_device[lo:lo + batch], y_device[lo:lo + batch])
        cp.cuda.Device().synchronize()
        walls.append((time.perf_counter() - start) * 1e3)
        os.environ.pop("RH_DIAG", None)
    print("walls ms", [round(w, 3) for w in walls], file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
