"""One update of P parameters (20,000 rows, float64, host input, three iterations at most), for
Nsight Compute:

    RH_CUDA_LIBRARY=.../librh_cuda.so ncu --kernel-name regex:small_cholesky --launch-count 2 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --section LaunchStats python3 ncu_update.py P
"""

import sys
import warnings

import numpy as np

from renewable_huber import RenewableHuberRegressor

parameters = int(sys.argv[1])
features = parameters - 1
rng = np.random.default_rng(5)
X = rng.standard_normal((20000, features))
y = X @ rng.uniform(-1, 1, features) + rng.standard_t(3, 20000)
model = RenewableHuberRegressor(backend="native_cuda", device="cuda", max_iter=3)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model.partial_fit(X, y)
