"""cProfile of cold device-input streams (wide and streaming float64 none, wide float64 L1):
five timed streams after three warm-up ones, then ten under cProfile, by own and by cumulative
time. Run from the repository root with RH_CUDA_LIBRARY set (needs CuPy).
"""

import cProfile
import io
import pstats
import sys

import cupy as cp

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream, timed_streams  # noqa: E402
from benchmarks.profiles import shapes_of  # noqa: E402

for name, dtype, penalty in [("wide", "float64", "none"), ("streaming", "float64", "none"),
                             ("wide", "float64", "l1")]:
    shape = shapes_of("standard", [name])[0]
    X, y = shape_data(shape)
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    walls, _, _ = timed_streams(cp, shape, Xd, yd, dtype, penalty, warmups=3, repetitions=5)
    print(f"### {name} {dtype} {penalty}: walls ms", [round(1e3 * w, 3) for w in walls])
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(10):
        stream(cp, shape, Xd, yd, dtype, penalty)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(28)
    stats.sort_stats("cumulative").print_stats(40)
    print(text.getvalue())
