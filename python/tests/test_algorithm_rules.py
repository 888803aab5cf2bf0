"""The solver rules of docs/algorithm.md ("Solvers") on the reference core: the constants agree
with engines/common/rh_algorithm.h, the majoriser weight majorises rho (checked pointwise), and
the fallbacks reach the optimum where the plain methods stop."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from renewable_huber.config import UpdateConfig
from renewable_huber.core import design_matrix, huber_loss, huber_score, renewable_update, rules
from renewable_huber.core import lamm_solver as lamm_module
from renewable_huber.core.huber import smoothed_curvature
from renewable_huber.state import RenewableState

HEADER = Path(__file__).resolve().parents[2] / "engines" / "common" / "rh_algorithm.h"


def _header_constants() -> dict[str, float]:
    text = HEADER.read_text()
    pairs = re.findall(r"#define RH_(\w+) ([0-9.e+-]+)", text)
    return {name: float(value) for name, value in pairs}


def test_the_c_header_and_the_reference_state_the_same_constants():
    constants = _header_constants()
    # The batch-weight tolerance is an ABI rule between a caller's declared weight and the
    # engine's own sum; the reference computes the sum itself and has no such rule.
    assert constants.pop("WEIGHT_SUM_RTOL") == 1e-6
    assert constants == {
        "LINE_SEARCH_TRIALS": rules.LINE_SEARCH_TRIALS,
        "LAMM_ATTEMPTS": rules.LAMM_ATTEMPTS,
        "LAMM_INITIAL_PHI": rules.LAMM_INITIAL_PHI,
        "LAMM_BOUND_ATTEMPTS": rules.LAMM_BOUND_ATTEMPTS,
        "LAMM_SLACK": rules.LAMM_SLACK,
        "LAMM_PHI_FLOOR": rules.LAMM_PHI_FLOOR,
        "ROUNDING_FLOOR_FACTOR": rules.ROUNDING_FLOOR_FACTOR,
        "MIN_BANDWIDTH": rules.MIN_BANDWIDTH,
        "PIVOT_FACTOR": rules.PIVOT_FACTOR,
    }


@pytest.mark.parametrize("tau,h", [(1.345, 0.05), (2.0, 0.5), (0.01, 0.01)])
def test_majoriser_weight_gives_a_quadratic_above_rho_touching_it(tau, h):
    anchors = np.concatenate([np.linspace(-50 * tau, 50 * tau, 401), [0.0, tau, -tau]])
    curvature = smoothed_curvature(np, anchors, tau, h)
    weights = rules.majoriser_weights(np, anchors, tau, curvature)
    s = np.linspace(-100 * tau, 100 * tau, 2001)
    for r0, m in zip(anchors, weights, strict=True):
        touching = huber_loss(np, r0, tau) + huber_score(np, r0, tau) * (s - r0)
        quadratic = touching + 0.5 * m * (s - r0) ** 2
        assert np.all(quadratic >= huber_loss(np, s, tau) - 1e-9 * (1 + np.abs(s) * tau))
    assert np.all(weights[np.abs(anchors) <= tau] == 1.0)
    outside = np.abs(anchors) > tau + h
    assert np.allclose(weights[outside], tau / np.abs(anchors[outside]))


def test_rounding_floor_scales_with_the_objective_and_the_dtype():
    eps32 = float(np.finfo(np.float32).eps)
    assert rules.within_rounding(63 * eps32 * 10.0, 10.0, eps32)
    assert not rules.within_rounding(65 * eps32 * 10.0, 10.0, eps32)
    assert not rules.within_rounding(1e-300, 0.0, eps32) and rules.within_rounding(0.0, 0.0, eps32)


def test_a_rejected_direction_ends_converged_within_rounding_or_within_the_step_test():
    eps = float(np.finfo(np.float64).eps)
    beta = np.array([3.0, 4.0])  # ||beta|| = 5: the step test allows tol * 6
    tol = 1e-6
    small = np.array([0.0, 5.9e-6])
    large = np.array([0.0, 6.1e-6])
    # Within rounding of F: converged whatever the direction's length.
    assert rules.rejected_direction_converged(np, 63 * eps * 2.0, 2.0, eps, large, beta, tol)
    # An exact fit: F and its predicted decrease at F's own rounding floor (F ~ 1e-36), the
    # relative test fails, the direction passes the step test.
    assert not rules.within_rounding(2.6e-39, 9.6e-37, eps)
    assert rules.rejected_direction_converged(np, 2.6e-39, 9.6e-37, eps, small, beta, tol)
    # Neither: line search exhausted, not converged.
    assert not rules.rejected_direction_converged(np, 2.6e-39, 9.6e-37, eps, large, beta, tol)


def test_equilibration_factors_are_powers_of_two_bringing_the_diagonal_to_unit_order():
    diagonal = np.array(
        [1.0, 0.5, 2.0, 3.0, 1e10, 1e-10, 5e-324, 1.7e308, 0.0, -4.0, np.inf, np.nan]
    )
    d = rules.equilibration_factors(np, diagonal)
    usable = np.isfinite(diagonal) & (diagonal > 0)
    mantissa, _ = np.frexp(d)
    assert np.all(mantissa == 0.5)  # powers of two: the scaling is exact
    scaled = d[usable] * (d[usable] * diagonal[usable])
    assert np.all((scaled >= 0.5) & (scaled < 2.0))
    assert np.all(d[~usable] == 1.0)


def test_the_ladder_solves_raw_unit_columns_instead_of_truncating_them():
    """A = D S D, D from 3e-5 to 3e5, S the identity but for two columns of correlation
    1 - 1e-5: Cholesky and LU refuse it at float32's pivot floor, its equilibrated singular
    values are within the cutoff, so the step is A^-1 b (analytic), not a truncated one."""
    from renewable_huber.core.linear_solve import solve_linear

    P, rho = 7, 1.0 - 1e-5
    scale = 3.0 * 10.0 ** np.linspace(-5, 5, P)
    S = np.eye(P)
    S[2, 5] = S[5, 2] = rho
    b = np.random.default_rng(3).normal(size=P)
    inverse = np.eye(P)
    inverse[np.ix_([2, 5], [2, 5])] = np.array([[1.0, -rho], [-rho, 1.0]]) / (1.0 - rho**2)
    expected = (inverse @ (b / scale)) / scale
    A32 = (scale[:, None] * S * scale[None, :]).astype(np.float32)
    solution = solve_linear(np, A32, b.astype(np.float32))
    assert solution.method == "svd"
    # In S's units, against the float32 matrix's rounding amplified by kappa ~ 2e5.
    error = np.linalg.norm(scale * (solution.x - expected)) / np.linalg.norm(scale * expected)
    assert error < 0.05


def test_the_ladder_judges_a_streams_first_batch_at_float64s_epsilon():
    """rules.ladder_epsilon, and the problem's choice of it: float64's eps while the state has
    no batch and a zero information (H is then the batch's Gram, summed in float64), the
    working dtype's once J holds rounded values (a restored prior included)."""
    from renewable_huber.core.objective import RenewableProblem

    eps32, eps64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
    assert rules.ladder_epsilon(True, eps32) == eps64
    assert rules.ladder_epsilon(False, eps32) == eps32
    assert rules.ladder_epsilon(True, eps64) == rules.ladder_epsilon(False, eps64) == eps64
    config = UpdateConfig(
        tau=1.345, penalty="none", lambda_scale=1.0, bandwidth_scale=1.0, fit_intercept=True,
        max_iter=10, tol=1e-6, ridge=1e-8, n_features_in=2,
    )
    empty = RenewableState.empty(3, np.float32)
    X = design_matrix(np, np.ones((4, 2), dtype=np.float32), True)
    y = np.ones(4, dtype=np.float32)

    def chosen(state):
        return RenewableProblem.from_batch(np, state, X, y, None, config).ladder_epsilon

    assert chosen(empty) == eps64
    prior = RenewableState(empty.coefficients, np.eye(3, dtype=np.float32), 0, 0, 0.0, 0.0)
    assert chosen(prior) == eps32
    after, _ = renewable_update(np, empty, X, y, None, config)
    assert after.batch_count == 1 and chosen(after) == eps32


def _first_batch(X, y, penalty="none", max_iter=100, tol=1e-6, lambda_scale=1.0):
    p = X.shape[1]
    config = UpdateConfig(
        tau=1.345, penalty=penalty, lambda_scale=lambda_scale, bandwidth_scale=1.0,
        fit_intercept=True, max_iter=max_iter, tol=tol, ridge=1e-8, n_features_in=p,
    )
    state = RenewableState.empty(config.n_parameters, np.float64)
    return renewable_update(np, state, design_matrix(np, X, True), y, None, config)


def _first_order_residual(X, y, beta, tau=1.345):
    A = np.column_stack([X, np.ones(len(y))])
    score = huber_score(np, y - A @ beta, tau)
    return np.linalg.norm(A.T @ score) / (np.abs(A).T @ np.abs(score)).max()


def test_every_residual_beyond_the_band_still_reaches_the_optimum():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3)) * [1.0, 1e3, 1e5]
    y = X @ [2.0, -1e-3, 3e-5] + 5e4 + 40.0 * rng.standard_t(3, size=300)
    assert np.all(np.abs(y) > 1.345 + 1.0)  # at beta0 = 0 the curvature is zero on every row
    state, diagnostics = _first_batch(X, y, tol=1e-10)
    assert diagnostics.converged
    assert _first_order_residual(X, y, state.coefficients) < 1e-9


@pytest.mark.parametrize("rows", [5, 3])
def test_a_tiny_first_batch_in_raw_units_reaches_the_exact_fit(rows):
    """5 rows or 3 (fewer than the 4 parameters) of an exact linear relation 1e3 from zero: the
    optimum interpolates (every residual 0, f = 0); with 5 rows it is unique."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(rows, 3)) * 100.0
    y = X @ [1.0, 2.0, 3.0] + 1e3
    state, diagnostics = _first_batch(X, y)
    assert diagnostics.converged
    fitted = np.column_stack([X, np.ones(rows)]) @ state.coefficients
    assert np.max(np.abs(y - fitted)) <= 1e-9 * np.max(np.abs(y))
    if rows > 4:
        np.testing.assert_allclose(state.coefficients, [1.0, 2.0, 3.0, 1e3], rtol=1e-9)


def test_lamm_reaches_its_curvature_bound_attempts_on_1e7_features(monkeypatch):
    calls = []
    original = lamm_module.curvature_bound

    def counting(problem):
        calls.append(1)
        return original(problem)

    monkeypatch.setattr(lamm_module, "curvature_bound", counting)
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 3)) * 1e7
    y = X @ [1e-7, 0.0, -2e-7] + rng.normal(size=200)
    state, diagnostics = _first_batch(X, y, penalty="l1", max_iter=50)
    # 40 doublings of phi = 1 reach 1.1e12, below the curvature (~1e14) here.
    assert calls, "the curvature-bound attempts must run"
    # Never an early stop: converged, or still descending at max_iter.
    assert diagnostics.converged or diagnostics.iterations == 50
    clipped = np.minimum(np.abs(y), 1.345)
    start = 0.5 * np.sum(clipped * (2 * np.abs(y) - clipped)) / 200  # f at beta = 0
    assert diagnostics.objective < start
