"""renewable_update against independent NumPy math: OLS limits, estimating equations, KKT
conditions, weights, ordering properties and dtype discipline (docs/algorithm.md)."""

import dataclasses
import math

import numpy as np
import pytest
from float32_checks import flat_radius

from renewable_huber import core
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import EngineError, ValidationError
from renewable_huber.state import RenewableState


def make_config(p, *, penalty="none", fit_intercept=True, tau=1.345, ridge=1e-8, tol=1e-10,
                max_iter=200, lambda_scale=1.0, bandwidth_scale=1.0):
    return UpdateConfig(
        n_features_in=p,
        fit_intercept=fit_intercept,
        tau=tau,
        bandwidth_scale=bandwidth_scale,
        tol=tol,
        ridge=ridge,
        max_iter=max_iter,
        penalty=penalty,
        lambda_scale=lambda_scale,
    )


# LAMM's absolute majorisation slack (1e-12) accepts any step with phi ||step||^2 / 2 below
# it, so its iterates settle into steps of ~1e-6 and tighter tolerances run to max_iter
# (conformance/README.md). L1 tests therefore use this tolerance and compare to matching
# accuracy.
L1_TOL = 1e-6
TOL = {"none": 1e-12, "l1": L1_TOL}


def run_stream(batches, config, dtype=np.float64, state=None):
    """batches: list of (X, y, w or None) host arrays; returns (final state, diagnostics list)."""
    if state is None:
        state = RenewableState.empty(config.n_parameters, dtype)
    diagnostics = []
    for X, y, w in batches:
        Xd = core.design_matrix(np, np.asarray(X, dtype=dtype), config.fit_intercept)
        w = None if w is None else np.asarray(w, dtype=dtype)
        state, diag = core.renewable_update(np, state, Xd, np.asarray(y, dtype=dtype), w, config)
        diagnostics.append(diag)
    return state, diagnostics


def run_stream_states(batches, config, dtype=np.float64):
    """Like run_stream, but every batch's (state, diagnostics)."""
    state = RenewableState.empty(config.n_parameters, dtype)
    history = []
    for batch in batches:
        state, (diag,) = run_stream([batch], config, dtype, state)
        history.append((state, diag))
    return history


def assert_same_stream_up_to_rounding(batches, config, first, second):
    """Two computations of the same renewable objectives whose rounding differs (weighted vs
    replicated rows, permuted rows: BLAS sums them in another order).

    Coefficients: Newton accepts on plain non-increase and stops, at the latest, where f's
    rounding hides further decrease, so two such computations can end anywhere in the flat
    region around the optimum, up to the flat radius 10 sqrt(eps cond(H)) (1 + ||beta||)
    apart (float32_checks.flat_radius; 1e-9 relative was seen on the Nehalem kernel, beyond
    the 1e-9 this test used to claim). LAMM takes no linear solve and its acceptance test has
    a 1e-12 margin, so its paths agree to rounding: 1e-9 relative.
    Information: J depends on the coefficients only through the curvature weights of the
    rows near tau +- h, |dc_i| <= |x_i . d| / (2h) with d the coefficient gap, so batch k adds
    at most sum_i w_i ||x_i||^2 |x_i . d_k| / (2 h_k) to the gap it inherits, plus the
    Gram's own summation rounding (1e-12 relative, far above n eps for these sizes)."""
    slack = 0.0
    for (X, _, w), (a, diag), (b, _) in zip(batches, first, second, strict=True):
        if config.penalty == "none":
            radius = flat_radius(a, config)
            np.testing.assert_allclose(a.coefficients, b.coefficients, rtol=0, atol=radius)
        else:
            np.testing.assert_allclose(a.coefficients, b.coefficients, rtol=1e-9, atol=1e-12)
        design = core.design_matrix(np, np.asarray(X, dtype=np.float64), config.fit_intercept)
        weights = np.ones(len(design)) if w is None else np.asarray(w, dtype=np.float64)
        moved = np.abs(design @ (a.coefficients - b.coefficients)) / (2.0 * diag.bandwidth)
        slack += float(np.sum(weights * np.sum(design**2, axis=1) * moved))
        gap = float(np.linalg.norm(a.information - b.information))
        assert gap <= slack + 1e-12 * float(np.linalg.norm(a.information))


def linear_data(rng, n, beta, noise=1.0, intercept=0.5):
    X = rng.normal(size=(n, len(beta)))
    y = X @ np.asarray(beta) + intercept + noise * rng.standard_normal(n)
    return X, y


def with_ones(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


def psi(r, tau):
    return np.minimum(np.maximum(r, -tau), tau)


def curvature(r, tau, h):
    # the spec's four pieces, written out independently of the implementation's single clip
    a = np.abs(r)
    return np.where(a < tau - h, 1.0, np.where(a <= tau + h, 0.5 - (a - tau) / (2 * h), 0.0))


# ---------------------------------------------------------------- limits and robustness


def test_large_tau_without_ridge_reproduces_least_squares():
    rng = np.random.default_rng(0)
    X, y = linear_data(rng, 300, [1.0, -2.0, 0.5, 3.0])
    config = make_config(4, tau=100.0, ridge=0.0, tol=1e-12)
    state, (diag,) = run_stream([(X, y, None)], config)
    expected = np.linalg.lstsq(with_ones(X), y, rcond=None)[0]
    np.testing.assert_allclose(state.coefficients, expected, rtol=1e-10, atol=1e-12)
    assert diag.converged
    assert not diag.used_regularized_fallback


def test_one_gross_outlier_barely_moves_the_fit_while_ols_moves_a_lot():
    rng = np.random.default_rng(1)
    x = np.linspace(-2.0, 2.0, 101)
    X = x[:, None]
    y = 1.0 + 2.0 * x + 0.3 * rng.standard_normal(101)
    y_bad = y.copy()
    y_bad[50] += 1000.0
    config = make_config(1, tau=1.345)
    clean, _ = run_stream([(X, y, None)], config)
    dirty, _ = run_stream([(X, y_bad, None)], config)
    huber_shift = np.max(np.abs(dirty.coefficients - clean.coefficients))
    ols_shift = np.max(
        np.abs(np.linalg.lstsq(with_ones(X), y_bad, rcond=None)[0]
               - np.linalg.lstsq(with_ones(X), y, rcond=None)[0])
    )
    assert huber_shift < 0.03
    assert ols_shift > 5.0


# ---------------------------------------------------------------- state transition


def test_state_counters_diagnostics_and_information_follow_the_spec():
    rng = np.random.default_rng(2)
    X1, y1 = linear_data(rng, 120, [1.0, 0.0, -1.0])
    X2, y2 = linear_data(rng, 90, [1.0, 0.0, -1.0])
    w2 = rng.uniform(0.0, 2.0, size=90)
    w2[:5] = 0.0
    config = make_config(3, penalty="l1", tol=L1_TOL, max_iter=3000, lambda_scale=0.5)
    state1, _ = run_stream([(X1, y1, None)], config)
    state2, (diag,) = run_stream([(X2, y2, w2)], config, state=state1)

    N = 120 + w2.sum()
    h = min(1.0 / (math.sqrt(N) * math.log(3)), config.tau)
    lam = 0.5 * config.tau * math.sqrt(math.log(3) / N)
    assert state2.n_samples_seen == 210
    assert state2.batch_count == 2
    assert state2.weight_sum == pytest.approx(N, rel=1e-14)
    assert state2.previous_lambda == pytest.approx(lam, rel=1e-14)
    assert diag.bandwidth == pytest.approx(h, rel=1e-14)
    assert diag.lambda_value == pytest.approx(lam, rel=1e-14)

    beta = state2.coefficients
    Xd = with_ones(X2)
    r = y2 - Xd @ beta
    c = curvature(r, config.tau, h)
    expected_J = state1.information + (Xd * (w2 * c)[:, None]).T @ Xd
    np.testing.assert_allclose(state2.information, expected_J, rtol=1e-12, atol=1e-10)
    np.testing.assert_array_equal(state2.information, state2.information.T)

    rho = np.where(np.abs(r) <= config.tau, r**2 / 2, config.tau * np.abs(r) - config.tau**2 / 2)
    delta = beta - state1.coefficients
    m = np.array([1.0, 1.0, 1.0, 0.0])
    lam0 = state1.previous_lambda
    smooth = (w2 @ rho + delta @ state1.information @ delta / 2) / N
    smooth -= 120 / N * lam0 * (np.sign(state1.coefficients) * m) @ delta
    expected_objective = smooth + lam * np.sum(np.abs(beta) * m)
    assert diag.objective == pytest.approx(expected_objective, rel=1e-10)


def test_inputs_are_never_mutated_nor_aliased():
    rng = np.random.default_rng(3)
    X, y = linear_data(rng, 50, [1.0, 2.0])
    w = rng.uniform(0.5, 1.5, size=50)
    config = make_config(2, penalty="l1", tol=1e-6)
    state, _ = run_stream([(X, y, None)], config)
    Xd = with_ones(X)
    copies = [a.copy() for a in (Xd, y, w, state.coefficients, state.information)]
    new_state, _ = core.renewable_update(np, state, Xd, y, w, config)
    originals = (Xd, y, w, state.coefficients, state.information)
    for before, after in zip(copies, originals, strict=True):
        np.testing.assert_array_equal(before, after)
    assert not np.shares_memory(new_state.coefficients, state.coefficients)
    assert not np.shares_memory(new_state.information, state.information)


# ---------------------------------------------------------------- estimating equations


def test_two_batch_solution_solves_the_renewable_estimating_equation():
    rng = np.random.default_rng(4)
    beta_true = [1.5, -0.5, 0.0, 2.0]
    X1, y1 = linear_data(rng, 200, beta_true)
    X2, y2 = linear_data(rng, 150, beta_true)
    y1 += 8.0 * rng.standard_t(2, size=200) * (rng.uniform(size=200) < 0.1)
    y2 += 8.0 * rng.standard_t(2, size=150) * (rng.uniform(size=150) < 0.1)
    config = make_config(4, ridge=0.0, tol=1e-12)
    state1, _ = run_stream([(X1, y1, None)], config)
    state2, (diag,) = run_stream([(X2, y2, None)], config, state=state1)
    assert diag.converged

    Xd2 = with_ones(X2)
    beta = state2.coefficients
    equation = -Xd2.T @ psi(y2 - Xd2 @ beta, config.tau) + state1.information @ (
        beta - state1.coefficients
    )
    assert np.max(np.abs(equation)) / 350 < 1e-10
    # and the equation is not trivially satisfied by the previous estimate
    at_previous = -Xd2.T @ psi(y2 - Xd2 @ state1.coefficients, config.tau)
    assert np.max(np.abs(at_previous)) / 350 > 1e-3


def test_l1_solution_satisfies_its_kkt_conditions():
    rng = np.random.default_rng(5)
    beta_true = np.array([2.0, 0.0, 0.0, -1.5, 0.0, 0.05, 0.0, 1.0])
    X1, y1 = linear_data(rng, 300, beta_true)
    X2, y2 = linear_data(rng, 200, beta_true)
    w2 = rng.integers(0, 3, size=200).astype(float)
    config = make_config(8, penalty="l1", tol=L1_TOL, max_iter=5000, lambda_scale=2.0)
    state1, (diag1,) = run_stream([(X1, y1, None)], config)
    state2, (diag2,) = run_stream([(X2, y2, w2)], config, state=state1)
    assert diag1.converged and diag2.converged

    N = state2.weight_sum
    lam = diag2.lambda_value
    Xd = with_ones(X2)
    beta = state2.coefficients
    m = np.r_[np.ones(8), 0.0]
    historical = state1.weight_sum / N * state1.previous_lambda * np.sign(state1.coefficients) * m
    g = (-Xd.T @ (w2 * psi(y2 - Xd @ beta, config.tau))
         + state1.information @ (beta - state1.coefficients)) / N - historical
    # a converged LAMM step is <= tol (1 + ||beta||); the gradient map it leaves behind is
    # within (phi + curvature) times that, both O(1) here
    slack = 5 * L1_TOL * (1 + np.linalg.norm(beta))
    penalised = np.arange(8)
    nonzero = penalised[beta[:8] != 0]
    zero = penalised[beta[:8] == 0]
    assert len(zero) >= 1 and len(nonzero) >= 3
    np.testing.assert_allclose(g[nonzero] + lam * np.sign(beta[nonzero]), 0.0, atol=slack)
    assert np.all(np.abs(g[zero]) <= lam + slack)
    assert abs(g[8]) < slack


def test_l1_with_zero_lambda_scale_equals_the_unpenalised_fit():
    rng = np.random.default_rng(6)
    beta_true = [1.0, -1.0, 0.0]
    batches = []
    for n in (150, 100, 120):
        X, y = linear_data(rng, n, beta_true)
        y += 6.0 * (rng.uniform(size=n) < 0.08)
        batches.append((X, y, None))
    l1, l1_diag = run_stream(
        batches, make_config(3, penalty="l1", lambda_scale=0.0, tol=L1_TOL, max_iter=5000)
    )
    none, _ = run_stream(batches, make_config(3, penalty="none", tol=1e-12))
    assert all(d.converged for d in l1_diag)
    assert all(d.lambda_value == 0.0 for d in l1_diag)
    np.testing.assert_allclose(l1.coefficients, none.coefficients, rtol=0, atol=10 * L1_TOL)
    scale = np.max(np.abs(none.information))
    np.testing.assert_allclose(l1.information, none.information, rtol=0, atol=1e-4 * scale)


# ---------------------------------------------------------------- weights


def test_integer_weights_equal_row_replication():
    rng = np.random.default_rng(7)
    X1, y1 = linear_data(rng, 60, [1.0, 2.0, -1.0])
    X2, y2 = linear_data(rng, 70, [1.0, 2.0, -1.0])
    y2[::9] += 15.0
    w1 = rng.integers(1, 4, size=60).astype(float)
    w2 = rng.integers(0, 4, size=70).astype(float)
    for penalty in ("none", "l1"):
        config = make_config(3, penalty=penalty, tol=TOL[penalty], max_iter=5000)
        batches = [(X1, y1, w1), (X2, y2, w2)]
        weighted = run_stream_states(batches, config)
        replicated = run_stream_states(
            [
                (np.repeat(X1, w1.astype(int), axis=0), np.repeat(y1, w1.astype(int)), None),
                (np.repeat(X2, w2.astype(int), axis=0), np.repeat(y2, w2.astype(int)), None),
            ],
            config,
        )
        assert_same_stream_up_to_rounding(batches, config, weighted, replicated)
        assert weighted[-1][0].weight_sum == replicated[-1][0].weight_sum


def test_zero_weight_rows_are_ignored_but_counted():
    rng = np.random.default_rng(8)
    X1, y1 = linear_data(rng, 80, [0.5, -0.5])
    X2, y2 = linear_data(rng, 60, [0.5, -0.5])
    junk_X = rng.normal(scale=50.0, size=(25, 2))
    junk_y = rng.normal(scale=1e4, size=25)
    X2_full = np.vstack([X2[:30], junk_X, X2[30:]])
    y2_full = np.r_[y2[:30], junk_y, y2[30:]]
    w2_full = np.r_[np.ones(30), np.zeros(25), np.ones(30)]
    for penalty in ("none", "l1"):
        config = make_config(2, penalty=penalty, tol=TOL[penalty], max_iter=5000)
        zeros_history = run_stream_states([(X1, y1, None), (X2_full, y2_full, w2_full)], config)
        without_history = run_stream_states([(X1, y1, None), (X2, y2, None)], config)
        # not bitwise: BLAS blocks the sums differently with the extra rows, and Newton's
        # plain non-increase test stops where f's rounding hides further decrease
        assert_same_stream_up_to_rounding(
            [(X1, y1, None), (X2, y2, None)], config, without_history, zeros_history
        )
        with_zeros, without = zeros_history[-1][0], without_history[-1][0]
        assert with_zeros.weight_sum == without.weight_sum == 140.0
        assert with_zeros.n_samples_seen == 165
        assert without.n_samples_seen == 140


# ---------------------------------------------------------------- ordering


def three_batches(seed):
    rng = np.random.default_rng(seed)
    batches = []
    for n in (90, 60, 120):
        X, y = linear_data(rng, n, [1.0, -2.0, 0.5])
        y[rng.uniform(size=n) < 0.1] += 20.0
        batches.append((X, y, rng.uniform(0.2, 2.0, size=n)))
    return batches


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_row_order_within_a_batch_does_not_matter(penalty):
    batches = three_batches(9)
    rng = np.random.default_rng(10)
    shuffled = []
    for X, y, w in batches:
        order = rng.permutation(len(y))
        shuffled.append((X[order], y[order], w[order]))
    config = make_config(3, penalty=penalty, tol=TOL[penalty], max_iter=5000)
    a = run_stream_states(batches, config)
    b = run_stream_states(shuffled, config)
    assert_same_stream_up_to_rounding(batches, config, a, b)


def test_batch_order_and_boundaries_are_part_of_the_computation():
    batches = three_batches(11)
    config = make_config(3, tol=1e-12)
    forward, _ = run_stream(batches, config)
    backward, _ = run_stream(batches[::-1], config)
    one_shot, _ = run_stream(
        [tuple(np.concatenate([b[k] for b in batches]) for k in range(3))], config
    )
    assert np.max(np.abs(forward.coefficients - backward.coefficients)) > 1e-5
    assert np.max(np.abs(forward.coefficients - one_shot.coefficients)) > 1e-5
    # all three estimate the same thing
    assert np.max(np.abs(forward.coefficients - one_shot.coefficients)) < 0.2


# ---------------------------------------------------------------- linear algebra paths


def test_rank_deficient_design_takes_the_minimum_norm_fallback():
    rng = np.random.default_rng(12)
    X, y = linear_data(rng, 200, [1.0, 2.0, -1.0])
    X = np.hstack([X, X[:, :1] - 2.0 * X[:, 1:2]])  # exactly collinear fourth column
    config = make_config(4, tau=100.0, ridge=0.0, tol=1e-12)
    state, (diag,) = run_stream([(X, y, None)], config)
    assert diag.used_regularized_fallback
    assert np.all(np.isfinite(state.coefficients))
    expected = np.linalg.lstsq(with_ones(X), y, rcond=None)[0]  # the minimum-norm solution
    np.testing.assert_allclose(state.coefficients, expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(state.coefficients, np.linalg.pinv(with_ones(X)) @ y, rtol=1e-8)


def test_asymmetric_information_is_solved_against_as_is():
    rng = np.random.default_rng(13)
    P = 4
    A = rng.normal(size=(P, P))
    J = 30.0 * (A @ A.T + P * np.eye(P)) + rng.normal(scale=8.0, size=(P, P))
    beta0 = rng.normal(size=P)
    state = RenewableState(beta0, J, n_samples_seen=40, batch_count=1, weight_sum=40.0)
    X, y = linear_data(rng, 100, [1.0, 0.0, -1.0])
    config = make_config(3, tau=1e3, ridge=0.0, tol=1e-13)
    new_state, (diag,) = run_stream([(X, y, None)], config, state=state)
    assert diag.converged and not diag.used_regularized_fallback

    # with every residual inside the quadratic zone, g(beta) = 0 is the linear system
    # (X'X + J)(beta - beta0) = X'(y - X beta0), with J taken as is
    Xd = with_ones(X)
    expected = beta0 + np.linalg.solve(Xd.T @ Xd + J, Xd.T @ (y - Xd @ beta0))
    np.testing.assert_allclose(new_state.coefficients, expected, rtol=1e-10)
    symmetrised = beta0 + np.linalg.solve(Xd.T @ Xd + (J + J.T) / 2, Xd.T @ (y - Xd @ beta0))
    assert np.max(np.abs(symmetrised - expected)) > 1e-4
    # the asymmetry is carried into the new information, not symmetrised away
    np.testing.assert_allclose(new_state.information - J, Xd.T @ Xd, rtol=1e-12, atol=1e-9)


# ---------------------------------------------------------------- dtype discipline


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_float32_stays_float32(penalty):
    rng = np.random.default_rng(14)
    batches = [(*linear_data(rng, 400, [1.0, -1.0, 2.0]), None) for _ in range(2)]
    config = make_config(3, penalty=penalty, tol=1e-5, max_iter=2000)
    single, diags = run_stream(batches, config, dtype=np.float32)
    double, _ = run_stream(batches, config, dtype=np.float64)
    assert single.coefficients.dtype == np.float32
    assert single.information.dtype == np.float32
    for diag in diags:
        assert type(diag.objective) is float
        assert type(diag.bandwidth) is float
        assert type(diag.lambda_value) is float
    assert type(single.weight_sum) is float and type(single.previous_lambda) is float
    np.testing.assert_allclose(single.coefficients, double.coefficients, rtol=1e-3, atol=1e-4)
    # J depends on beta through c, whose slope is 1/(2h): compare on the scale of J
    scale = np.max(np.abs(double.information))
    np.testing.assert_allclose(single.information, double.information, rtol=0, atol=1e-3 * scale)


# ---------------------------------------------------------------- misuse


def test_mixed_dtypes_are_refused_and_nothing_changes():
    rng = np.random.default_rng(15)
    X, y = linear_data(rng, 20, [1.0])
    config = make_config(1)
    state = RenewableState.empty(2, np.float32)
    with pytest.raises(ValidationError, match="X_design is float64"):
        core.renewable_update(np, state, with_ones(X), y.astype(np.float32), None, config)
    with pytest.raises(ValidationError, match="sample_weight is float64"):
        core.renewable_update(
            np, state, with_ones(X).astype(np.float32), y.astype(np.float32), np.ones(20), config
        )
    np.testing.assert_array_equal(state.coefficients, np.zeros(2, np.float32))


def test_missing_intercept_column_and_bad_shapes_are_refused():
    rng = np.random.default_rng(16)
    X, y = linear_data(rng, 20, [1.0, 2.0])
    config = make_config(2)
    state = RenewableState.empty(3, np.float64)
    with pytest.raises(ValidationError, match=r"X_design has shape \(20, 2\); expected \(n, 3\)"):
        core.renewable_update(np, state, X, y, None, config)
    with pytest.raises(ValidationError, match=r"y has shape \(19,\)"):
        core.renewable_update(np, state, with_ones(X), y[:19], None, config)
    with pytest.raises(ValidationError, match="state has coefficients"):
        small = RenewableState.empty(2, np.float64)
        core.renewable_update(np, small, with_ones(X), y, None, config)
    bad_penalty = dataclasses.replace(config, penalty="l2")
    with pytest.raises(ValidationError, match="penalty"):
        core.renewable_update(np, state, with_ones(X), y, None, bad_penalty)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_overflow_is_a_numerical_error_and_leaves_the_state_alone():
    # residuals are zero at beta0, so every row has full curvature and X'X overflows
    X = np.array([[1e200], [2e200], [-1e200]])
    y = np.array([1.0, 2.0, -1.0])
    config = make_config(1, fit_intercept=False)
    state = RenewableState(np.array([1e-200]), np.eye(1), n_samples_seen=4, batch_count=1,
                           weight_sum=4.0)
    with pytest.raises(EngineError, match="NUMERICAL_ERROR"):
        core.renewable_update(np, state, X, y, None, config)
    np.testing.assert_array_equal(state.coefficients, [1e-200])
    np.testing.assert_array_equal(state.information, np.eye(1))
