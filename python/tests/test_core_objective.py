"""f, g and H of the renewable objective against finite differences and direct formulas."""

import dataclasses

import numpy as np
import pytest

from renewable_huber import core
from renewable_huber.config import UpdateConfig
from renewable_huber.state import RenewableState


def make_config(penalty="none", fit_intercept=True, p=4, tau=1.2, ridge=1e-3):
    return UpdateConfig(
        n_features_in=p,
        fit_intercept=fit_intercept,
        tau=tau,
        bandwidth_scale=1.0,
        tol=1e-10,
        ridge=ridge,
        max_iter=100,
        penalty=penalty,
        lambda_scale=0.7,
    )


def asymmetric_state(P, rng, n_samples_seen=50):
    A = rng.normal(size=(P, P))
    information = 40.0 * (A @ A.T + P * np.eye(P)) + rng.normal(scale=3.0, size=(P, P))
    assert not np.array_equal(information, information.T)
    coefficients = rng.normal(size=P)
    coefficients[1] = 0.0  # sign(0) = 0 must drop out of the historical term
    return RenewableState(
        coefficients=coefficients,
        information=information,
        n_samples_seen=n_samples_seen,
        batch_count=2,
        previous_lambda=0.3,
        weight_sum=61.5,
    )


def batch(rng, n=80, p=4):
    X = rng.normal(size=(n, p))
    y = X @ rng.normal(size=p) + rng.standard_t(2, size=n) * 2.0
    w = rng.uniform(0.0, 3.0, size=n)
    return X, y, w


def central_difference(f, beta, step=1e-6):
    grad = np.empty_like(beta)
    for j in range(beta.size):
        e = np.zeros_like(beta)
        e[j] = step
        grad[j] = (f(beta + e) - f(beta - e)) / (2 * step)
    return grad


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_gradient_is_the_derivative_of_the_objective(penalty):
    rng = np.random.default_rng(11)
    config = make_config(penalty)
    state = asymmetric_state(config.n_parameters, rng)
    J = state.information
    symmetric = dataclasses.replace(state, information=(J + J.T) / 2)
    X, y, w = batch(rng)
    problem = core.RenewableProblem.from_batch(
        np, symmetric, core.design_matrix(np, X, True), y, w, config
    )
    assert (problem.historical is not None) == (penalty == "l1")
    for _ in range(3):
        beta = rng.normal(size=config.n_parameters) * 2.0
        numeric = central_difference(lambda b: core.objective(problem, b), beta)
        np.testing.assert_allclose(core.gradient(problem, beta), numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_gradient_with_asymmetric_information_uses_j_delta_as_the_spec_says(penalty):
    # f only sees the symmetric part of J, so its derivative has (J + J')/2 delta where the
    # spec's g has J delta: they differ by exactly (J - J')/2 delta / N.
    rng = np.random.default_rng(12)
    config = make_config(penalty)
    state = asymmetric_state(config.n_parameters, rng)
    X, y, w = batch(rng)
    problem = core.RenewableProblem.from_batch(
        np, state, core.design_matrix(np, X, True), y, w, config
    )
    J = state.information
    for _ in range(3):
        beta = rng.normal(size=config.n_parameters) * 2.0
        numeric = central_difference(lambda b: core.objective(problem, b), beta)
        skew = (J - J.T) / 2 @ (beta - state.coefficients) / problem.weight_sum
        assert np.max(np.abs(skew)) > 1e-2
        np.testing.assert_allclose(
            core.gradient(problem, beta), numeric + skew, rtol=1e-6, atol=1e-7
        )


def test_objective_matches_the_spec_formula_with_the_historical_term():
    rng = np.random.default_rng(5)
    config = make_config("l1", fit_intercept=True)
    state = asymmetric_state(config.n_parameters, rng)
    X, y, w = batch(rng)
    Xd = np.hstack([X, np.ones((X.shape[0], 1))])
    problem = core.RenewableProblem.from_batch(np, state, Xd, y, w, config)
    beta = rng.normal(size=config.n_parameters)

    N = state.weight_sum + w.sum()
    r = y - Xd @ beta
    tau = config.tau
    rho = np.array([ri * ri / 2 if abs(ri) <= tau else tau * abs(ri) - tau * tau / 2 for ri in r])
    delta = beta - state.coefficients
    m = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    historical = state.weight_sum / N * state.previous_lambda * np.sign(state.coefficients) * m
    expected = (np.dot(w, rho) + delta @ state.information @ delta / 2) / N - historical @ delta
    assert core.objective(problem, beta) == pytest.approx(expected, rel=1e-13)
    np.testing.assert_allclose(problem.historical, historical, rtol=1e-15)
    assert problem.weight_sum == pytest.approx(N, rel=1e-15)


def test_no_historical_term_on_the_first_batch():
    config = make_config("l1")
    state = RenewableState.empty(config.n_parameters, np.float64)
    rng = np.random.default_rng(1)
    X, y, _ = batch(rng)
    problem = core.RenewableProblem.from_batch(
        np, state, core.design_matrix(np, X, True), y, None, config
    )
    assert problem.historical is None
    assert problem.weight_sum == X.shape[0]


def test_hessian_uses_the_smoothed_curvature_and_adds_ridge_after_dividing_by_n():
    rng = np.random.default_rng(8)
    config = make_config("none", fit_intercept=False, ridge=0.25)
    state = asymmetric_state(config.n_parameters, rng)
    X, y, w = batch(rng)
    problem = core.RenewableProblem.from_batch(np, state, X, y, w, config)
    beta = rng.normal(size=config.n_parameters)
    N = state.weight_sum + w.sum()
    h = problem.bandwidth
    r = y - X @ beta
    c = np.interp(np.abs(r), [0, config.tau - h, config.tau + h, 1e300], [1, 1, 0, 0])
    expected = (X.T @ np.diag(w * c) @ X + state.information) / N + 0.25 * np.eye(4)
    np.testing.assert_allclose(core.hessian(problem, beta), expected, rtol=1e-12, atol=1e-14)


def test_hessian_is_bitwise_symmetric_when_the_information_is():
    rng = np.random.default_rng(9)
    config = make_config("none", p=6)
    state = RenewableState.empty(config.n_parameters, np.float64)
    X, y, w = batch(rng, n=1000, p=6)
    problem = core.RenewableProblem.from_batch(
        np, state, core.design_matrix(np, X, True), y, w, config
    )
    H = core.hessian(problem, rng.normal(size=config.n_parameters))
    np.testing.assert_array_equal(H, H.T)
