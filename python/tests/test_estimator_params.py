"""Constructor parameters: stored untouched, validated at fit with clear messages, and the
scikit-learn parameter protocol (get_params/set_params/clone)."""

import numpy as np
import pytest

from renewable_huber import (
    BackendUnavailableError,
    RenewableHuberRegressor,
    ValidationError,
)

X = np.arange(12.0).reshape(6, 2) % 5
Y = np.array([0.5, 1.0, -2.0, 3.0, 0.0, 1.5])

BAD_PARAMS = [
    ("tau", 0.0, "tau must be a finite real number > 0"),
    ("tau", -1.0, "tau must be a finite real number > 0"),
    ("tau", float("nan"), "tau must be a finite real number > 0"),
    ("tau", float("inf"), "tau must be a finite real number > 0"),
    ("tau", True, "tau must be a finite real number > 0"),
    ("tau", "1.345", "tau must be a finite real number > 0"),
    ("lambda_scale", -0.1, "lambda_scale must be a finite real number >= 0"),
    ("lambda_scale", False, "lambda_scale must be a finite real number >= 0"),
    ("bandwidth_scale", 0, "bandwidth_scale must be a finite real number > 0"),
    ("tol", 0.0, "tol must be a finite real number > 0"),
    ("tol", None, "tol must be a finite real number > 0"),
    ("ridge", -1e-9, "ridge must be a finite real number >= 0"),
    ("ridge", float("inf"), "ridge must be a finite real number >= 0"),
    ("max_iter", 0, "max_iter must be an integer >= 1"),
    ("max_iter", 2.0, "max_iter must be an integer >= 1"),
    ("max_iter", True, "max_iter must be an integer >= 1"),
    ("penalty", "l2", "penalty must be one of 'none', 'l1'"),
    ("penalty", None, "penalty must be one of 'none', 'l1'"),
    ("dtype", "float16", "dtype must be 'float32' or 'float64'"),
    ("dtype", None, "dtype must be 'float32' or 'float64'"),
    ("dtype", np.int64, "dtype must be 'float32' or 'float64'"),
    ("device", "tpu", "device must be one of 'auto', 'cpu', 'cuda'"),
    ("n_jobs", 0, "n_jobs must be None, -1 or a positive integer"),
    ("n_jobs", -2, "n_jobs must be None, -1 or a positive integer"),
    ("n_jobs", 1.5, "n_jobs must be None, -1 or a positive integer"),
    ("n_jobs", True, "n_jobs must be None, -1 or a positive integer"),
    ("fit_intercept", 1, "fit_intercept must be True or False"),
    ("cuda_graphs", "yes", "cuda_graphs must be True or False"),
    ("cuda_fast_math", 0, "cuda_fast_math must be True or False"),
    ("inference", "yes", "inference must be True or False"),
    ("inference", 1, "inference must be True or False"),
    ("inference", None, "inference must be True or False"),
    ("standardize", "yes", "standardize must be True or False"),
    ("standardize", 0, "standardize must be True or False"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_PARAMS)
def test_invalid_parameter_is_rejected_at_fit_with_its_name(name, value, message):
    estimator = RenewableHuberRegressor(**{name: value})
    assert getattr(estimator, name) is value  # the constructor only stores
    with pytest.raises(ValidationError, match=message):
        estimator.fit(X, Y)
    assert not hasattr(estimator, "coef_")


@pytest.mark.parametrize(("name", "value", "message"), BAD_PARAMS)
def test_invalid_parameter_is_rejected_at_partial_fit(name, value, message):
    with pytest.raises(ValidationError, match=message):
        RenewableHuberRegressor(**{name: value}).partial_fit(X, Y)


def test_unknown_backend_is_both_unavailable_and_a_validation_error():
    estimator = RenewableHuberRegressor(backend="tensorflow")
    with pytest.raises(BackendUnavailableError, match="backend must be one of"):
        estimator.fit(X, Y)
    with pytest.raises(ValidationError):
        estimator.fit(X, Y)


def test_cuda_fast_math_requires_float32():
    with pytest.raises(ValidationError, match="cuda_fast_math=True requires dtype='float32'"):
        RenewableHuberRegressor(cuda_fast_math=True).fit(X, Y)


def test_backend_device_mismatch_is_a_validation_error():
    with pytest.raises(BackendUnavailableError, match="backend 'numpy' runs on device 'cpu'"):
        RenewableHuberRegressor(backend="numpy", device="cuda").fit(X, Y)


@pytest.mark.parametrize(
    "params",
    [
        {"tau": 2, "max_iter": np.int64(5), "n_jobs": -1},
        {"dtype": np.float32, "lambda_scale": 0, "ridge": 0.0, "penalty": "l1"},
        {"dtype": np.dtype("float64"), "n_jobs": 3, "tol": np.float32(1e-4)},
    ],
)
def test_valid_spellings_are_accepted(params):
    estimator = RenewableHuberRegressor(backend="numpy", **params).fit(X, Y)
    assert estimator.coef_.shape == (2,)


def test_get_params_returns_every_constructor_parameter_as_given():
    params = RenewableHuberRegressor(tau=2.5, penalty="l1", n_jobs=4).get_params()
    assert params == {
        "tau": 2.5,
        "penalty": "l1",
        "lambda_scale": 1.0,
        "bandwidth_scale": 1.0,
        "fit_intercept": True,
        "max_iter": 100,
        "tol": 1e-6,
        "ridge": 1e-8,
        "backend": "auto",
        "device": "auto",
        "dtype": "float64",
        "n_jobs": 4,
        "cuda_graphs": False,
        "cuda_fast_math": False,
        "inference": False,
        "standardize": False,
    }


def test_get_params_set_params_round_trip():
    source = RenewableHuberRegressor(tau=0.7, max_iter=7, dtype="float32", backend="numpy")
    target = RenewableHuberRegressor().set_params(**source.get_params())
    assert target.get_params() == source.get_params()


def test_set_params_resets_the_stream():
    estimator = RenewableHuberRegressor(backend="numpy").fit(X, Y)
    assert estimator.n_samples_seen_ == 6
    returned = estimator.set_params(tau=3.0)
    assert returned is estimator
    assert estimator.tau == 3.0
    for attribute in ("coef_", "intercept_", "n_samples_seen_", "backend_", "diagnostics_"):
        assert not hasattr(estimator, attribute)
    estimator.partial_fit(X, Y)
    assert estimator.n_samples_seen_ == 6


def test_set_params_rejects_unknown_names_without_changing_anything():
    estimator = RenewableHuberRegressor(backend="numpy").fit(X, Y)
    coef = estimator.coef_.copy()
    with pytest.raises(ValidationError, match=r"invalid parameter\(s\) \['alpha'\]"):
        estimator.set_params(tau=9.0, alpha=1.0)
    assert estimator.tau == 1.345
    np.testing.assert_array_equal(estimator.coef_, coef)


def test_sklearn_clone_copies_parameters_and_not_the_fit():
    base = pytest.importorskip("sklearn.base")
    estimator = RenewableHuberRegressor(tau=2.0, penalty="l1", backend="numpy").fit(X, Y)
    twin = base.clone(estimator)
    assert type(twin) is RenewableHuberRegressor
    assert twin.get_params() == estimator.get_params()
    assert not hasattr(twin, "coef_")


def test_sklearn_sees_fitted_state():
    validation = pytest.importorskip("sklearn.utils.validation")
    estimator = RenewableHuberRegressor(backend="numpy")
    with pytest.raises(Exception, match="not fitted"):
        validation.check_is_fitted(estimator)
    validation.check_is_fitted(estimator.fit(X, Y))


def test_repr_lists_only_non_default_parameters():
    assert repr(RenewableHuberRegressor()) == "RenewableHuberRegressor()"
    assert (
        repr(RenewableHuberRegressor(tau=2.0, penalty="l1"))
        == "RenewableHuberRegressor(tau=2.0, penalty='l1')"
    )


def test_parameter_changed_mid_stream_without_reset_is_refused():
    estimator = RenewableHuberRegressor(backend="numpy").partial_fit(X, Y)
    estimator.fit_intercept = False
    with pytest.raises(ValidationError, match="changed since this stream started"):
        estimator.partial_fit(X, Y)
    assert estimator.n_samples_seen_ == 6


def test_sklearn_recognises_a_regressor():
    base = pytest.importorskip("sklearn.base")
    assert base.is_regressor(RenewableHuberRegressor())


# -------------------------------------------- parameters changed mid-stream (no set_params)
# The estimator reuses the last validation while every parameter is the very same immutable
# object; any change of object, or a parameter whose value could change in place, is validated
# again before the next batch.
MID_STREAM_BACKENDS = ["numpy", "native_cpu"]


def _mid_stream_estimator(request, backend):
    if backend == "native_cpu":
        request.getfixturevalue("cpu_library")
    return RenewableHuberRegressor(backend=backend, n_jobs=1 if backend == "native_cpu" else None)


@pytest.mark.parametrize("backend", MID_STREAM_BACKENDS)
@pytest.mark.parametrize(("name", "value", "message"), BAD_PARAMS)
def test_invalid_parameter_set_mid_stream_is_rejected_at_the_next_batch(
    request, backend, name, value, message
):
    estimator = _mid_stream_estimator(request, backend).partial_fit(X, Y)
    estimator.partial_fit(X, Y)
    good = getattr(estimator, name)
    coef = estimator.coef_.copy()
    setattr(estimator, name, value)
    with pytest.raises(ValidationError, match=message):
        estimator.partial_fit(X, Y)
    assert estimator.n_samples_seen_ == 12
    np.testing.assert_array_equal(estimator.coef_, coef)
    setattr(estimator, name, good)
    estimator.partial_fit(X, Y)
    assert estimator.n_samples_seen_ == 18


class _TunableFloat(float):
    """A float whose value as a number (float(x)) can change after it was stored."""

    def __new__(cls, value):
        instance = super().__new__(cls, value)
        instance.value = value
        return instance

    def __float__(self):
        return float(self.value)


@pytest.mark.parametrize("backend", MID_STREAM_BACKENDS)
def test_a_parameter_that_can_change_in_place_is_validated_at_every_batch(request, backend):
    estimator = _mid_stream_estimator(request, backend)
    estimator.tau = _TunableFloat(1.345)
    estimator.partial_fit(X, Y).partial_fit(X, Y)
    estimator.tau.value = float("nan")
    with pytest.raises(ValidationError, match="tau must be a finite real number > 0"):
        estimator.partial_fit(X, Y)
    assert estimator.n_samples_seen_ == 12


@pytest.mark.parametrize("backend", MID_STREAM_BACKENDS)
def test_valid_parameters_changed_mid_stream_apply_from_the_next_batch(request, backend):
    estimator = _mid_stream_estimator(request, backend).partial_fit(X, Y)
    assert estimator.diagnostics_["lambda_value"] == 0.0
    estimator.penalty = "l1"
    estimator.lambda_scale = 2.0
    estimator.tau = 0.9
    estimator.partial_fit(X, Y)
    # docs/algorithm.md: lambda = lambda_scale * tau * sqrt(ln(max(p, 2)) / N), N = 12 rows.
    expected = 2.0 * 0.9 * np.sqrt(np.log(2.0) / 12.0)
    assert estimator.diagnostics_["lambda_value"] == pytest.approx(expected, rel=1e-12)
    estimator.max_iter = 1
    estimator.lambda_scale = 0.5
    estimator.partial_fit(X, Y)
    assert estimator.n_iter_ <= 1
    expected = 0.5 * 0.9 * np.sqrt(np.log(2.0) / 18.0)
    assert estimator.diagnostics_["lambda_value"] == pytest.approx(expected, rel=1e-12)
    estimator.penalty = "none"
    estimator.partial_fit(X, Y)
    assert estimator.diagnostics_["lambda_value"] == 0.0


# ------------------------------------------- validation shared between estimators (by value)
def _counting_validation(monkeypatch):
    from renewable_huber import estimator as estimator_module

    calls = []
    real = estimator_module.validate_params

    def counted(params):
        calls.append(dict(params))
        return real(params)

    monkeypatch.setattr(estimator_module, "validate_params", counted)
    monkeypatch.setattr(estimator_module, "_VALIDATED_BY_VALUE", {})
    monkeypatch.setattr(estimator_module, "_last_validated_by_value", None)
    return calls


def test_estimators_with_equal_parameters_validate_them_once(monkeypatch):
    calls = _counting_validation(monkeypatch)
    first = RenewableHuberRegressor(tau=2.5, max_iter=40).fit(X, Y)
    second = RenewableHuberRegressor(tau=2.5, max_iter=40).fit(X, Y)
    assert len(calls) == 1
    np.testing.assert_array_equal(first.coef_, second.coef_)
    RenewableHuberRegressor(tau=2.0, max_iter=40).fit(X, Y)
    assert len(calls) == 2


@pytest.mark.parametrize(("name", "valid", "refused"), [
    ("fit_intercept", True, 1),
    ("max_iter", 1, True),
    ("cuda_graphs", False, 0),
    ("tau", 1.0, True),
])
def test_a_value_equal_to_a_validated_one_but_of_another_type_is_validated(
    monkeypatch, name, valid, refused
):
    _counting_validation(monkeypatch)
    RenewableHuberRegressor(**{name: valid})._validated_params()
    assert valid == refused  # equal (and equally hashed) as Python values
    with pytest.raises(ValidationError, match=name):
        RenewableHuberRegressor(**{name: refused}).partial_fit(X, Y)


def test_negative_zero_is_not_served_the_validation_of_zero(monkeypatch):
    _counting_validation(monkeypatch)
    zero = RenewableHuberRegressor(ridge=0.0)._validated_params()
    negative = RenewableHuberRegressor(ridge=-0.0)._validated_params()
    assert np.copysign(1.0, zero.ridge) == 1.0
    assert np.copysign(1.0, negative.ridge) == -1.0


def test_the_shared_validations_are_bounded(monkeypatch):
    from renewable_huber import estimator as estimator_module

    calls = _counting_validation(monkeypatch)
    monkeypatch.setattr(estimator_module, "_VALIDATED_BY_VALUE_LIMIT", 3)
    for tau in (1.0, 2.0, 3.0, 4.0, 5.0):
        RenewableHuberRegressor(tau=tau)._validated_params()
    assert len(estimator_module._VALIDATED_BY_VALUE) == 3
    RenewableHuberRegressor(tau=5.0)._validated_params()  # not kept: validated again
    RenewableHuberRegressor(tau=1.0)._validated_params()  # kept
    assert len(calls) == 6


def test_the_last_shared_validation_serves_only_its_very_objects(monkeypatch):
    calls = _counting_validation(monkeypatch)
    first = RenewableHuberRegressor(tau=2.5, max_iter=40)._validated_params()
    assert RenewableHuberRegressor(tau=2.5, max_iter=40)._validated_params() is first
    assert len(calls) == 1
    assert RenewableHuberRegressor(tau=2.0, max_iter=40)._validated_params().tau == 2.0
    assert RenewableHuberRegressor(max_iter=40)._validated_params().tau == 1.345
    # A value that can change in place is never shared, so the change is seen.
    tau = _TunableFloat(1.5)
    assert RenewableHuberRegressor(tau=tau)._validated_params().tau == 1.5
    tau.value = float("nan")
    with pytest.raises(ValidationError, match="tau must be a finite real number > 0"):
        RenewableHuberRegressor(tau=tau)._validated_params()


def test_set_params_on_an_estimator_sharing_its_validation_starts_its_own_stream(monkeypatch):
    _counting_validation(monkeypatch)
    first = RenewableHuberRegressor(tau=2.5).partial_fit(X, Y)
    second = RenewableHuberRegressor(tau=2.5).partial_fit(X, Y)
    second.set_params(tau=0.5).partial_fit(X, Y)
    assert (first.tau_, second.tau_, second.n_samples_seen_) == (2.5, 0.5, 6)
    np.testing.assert_array_equal(second.coef_, RenewableHuberRegressor(tau=0.5).fit(X, Y).coef_)
    first.partial_fit(X, Y)
    assert (first.tau_, first.n_samples_seen_) == (2.5, 12)


# --------------------------------------- update configs shared between estimators (cold streams)
def test_cold_streams_share_an_update_config_only_where_it_is_theirs(engine, monkeypatch):
    """Each stream's config (and with it a native engine's ABI struct) is the one its own
    parameters, p and tau give, whatever stream ran just before it in the process."""
    from renewable_huber import estimator as estimator_module

    def stream(X_, Y_, **params):
        model = RenewableHuberRegressor(**engine, **params).partial_fit(X_, Y_)
        return model.partial_fit(X_, Y_), model._config_cache[3]

    def alone(X_, Y_, **params):
        monkeypatch.setattr(estimator_module, "_last_config", None)
        return stream(X_, Y_, **params)[0].coef_

    first, config = stream(X, Y, tau=2.5)
    assert stream(X, Y, tau=2.5)[1] is config  # a cold stream with the same settings
    # Each differs from the stream before it in one thing only.
    for X_, Y_, params in [(X[:, :1], Y, {"tau": 2.5}), (X[:, :1], Y, {"tau": 2.0}),
                           (X[:, :1], Y, {"tau": 2.0, "max_iter": 7}),
                           (X, Y, {"tau": "auto"}), (X, Y * 10.0, {"tau": "auto"})]:
        model, other = stream(X_, Y_, **params)
        assert other is not config
        assert (other.n_features_in, other.tau, other.max_iter) == (
            X_.shape[1], model.tau_, params.get("max_iter", 100))
        np.testing.assert_array_equal(model.coef_, alone(X_, Y_, **params))
        config = other
    model, _ = stream(X, Y, tau=2.5)
    np.testing.assert_array_equal(model.coef_, first.coef_)
    model.set_params(tau=0.5).partial_fit(X, Y)
    assert model._config_cache[3].tau == 0.5
