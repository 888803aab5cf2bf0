"""Statistical behaviour of the renewable estimator on contaminated streams.

The renewable estimate after streaming 100,000 rows should be indistinguishable, at the
scale of the estimation error itself, from the full-data Huber fit (Jiang, Liang & Yu 2024):
its distance to that oracle must be under 1% of the oracle's distance to the truth.

tau is set relative to the noise scale, the textbook 1.345 sigma with sigma the robust
(MAD) scale of the t(3) errors, about 1.13. Measured on seeds 0-9 of this stream: with that
tau the worst ratio was 0.57% (batches of 500) and 0.31% (5,000); with the unscaled default
tau = 1.345 it was 1.13% (seed 6, batches of 500) and 0.27%, so the 1% bound is not met on
every seed at the default tau with small batches.
"""

import numpy as np
import pytest

from renewable_huber import core
from renewable_huber.config import UpdateConfig
from renewable_huber.state import RenewableState

N_ROWS = 100_000
N_FEATURES = 10
OUTLIER_FRACTION = 0.05


def t3_robust_scale():
    stats = pytest.importorskip("scipy.stats")
    # MAD / Phi^-1(3/4): the scale a robust fit sees for t(3) errors
    return stats.t.ppf(0.75, 3) / stats.norm.ppf(0.75)


def contaminated_stream(seed):
    """AR(0.5)-correlated Gaussian features, t(3) errors, 5% gross response outliers of
    random sign and size 20-50 (symmetric, so they inflate OLS variance rather than bias)."""
    rng = np.random.default_rng(seed)
    lags = np.arange(N_FEATURES)
    covariance = 0.5 ** np.abs(lags[:, None] - lags[None, :])
    X = rng.standard_normal((N_ROWS, N_FEATURES)) @ np.linalg.cholesky(covariance).T
    truth = np.r_[rng.uniform(-2.0, 2.0, size=N_FEATURES), 1.0]  # intercept last
    y = X @ truth[:-1] + truth[-1] + rng.standard_t(3, size=N_ROWS)
    outliers = rng.uniform(size=N_ROWS) < OUTLIER_FRACTION
    count = int(outliers.sum())
    y[outliers] += rng.choice([-1.0, 1.0], size=count) * rng.uniform(20.0, 50.0, size=count)
    return X, y, truth


def stream_fit(X, y, batch_size, tau):
    config = UpdateConfig(
        n_features_in=N_FEATURES,
        fit_intercept=True,
        tau=tau,
        bandwidth_scale=1.0,
        tol=1e-8,
        ridge=1e-8,
        max_iter=100,
        penalty="none",
        lambda_scale=1.0,
    )
    state = RenewableState.empty(config.n_parameters, np.float64)
    for start in range(0, len(y), batch_size):
        rows = slice(start, start + batch_size)
        Xd = core.design_matrix(np, X[rows], True)
        state, diagnostics = core.renewable_update(np, state, Xd, y[rows], None, config)
        assert diagnostics.converged, (start, diagnostics)
    return state.coefficients


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_estimate_matches_the_full_data_huber_fit(seed):
    tau = 1.345 * t3_robust_scale()
    X, y, truth = contaminated_stream(seed)
    oracle = stream_fit(X, y, N_ROWS, tau)
    oracle_error = np.linalg.norm(oracle - truth)
    ols = np.linalg.lstsq(np.hstack([X, np.ones((N_ROWS, 1))]), y, rcond=None)[0]
    ols_error = np.linalg.norm(ols - truth)
    print(f"\nseed {seed}: oracle-truth {oracle_error:.4g}, OLS-truth {ols_error:.4g}")
    assert ols_error > 3.0 * oracle_error
    for batch_size in (500, 5000):
        renewable = stream_fit(X, y, batch_size, tau)
        ratio = np.linalg.norm(renewable - oracle) / oracle_error
        print(f"  batches of {batch_size}: |renewable - oracle| / |oracle - truth| = {ratio:.4%}")
        assert ratio < 0.01
