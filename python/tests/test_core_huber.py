"""The Huber pieces against the analytic values of docs/algorithm.md."""

import math

import numpy as np
import pytest

from renewable_huber import core
from renewable_huber.exceptions import ValidationError


def test_curvature_matches_the_spec_check_values():
    r = np.array([-3.0, -2.5, -2.25, -2.0, -1.75, -1.5, 0.0])
    expected = np.array([0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0])
    np.testing.assert_allclose(core.smoothed_curvature(np, r, 2.0, 0.5), expected, atol=1e-15)


def test_curvature_is_symmetric_in_the_residual():
    r = np.array([3.0, 2.5, 2.25, 2.0, 1.75, 1.5, 1e-9])
    expected = np.array([0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0])
    np.testing.assert_allclose(core.smoothed_curvature(np, r, 2.0, 0.5), expected, atol=1e-15)


def test_curvature_with_bandwidth_equal_to_tau_is_a_tent():
    # h = tau leaves no plateau: the two ramps of the spec meet at r = 0 with c = 1.
    tau = 1.5
    r = np.linspace(-4.0, 4.0, 33)
    ramps = np.where(r <= 0, 0.5 + (r + tau) / (2 * tau), 0.5 - (r - tau) / (2 * tau))
    by_pieces = np.where(r < -2 * tau, 0.0, ramps)
    by_pieces = np.where(r > 2 * tau, 0.0, by_pieces)
    got = core.smoothed_curvature(np, r, tau, tau)
    np.testing.assert_allclose(got, by_pieces, atol=1e-15)


def test_huber_loss_analytic_values():
    r = np.array([-5.0, -1.0, 0.0, 0.5, 1.0, 3.0])
    # tau = 1: r^2/2 inside, |r| - 1/2 outside
    expected = np.array([4.5, 0.5, 0.0, 0.125, 0.5, 2.5])
    np.testing.assert_allclose(core.huber_loss(np, r, 1.0), expected, rtol=0, atol=1e-15)


def test_huber_score_is_the_clipped_residual():
    r = np.array([-5.0, -1.345, -0.2, 0.0, 0.7, 1.345, 9.0])
    expected = np.array([-1.345, -1.345, -0.2, 0.0, 0.7, 1.345, 1.345])
    np.testing.assert_array_equal(core.huber_score(np, r, 1.345), expected)


def test_huber_score_is_the_derivative_of_the_loss():
    r = np.array([-3.0, -0.4, 0.3, 2.2])
    step = 1e-6
    numeric = (core.huber_loss(np, r + step, 1.0) - core.huber_loss(np, r - step, 1.0)) / (2 * step)
    np.testing.assert_allclose(core.huber_score(np, r, 1.0), numeric, atol=1e-8)


def test_bandwidth_formula_and_cap():
    assert core.bandwidth(1.0, 400.0, 10, 1.345) == pytest.approx(1 / (20 * math.log(10)))
    # p = 1 uses ln 2
    assert core.bandwidth(2.0, 100.0, 1, 5.0) == pytest.approx(2 / (10 * math.log(2)))
    # a huge scale is capped at tau
    assert core.bandwidth(1e6, 4.0, 3, 0.8) == 0.8


def test_lambda_formula():
    assert core.lambda_value("none", 3.0, 1.345, 100.0, 10) == 0.0
    expected = 0.5 * 1.345 * math.sqrt(math.log(10) / 250.0)
    assert core.lambda_value("l1", 0.5, 1.345, 250.0, 10) == pytest.approx(expected, rel=1e-15)
    assert core.lambda_value("l1", 1.0, 2.0, 50.0, 1) == pytest.approx(
        2.0 * math.sqrt(math.log(2) / 50.0), rel=1e-15
    )


def test_lambda_rejects_an_unknown_penalty():
    with pytest.raises(ValidationError, match="penalty"):
        core.lambda_value("l2", 1.0, 1.0, 10.0, 3)


def test_soft_threshold():
    v = np.array([-3.0, -0.5, 0.0, 0.2, 2.0, 5.0])
    t = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(core.soft_threshold(np, v, t), [-2.0, 0.0, 0.0, 0.0, 1.0, 5.0])


def test_design_matrix_appends_the_intercept_last_as_a_copy():
    X = np.arange(6.0).reshape(3, 2)
    Xd = core.design_matrix(np, X, True)
    np.testing.assert_array_equal(Xd, [[0, 1, 1], [2, 3, 1], [4, 5, 1]])
    Xd[0, 0] = 99.0
    assert X[0, 0] == 0.0
    assert core.design_matrix(np, X, False) is X
    assert core.design_matrix(np, X.astype(np.float32), True).dtype == np.float32


def test_weighted_gram_is_exactly_symmetric_and_correct():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(257, 7))
    v = rng.uniform(0, 2, size=257)
    gram = core.weighted_gram(np, X, v)
    np.testing.assert_array_equal(gram, gram.T)
    reference = sum(v[i] * np.outer(X[i], X[i]) for i in range(X.shape[0]))
    np.testing.assert_allclose(gram, reference, rtol=1e-12, atol=1e-12)
