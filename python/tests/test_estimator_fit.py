"""The estimator computes what the NumPy reference core computes, and exposes it through
the documented fitted attributes. Expected values come from the core called directly
(its own tests pin it to the spec) or from independent formulas."""

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor, RenewableState
from renewable_huber.config import UpdateConfig
from renewable_huber.core import design_matrix, renewable_update
from renewable_huber.diagnostics import stop_reason


def make_stream(n_batches=3, n=60, p=4, seed=0):
    rng = np.random.default_rng(seed)
    beta = np.linspace(-1.5, 2.0, p)
    batches = []
    for _ in range(n_batches):
        X = rng.normal(size=(n, p))
        y = X @ beta + 0.7 + rng.standard_t(3, size=n)
        y[rng.random(n) < 0.05] += 25.0
        batches.append((X, y))
    return batches


def reference(batches, *, dtype=np.float64, fit_intercept=True, weights=None, **settings):
    config_values = dict(tau=1.345, bandwidth_scale=1.0, tol=1e-6, ridge=1e-8, max_iter=100,
                         penalty="none", lambda_scale=1.0)
    config_values.update(settings)
    p = batches[0][0].shape[1]
    config = UpdateConfig(n_features_in=p, fit_intercept=fit_intercept, **config_values)
    state = RenewableState.empty(config.n_parameters, dtype)
    diagnostics = None
    for index, (X, y) in enumerate(batches):
        w = None if weights is None else np.asarray(weights[index], dtype=dtype)
        design = design_matrix(np, np.ascontiguousarray(X, dtype=dtype), fit_intercept)
        state, diagnostics = renewable_update(
            np, state, design, np.asarray(y, dtype=dtype), w, config
        )
    return state, diagnostics


def stream(estimator, batches, weights=None):
    for index, (X, y) in enumerate(batches):
        estimator.partial_fit(X, y, None if weights is None else weights[index])
    return estimator


@pytest.mark.parametrize("penalty", ["none", "l1"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_partial_fit_stream_equals_the_reference_core(penalty, fit_intercept):
    batches = make_stream()
    estimator = stream(
        RenewableHuberRegressor(backend="numpy", penalty=penalty, fit_intercept=fit_intercept),
        batches,
    )
    state, diagnostics = reference(batches, penalty=penalty, fit_intercept=fit_intercept)
    np.testing.assert_array_equal(estimator.state_.coefficients, state.coefficients)
    np.testing.assert_array_equal(estimator.state_.information, state.information)
    np.testing.assert_array_equal(estimator.coef_, state.coefficients[:4])
    if fit_intercept:
        assert estimator.intercept_ == state.coefficients[4]
    else:
        assert estimator.intercept_ == 0.0
    assert estimator.n_iter_ == diagnostics.iterations
    # diagnostics_ adds the reason derived from (converged, iterations, max_iter, penalty).
    assert estimator.diagnostics_ == {
        **diagnostics.as_dict(),
        "stop_reason": stop_reason(diagnostics.converged, diagnostics.iterations,
                                   estimator.max_iter, penalty),
    }
    assert estimator.n_samples_seen_ == 180
    assert estimator.state_.batch_count == 3
    assert estimator.state_.weight_sum == 180.0


def test_fitted_attributes_and_their_types():
    estimator = RenewableHuberRegressor(backend="numpy").fit(*make_stream(1)[0])
    assert estimator.coef_.shape == (4,)
    assert estimator.n_features_in_ == 4
    assert estimator.backend_ == "numpy"
    assert estimator.device_ == "cpu"
    assert estimator.n_jobs_ is None
    assert set(estimator.diagnostics_) == {
        "iterations", "converged", "objective", "lambda_value", "bandwidth",
        "used_regularized_fallback", "stop_reason",
    }
    assert estimator.diagnostics_["stop_reason"] is None
    assert estimator.diagnostics_["converged"] is True
    assert estimator.diagnostics_["lambda_value"] == 0.0
    # h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau), N = 60, p = 4
    assert estimator.diagnostics_["bandwidth"] == pytest.approx(1.0 / (np.sqrt(60) * np.log(4)))
    assert not hasattr(estimator, "cuda_features_")
    assert not hasattr(estimator, "feature_names_in_")


def test_auto_backend_on_cpu_records_its_choice():
    estimator = RenewableHuberRegressor().fit(*make_stream(1)[0])
    assert estimator.backend_ in ("native_cpu", "numpy")
    assert estimator.device_ == "cpu"


def test_state_and_coef_are_defensive_copies():
    estimator = RenewableHuberRegressor(backend="numpy").fit(*make_stream(1)[0])
    expected = estimator.predict(make_stream(1)[0][0])
    estimator.state_.coefficients[:] = 1e6
    estimator.state_.information[:] = 0.0
    estimator.coef_[:] = 1e6
    np.testing.assert_array_equal(estimator.predict(make_stream(1)[0][0]), expected)
    assert estimator.state_.coefficients[0] != 1e6


def test_fit_equals_reset_then_partial_fit():
    batches = make_stream()
    estimator = stream(RenewableHuberRegressor(backend="numpy"), batches)
    estimator.fit(*batches[2])
    fresh = RenewableHuberRegressor(backend="numpy").reset().partial_fit(*batches[2])
    np.testing.assert_array_equal(estimator.state_.coefficients, fresh.state_.coefficients)
    np.testing.assert_array_equal(estimator.state_.information, fresh.state_.information)
    assert estimator.n_samples_seen_ == 60
    assert estimator.state_.batch_count == 1


def test_reset_forgets_the_stream():
    estimator = stream(RenewableHuberRegressor(backend="numpy"), make_stream())
    assert estimator.reset() is estimator
    for attribute in ("coef_", "intercept_", "n_features_in_", "n_samples_seen_", "n_iter_",
                      "backend_", "device_", "n_jobs_", "diagnostics_", "state_"):
        assert not hasattr(estimator, attribute)
    estimator.partial_fit(*make_stream(1, p=2)[0])  # a new stream may change the width
    assert estimator.n_features_in_ == 2


@pytest.fixture(params=["numpy", "native_cpu"])
def backend_name(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
    return request.param


def test_reset_reuses_the_backend_holding_the_empty_state(backend_name):
    batches = make_stream()
    estimator = stream(RenewableHuberRegressor(backend=backend_name), batches)
    kept = estimator._backend
    estimator.reset()
    estimator.partial_fit(*batches[2])
    fresh = RenewableHuberRegressor(backend=backend_name).partial_fit(*batches[2])
    assert estimator._backend is kept
    np.testing.assert_array_equal(estimator.state_.coefficients, fresh.state_.coefficients)
    np.testing.assert_array_equal(estimator.state_.information, fresh.state_.information)
    assert estimator.n_samples_seen_ == 60 and estimator.state_.batch_count == 1


def test_reset_backend_is_not_reused_for_another_layout_or_width(backend_name):
    batches = make_stream()
    estimator = stream(RenewableHuberRegressor(backend=backend_name), batches)
    kept = estimator._backend
    estimator.reset().partial_fit(*make_stream(1, p=2)[0])  # another number of parameters
    assert estimator._backend is not kept and estimator.n_features_in_ == 2
    kept = estimator._backend
    estimator.set_params(dtype="float32")  # another stream layout
    estimator.partial_fit(*batches[0])
    assert estimator._backend is not kept
    assert estimator.state_.coefficients.dtype == np.float32
    fresh = RenewableHuberRegressor(backend=backend_name, dtype="float32").partial_fit(*batches[0])
    np.testing.assert_array_equal(estimator.state_.coefficients, fresh.state_.coefficients)


def test_refused_batch_after_reset_leaves_the_kept_backend_empty(backend_name):
    batches = make_stream()
    estimator = stream(RenewableHuberRegressor(backend=backend_name), batches)
    kept = estimator._backend
    estimator.reset()
    X, y = batches[1]
    bad = y.copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="y"):
        estimator.partial_fit(X, bad)
    assert not hasattr(estimator, "coef_")
    estimator.partial_fit(X, y)
    fresh = RenewableHuberRegressor(backend=backend_name).partial_fit(X, y)
    assert estimator._backend is kept
    np.testing.assert_array_equal(estimator.state_.coefficients, fresh.state_.coefficients)
    assert estimator.n_samples_seen_ == 60


def test_float32_stays_float32():
    batches = make_stream()
    estimator = stream(RenewableHuberRegressor(backend="numpy", dtype="float32"), batches)
    state, _ = reference(batches, dtype=np.float32)
    assert estimator.coef_.dtype == np.float32
    assert np.asarray(estimator.intercept_).dtype == np.float32
    assert estimator.state_.coefficients.dtype == np.float32
    assert estimator.state_.information.dtype == np.float32
    assert estimator.predict(batches[0][0]).dtype == np.float32
    np.testing.assert_array_equal(estimator.state_.coefficients, state.coefficients)
    double = stream(RenewableHuberRegressor(backend="numpy"), batches)
    np.testing.assert_allclose(estimator.coef_, double.coef_, rtol=4e-4, atol=4e-4)


def test_sample_weights_reach_the_core_and_integer_weights_equal_replication():
    batches = make_stream(2, n=30)
    rng = np.random.default_rng(3)
    weights = [rng.integers(0, 4, size=30).astype(float) for _ in batches]
    weighted = stream(RenewableHuberRegressor(backend="numpy"), batches, weights)
    state, _ = reference(batches, weights=weights)
    np.testing.assert_array_equal(weighted.state_.coefficients, state.coefficients)
    assert weighted.state_.weight_sum == sum(float(w.sum()) for w in weights)
    assert weighted.n_samples_seen_ == 60  # zero-weight rows are counted
    replicated = stream(
        RenewableHuberRegressor(backend="numpy"),
        [(np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int)))
         for (X, y), w in zip(batches, weights, strict=True)],
    )
    np.testing.assert_allclose(weighted.coef_, replicated.coef_, rtol=1e-9, atol=1e-10)


def test_predict_is_the_linear_model():
    X, y = make_stream(1)[0]
    estimator = RenewableHuberRegressor(backend="numpy").fit(X, y)
    np.testing.assert_allclose(
        estimator.predict(X), X @ estimator.coef_ + estimator.intercept_, rtol=1e-13
    )


def test_large_tau_without_ridge_is_ordinary_least_squares():
    X, y = make_stream(1)[0]
    estimator = RenewableHuberRegressor(backend="numpy", tau=1e4, ridge=0.0).fit(X, y)
    design = np.c_[X, np.ones(len(X))]
    ols = np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(estimator.coef_, ols[:4], rtol=1e-10, atol=1e-12)
    assert estimator.intercept_ == pytest.approx(ols[4], abs=1e-12)


def r2_by_hand(y, prediction, weights):
    mean = np.sum(weights * y) / np.sum(weights)
    return 1 - np.sum(weights * (y - prediction) ** 2) / np.sum(weights * (y - mean) ** 2)


def test_score_is_r2_and_matches_scikit_learn():
    batches = make_stream(2)
    estimator = RenewableHuberRegressor(backend="numpy").fit(*batches[0])
    X, y = batches[1]
    weights = np.random.default_rng(5).uniform(0, 3, size=len(y))
    prediction = estimator.predict(X)
    assert estimator.score(X, y) == pytest.approx(r2_by_hand(y, prediction, np.ones_like(y)),
                                                  rel=1e-12)
    assert estimator.score(X, y, weights) == pytest.approx(r2_by_hand(y, prediction, weights),
                                                           rel=1e-12)
    metrics = pytest.importorskip("sklearn.metrics")
    assert estimator.score(X, y) == pytest.approx(metrics.r2_score(y, prediction), rel=1e-12)
    assert estimator.score(X, y, sample_weight=weights) == pytest.approx(
        metrics.r2_score(y, prediction, sample_weight=weights), rel=1e-12
    )
    assert isinstance(estimator.score(X, y), float)


def test_score_of_a_constant_target():
    # Zero features and zero target: the gradient at beta = 0 vanishes, so the fit is exactly
    # 0 and its predictions are perfect for a zero target.
    X = np.zeros((5, 1))
    estimator = RenewableHuberRegressor(backend="numpy", fit_intercept=False).fit(X, np.zeros(5))
    np.testing.assert_array_equal(estimator.predict(X), np.zeros(5))
    assert estimator.score(X, np.zeros(5)) == 1.0
    assert estimator.score(X, np.full(5, 3.0)) == 0.0


def test_sklearn_cross_validation_runs_the_estimator():
    model_selection = pytest.importorskip("sklearn.model_selection")
    X = np.vstack([b[0] for b in make_stream()])
    y = np.concatenate([b[1] for b in make_stream()])
    scores = model_selection.cross_val_score(RenewableHuberRegressor(backend="numpy"), X, y, cv=3)
    folds = np.array_split(np.arange(len(y)), 3)
    expected = []
    for fold in folds:
        train = np.setdiff1d(np.arange(len(y)), fold)
        model = RenewableHuberRegressor(backend="numpy").fit(X[train], y[train])
        expected.append(model.score(X[fold], y[fold]))
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
