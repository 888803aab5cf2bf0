"""CUDA activity records of host-input updates (NumPy rows) on native_cuda: three warm updates,
then two recorded, for 1,000,000 x 32 and 65,536 x 32 float64, written as
OUT/stg-LABEL-ROWS.json (chunk_timeline.py reads them). Run from the repository root with
RH_CUDA_LIBRARY set (needs PyTorch).

    python3 stg.py OUT LABEL
"""

import sys

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from renewable_huber import RenewableHuberRegressor

out, label = sys.argv[1], sys.argv[2]
torch.zeros(1, device="cuda")  # the profiler's CUDA context is the one librh_cuda uses
rng = np.random.default_rng(3)
for n, p in [(1_000_000, 32), (65_536, 32)]:
    X = rng.standard_normal((n, p))
    y = X @ rng.uniform(-1, 1, p) + rng.standard_t(3, n)
    model = RenewableHuberRegressor(backend="native_cuda", device="cuda")
    for _ in range(3):
        model.partial_fit(X, y)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(2):
            model.partial_fit(X, y)
    profiler.export_chrome_trace(f"{out}/stg-{label}-{n}.json")
