"""The demo's simulation design: shapes, determinism and the distributional properties the
demo's claims rest on (AR(0.5) correlation, t(3) errors, ~5% outliers shifted by ~20)."""

import math

import numpy as np
import pytest

from renewable_huber.simulation import simulate, true_coefficients

N = 100_000
P = 6


@pytest.fixture(scope="module")
def data():
    return simulate(N, P, seed=7)


def clean_errors(d):
    return (d.y - d.X @ d.true_coef - d.true_intercept)[~d.is_outlier]


def t3_two_sided_tail(t):
    """P(|T| > t) for Student t with 3 degrees of freedom, from its closed-form CDF."""
    u = t / math.sqrt(3.0)
    cdf = 0.5 + (u / (1.0 + u * u) + math.atan(u)) / math.pi
    return 2.0 * (1.0 - cdf)


def test_shapes_and_parameter_order(data):
    assert data.X.shape == (N, P)
    assert data.y.shape == (N,)
    assert data.is_outlier.shape == (N,) and data.is_outlier.dtype == bool
    np.testing.assert_array_equal(data.true_parameters[:-1], data.true_coef)
    assert data.true_parameters[-1] == data.true_intercept == 1.0


def test_true_coefficients_follow_the_documented_pattern():
    np.testing.assert_array_equal(true_coefficients(6), [1.0, -1.5, 2.0, -1.0, 1.5, -2.0])


def test_same_seed_gives_identical_data_and_another_seed_does_not():
    a, b, c = simulate(500, 3, seed=11), simulate(500, 3, seed=11), simulate(500, 3, seed=12)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.is_outlier, b.is_outlier)
    assert not np.array_equal(a.X, c.X)


def test_outlier_fraction_is_five_percent_within_binomial_noise(data):
    sd = math.sqrt(0.05 * 0.95 / N)
    assert abs(data.is_outlier.mean() - 0.05) < 5 * sd


def test_features_have_unit_variance_and_ar_half_correlation(data):
    corr = np.corrcoef(data.X, rowvar=False)
    lags = np.abs(np.subtract.outer(np.arange(P), np.arange(P)))
    np.testing.assert_allclose(corr, 0.5 ** lags, atol=0.015)
    np.testing.assert_allclose(data.X.var(axis=0), 1.0, atol=0.02)


def test_clean_errors_are_centred_t3(data):
    errors = clean_errors(data)
    assert abs(np.median(errors)) < 0.02
    for t in (1.0, 3.0, 6.0):
        expected = t3_two_sided_tail(t)
        observed = np.mean(np.abs(errors) > t)
        assert abs(observed - expected) < 5 * math.sqrt(expected * (1 - expected) / errors.size)


def test_outliers_are_shifted_up_by_about_twenty(data):
    shifted = (data.y - data.X @ data.true_coef - data.true_intercept)[data.is_outlier]
    # shift N(20, 25) plus a t(3) error (variance 3): mean 20, sd sqrt(28)
    assert abs(shifted.mean() - 20.0) < 5 * math.sqrt(28.0 / shifted.size)
    assert shifted.min() > 0.0


def test_without_outliers_no_row_is_flagged():
    assert not simulate(1000, 2, seed=0, outlier_fraction=0.0).is_outlier.any()


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"n_rows": 0, "n_features": 2}, "n_rows"),
        ({"n_rows": 10, "n_features": 0}, "n_features"),
        ({"n_rows": True, "n_features": 2}, "n_rows"),
        ({"n_rows": 10, "n_features": 2, "rho": 1.0}, "rho"),
        ({"n_rows": 10, "n_features": 2, "outlier_fraction": 1.5}, "outlier_fraction"),
        ({"n_rows": 10, "n_features": 2, "error_df": 0.0}, "error_df"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, word):
    with pytest.raises(ValueError, match=word):
        simulate(**kwargs)
