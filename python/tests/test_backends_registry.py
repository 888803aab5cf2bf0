"""The backend registry: names, availability reasons, "auto" resolution and construction."""

import sys

import numpy as np
import pytest

from renewable_huber import (
    BackendUnavailableError,
    RenewableHuberRegressor,
    RenewableState,
    ValidationError,
    backends,
)
from renewable_huber.config import UpdateConfig


def test_backend_names():
    assert backends.BACKENDS == ("numpy", "cupy", "native_cpu", "native_cuda")


def test_numpy_is_always_available():
    assert backends.unavailable_reason("numpy") is None


def test_unknown_backend_name_is_refused():
    with pytest.raises(BackendUnavailableError, match="unknown backend 'jax'"):
        backends.unavailable_reason("jax")
    with pytest.raises(BackendUnavailableError, match="backend must be one of"):
        backends.choose_backend("jax", "auto")


def test_missing_cupy_gives_a_reason_with_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    reason = backends.unavailable_reason("cupy")
    assert "CuPy is not installed" in reason and "pip install cupy" in reason
    with pytest.raises(BackendUnavailableError, match="backend 'cupy' is unavailable: CuPy"):
        backends.choose_backend("cupy", "auto")
    with pytest.raises(BackendUnavailableError, match="backend 'cupy' is unavailable"):
        backends.create_backend("cupy", dtype=np.float64, n_parameters=3, n_jobs=None,
                                cuda_graphs=False, cuda_fast_math=False)
    estimator = RenewableHuberRegressor(backend="cupy")
    with pytest.raises(BackendUnavailableError, match="CuPy is not installed"):
        estimator.fit(np.eye(3), np.ones(3))
    assert not hasattr(estimator, "coef_")


def test_a_new_stream_asks_whether_its_backend_is_available_once(monkeypatch):
    asked = []
    real = backends.unavailable_reason

    def counted(name):
        asked.append(name)
        return real(name)

    monkeypatch.setattr(backends, "unavailable_reason", counted)
    estimator = RenewableHuberRegressor(backend="numpy").fit(np.eye(3), np.ones(3))
    assert asked == ["numpy"]  # choose_backend's; the construction that follows trusts it
    estimator.partial_fit(np.eye(3), np.ones(3))
    assert asked == ["numpy"]
    backends.create_backend("numpy", dtype=np.float64, n_parameters=3, n_jobs=None,
                            cuda_graphs=False, cuda_fast_math=False)
    assert asked == ["numpy", "numpy"]  # on its own, construction still asks


def test_native_binding_that_cannot_import_is_unavailable(monkeypatch):
    def broken_import():
        raise ImportError("librh symbols missing")

    monkeypatch.setattr(backends, "_native_module", broken_import)
    for name in ("native_cpu", "native_cuda"):
        reason = backends.unavailable_reason(name)
        assert reason == "the native engine binding could not be imported (librh symbols missing)"
    assert backends.choose_backend("auto", "auto") == ("numpy", "cpu")
    with pytest.raises(BackendUnavailableError, match="backend 'native_cpu' is unavailable"):
        backends.choose_backend("native_cpu", "cpu")


def fake_availability(monkeypatch, available):
    monkeypatch.setattr(
        backends,
        "unavailable_reason",
        lambda name: None if name in available else f"{name} is missing in this test",
    )


@pytest.mark.parametrize(
    ("available", "device", "expected"),
    [
        ({"numpy", "native_cpu", "native_cuda", "cupy"}, "auto", ("native_cpu", "cpu")),
        ({"numpy", "native_cpu", "native_cuda", "cupy"}, "cpu", ("native_cpu", "cpu")),
        ({"numpy", "native_cuda", "cupy"}, "auto", ("numpy", "cpu")),
        ({"numpy", "native_cpu", "native_cuda", "cupy"}, "cuda", ("native_cuda", "cuda")),
        ({"numpy", "native_cpu", "cupy"}, "cuda", ("cupy", "cuda")),
    ],
)
def test_auto_resolution(monkeypatch, available, device, expected):
    fake_availability(monkeypatch, available)
    assert backends.choose_backend("auto", device) == expected


def test_auto_never_picks_cuda_without_device_cuda(monkeypatch):
    fake_availability(monkeypatch, {"native_cuda", "cupy", "numpy"})
    assert backends.choose_backend("auto", "auto")[1] == "cpu"


def test_auto_on_cuda_with_nothing_available_names_both_reasons(monkeypatch):
    fake_availability(monkeypatch, {"numpy", "native_cpu"})
    with pytest.raises(BackendUnavailableError) as error:
        backends.choose_backend("auto", "cuda")
    message = str(error.value)
    assert "native_cuda: native_cuda is missing" in message
    assert "cupy: cupy is missing" in message


@pytest.mark.parametrize(
    ("backend", "device", "expected"),
    [("numpy", "auto", ("numpy", "cpu")), ("numpy", "cpu", ("numpy", "cpu")),
     ("cupy", "auto", ("cupy", "cuda")), ("native_cuda", "cuda", ("native_cuda", "cuda")),
     ("native_cpu", "auto", ("native_cpu", "cpu"))],
)
def test_explicit_backend_resolves_its_device(monkeypatch, backend, device, expected):
    fake_availability(monkeypatch, set(backends.BACKENDS))
    assert backends.choose_backend(backend, device) == expected


@pytest.mark.parametrize(("backend", "device"), [("numpy", "cuda"), ("native_cpu", "cuda"),
                                                 ("cupy", "cpu"), ("native_cuda", "cpu")])
def test_explicit_backend_on_the_wrong_device_is_unavailable(monkeypatch, backend, device):
    """As in renewable-huber 0.7: the backend is unavailable on that device."""
    fake_availability(monkeypatch, set(backends.BACKENDS))
    with pytest.raises(BackendUnavailableError, match=f"backend '{backend}' runs on device"):
        backends.choose_backend(backend, device)


def test_unknown_device_is_a_validation_error():
    with pytest.raises(ValidationError, match="device must be one of"):
        backends.choose_backend("auto", "gpu")


def test_create_numpy_backend_matches_the_protocol():
    backend = backends.create_backend("numpy", dtype=np.float32, n_parameters=3, n_jobs=2,
                                      cuda_graphs=False, cuda_fast_math=False)
    assert (backend.name, backend.device, backend.dtype, backend.n_jobs) == (
        "numpy", "cpu", np.dtype(np.float32), None)
    backend.restore(RenewableState.empty(3, np.float32))
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]], dtype=np.float32)
    y = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    config = UpdateConfig(n_features_in=2, fit_intercept=True, tau=100.0, bandwidth_scale=1.0,
                          tol=1e-7, ridge=0.0, max_iter=50, penalty="none", lambda_scale=1.0)
    state, diagnostics = backend.update(X, y, None, config)
    # tau far above every residual: ordinary least squares, solved independently.
    ols = np.linalg.lstsq(np.c_[X.astype(float), np.ones(4)], y.astype(float), rcond=None)[0]
    np.testing.assert_allclose(state.coefficients, ols, rtol=1e-4, atol=1e-5)
    assert state.coefficients.dtype == np.float32
    assert (state.n_samples_seen, state.batch_count, state.weight_sum) == (4, 1, 4.0)
    np.testing.assert_allclose(backend.predict(X), np.c_[X, np.ones(4)] @ ols, rtol=1e-4)
    # The returned state is the caller's: changing it does not touch the committed one.
    state.coefficients[:] = 0.0
    assert backend.predict(X)[0] != 0.0


def test_numpy_backend_restore_checks_the_shape():
    backend = backends.create_backend("numpy", dtype=np.float64, n_parameters=3, n_jobs=None,
                                      cuda_graphs=False, cuda_fast_math=False)
    with pytest.raises(ValidationError, match="created for 3 parameters"):
        backend.restore(RenewableState.empty(4, np.float64))


def test_auto_warns_when_a_named_engine_library_is_broken(monkeypatch, tmp_path):
    broken = tmp_path / "librh_cpu.so"
    broken.write_bytes(b"not a shared library")
    monkeypatch.setenv("RH_CPU_LIBRARY", str(broken))
    with pytest.warns(RuntimeWarning, match=r"backend='auto' uses numpy: native_cpu: .*librh_cpu"):
        assert backends.choose_backend("auto", "cpu") == ("numpy", "cpu")


def test_auto_falls_back_quietly_when_no_engine_is_installed(monkeypatch, tmp_path):
    import warnings

    from renewable_huber import _loader

    monkeypatch.delenv("RH_CPU_LIBRARY", raising=False)
    monkeypatch.setattr(_loader, "PACKAGE_LIBRARY_DIR", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert backends.choose_backend("auto", "cpu") == ("numpy", "cpu")
