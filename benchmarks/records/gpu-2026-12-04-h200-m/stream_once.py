"""One cold native_cuda stream of a benchmark shape on device input (CuPy), for Nsight Compute:

    RH_CUDA_LIBRARY=.../librh_cuda.so PYTHONPATH=python:. ncu ... \
        python3 benchmarks/records/gpu-2026-12-04-h200-m/stream_once.py large large-stream float64

The shape's rows (benchmarks/micro/cuda_cold_streams.py's shape_data) are kept in
build/stream-data/ after the first run, so later processes skip generating them. Prints the
stream's iterations.
"""

import sys
import warnings
from pathlib import Path

import cupy as cp
import numpy as np
from benchmarks.micro.cuda_cold_streams import shape_data, stream
from benchmarks.profiles import shapes_of

profile, name, dtype = sys.argv[1:4]
penalty = sys.argv[4] if len(sys.argv) > 4 else "none"
shape = {s.name: s for s in shapes_of(profile)}[name]
cache = Path("build/stream-data") / f"{name}.npz"
if cache.exists():
    data = np.load(cache)
    X, y = data["X"], data["y"]
else:
    X, y = shape_data(shape)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, X=X, y=y)
Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _, iterations = stream(cp, shape, Xd, yd, dtype, penalty)
print("iterations", iterations)
