"""The contaminated simulation design of Jiang, Liang & Yu (2024), used by the demo.

Features are Gaussian with an AR(rho) correlation (Sigma_ij = rho^|i-j|), errors are
Student t with 3 degrees of freedom (heavy tails, finite variance), and a fraction of the
responses get a gross positive shift. The shift is one-sided on purpose: it biases least
squares (intercept and efficiency) while the Huber loss bounds each outlier's influence.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class SimulatedData:
    X: np.ndarray
    y: np.ndarray
    true_coef: np.ndarray
    true_intercept: float
    is_outlier: np.ndarray

    @property
    def true_parameters(self) -> np.ndarray:
        """Slopes then intercept: the estimator's parameter order (intercept last)."""
        return np.append(self.true_coef, self.true_intercept)


def true_coefficients(n_features: int) -> np.ndarray:
    """A fixed pattern of signs and magnitudes (1, -1.5, 2, -1, 1.5, -2, ...), so every
    feature matters and no estimate can look good by shrinking towards zero."""
    j = np.arange(n_features)
    return (-1.0) ** j * (1.0 + 0.5 * (j % 3))


def ar_gaussian_features(rng: np.random.Generator, n_rows: int, n_features: int,
                         rho: float) -> np.ndarray:
    """Rows of N(0, Sigma) with Sigma_ij = rho^|i-j|, built as a stationary AR(1) across
    columns so no p x p Cholesky factor is needed."""
    innovations = rng.standard_normal((n_rows, n_features))
    X = np.empty_like(innovations)
    X[:, 0] = innovations[:, 0]
    scale = np.sqrt(1.0 - rho * rho)
    for j in range(1, n_features):
        X[:, j] = rho * X[:, j - 1] + scale * innovations[:, j]
    return X


def simulate(n_rows: int, n_features: int, *, seed: int = 0, rho: float = 0.5,
             error_df: float = 3.0, outlier_fraction: float = 0.05,
             outlier_shift_mean: float = 20.0, outlier_shift_sd: float = 5.0,
             intercept: float = 1.0) -> SimulatedData:
    """Draw the whole data set; the same seed gives bit-identical arrays."""
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
        raise ValueError(f"n_rows must be a positive integer, got {n_rows!r}")
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) \
            or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    if not -1.0 < rho < 1.0:
        raise ValueError(f"rho must lie in (-1, 1) for a valid AR correlation, got {rho!r}")
    if not 0.0 <= outlier_fraction < 1.0:
        raise ValueError(f"outlier_fraction must lie in [0, 1), got {outlier_fraction!r}")
    if not error_df > 0:
        raise ValueError(f"error_df must be > 0, got {error_df!r}")

    rng = np.random.default_rng(seed)
    X = ar_gaussian_features(rng, int(n_rows), int(n_features), rho)
    coef = true_coefficients(int(n_features))
    errors = rng.standard_t(error_df, size=int(n_rows))
    is_outlier = rng.random(int(n_rows)) < outlier_fraction
    shifts = rng.normal(outlier_shift_mean, outlier_shift_sd, size=int(n_rows))
    y = X @ coef + intercept + errors + np.where(is_outlier, shifts, 0.0)
    return SimulatedData(X=X, y=y, true_coef=coef, true_intercept=float(intercept),
                         is_outlier=is_outlier)


def simulate_raw_units(n_rows: int, n_features: int, *, seed: int = 0,
                       feature_scales: tuple[float, float] = (1.0, 1e5),
                       target_offset: float = 1e5, error_scale: float = 50.0,
                       outlier_fraction: float = 0.05) -> SimulatedData:
    """The same contaminated design in raw units, as real tables come: feature j has scale
    s_j (log-spaced over feature_scales) and mean 3 s_j, the target sits at target_offset with
    errors of error_scale (t(3)) and one-sided outliers of 20 error_scale. With tau = 1.345 the
    fit is far from the quadratic zone at zero and near least absolute deviations at the
    optimum: the case that tests a solver's globalisation, not a tuned design."""
    base = simulate(n_rows, n_features, seed=seed, outlier_fraction=outlier_fraction,
                    intercept=0.0)
    low, high = feature_scales
    scales = np.geomspace(low, high, int(n_features)) if n_features > 1 else np.array([low])
    X = base.X * scales + 3.0 * scales
    coef = base.true_coef / scales
    intercept = target_offset - float(coef @ (3.0 * scales))
    y = X @ coef + intercept + error_scale * (base.y - base.X @ base.true_coef)
    return SimulatedData(X=X, y=y, true_coef=coef, true_intercept=intercept,
                         is_outlier=base.is_outlier)
