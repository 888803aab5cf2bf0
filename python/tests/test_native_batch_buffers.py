"""native_cpu's per-engine batch structs and state landing buffers: what a batch returns is
the caller's own (never memory a later or failed batch writes), read-only and zero-row input
still reach the engine correctly, and the range rule's fast path for y stays silent under
strict NumPy error settings. Expected values come from a second, independent engine fed the
same batches."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor
from renewable_huber.backends.native import NativeBackend
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import ValidationError
from renewable_huber.state import RenewableState

pytestmark = pytest.mark.usefixtures("cpu_library")

P_FEATURES = 3


def _config() -> UpdateConfig:
    return UpdateConfig(n_features_in=P_FEATURES, fit_intercept=True, tau=1.345,
                        bandwidth_scale=1.0, tol=1e-8, ridge=1e-8, max_iter=100,
                        penalty="none", lambda_scale=1.0)


def _batch(seed: int, n: int = 50):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, P_FEATURES))
    return X, X @ np.array([1.0, -2.0, 0.5]) + 0.3 + rng.standard_t(3, size=n)


def _backend_with_meat() -> NativeBackend:
    backend = NativeBackend("native_cpu", dtype="float64", n_parameters=P_FEATURES + 1, n_jobs=1)
    backend.restore(RenewableState.empty(P_FEATURES + 1, np.float64, with_meat=True))
    return backend


def _arrays(state: RenewableState):
    return state.coefficients, state.information, state.meat


def test_returned_states_are_the_callers_own_across_later_and_failed_batches():
    backend, reference = _backend_with_meat(), _backend_with_meat()
    first, _ = backend.update(*_batch(1), None, _config())
    kept = [array.copy() for array in _arrays(first)]
    assert first.meat is not None
    # A refused batch (NaN in y, refused by the engine) and a committed one follow.
    X_bad, y_bad = _batch(2)
    y_bad[7] = np.nan
    with pytest.raises(ValidationError, match=r"y contains NaN or infinity \(first at index 7\)"):
        backend.update(X_bad, y_bad, None, _config())
    second, _ = backend.update(*_batch(3), None, _config())
    for array, before in zip(_arrays(first), kept, strict=True):
        np.testing.assert_array_equal(array, before)
    for a, b in zip(_arrays(first), _arrays(second), strict=True):
        assert not np.shares_memory(a, b)
    # Writing into a returned state changes neither the engine nor later states.
    for array in _arrays(second):
        array[...] = -7.0
    third, _ = backend.update(*_batch(4), None, _config())
    for seed in (1, 3, 4):
        expected, _ = reference.update(*_batch(seed), None, _config())
    for got, want in zip(_arrays(third), _arrays(expected), strict=True):
        np.testing.assert_array_equal(got, want)
    assert (third.batch_count, third.n_samples_seen) == (expected.batch_count, 150)
    backend.close()
    reference.close()


def test_state_without_k_returns_no_meat_after_a_stream_with_it():
    with_meat = _backend_with_meat()
    assert with_meat.update(*_batch(1), None, _config())[0].meat is not None
    without = NativeBackend("native_cpu", dtype="float64", n_parameters=P_FEATURES + 1)
    without.restore(RenewableState.empty(P_FEATURES + 1, np.float64, with_meat=False))
    assert without.update(*_batch(1), None, _config())[0].meat is None
    with_meat.close()
    without.close()


def test_read_only_input_is_read_in_place_like_writable_input():
    X, y = _batch(5)
    writable = RenewableHuberRegressor(backend="native_cpu").partial_fit(X, y)
    X_ro, y_ro = X.copy(), y.copy()
    X_ro.flags.writeable = y_ro.flags.writeable = False
    weights = np.linspace(0.5, 1.5, len(y))
    weights_ro = weights.copy()
    weights_ro.flags.writeable = False
    read_only = RenewableHuberRegressor(backend="native_cpu").partial_fit(X_ro, y_ro)
    np.testing.assert_array_equal(read_only.coef_, writable.coef_)
    assert read_only.intercept_ == writable.intercept_
    weighted = RenewableHuberRegressor(backend="native_cpu").partial_fit(X, y, weights)
    weighted_ro = RenewableHuberRegressor(backend="native_cpu").partial_fit(X_ro, y_ro, weights_ro)
    np.testing.assert_array_equal(weighted_ro.coef_, weighted.coef_)


def test_a_zero_row_batch_given_to_the_backend_directly_is_refused_and_changes_nothing():
    backend = _backend_with_meat()
    before, _ = backend.update(*_batch(1), None, _config())
    with pytest.raises(ValidationError, match="rh_cuda_engine_update_host_with_state failed"):
        backend.update(np.empty((0, P_FEATURES)), np.empty(0), None, _config())
    after = backend.state()
    for got, want in zip(_arrays(after), _arrays(before), strict=True):
        np.testing.assert_array_equal(got, want)
    assert after.batch_count == before.batch_count
    backend.close()


def test_an_overflowing_y_is_refused_by_the_range_rule_under_strict_numpy_errors():
    X, y = _batch(6)
    y[9] = 1e160  # y_i^2 overflows float64
    model = RenewableHuberRegressor(backend="native_cpu").partial_fit(*_batch(7))
    coef = model.coef_.copy()
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        with pytest.raises(ValidationError, match=r"^y is too large for float64") as caught:
            model.partial_fit(X, y)
    assert "the largest entry is at index 9 (value 1e+160)" in str(caught.value)
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.n_samples_seen_ == 50
