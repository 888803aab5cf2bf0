"""The algorithm's constants and scalar rules (docs/algorithm.md, "Solvers"), stated once for
the reference core. engines/common/rh_algorithm.h states the same for the C and CUDA engines
(each function here names its C counterpart), and a test keeps the constants equal."""

from __future__ import annotations

import math
import sys

# Newton's line search: t = 1, 1/2, ..., 2^-26 (the next halving would fall below 1e-8).
LINE_SEARCH_TRIALS = 27
# LAMM: phi, 2 phi, ..., 2^39 phi, then LAMM_BOUND_ATTEMPTS more from max(phi, the curvature
# bound), doubling on rejection.
LAMM_ATTEMPTS = 40
# phi at the start of every batch's LAMM solve.
LAMM_INITIAL_PHI = 1.0
LAMM_BOUND_ATTEMPTS = 8
# Absolute slack on LAMM's majorisation test, so rounding in f cannot reject an exact majoriser.
LAMM_SLACK = 1e-12
LAMM_PHI_FLOOR = 1e-8
# The least bandwidth an update accepts (the least positive normal double): a zero or
# subnormal h, from a bandwidth_scale tiny against sqrt(N), would make the curvature ramps'
# slope 1 / (2h) infinite, so such a batch is refused before any work.
MIN_BANDWIDTH = sys.float_info.min
# A solve whose every step was rejected is converged when the decrease its last step predicted
# is at most ROUNDING_FLOOR_FACTOR * eps * |F|.
ROUNDING_FLOOR_FACTOR = 64.0
# The linear-solve ladder's relative pivot floor (docs/decisions.md, "Linear solve ladder"): a
# factorisation is refused when a pivot is not above PIVOT_FACTOR * P * eps times its reference.
PIVOT_FACTOR = 64.0


def _log_features(n_features_in: int) -> float:
    return math.log(max(n_features_in, 2))


def bandwidth(bandwidth_scale: float, weight_sum: float, n_features_in: int, tau: float) -> float:
    """h = min(bandwidth_scale / (sqrt(N) * ln(max(p, 2))), tau), N the cumulative weight
    (rh_bandwidth)."""
    return min(bandwidth_scale / (math.sqrt(weight_sum) * _log_features(n_features_in)), tau)


def l1_lambda(lambda_scale: float, tau: float, weight_sum: float, n_features_in: int) -> float:
    """lambda = lambda_scale * tau * sqrt(ln(max(p, 2)) / N) for L1 (rh_lambda)."""
    return lambda_scale * tau * math.sqrt(_log_features(n_features_in) / weight_sum)


def within_rounding(predicted_decrease: float, objective: float, eps: float) -> bool:
    """No representable step can decrease f measurably: the decrease predicted for the last
    rejected step is within ROUNDING_FLOOR_FACTOR * eps * |F|."""
    return predicted_decrease <= ROUNDING_FLOOR_FACTOR * eps * abs(objective)


def pivot_floor(n: int, eps: float) -> float:
    """PIVOT_FACTOR * n * eps for an n x n factorisation in a dtype of machine epsilon eps:
    Cholesky refuses a squared pivot not above it times its column's diagonal, LU a smallest
    |u_ii| not above it times the largest (rh_pivot_floor)."""
    return PIVOT_FACTOR * n * eps


def rank_cutoff(n: int, eps: float, largest: float) -> float:
    """The minimum-norm solve's cutoff: singular values of an n x n matrix not above
    eps * n * largest are dropped (rh_rank_cutoff)."""
    return eps * n * largest


def ladder_epsilon(stream_start: bool, dtype_eps: float) -> float:
    """The eps of the Newton ladder's thresholds (rh_ladder_epsilon): the system is float64 for
    every working dtype; at a stream's first batch (batch count 0, all-zero information) H is
    the batch's Gram alone, exact to float64 rounding, and is judged at float64's epsilon;
    afterwards it holds the information stored in the working dtype, whose rounding can leave
    it indefinite at dtype_eps, and is judged there."""
    return sys.float_info.epsilon if stream_start else dtype_eps


def step_converged(xp, step, beta, tol: float) -> bool:
    """The step test of both solvers: ||step||_2 <= tol * (1 + ||beta||_2), beta the newly
    accepted iterate (rh_step_converged)."""
    return float(xp.linalg.norm(step)) <= tol * (1.0 + float(xp.linalg.norm(beta)))


def rejected_direction_converged(xp, predicted_decrease: float, objective: float, eps: float,
                                 direction, beta, tol: float) -> bool:
    """Newton's solve ended with every trial along its last direction rejected: converged when
    the decrease that direction predicted is within rounding of F, or when the direction itself
    passes the step test at beta (its whole step would have ended the solve had rounding let f
    decrease; F at its own rounding floor, as in an exact fit, defeats any test relative to F)
    (rh_rejected_direction_converged)."""
    return (within_rounding(predicted_decrease, objective, eps)
            or step_converged(xp, direction, beta, tol))


def decrease_settled(F: float, f: float, tol: float) -> bool:
    """A Newton step the line search cut short ends the solve only when it also changed the
    objective by at most tol |f|, F before it and f after (rh_decrease_settled)."""
    return F - f <= tol * abs(f)


def lamm_upper(F: float, inner: float, phi: float, squared: float) -> float:
    """LAMM's model F + <g, step> + phi ||step||^2 / 2 from inner = <g, step> and squared =
    ||step||^2 (rh_lamm_upper)."""
    return F + inner + phi * squared / 2.0


def lamm_accepts(f: float, upper: float) -> bool:
    """LAMM accepts a candidate of objective f under its model's value (rh_lamm_accepts)."""
    return f <= upper + LAMM_SLACK


def lamm_relaxed_phi(phi: float) -> float:
    """phi for the next iteration after an accepted attempt: max(phi / 2, LAMM_PHI_FLOOR)
    (rh_lamm_relaxed_phi)."""
    relaxed = phi / 2.0
    return relaxed if relaxed > LAMM_PHI_FLOOR else LAMM_PHI_FLOOR


def majoriser_weights(xp, r, tau: float, curvature):
    """max(c(r), min(1, tau / |r|)) per row: psi(r)/r is the weight of the quadratic touching
    rho at r from above (rho is concave in r^2), so any larger weight majorises f; where c is
    larger (inside the quadratic zone) the fallback step is the Newton step."""
    magnitude = xp.abs(r)
    # tau / |r| only where |r| > tau, so a zero residual never divides.
    irls = xp.where(magnitude > tau, tau / xp.where(magnitude > tau, magnitude, tau), 1.0)
    return xp.maximum(curvature, irls.astype(r.dtype, copy=False))


def history_scale(previous_weight: float, total_weight: float, previous_lambda: float) -> float:
    """The L1 historical subgradient's scale (W / N) lambda_prev, W the weight before the batch
    and N after it (rh_history_scale)."""
    return previous_weight / total_weight * previous_lambda


def lamm_phi_bound(sum_w_x2: float, trace_information: float, total_weight: float) -> float:
    """(sum_i w_i ||x_i||^2 + trace J) / N: at least the largest eigenvalue of f's Hessian."""
    return (sum_w_x2 + trace_information) / total_weight


def equilibration_factors(xp, diagonal):
    """The linear-solve ladder's equilibration: per diagonal entry a, the power of two d with
    d^2 a in [1/2, 2), 1 where a is not a positive finite number (rh_equilibration_factor)."""
    usable = (diagonal > 0) & xp.isfinite(diagonal)
    _, exponent = xp.frexp(xp.where(usable, diagonal, 1.0))
    # a = m 2^e, m in [1/2, 1): d = 2^-floor(e / 2) (floor division also for negative e).
    return xp.ldexp(xp.ones_like(diagonal), -(exponent // 2))
