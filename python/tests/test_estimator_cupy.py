"""The cupy backend: the reference core on the GPU. Skipped, with the reason, where CuPy or
a GPU is absent."""

import numpy as np
import pytest

from renewable_huber import (
    BackendContractError,
    RenewableHuberRegressor,
    ValidationError,
    backends,
)

_REASON = backends.unavailable_reason("cupy")
pytestmark = [
    pytest.mark.cupy,
    pytest.mark.skipif(_REASON is not None, reason=f"cupy backend unavailable: {_REASON}"),
]


@pytest.fixture
def cp():
    import cupy

    return cupy


def make_batches(n_batches=3, n=80, p=5, seed=2):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        X = rng.normal(size=(n, p))
        out.append((X, X @ np.arange(1.0, p + 1) - 0.5 + rng.standard_t(3, size=n)))
    return out


# float32 information gets a looser bound: a residual within rounding of a curvature knot
# (+-tau +-h) changes its row's weight, and GPU and CPU round residuals differently.
@pytest.mark.parametrize(("dtype", "rtol", "information_rtol"),
                         [("float64", 1e-9, 1e-9), ("float32", 4e-4, 1e-2)])
@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_cupy_matches_numpy_on_host_input(dtype, rtol, information_rtol, penalty):
    gpu = RenewableHuberRegressor(backend="cupy", dtype=dtype, penalty=penalty)
    cpu = RenewableHuberRegressor(backend="numpy", dtype=dtype, penalty=penalty)
    for X, y in make_batches():
        gpu.partial_fit(X, y)
        cpu.partial_fit(X, y)
    assert gpu.backend_ == "cupy" and gpu.device_ == "cuda"
    assert gpu.coef_.dtype == np.dtype(dtype)
    assert isinstance(gpu.state_.coefficients, np.ndarray)
    np.testing.assert_allclose(gpu.state_.coefficients, cpu.state_.coefficients,
                               rtol=rtol, atol=rtol)
    np.testing.assert_allclose(gpu.state_.information, cpu.state_.information,
                               rtol=information_rtol, atol=information_rtol)
    prediction = gpu.predict(make_batches(1, seed=9)[0][0])
    expected = cpu.predict(make_batches(1, seed=9)[0][0])
    assert isinstance(prediction, np.ndarray)
    # Predictions near zero carry the absolute error of the larger terms they cancel.
    np.testing.assert_allclose(prediction, expected, rtol=rtol,
                               atol=rtol * float(np.abs(expected).max()))


def test_device_input_is_used_on_the_device_and_predict_returns_cupy(cp):
    batches = make_batches()
    gpu = RenewableHuberRegressor(backend="cupy")
    cpu = RenewableHuberRegressor(backend="numpy")
    for X, y in batches:
        gpu.partial_fit(cp.asarray(X), cp.asarray(y), cp.ones(len(y)))
        cpu.partial_fit(X, y)
    np.testing.assert_allclose(gpu.coef_, cpu.coef_, rtol=1e-9)
    prediction = gpu.predict(cp.asarray(batches[0][0]))
    assert isinstance(prediction, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(prediction), cpu.predict(batches[0][0]), rtol=1e-9)
    assert gpu.score(cp.asarray(batches[0][0]), cp.asarray(batches[0][1])) == pytest.approx(
        cpu.score(*batches[0]), rel=1e-9
    )


def test_device_input_rules(cp):
    X, y = make_batches(1)[0]
    estimator = RenewableHuberRegressor(backend="cupy").fit(X, y)
    coef = estimator.coef_.copy()
    bad = cp.asarray(X)
    bad[4, 2] = cp.nan
    with pytest.raises(ValidationError, match="X contains NaN or infinity"):
        estimator.partial_fit(bad, cp.asarray(y))
    with pytest.raises(BackendContractError, match="device array of dtype float32"):
        estimator.partial_fit(cp.asarray(X, dtype=cp.float32), cp.asarray(y))
    with pytest.raises(BackendContractError, match="pass all arrays on the same device"):
        estimator.partial_fit(cp.asarray(X), y)
    with pytest.raises(ValidationError, match="sample_weight must be >= 0"):
        estimator.partial_fit(cp.asarray(X), cp.asarray(y), -cp.ones(len(y)))
    with pytest.raises(ValidationError, match="X has 4 features"):
        estimator.predict(cp.asarray(X[:, :4]))
    np.testing.assert_array_equal(estimator.coef_, coef)
    assert estimator.n_samples_seen_ == 80


def test_cupy_arrays_on_the_numpy_backend_are_a_contract_error(cp):
    X, y = make_batches(1)[0]
    with pytest.raises(BackendContractError, match=r"X is a device array \(cupy\)"):
        RenewableHuberRegressor(backend="numpy").fit(cp.asarray(X), cp.asarray(y))


def test_torch_cuda_tensors_are_accepted_and_predictions_come_back_as_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    X, y = make_batches(1)[0]
    tX = torch.tensor(X, device="cuda", requires_grad=True)
    ty = torch.tensor(y, device="cuda")
    gpu = RenewableHuberRegressor(backend="cupy").fit(tX, ty)
    cpu = RenewableHuberRegressor(backend="numpy").fit(X, y)
    np.testing.assert_allclose(gpu.coef_, cpu.coef_, rtol=1e-9)
    prediction = gpu.predict(tX)
    assert isinstance(prediction, torch.Tensor) and prediction.is_cuda
    np.testing.assert_allclose(prediction.cpu().numpy(), cpu.predict(X), rtol=1e-9)


def test_cupy_checkpoint_resumes_on_numpy(tmp_path):
    batches = make_batches()
    gpu = RenewableHuberRegressor(backend="cupy")
    for X, y in batches[:2]:
        gpu.partial_fit(X, y)
    gpu.save(tmp_path / "gpu.npz")
    resumed = RenewableHuberRegressor.load(tmp_path / "gpu.npz", backend="numpy")
    resumed.partial_fit(*batches[2])
    gpu.partial_fit(*batches[2])
    assert resumed.backend_ == "numpy"
    np.testing.assert_allclose(resumed.state_.coefficients, gpu.state_.coefficients, rtol=1e-9)
