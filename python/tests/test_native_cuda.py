"""native_cuda on a GPU host: the reference within the golden tolerances, DLPack device input
from CuPy and PyTorch (with and without requires_grad), device predict returning the caller's
array type, transport violations as BackendContractError, CUDA Graphs on/off equal.

Every test here skips with a visible reason without a GPU and librh_cuda (RH_CUDA_LIBRARY,
$RH_BUILD_DIR/engines/cuda, or the installed package)."""

from __future__ import annotations

import numpy as np
import pytest

from renewable_huber import core
from renewable_huber.backends.native import NativeBackend, unavailable_reason
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import BackendContractError, ValidationError
from renewable_huber.state import RenewableState

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module", autouse=True)
def cuda_available(cuda_library):
    reason = unavailable_reason("native_cuda")
    if reason is not None:
        pytest.skip(f"native_cuda unavailable here: {reason}")
    return cuda_library


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy", reason="CuPy is not installed")


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


def config_for(p: int, penalty="none", tol=1e-6) -> UpdateConfig:
    return UpdateConfig(n_features_in=p, fit_intercept=True, tau=1.345, bandwidth_scale=1.0,
                        tol=tol, ridge=1e-8, max_iter=100, penalty=penalty, lambda_scale=1.0)


def stream(seed: int, p: int, sizes, dtype):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=p)
    out = []
    for n in sizes:
        X = rng.normal(size=(n, p))
        y = X @ beta + rng.standard_t(3, size=n) + 20.0 * (rng.random(n) < 0.05)
        w = rng.uniform(0.0, 2.0, size=n)
        w[rng.random(n) < 0.2] = 0.0
        out.append((X.astype(dtype), y.astype(dtype), w.astype(dtype)))
    return out


def reference(batches, config, dtype):
    state = RenewableState.empty(config.n_parameters, dtype)
    for X, y, w in batches:
        state, diag = core.renewable_update(np, state, core.design_matrix(np, X, True), y, w, config)
    return state, diag


def cuda_backend(p: int, dtype, **kwargs) -> NativeBackend:
    return NativeBackend("native_cuda", dtype=dtype, n_parameters=p + 1, **kwargs)


@pytest.mark.parametrize("penalty", ["none", "l1"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_host_input_matches_reference(dtype, penalty):
    p = 12
    config = config_for(p, penalty)
    batches = stream(3, p, [200, 60, 9], dtype)
    expected, expected_diag = reference(batches, config, dtype)
    backend = cuda_backend(p, dtype)
    for X, y, w in batches:
        state, diag = backend.update(X, y, w, config)
    if diag.iterations != expected_diag.iterations:
        print(f"native_cuda {dtype.__name__} {penalty}: {diag.iterations} it, "
              f"reference {expected_diag.iterations}")
    rtol, atol = (2e-8, 3e-9) if dtype == np.float64 else (4e-4, 4e-4)
    np.testing.assert_allclose(state.coefficients, expected.coefficients, rtol=rtol, atol=atol)
    if dtype == np.float64:
        np.testing.assert_allclose(state.information, expected.information, rtol=rtol, atol=atol)
        np.testing.assert_allclose(diag.objective, expected_diag.objective, rtol=rtol, atol=atol)
    X_new = batches[0][0][:5]
    np.testing.assert_allclose(
        backend.predict(X_new),
        core.design_matrix(np, X_new.astype(np.float64), True) @ expected.coefficients,
        rtol=rtol, atol=atol,
    )
    backend.close()


def test_cupy_device_input_equals_host_input(cupy):
    p = 8
    config = config_for(p)
    batches = stream(5, p, [150, 40], np.float64)
    host, device = cuda_backend(p, np.float64), cuda_backend(p, np.float64)
    for X, y, w in batches:
        host_state, _ = host.update(X, y, w, config)
        device_state, _ = device.update(cupy.asarray(X), cupy.asarray(y), cupy.asarray(w), config)
    np.testing.assert_allclose(device_state.coefficients, host_state.coefficients, rtol=1e-12)
    prediction = device.predict(cupy.asarray(batches[0][0]))
    assert isinstance(prediction, cupy.ndarray) and prediction.dtype == np.float64
    np.testing.assert_allclose(cupy.asnumpy(prediction), host.predict(batches[0][0]), rtol=1e-12)
    host.close()
    device.close()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_torch_device_input_and_predict_return_torch(torch, requires_grad):
    p = 6
    config = config_for(p)
    (X, y, w), = stream(7, p, [120], np.float32)
    host = cuda_backend(p, np.float32)
    expected, _ = host.update(X, y, w, config)
    device = cuda_backend(p, np.float32)
    X_t = torch.tensor(X, device="cuda", requires_grad=requires_grad)
    state, _ = device.update(X_t, torch.tensor(y, device="cuda"), torch.tensor(w, device="cuda"),
                             config)
    np.testing.assert_allclose(state.coefficients, expected.coefficients, rtol=1e-6, atol=1e-6)
    prediction = device.predict(X_t)
    assert isinstance(prediction, torch.Tensor) and prediction.is_cuda
    assert prediction.dtype == torch.float32
    np.testing.assert_allclose(prediction.cpu().numpy(), host.predict(X), rtol=1e-5, atol=1e-5)
    host.close()
    device.close()


def test_wrong_dtype_layout_and_device_are_contract_errors(cupy):
    p = 4
    config = config_for(p)
    backend = cuda_backend(p, np.float64)
    backend.update(*stream(1, p, [50], np.float64)[0], config)
    before = backend.state()
    X, y, _ = stream(2, p, [30], np.float64)[0]
    cases = [
        (cupy.asarray(X, dtype=cupy.float32), cupy.asarray(y), "float32"),
        (cupy.asfortranarray(cupy.asarray(X)), cupy.asarray(y), "C-contiguous"),
        (cupy.asarray(X)[::2], cupy.asarray(y)[::2], "C-contiguous"),
    ]
    for X_dev, y_dev, message in cases:
        with pytest.raises(BackendContractError, match=message):
            backend.update(X_dev, y_dev, None, config)
    with pytest.raises(ValidationError, match="shape"):
        backend.update(cupy.asarray(X), cupy.asarray(y[:-1]), None, config)
    if cupy.cuda.runtime.getDeviceCount() > 1:
        with cupy.cuda.Device(1):
            other = cupy.asarray(X)
        with pytest.raises(BackendContractError, match="device 1"):
            backend.update(other, cupy.asarray(y), None, config)
    after = backend.state()
    np.testing.assert_array_equal(after.coefficients, before.coefficients)
    assert after.batch_count == before.batch_count
    backend.close()


def test_cuda_graphs_on_and_off_give_equal_results():
    p = 10
    config = config_for(p)
    batches = stream(9, p, [300, 300, 300, 300], np.float64)
    results = []
    for graphs in (False, True):
        backend = cuda_backend(p, np.float64, cuda_graphs=graphs)
        for X, y, w in batches:
            state, _ = backend.update(X, y, w, config)
        results.append((state, backend.features))
        backend.close()
    np.testing.assert_allclose(results[1][0].coefficients, results[0][0].coefficients, rtol=1e-12)
    np.testing.assert_allclose(results[1][0].information, results[0][0].information, rtol=1e-12)
    assert results[0][1]["requested"] == [] and "cuda_graphs" in results[1][1]["requested"]


def test_fast_math_with_float32_is_reported():
    backend = cuda_backend(3, np.float32, cuda_fast_math=True)
    assert "fast_math" in backend.features["requested"]
    backend.close()
