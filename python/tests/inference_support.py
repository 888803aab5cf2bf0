"""Shared by the engine tests of the meat matrix K: a weighted stream with one-sided outliers,
its config, and the NumPy reference's state after it."""

from __future__ import annotations

import numpy as np

from renewable_huber.config import UpdateConfig
from renewable_huber.core import design_matrix, renewable_update
from renewable_huber.state import RenewableState

P_FEATURES = 4


def config(penalty="none"):
    return UpdateConfig(n_features_in=P_FEATURES, fit_intercept=True, tau=1.345,
                        bandwidth_scale=1.0, tol=1e-10, ridge=1e-8, max_iter=100,
                        penalty=penalty, lambda_scale=1.0)


def batches(count=3, n=700, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        X = rng.normal(size=(n, P_FEATURES))
        y = X @ np.linspace(-1, 1, P_FEATURES) + 0.3 + rng.standard_t(3, size=n)
        y[: n // 20] += 15.0  # one-sided outliers
        out.append((X, y, rng.uniform(0.0, 2.0, size=n)))
    return out


def reference_stream(data, dtype):
    state = RenewableState.empty(P_FEATURES + 1, dtype)
    for X, y, w in data:
        design = design_matrix(np, X.astype(dtype), True)
        state, _ = renewable_update(np, state, design, y.astype(dtype), w.astype(dtype), config())
    return state


def state_fields(state):
    return {name: getattr(state, name) for name in (
        "coefficients", "information", "n_samples_seen", "batch_count", "previous_lambda",
        "weight_sum", "meat")}
