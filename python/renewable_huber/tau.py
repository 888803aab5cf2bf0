"""Choosing tau: the Huber threshold is an absolute number in the target's units.

rho_tau is quadratic for |r| <= tau and linear beyond, so tau only means something relative to
the spread of the residuals. The classical choice is tau = 1.345 sigma, sigma the noise scale
(95% efficiency under Gaussian noise); the estimator's default tau = 1.345 is that choice for a
target whose noise has unit scale, i.e. for standardised data. On data in raw units (a target
in the hundreds or thousands) the default is tiny: almost every row is in the linear zone, the
fit approaches least absolute deviations, and the renewable update, which carries the past
through a quadratic (the information matrix), loses its equivalence with the full-data fit
across batches.

suggest_tau estimates sigma robustly from a pilot batch; tau="auto" in the estimator applies it
to the first batch of a stream; residual_scale_at and tau_too_small are the cheap first-batch
check behind TauScaleWarning.
"""

from __future__ import annotations

import sys

import numpy as np

from ._validation import is_device_array, validate_batch
from .exceptions import ValidationError

# tau = HUBER_EFFICIENCY_CONSTANT * sigma gives 95% efficiency under Gaussian noise.
HUBER_EFFICIENCY_CONSTANT = 1.345
# median(|e|) of a standard normal e is 1 / 1.4826: the factor that makes the MAD estimate sigma.
NORMAL_MAD_FACTOR = 1.4826
# Mean absolute deviation of a standard normal is sqrt(2 / pi): its normalising factor.
NORMAL_MEAN_ABS_FACTOR = 1.2533
# The pilot fit uses at most this many rows, evenly spaced over the batch: the scale of the
# residuals is estimated to a few percent from them, and the cost stays that of small
# least-squares solves whatever the batch size.
PILOT_ROWS = 5_000
# The first-batch check uses at most this many rows (one matrix-vector product and a median):
# the warning fires at a tenfold gap, which a median of 256 residuals (a few percent of
# sampling error) resolves, and its cost stays a few microseconds on every new stream (a
# single-batch stream of 4,096 x 16 took 0.1 ms more with 2,000 rows, 20% of its update).
CHECK_ROWS = 256
# No TauScaleWarning is possible when the first batch's reported objective (its mean Huber loss,
# J being zero; plus the L1 penalty) is below QUIET_OBJECTIVE tau^2 (unit weights): the warning
# needs half the residuals beyond tau / (TAU_WARNING_RATIO * 1.4826) = 6.7 tau, each adding at
# least 6.2 tau^2 to the loss, so a mean loss of 3.1 tau^2; below a third of that no sample of
# the residuals plausibly has its median there, and the check is skipped for free.
QUIET_OBJECTIVE = 1.0
# TauScaleWarning fires when tau < TAU_WARNING_RATIO * the residuals' normalised MAD (at the
# fitted coefficients; on the pilot fit when the first batch did not converge, because
# unconverged coefficients say nothing about the noise).
TAU_WARNING_RATIO = 0.1
# A pilot residual scale below this fraction of max |y| is rounding: an exact fit.
EXACT_FIT_RATIO = 1e-12
# Iteratively reweighted least squares for the pilot LAD fit.
_LAD_ITERATIONS = 30
_LAD_RELATIVE_CHANGE = 1e-3
# An exact LAD fit passes through some rows (residual exactly zero); IRLS, stopped at a relative
# change of 1e-3, leaves them at small multiples of its weights' floor instead. Pilot residuals
# below this fraction of the mean absolute residual are taken as those zeros, so that a target
# where more than half the rows are fitted exactly (a binary or heavily tied target: 80% of
# statsmodels' modechoice rows came out below 1.5e-6 for residuals of mean 0.25) gets
# robust_scale's mean-absolute fallback instead of the MAD of IRLS's leftovers (which made
# tau 7.9e-7 there).
LAD_ZERO_RATIO = 1e-4


def robust_scale(residuals: np.ndarray) -> float:
    """sigma estimated from residuals: 1.4826 x the (upper) median |r| (the normalised MAD
    about zero,
    which is where tau measures from), or 1.2533 x mean |r| when more than half of them are
    exactly zero; 0.0 only when all are."""
    magnitude = np.abs(np.asarray(residuals, dtype=np.float64))
    if magnitude.size == 0:
        return 0.0
    # The upper median by one partition (np.median costs several times more on the few
    # hundred values of the first-batch check, which runs on every new stream).
    middle = magnitude.size // 2
    scale = NORMAL_MAD_FACTOR * float(np.partition(magnitude, middle)[middle])
    if scale > 0.0:
        return scale
    return NORMAL_MEAN_ABS_FACTOR * float(magnitude.mean())


def suggest_tau(X, y, sample_weight=None, *, fit_intercept: bool = True) -> float:
    """A tau in the target's units for data like this pilot batch: 1.345 x the robust scale
    of the residuals of a pilot least-absolute-deviations fit.

    X (n, p), y (n,), sample_weight (n,) or None: a representative batch (a shuffled sample
    or the first batch of a shuffled stream), host or device arrays. At most PILOT_ROWS rows,
    evenly spaced, are used; rows of zero weight are ignored. The pilot is a least-squares fit
    refined to least absolute deviations by iteratively reweighted least squares (robust to
    the outliers a Huber fit is for), on columns scaled to unit maximum (raw units with
    features in the thousands next to the intercept's 1 stay well conditioned); the scale is
    1.4826 x the median absolute residual. Returns a float > 0; raises ValidationError when
    the pilot fits the batch exactly (no spread to measure) or the input is invalid.
    """
    if any(is_device_array(a) for a in (X, y, sample_weight) if a is not None):
        # Only the pilot rows cross to the host.
        X, y, sample_weight = (
            None if a is None else _to_host(a[:: row_stride(int(a.shape[0]), PILOT_ROWS)])
            for a in (X, y, sample_weight)
        )
    batch = validate_batch(
        X, y, sample_weight, dtype=np.dtype(np.float64), accepts_device=False,
        backend_name="numpy",
    )
    return tau_from_batch(batch.X, batch.y, batch.sample_weight, fit_intercept=fit_intercept)


def tau_from_batch(X, y, sample_weight, *, fit_intercept: bool) -> float:
    """suggest_tau for an already validated batch: host arrays, or device arrays of which only
    the pilot rows are copied to the host."""
    return HUBER_EFFICIENCY_CONSTANT * pilot_scale(X, y, sample_weight,
                                                   fit_intercept=fit_intercept)


def pilot_scale(X, y, sample_weight, *, fit_intercept: bool) -> float:
    """The robust scale of the pilot LAD fit's residuals on at most PILOT_ROWS rows of a
    validated batch (see suggest_tau); ValidationError when they have no spread."""
    step = row_stride(int(X.shape[0]), PILOT_ROWS)
    X, y = _to_host(X[::step]).astype(np.float64), _to_host(y[::step]).astype(np.float64)
    weights = None
    if sample_weight is not None:
        weights = _to_host(sample_weight[::step]).astype(np.float64)
        keep = weights > 0
        X, y, weights = X[keep], y[keep], weights[keep]
    # Arrays a native engine reads unchanged are scanned for NaN/Inf by the engine, after
    # this pilot: bad values among the pilot rows must not pass as "no spread".
    if not all(np.isfinite(a).all() for a in (X, y, weights) if a is not None):
        raise ValidationError(
            "cannot suggest a tau: X, y or sample_weight contains NaN or infinity"
        )
    try:
        residuals = _lad_residuals(X, y, weights, fit_intercept)
        magnitude = np.abs(residuals)
        scale = robust_scale(np.where(magnitude <= LAD_ZERO_RATIO * magnitude.mean(), 0.0,
                                      residuals))
    except np.linalg.LinAlgError as error:
        raise ValidationError(f"cannot suggest a tau: the pilot fit failed ({error})") from None
    # Residuals of an exact fit are rounding errors, not a spread: below EXACT_FIT_RATIO of
    # y's own size they are taken as zero.
    if not scale > EXACT_FIT_RATIO * float(np.abs(y).max(initial=0.0)):
        raise ValidationError(
            "cannot suggest a tau: the pilot fit reproduces y exactly on the batch "
            f"({X.shape[0]} rows, {X.shape[1]} features), so the residuals have no spread; "
            "use a larger batch (more rows than features) or choose tau in y's units yourself"
        )
    return scale


def residual_scale_at(coefficients, X: np.ndarray, y: np.ndarray, sample_weight,
                      fit_intercept: bool) -> float:
    """The robust scale of the residuals at `coefficients` (intercept last when
    fit_intercept) over at most CHECK_ROWS evenly spaced rows of weight > 0 of a host batch:
    one small matrix-vector product and a median, the cost of the first-batch check."""
    step = row_stride(X.shape[0], CHECK_ROWS)
    rows = X[::step]
    beta = np.asarray(coefficients, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        fitted = rows @ beta[: rows.shape[1]]
        if fit_intercept:
            fitted += beta[-1]
        residuals = y[::step].astype(np.float64) - fitted
    if sample_weight is not None:
        residuals = residuals[np.asarray(sample_weight[::step]) > 0]
    return robust_scale(residuals[np.isfinite(residuals)])


def tau_too_small(tau: float, scale: float) -> bool:
    """The TauScaleWarning rule: tau below TAU_WARNING_RATIO times the residuals' scale."""
    return tau < TAU_WARNING_RATIO * scale


def tau_scale_message(tau: float, scale: float, suggestion: float | None, *,
                      at_fit: bool) -> str:
    """The text of TauScaleWarning; at_fit: scale was measured at the fitted coefficients
    (else on a pilot fit, because the batch did not converge)."""
    where = "at the fitted coefficients" if at_fit else (
        "of a pilot fit, as the batch did not converge")
    suggested = (
        f"suggest_tau on this batch gives tau={suggestion:.4g}"
        if suggestion is not None
        else f"1.345 x that spread is {HUBER_EFFICIENCY_CONSTANT * scale:.4g}"
    )
    return (
        f"tau={tau:g} is far below the spread of the first batch's residuals (normalised MAD "
        f"{scale:.4g} {where}): tau is an absolute threshold in the target's units, and "
        "with a tau this small nearly every row lies in Huber's linear zone, where the "
        "renewable update loses its equivalence with the full-data fit across batches. "
        f"{suggested} (renewable_huber.suggest_tau(X, y) on a pilot batch; or tau='auto'); "
        "or standardise y."
    )


# ------------------------------------------------------------------------------- helpers


def _to_host(array) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    library = sys.modules.get(type(array).__module__.split(".")[0])
    if library is not None and hasattr(library, "asnumpy"):
        return library.asnumpy(array)
    if hasattr(array, "detach"):
        return np.asarray(array.detach().cpu())
    return np.asarray(array)


def row_stride(n_rows: int, limit: int) -> int:
    """The stride that keeps at most `limit` of n_rows rows, evenly spaced."""
    return max(1, -(-n_rows // limit))


def _lad_residuals(X: np.ndarray, y: np.ndarray, weights, fit_intercept: bool) -> np.ndarray:
    """Residuals of a least-absolute-deviations fit by iteratively reweighted least squares,
    started from least squares."""
    design = np.column_stack([X, np.ones(X.shape[0])]) if fit_intercept else X
    # Column equilibration: the solution is scale-equivariant, the solver's accuracy is not.
    column_scale = np.abs(design).max(axis=0)
    column_scale[column_scale == 0.0] = 1.0
    design = design / column_scale
    base = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)

    def weighted_fit(row_weights):
        root = np.sqrt(row_weights)
        return np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0]

    residuals = y - design @ weighted_fit(base)
    scale = robust_scale(residuals)
    for _ in range(_LAD_ITERATIONS):
        if not scale > 0.0:
            break
        # |r| is floored relative to the current scale so exactly fitted rows keep a finite
        # weight (the usual IRLS guard for LAD).
        floor = 1e-6 * scale
        residuals = y - design @ weighted_fit(base / np.maximum(np.abs(residuals), floor))
        new_scale = robust_scale(residuals)
        done = abs(new_scale - scale) <= _LAD_RELATIVE_CHANGE * scale
        scale = new_scale
        if done:
            break
    return residuals
