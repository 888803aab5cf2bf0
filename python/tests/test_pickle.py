"""pickle, copy.deepcopy and joblib of an estimator on every backend: the pickled form holds
the parameters and the committed state (never an engine handle), and the copy continues the
stream bit for bit as the original does."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor
from renewable_huber.backends import unavailable_reason


def _batches(seed=3, n=120, p=4, count=3):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=p)
    out = []
    for _ in range(count):
        X = rng.normal(size=(n, p))
        out.append((X, X @ beta + 0.5 + rng.standard_t(3, size=n)))
    return out


def _host(array):
    """A NumPy copy of a host or CuPy array."""
    return array.get() if hasattr(array, "get") else np.asarray(array)


def _joblib_round_trip(model):
    joblib = pytest.importorskip("joblib")
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


ROUND_TRIPS = {
    "pickle": lambda model: pickle.loads(pickle.dumps(model)),
    "deepcopy": copy.deepcopy,
    "joblib": _joblib_round_trip,
}


@pytest.fixture(params=["numpy", "native_cpu",
                        pytest.param("native_cuda", marks=pytest.mark.cuda),
                        pytest.param("cupy", marks=pytest.mark.cuda)])
def backend_params(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
    if request.param == "native_cuda":
        request.getfixturevalue("cuda_library")
    reason = unavailable_reason(request.param)
    if reason is not None:
        pytest.skip(f"{request.param} unavailable here: {reason}")
    device = "cuda" if request.param in ("native_cuda", "cupy") else "auto"
    return {"backend": request.param, "device": device}


@pytest.mark.parametrize("penalty", ["none", "l1"])
@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
def test_a_fitted_estimator_round_trips_and_resumes_bit_for_bit(backend_params, how, penalty):
    first, second, third = _batches()
    original = RenewableHuberRegressor(penalty=penalty, **backend_params)
    original.partial_fit(*first).partial_fit(*second)
    twin = ROUND_TRIPS[how](original)
    assert twin is not original and twin._backend is not original._backend
    assert twin.get_params() == original.get_params()
    assert twin.backend_ == original.backend_ and twin.n_iter_ == original.n_iter_
    assert twin.diagnostics_ == original.diagnostics_
    for name in ("coefficients", "information"):
        np.testing.assert_array_equal(_host(getattr(twin.state_, name)),
                                      _host(getattr(original.state_, name)))
    np.testing.assert_array_equal(_host(twin.predict(third[0])),
                                  _host(original.predict(third[0])))
    original.partial_fit(*third)
    twin.partial_fit(*third)
    np.testing.assert_array_equal(_host(twin.state_.coefficients),
                                  _host(original.state_.coefficients))
    np.testing.assert_array_equal(_host(twin.state_.information),
                                  _host(original.state_.information))
    assert twin.state_.n_samples_seen == original.state_.n_samples_seen == 360


def test_an_unfitted_estimator_round_trips_as_its_parameters():
    model = RenewableHuberRegressor(tau=2.0, penalty="l1", dtype="float32")
    for how, round_trip in ROUND_TRIPS.items():
        twin = round_trip(model)
        assert twin.get_params() == model.get_params(), how
        assert not hasattr(twin, "coef_")


def test_the_pickle_holds_no_engine_handle(cpu_library):
    model = RenewableHuberRegressor(backend="native_cpu").fit(*_batches()[0])
    data = pickle.dumps(model)
    assert b"ctypes" not in data and b"NativeBackend" not in data


def test_feature_names_survive_a_pickle():
    pandas = pytest.importorskip("pandas")
    X, y = _batches()[0]
    frame = pandas.DataFrame(X, columns=["a", "b", "c", "d"])
    twin = pickle.loads(pickle.dumps(RenewableHuberRegressor(backend="numpy").fit(frame, y)))
    assert list(twin.feature_names_in_) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(twin.predict(frame), twin.predict(X))
