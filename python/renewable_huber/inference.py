"""Standard errors, covariance and intervals of a stream's coefficients (docs/algorithm.md,
"Inference").

The renewable Huber estimator is asymptotically normal with the sandwich covariance
V = J^-1 K J^-T, where J is the state's information and K its meat matrix, both sums over
batches (core/meat.py). The reported covariance multiplies it by the HC1-style small-sample
factor n / (n - P), n the rows seen and P the number of parameters. Everything here is host
NumPy in float64 and never needs SciPy: the normal quantile and tail come from math.erfc and a
few Newton steps on it.
"""

from __future__ import annotations

import math

import numpy as np

from .exceptions import InferenceUnavailableError, ValidationError
from .state import RenewableState

# Beyond this condition number of J scaled to a unit diagonal the sandwich is rounding noise,
# not a covariance. Scaling first keeps features in raw units (scales 1e0..1e6) from counting
# as ill-conditioned: only near-collinear columns do.
_MAX_CONDITION = 1e12

# Why a stream fitted with inference=False (the default) has no standard errors.
NOT_REQUESTED = (
    "standard errors were not requested: this stream has inference=False (the default, and "
    "how a checkpoint of format 4 or older without K reads), so no meat matrix K was "
    "accumulated; fit with RenewableHuberRegressor(inference=True) to get bse_, cov_params(), "
    "conf_int() and summary()"
)


def small_sample_factor(n_samples: int, n_parameters: int) -> float:
    """n / (n - P): the degrees-of-freedom correction applied to J^-1 K J^-T."""
    if n_samples <= n_parameters:
        raise InferenceUnavailableError(
            f"standard errors need more rows than parameters: the stream has seen {n_samples} "
            f"rows for {n_parameters} parameters"
        )
    return n_samples / (n_samples - n_parameters)


def sandwich_covariance(state: RenewableState) -> np.ndarray:
    """(P, P) float64 covariance of the state's coefficients, intercept last:
    n / (n - P) * J^-1 K J^-T. InferenceUnavailableError when the state has no K, J is
    singular or n <= P."""
    if state.meat is None:
        raise InferenceUnavailableError(
            "this stream carries no meat matrix K, so it has no standard errors: it was "
            "restored from a state without K (a checkpoint of format 3 or older, or a caller "
            "of the engine ABI without the K field) or an L1-penalised batch was folded in; "
            "start a new stream (fit) to get inference"
        )
    P = state.n_parameters
    factor = small_sample_factor(int(state.n_samples_seen), P)
    information = np.asarray(state.information, dtype=np.float64)
    meat = np.asarray(state.meat, dtype=np.float64)
    diagonal = np.diagonal(information)
    scale = np.sqrt(np.where(diagonal > 0, diagonal, np.nan))
    condition = np.linalg.cond(information / np.outer(scale, scale))
    if not condition <= _MAX_CONDITION:
        raise InferenceUnavailableError(
            f"the information matrix J is singular or nearly so (condition number "
            f"{condition:.3g}): the coefficients are not identified (collinear columns?) and "
            "have no standard errors"
        )
    left = np.linalg.solve(information, meat)  # J^-1 K
    covariance = np.linalg.solve(information, left.T).T  # (J^-1 K) J^-T
    covariance = 0.5 * (covariance + covariance.T) * factor
    return covariance


def standard_errors_of(
    state: RenewableState, penalty: str, requested: bool = True
) -> tuple[np.ndarray | None, str | None]:
    """(standard errors, None), or (None, the reason) when the stream has none: the command
    line reports the reason instead of failing. requested: the stream's inference setting."""
    if penalty != "none":
        return None, "offered for penalty='none' only (not valid after L1 selection)"
    if not requested:
        return None, "not computed (fit with --inference)"
    try:
        return np.sqrt(np.diagonal(sandwich_covariance(state))), None
    except InferenceUnavailableError as error:
        return None, str(error)


def normal_tail(z: float) -> float:
    """P(|Z| > |z|) for a standard normal Z."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def normal_quantile(probability: float) -> float:
    """The standard normal quantile q with P(Z <= q) = probability, for 0 < probability < 1.

    Bisection on the upper tail 0.5 erfc(q / sqrt 2), which math.erfc gives to full relative
    precision even far out, so tiny tail probabilities keep their digits."""
    if not 0.0 < probability < 1.0:
        raise ValidationError(f"probability must be in (0, 1), got {probability!r}")
    tail = min(probability, 1.0 - probability)
    low, high = 0.0, 40.0
    while high - low > 4e-16 * high:
        middle = 0.5 * (low + high)
        if 0.5 * math.erfc(middle / math.sqrt(2.0)) > tail:
            low = middle
        else:
            high = middle
    q = 0.5 * (low + high)
    return q if probability >= 0.5 else -q


def check_alpha(alpha) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)):
        raise ValidationError(f"alpha must be a number in (0, 1), got {alpha!r}")
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValidationError(f"alpha must be in (0, 1), got {alpha!r}")
    return alpha


def confidence_intervals(coefficients: np.ndarray, standard_errors: np.ndarray,
                         alpha: float) -> np.ndarray:
    """(P, 2) Wald intervals coefficient -+ z_{1-alpha/2} standard error."""
    z = normal_quantile(1.0 - check_alpha(alpha) / 2.0)
    coefficients = np.asarray(coefficients, dtype=np.float64)
    return np.column_stack((coefficients - z * standard_errors, coefficients + z * standard_errors))


def summary_rows(names, coefficients, standard_errors, alpha: float) -> list[dict]:
    """One dict per coefficient: name, coef, std_err, z, p_value, lower, upper."""
    intervals = confidence_intervals(coefficients, standard_errors, alpha)
    rows = []
    for name, coef, se, (lower, upper) in zip(
        names, np.asarray(coefficients, dtype=np.float64), standard_errors, intervals,
        strict=True,
    ):
        z = coef / se if se > 0 else math.copysign(math.inf, coef) if coef != 0 else math.nan
        p_value = normal_tail(z) if not math.isnan(z) else math.nan
        rows.append({"name": name, "coef": float(coef), "std_err": float(se), "z": float(z),
                     "p_value": float(p_value), "lower": float(lower), "upper": float(upper)})
    return rows


def format_summary(rows: list[dict], alpha: float, header: str) -> str:
    """A fixed-width table of summary_rows, statsmodels-like."""
    level = 100.0 * (1.0 - alpha)
    low, high = f"[{alpha / 2:.3g}", f"{1 - alpha / 2:.3g}]"
    width = max(9, *(len(row["name"]) for row in rows))
    lines = [header, f"{'':<{width}} {'coef':>12} {'std err':>12} {'z':>9} {'P>|z|':>8} "
             f"{low:>12} {high:>12}"]
    for row in rows:
        lines.append(
            f"{row['name']:<{width}} {row['coef']:>12.6g} {row['std_err']:>12.6g} "
            f"{row['z']:>9.3f} {row['p_value']:>8.3g} {row['lower']:>12.6g} {row['upper']:>12.6g}"
        )
    lines.append(f"Intervals at {level:g}% from the sandwich covariance n/(n-P) J^-1 K J^-1.")
    return "\n".join(lines)
