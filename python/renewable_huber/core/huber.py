"""The Huber pieces of docs/algorithm.md: loss, score, smoothed curvature, the checked bandwidth
and lambda (their formulas are rules.py's), soft threshold. Array functions take the array
namespace implicitly through their inputs' methods and stay in the inputs' dtype; scalar
parameters are Python floats so they never promote float32 arrays."""

from __future__ import annotations

from ..exceptions import ValidationError
from .rules import MIN_BANDWIDTH, bandwidth, l1_lambda


def huber_loss(xp, r, tau: float):
    """rho(r): quadratic inside [-tau, tau], linear with slope tau outside.

    Written as psi(r) * (r - psi(r) / 2), which is r^2/2 inside and tau |r| - tau^2/2
    outside, so huge residuals are never squared (no spurious overflow).
    """
    score = huber_score(xp, r, tau)
    return score * (r - 0.5 * score)


def huber_score(xp, r, tau: float):
    """psi(r) = clip(r, -tau, tau): the ordinary (not smoothed) score used by the gradient."""
    return xp.clip(r, -tau, tau)


def smoothed_curvature(xp, r, tau: float, h: float):
    """c(r): the paper's smoothed surrogate for psi'(r), linear ramps of half-width h at +-tau.

    The four pieces of the spec collapse to one clip because both ramps equal
    1/2 + (tau - |r|) / (2h) and the plateaus are exactly where that leaves [0, 1].
    """
    return xp.clip(0.5 + (tau - xp.abs(r)) / (2.0 * h), 0.0, 1.0)


def checked_bandwidth(
    bandwidth_scale: float, weight_sum: float, n_features_in: int, tau: float
) -> float:
    """bandwidth(), refused with ValidationError unless it is a positive normal number (an
    update with a zero or subnormal h would divide by it)."""
    h = bandwidth(bandwidth_scale, weight_sum, n_features_in, tau)
    if not h >= MIN_BANDWIDTH:
        raise ValidationError(
            f"bandwidth h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau) is {h!r} for "
            f"bandwidth_scale {bandwidth_scale!r}, tau {tau!r} and cumulative weight N "
            f"{weight_sum!r}: must be a positive normal number (>= {MIN_BANDWIDTH!r}); raise "
            f"bandwidth_scale"
        )
    return h


def lambda_value(
    penalty: str, lambda_scale: float, tau: float, weight_sum: float, n_features_in: int
) -> float:
    """0 without a penalty; lambda_scale * tau * sqrt(ln(max(p, 2)) / N) for "l1"."""
    if penalty == "none":
        return 0.0
    if penalty == "l1":
        return l1_lambda(lambda_scale, tau, weight_sum, n_features_in)
    raise ValidationError(f"penalty must be 'none' or 'l1', got {penalty!r}")


def soft_threshold(xp, v, threshold):
    """S(v, t) = sign(v) * max(|v| - t, 0); a zero threshold returns v unchanged."""
    return xp.sign(v) * xp.maximum(xp.abs(v) - threshold, 0.0)
