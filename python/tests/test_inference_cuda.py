"""The meat matrix K on librh_cuda (host and device input) against the NumPy reference, and the
56-byte state structs of callers built before K. Every test skips with a visible reason without
a GPU and librh_cuda."""

from __future__ import annotations

import numpy as np
import pytest
from inference_support import P_FEATURES, batches, config, reference_stream, state_fields

from renewable_huber import RenewableHuberRegressor
from renewable_huber.backends.native import NativeBackend
from renewable_huber.state import RenewableState

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("cuda_engine")]


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-7), (np.float32, 2e-3)])
def test_cuda_meat_equals_the_numpy_reference(dtype, rtol):
    data = batches()
    engine = NativeBackend("native_cuda", dtype=dtype, n_parameters=P_FEATURES + 1)
    for X, y, w in data:
        state, _ = engine.update(X.astype(dtype), y.astype(dtype), w.astype(dtype), config())
    expected = reference_stream(data, dtype)
    assert state.meat.dtype == np.float64
    np.testing.assert_allclose(state.meat, expected.meat, rtol=rtol,
                               atol=rtol * np.abs(expected.meat).max())
    np.testing.assert_array_equal(engine.state().meat, state.meat)


def test_cuda_meat_from_device_input_equals_host_input():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    data = batches(2)
    host = NativeBackend("native_cuda", dtype=np.float64, n_parameters=P_FEATURES + 1)
    device = NativeBackend("native_cuda", dtype=np.float64, n_parameters=P_FEATURES + 1)
    for X, y, w in data:
        a, _ = host.update(X, y, w, config())
        b, _ = device.update(cupy.asarray(X), cupy.asarray(y), cupy.asarray(w), config())
    np.testing.assert_allclose(b.meat, a.meat, rtol=1e-12)


def test_cuda_restore_without_meat_and_l1_end_k():
    data = batches()
    engine = NativeBackend("native_cuda", dtype=np.float64, n_parameters=P_FEATURES + 1)
    state, _ = engine.update(*data[0], config())
    engine.restore(RenewableState(**{**state_fields(state), "meat": None}))
    assert engine.state().meat is None
    engine.restore(state)
    np.testing.assert_array_equal(engine.state().meat, state.meat)
    after, _ = engine.update(*data[1], config("l1"))
    assert after.meat is None


def test_cuda_estimator_standard_errors_match_numpy():
    data = batches(3, n=3000, seed=5)
    fitted = {}
    for backend in ("numpy", "native_cuda"):
        model = RenewableHuberRegressor(inference=True, backend=backend, tol=1e-10)
        for X, y, w in data:
            model.partial_fit(X, y, sample_weight=w)
        fitted[backend] = model
    np.testing.assert_allclose(fitted["native_cuda"].bse_, fitted["numpy"].bse_, rtol=1e-7)


def test_cupy_backend_standard_errors_match_numpy():
    pytest.importorskip("cupy", reason="CuPy is not installed")
    data = batches(3, n=2000, seed=6)
    fitted = {}
    for backend in ("numpy", "cupy"):
        model = RenewableHuberRegressor(inference=True, backend=backend, tol=1e-10)
        for X, y, w in data:
            model.partial_fit(X, y, sample_weight=w)
        fitted[backend] = model
    assert fitted["cupy"].state_.meat.dtype == np.float64
    np.testing.assert_allclose(fitted["cupy"].bse_, fitted["numpy"].bse_, rtol=1e-7)
