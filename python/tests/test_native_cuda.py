"""native_cuda on a GPU host: the reference within the golden tolerances, DLPack device input
from CuPy and PyTorch (with and without requires_grad), device predict returning the caller's
array type, transport violations as BackendContractError, CUDA Graphs on/off equal.

Every test here skips with a visible reason without a GPU and librh_cuda (RH_CUDA_LIBRARY,
$RH_BUILD_DIR/engines/cuda, or the installed package)."""

from __future__ import annotations

import numpy as np
import pytest
from float32_checks import assert_float32_close, flat_radius

from renewable_huber import _dlpack, core
from renewable_huber.backends.native import NativeBackend
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import BackendContractError, ValidationError
from renewable_huber.state import RenewableState

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("cuda_engine")]


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
        design = core.design_matrix(np, X, True)
        state, diag = core.renewable_update(np, state, design, y, w, config)
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
    X_new = batches[0][0][:5]
    if dtype == np.float64:
        rtol, atol = 2e-8, 3e-9
        np.testing.assert_allclose(state.coefficients, expected.coefficients, rtol=rtol, atol=atol)
        np.testing.assert_allclose(state.information, expected.information, rtol=rtol, atol=atol)
        np.testing.assert_allclose(diag.objective, expected_diag.objective, rtol=rtol, atol=atol)
        np.testing.assert_allclose(
            backend.predict(X_new),
            core.design_matrix(np, X_new.astype(np.float64), True) @ expected.coefficients,
            rtol=rtol, atol=atol,
        )
    else:
        # float32 engines stop where float32 stops resolving progress (docs/decisions.md
        # "Float32 oracle"), as the float32 reference does but not at the same place: both are
        # held to the float64 computation on the same float32 data.
        exact, _ = reference([tuple(a.astype(np.float64) for a in b) for b in batches], config,
                             np.float64)
        slack = flat_radius(exact, config, np.float32)
        assert_float32_close(state.coefficients, exact.coefficients, "coefficients", slack)
        gap_engine = np.max(np.abs(state.coefficients - exact.coefficients))
        gap_reference = np.max(np.abs(expected.coefficients - exact.coefficients))
        print(f"float32 {penalty}: engine {gap_engine:.2e}, float32 reference "
              f"{gap_reference:.2e} from the float64 computation (slack {slack:.2e})")
        assert_float32_close(
            backend.predict(X_new),
            core.design_matrix(np, X_new.astype(np.float64), True) @ exact.coefficients,
            "predictions", slack * float(np.max(np.abs(X_new).sum(axis=1)) + 1.0),
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


def test_cupy_batches_without_weights_are_read_without_dlpack(cupy, monkeypatch):
    # CupyBatchReader takes X and y from CuPy's attributes; a weighted batch still borrows
    # through DLPack. Both must give the host input's result.
    p = 6
    config = config_for(p)
    batches = stream(11, p, [90, 70], np.float64)
    host, device = cuda_backend(p, np.float64), cuda_backend(p, np.float64)

    def no_dlpack(self):
        raise AssertionError("a CuPy batch without weights went through DLPack")

    with monkeypatch.context() as patch:
        patch.setattr(_dlpack.Borrow, "__enter__", no_dlpack)
        for X, y, _ in batches:
            expected, _ = host.update(X, y, None, config)
            state, _ = device.update(cupy.asarray(X), cupy.asarray(y), None, config)
        np.testing.assert_allclose(state.coefficients, expected.coefficients, rtol=1e-12)
        X, y, w = batches[0]
        with pytest.raises(AssertionError, match="through DLPack"):
            device.update(cupy.asarray(X), cupy.asarray(y), cupy.asarray(w), config)
    host.close()
    device.close()


def test_device_input_produced_on_another_stream_is_ordered_before_the_engine(cupy):
    # X and y are written on a non-blocking CuPy stream behind a few milliseconds of matrix
    # products, and handed to the engine while that stream is current: an engine that did not
    # wait for it would read NaNs, the arrays' contents before they are written. (Weights would
    # not show it: their sum is read back on the producer's stream before the engine runs.)
    p = 8
    config = config_for(p)
    (X, y, _), = stream(13, p, [4096], np.float64)
    host = cuda_backend(p, np.float64)
    expected, _ = host.update(X, y, None, config)
    device = cuda_backend(p, np.float64)
    producer = cupy.cuda.Stream(non_blocking=True)
    with producer:
        X_dev = cupy.full(X.shape, cupy.nan)
        y_dev = cupy.full(y.shape, cupy.nan)
        a = cupy.random.default_rng(1).random((2048, 2048))
        for _ in range(12):
            a = a @ a
            a /= a.max()  # positive entries, the largest 1: a stays finite
        zero = 0.0 * a[0, 0]
        X_dev[...] = cupy.asarray(X) + zero
        y_dev[...] = cupy.asarray(y) + zero
        state, _ = device.update(X_dev, y_dev, None, config)
    producer.synchronize()
    assert float(zero) == 0.0  # the arrays' final contents are X and y themselves
    np.testing.assert_allclose(state.coefficients, expected.coefficients, rtol=1e-12)
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


# ------------------------------------- NaN/Inf through the estimator: the engine's own check
# native_cuda input that reaches the engine unchanged (device arrays always; host arrays in the
# working dtype, C-contiguous) is not scanned in Python: launch_validate_rows finds the first
# bad value and the backend names the user's array. A host cast is still scanned in Python.
NONFINITE_INPUTS = {
    # kind: (estimator dtype, input dtype, on device)
    "cupy float64": ("float64", np.float64, True),
    "cupy float32": ("float32", np.float32, True),
    "host float64 unchanged": ("float64", np.float64, False),
    "host float64 to float32 cast": ("float32", np.float64, False),
}
NONFINITE_FIELDS = {
    # estimator argument: (index written, position in the message, engine text after the struct,
    # {value} the kind: nan, inf or -inf, as str() of the value writes it)
    "X": ((3, 1), "row 3, column 1", r"x_design\[3, 1\] is {value}: values must be finite"),
    "y": ((5,), "index 5", r"y\[5\] is {value}: values must be finite"),
    # Weights reach the engine with their sum, which the engine checks first: a non-finite sum
    # is traced to its first bad weight in the backend.
    "sample_weight": ((2,), "index 2", None),
}
NONFINITE_CUDA_CASES = [
    pytest.param(kind, name, value, id=f"{kind}-{name}-{value}")
    for kind in NONFINITE_INPUTS
    for name in NONFINITE_FIELDS
    for value in (np.nan, np.inf, -np.inf)
    if not (name == "sample_weight" and value < 0)  # a negative weight: its own message
]


def _estimator_batch(request, kind, seed, n, p=4, bad=None):
    """(X, y, sample_weight) for the estimator, optionally with bad = (name, value) written."""
    _, input_dtype, on_device = NONFINITE_INPUTS[kind]
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    arrays = {
        "X": X.astype(input_dtype),
        "y": (X @ np.linspace(-1.0, 1.0, p) + rng.standard_t(3, size=n)).astype(input_dtype),
        "sample_weight": rng.uniform(0.5, 1.5, size=n).astype(input_dtype),
    }
    if bad is not None:
        name, value = bad
        arrays[name][NONFINITE_FIELDS[name][0]] = value
    if on_device:
        cupy = request.getfixturevalue("cupy")
        arrays = {key: cupy.asarray(array) for key, array in arrays.items()}
    return arrays["X"], arrays["y"], arrays["sample_weight"]


def _expected_nonfinite(kind, name, value):
    dtype, input_dtype, on_device = NONFINITE_INPUTS[kind]
    _, where, engine_text = NONFINITE_FIELDS[name]
    message = rf"^{name} contains NaN or infinity \(first at {where}\)"
    if engine_text is None or np.dtype(input_dtype) != np.dtype(dtype):
        return message + "$"
    call, struct = (
        ("rh_cuda_engine_update_device_with_state", "RhCudaDeviceBatch") if on_device
        else ("rh_cuda_engine_update_host_with_state", "RhCudaHostBatch")
    )
    engine_text = engine_text.format(value=value)
    return message + rf": {call} failed with INVALID_ARGUMENT: {struct}\.{engine_text}$"


def _fitted_snapshot(estimator):
    """The estimator's fitted attributes and the engine's own committed state."""
    engine = estimator._backend.state()
    return {
        "coef_": estimator.coef_.copy(),
        "intercept_": estimator.intercept_,
        "n_samples_seen_": estimator.n_samples_seen_,
        "n_iter_": estimator.n_iter_,
        "diagnostics_": dict(estimator.diagnostics_),
        "state_coefficients": estimator.state_.coefficients,
        "engine_coefficients": engine.coefficients,
        "engine_information": engine.information,
        "engine_counters": (engine.n_samples_seen, engine.batch_count, engine.previous_lambda,
                            engine.weight_sum),
    }


def _assert_same_snapshot(before, after):
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(after[key], value, err_msg=key)
        else:
            assert after[key] == value, key


@pytest.mark.parametrize(("kind", "name", "value"), NONFINITE_CUDA_CASES)
def test_estimator_nonfinite_first_batch_names_the_array_and_fits_nothing(
    request, kind, name, value
):
    from renewable_huber import NotFittedError, RenewableHuberRegressor

    estimator = RenewableHuberRegressor(backend="native_cuda", dtype=NONFINITE_INPUTS[kind][0])
    bad = _estimator_batch(request, kind, 1, 40, bad=(name, value))
    message = _expected_nonfinite(kind, name, value)
    with pytest.raises(ValidationError, match=message):
        estimator.partial_fit(*bad)
    assert not hasattr(estimator, "coef_") and estimator._backend is None
    with pytest.raises(NotFittedError):
        estimator.predict(_estimator_batch(request, kind, 2, 5)[0])
    with pytest.raises(ValidationError, match=message):
        estimator.fit(*bad)
    assert not hasattr(estimator, "coef_")


@pytest.mark.parametrize(("kind", "name", "value"), NONFINITE_CUDA_CASES)
def test_estimator_nonfinite_later_batch_changes_nothing(request, kind, name, value):
    from renewable_huber import RenewableHuberRegressor

    dtype = NONFINITE_INPUTS[kind][0]
    estimator = RenewableHuberRegressor(backend="native_cuda", dtype=dtype)
    estimator.partial_fit(*_estimator_batch(request, kind, 1, 60))
    before = _fitted_snapshot(estimator)
    bad = _estimator_batch(request, kind, 2, 30, bad=(name, value))
    message = _expected_nonfinite(kind, name, value)
    for call in (estimator.partial_fit, estimator.fit):
        with pytest.raises(ValidationError, match=message):
            call(*bad)
        _assert_same_snapshot(before, _fitted_snapshot(estimator))
    # The stream goes on as if the bad batch never came.
    estimator.partial_fit(*_estimator_batch(request, kind, 3, 30))
    clean = RenewableHuberRegressor(backend="native_cuda", dtype=dtype)
    clean.partial_fit(*_estimator_batch(request, kind, 1, 60))
    clean.partial_fit(*_estimator_batch(request, kind, 3, 30))
    rtol = 1e-12 if dtype == "float64" else 1e-6
    np.testing.assert_allclose(estimator.coef_, clean.coef_, rtol=rtol, atol=rtol)
    assert estimator.n_samples_seen_ == clean.n_samples_seen_ == 90


def test_estimator_torch_nonfinite_weight_is_located(torch):
    from renewable_huber import RenewableHuberRegressor

    rng = np.random.default_rng(4)
    X = torch.tensor(rng.normal(size=(40, 3)), device="cuda")
    y = torch.tensor(rng.normal(size=40), device="cuda")
    w = torch.ones(40, dtype=torch.float64, device="cuda", requires_grad=True)
    with torch.no_grad():
        w[7] = float("nan")
    with pytest.raises(ValidationError, match=r"^sample_weight contains NaN or infinity "
                                              r"\(first at index 7\)$"):
        RenewableHuberRegressor(backend="native_cuda").partial_fit(X, y, sample_weight=w)
