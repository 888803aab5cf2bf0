"""A CUDA activity record of two cold streams each (wide and streaming, float64, no penalty,
device input) with every partial_fit and every engine update call marked as a user annotation,
written as OUT/gap-SHAPE.json (gap_breakdown.py reads them). Run from the repository root with
RH_CUDA_LIBRARY set (needs CuPy and PyTorch).

    python3 gap.py OUT
"""

import sys

import cupy as cp
import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream  # noqa: E402
from benchmarks.profiles import shapes_of  # noqa: E402

from renewable_huber import _engine, estimator  # noqa: E402


def marked(function, label):
    def run(*args, **kwargs):
        with record_function(label):
            return function(*args, **kwargs)
    return run


_engine.EngineHandle.update = marked(_engine.EngineHandle.update, "engine-update")
estimator.RenewableHuberRegressor.partial_fit = marked(
    estimator.RenewableHuberRegressor.partial_fit, "partial_fit")
torch.zeros(1, device="cuda")  # the profiler's CUDA context is the one librh_cuda uses
out = sys.argv[1]
for name, dtype, penalty in [("wide", "float64", "none"), ("streaming", "float64", "none")]:
    shape = shapes_of("standard", [name])[0]
    X, y = shape_data(shape)
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    for _ in range(3):
        stream(cp, shape, Xd, yd, dtype, penalty)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(2):
            stream(cp, shape, Xd, yd, dtype, penalty)
    profiler.export_chrome_trace(f"{out}/gap-{name}.json")
