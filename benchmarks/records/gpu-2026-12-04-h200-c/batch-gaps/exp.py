"""Does the export's fresh NumPy buffers per batch cost anything? Cold device-input streams with
the package's landing as shipped (new buffers after every export) against one that keeps its
buffers (an experiment only: the arrays handed out then alias), alternating, six rounds; the
median and lowest wall time and the minor page faults per stream. Run from the repository root
with RH_CUDA_LIBRARY set (needs CuPy).
"""

import resource
import statistics
import sys
import time

import cupy as cp

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream  # noqa: E402
from benchmarks.profiles import shapes_of  # noqa: E402

from renewable_huber import _engine  # noqa: E402

stock = _engine.StateLanding._take_fresh_buffers


def keep(self, *, with_meat):
    P = self.n_parameters
    if getattr(self, "block", None) is None or self.block.size != P * (P + 1):
        stock(self, with_meat=with_meat)


for name, dtype, penalty in [("wide", "float64", "none"), ("streaming", "float64", "none"),
                             ("wide", "float32", "l1")]:
    shape = shapes_of("standard", [name])[0]
    X, y = shape_data(shape)
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    walls = {"stock": [], "reuse": []}
    faults = {"stock": [], "reuse": []}
    for _ in range(6):
        for variant in ("stock", "reuse"):
            _engine.StateLanding._take_fresh_buffers = stock if variant == "stock" else keep
            stream(cp, shape, Xd, yd, dtype, penalty)
            cp.cuda.Device().synchronize()
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            began = time.perf_counter()
            stream(cp, shape, Xd, yd, dtype, penalty)
            walls[variant].append(time.perf_counter() - began)
            faults[variant].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    _engine.StateLanding._take_fresh_buffers = stock
    print(f"{name} {dtype} {penalty}: " + "; ".join(
        f"{v} median {1e3 * statistics.median(walls[v]):.3f} ms min {1e3 * min(walls[v]):.3f} "
        f"faults/stream {statistics.median(faults[v])}" for v in walls), flush=True)
