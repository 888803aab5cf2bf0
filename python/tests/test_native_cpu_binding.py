"""native_cpu through the binding: concurrency, thread counts, features, and every error path
raising the right exception with the engine's message while leaving the state untouched."""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
import pytest

from renewable_huber import _abi
from renewable_huber._loader import load_engine_library
from renewable_huber.backends.native import NativeBackend, _OpenMPThreads, unavailable_reason
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import (
    BackendContractError,
    BackendUnavailableError,
    EngineError,
    ValidationError,
)
from renewable_huber.state import RenewableState

pytestmark = pytest.mark.usefixtures("cpu_library")


def config_for(p: int, *, fit_intercept=True, penalty="none", **overrides) -> UpdateConfig:
    values = dict(
        n_features_in=p, fit_intercept=fit_intercept, tau=1.345, bandwidth_scale=1.0, tol=1e-6,
        ridge=1e-8, max_iter=100, penalty=penalty, lambda_scale=1.0,
    )
    values.update(overrides)
    return UpdateConfig(**values)


def batch(seed: int, n: int, p: int, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X @ np.linspace(-1.0, 1.0, p) + rng.standard_t(3, size=n)
    return X.astype(dtype), y.astype(dtype)


def backend_for(p: int, dtype=np.float64, **kwargs) -> NativeBackend:
    return NativeBackend("native_cpu", dtype=dtype, n_parameters=p + 1, **kwargs)


def assert_states_equal(a: RenewableState, b: RenewableState):
    np.testing.assert_array_equal(a.coefficients, b.coefficients)
    np.testing.assert_array_equal(a.information, b.information)
    assert (a.n_samples_seen, a.batch_count, a.previous_lambda, a.weight_sum) == (
        b.n_samples_seen, b.batch_count, b.previous_lambda, b.weight_sum
    )


def run_stream(backend: NativeBackend, seeds, n: int, p: int):
    results = [backend.update(*batch(seed, n, p), None, config_for(p)) for seed in seeds]
    return results[-1][0], backend.predict(batch(999, 7, p)[0])


@pytest.fixture
def fitted():
    backend = backend_for(3)
    backend.update(*batch(1, 80, 3), None, config_for(3))
    yield backend
    backend.close()


# --------------------------------------------------------------------------- availability
def test_native_cpu_is_available_and_reports_its_device():
    assert unavailable_reason("native_cpu") is None
    backend = backend_for(2)
    assert (backend.name, backend.device, backend.dtype) == ("native_cpu", "cpu", np.float64)
    backend.close()


def test_fresh_engine_holds_the_empty_state():
    backend = backend_for(4)
    assert_states_equal(backend.state(), RenewableState.empty(5, np.float64))
    backend.close()


def test_cpu_engine_reports_flags_requested_but_not_enabled():
    backend = NativeBackend("native_cpu", dtype="float32", n_parameters=3, cuda_graphs=True,
                            cuda_fast_math=True)
    features = backend.features
    assert features["requested_flags"] == 3 and features["enabled_flags"] == 0
    assert features["requested"] == ["cuda_graphs", "fast_math"] and features["enabled"] == []
    assert features["graph_captures"] == features["graph_replays"] == 0
    backend.close()


# ---------------------------------------------------------------------------- concurrency
def test_two_backends_in_two_threads_equal_each_alone():
    p, n = 12, 3000
    seeds = {"a": [1, 2, 3, 4], "b": [5, 6, 7, 8]}
    alone = {}
    for key, stream in seeds.items():
        backend = backend_for(p)
        alone[key] = run_stream(backend, stream, n, p)
        backend.close()
    together = {}
    barrier = threading.Barrier(2)

    def worker(key):
        backend = backend_for(p)
        barrier.wait()
        together[key] = run_stream(backend, seeds[key], n, p)
        backend.close()

    threads = [threading.Thread(target=worker, args=(key,)) for key in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for key in seeds:
        assert_states_equal(together[key][0], alone[key][0])
        np.testing.assert_array_equal(together[key][1], alone[key][1])


def test_one_and_two_threads_are_bitwise_identical():
    if not hasattr(load_engine_library("native_cpu"), "omp_set_num_threads"):
        pytest.skip("librh_cpu was built without OpenMP (RH_OPENMP=OFF): one thread only")
    p, n = 20, 5000
    results = []
    for n_jobs in (1, 2):
        backend = backend_for(p, n_jobs=n_jobs)
        assert backend.n_jobs == n_jobs
        results.append(run_stream(backend, [11, 12, 13], n, p))
        backend.close()
    assert_states_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_n_jobs_is_applied_in_the_calling_thread():
    lib = load_engine_library("native_cpu")
    try:
        omp_get_max_threads = lib.omp_get_max_threads
    except AttributeError:
        backend = backend_for(2, n_jobs=2)
        assert backend.n_jobs == 1, "without OpenMP the effective thread count is 1"
        backend.close()
        return
    omp_get_max_threads.restype = ctypes.c_int
    backend = backend_for(2, n_jobs=3)
    backend.update(*batch(1, 50, 2), None, config_for(2))
    assert omp_get_max_threads() == 3
    backend.close()
    assert backend_for(2, n_jobs=-1).n_jobs == (os.cpu_count() or 1)
    assert backend_for(2).n_jobs >= 1


def test_the_openmp_calls_are_declared_once_per_library():
    lib = load_engine_library("native_cpu")
    threads = _OpenMPThreads.of(lib)
    assert _OpenMPThreads.of(lib) is threads
    if threads.setter(1) is None:
        pytest.skip("librh_cpu was built without OpenMP (RH_OPENMP=OFF): one thread only")
    one, two = backend_for(2, n_jobs=1), backend_for(2, n_jobs=2)
    assert (one.n_jobs, two.n_jobs) == (1, 2)
    assert one._engine._set_threads is two._engine._set_threads is threads.setter(1)[0]
    one.close()
    two.close()


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, True, "2"])
def test_bad_n_jobs_is_refused(n_jobs):
    with pytest.raises(ValidationError, match="n_jobs"):
        backend_for(2, n_jobs=n_jobs)


# ------------------------------------------------------------------- states handed back
def test_each_update_returns_a_fresh_state_that_later_batches_never_touch():
    p = 3
    backend = backend_for(p)
    first, _ = backend.update(*batch(1, 80, p), None, config_for(p))
    kept = (first.coefficients.copy(), first.information.copy())
    second, _ = backend.update(*batch(2, 80, p), None, config_for(p))
    np.testing.assert_array_equal(first.coefficients, kept[0])
    np.testing.assert_array_equal(first.information, kept[1])
    assert not np.array_equal(second.coefficients, first.coefficients)
    for state in (first, second):
        assert state.coefficients.shape == (p + 1,) and state.coefficients.dtype == np.float64
        assert state.information.shape == (p + 1, p + 1) and state.information.flags.c_contiguous
        assert not np.shares_memory(state.coefficients, state.information)
    assert not np.shares_memory(first.information, second.information)
    # The engine's own copy agrees with what update() handed back (the layout against the
    # reference is test_native_cpu_reference's).
    assert_states_equal(backend.state(), second)
    backend.close()


# ------------------------------------------------------------ engine refusals, state intact
def _refusal_leaves_state(backend: NativeBackend, action, error_type, *fragments):
    before = backend.state()
    with pytest.raises(error_type) as caught:
        action()
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message
    assert_states_equal(backend.state(), before)
    return caught.value


def test_nan_in_x_is_refused_by_the_engine_with_its_message(fitted):
    X, y = batch(2, 30, 3)
    X[4, 1] = np.nan
    error = _refusal_leaves_state(
        fitted, lambda: fitted.update(X, y, None, config_for(3)), ValidationError,
        "rh_cuda_engine_update_host_with_state", "INVALID_ARGUMENT",
    )
    assert error.engine_message and error.engine_message in str(error)
    assert error.status == _abi.RH_CUDA_INVALID_ARGUMENT
    # The estimator skips its own scan for such arrays: the message names the user's array.
    assert str(error).startswith("X contains NaN or infinity (first at row 4, column 1): ")
    assert error.engine_message == "RhCudaHostBatch.x_design[4, 1] is nan: values must be finite"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nonfinite_y_and_weights_are_refused_naming_the_argument(dtype):
    backend = backend_for(3, dtype=dtype)
    backend.update(*batch(1, 80, 3, dtype), None, config_for(3))
    X, y = batch(2, 30, 3, dtype)
    y[6] = -np.inf
    error = _refusal_leaves_state(
        backend, lambda: backend.update(X, y, None, config_for(3)), ValidationError,
        "y contains NaN or infinity (first at index 6): rh_cuda_engine_update_host_with_state "
        "failed with INVALID_ARGUMENT: RhCudaHostBatch.y[6] is -inf: values must be finite",
    )
    assert error.status_name == "INVALID_ARGUMENT"
    y[6] = 0.5
    weights = np.ones(30, dtype=dtype)
    weights[[3, 8]] = [np.inf, np.nan]
    _refusal_leaves_state(
        backend, lambda: backend.update(X, y, weights, config_for(3)), ValidationError,
        "sample_weight contains NaN or infinity (first at index 3)",
    )
    backend.close()


def test_engine_refusals_other_than_nonfinite_data_keep_their_message(fitted):
    X, y = batch(2, 30, 3)
    error = _refusal_leaves_state(
        fitted, lambda: fitted.update(X, y, None, config_for(3, tau=-1.0)), ValidationError,
        "RhCudaUpdateConfig.tau",
    )
    assert "contains NaN" not in str(error)
    assert str(error) == (
        "rh_cuda_engine_update_host_with_state failed with INVALID_ARGUMENT: "
        + error.engine_message
    )


def test_negative_weight_is_refused(fitted):
    X, y = batch(2, 30, 3)
    w = np.ones(30)
    w[3] = -1.0
    _refusal_leaves_state(
        fitted, lambda: fitted.update(X, y, w, config_for(3)), ValidationError, "INVALID_ARGUMENT"
    )


@pytest.mark.parametrize(
    "field, value",
    [("tau", 0.0), ("tau", np.inf), ("bandwidth_scale", -1.0), ("tol", np.nan), ("ridge", -1e-3),
     ("max_iter", 0), ("lambda_scale", -1.0)],
)
def test_bad_config_is_refused_naming_the_field(fitted, field, value):
    X, y = batch(2, 30, 3)
    config = config_for(3, **{field: value})
    engine_field = "tolerance" if field == "tol" else field
    _refusal_leaves_state(
        fitted, lambda: fitted.update(X, y, None, config), ValidationError, engine_field
    )


def test_overflow_during_the_solve_is_a_numerical_engine_error():
    # Finite data whose Gram matrix overflows (1e160^2 > DBL_MAX): the reference core raises
    # NUMERICAL_ERROR on the same batch from the empty state.
    X, y = batch(2, 30, 3)
    fresh = backend_for(3)
    error = _refusal_leaves_state(
        fresh, lambda: fresh.update(X * 1e160, y, None, config_for(3)), EngineError,
        "NUMERICAL_ERROR",
    )
    assert error.status_name == "NUMERICAL_ERROR"
    fresh.close()


def test_invalid_restore_is_refused(fitted):
    good = fitted.state()
    broken = [
        RenewableState(good.coefficients * np.nan, good.information, good.n_samples_seen,
                       good.batch_count, 0.0, good.weight_sum),
        RenewableState(good.coefficients, good.information, good.n_samples_seen, 0, 0.0,
                       good.weight_sum),
        RenewableState(good.coefficients, good.information, good.n_samples_seen,
                       good.batch_count, 0.0, -1.0),
    ]
    for state in broken:
        _refusal_leaves_state(fitted, lambda state=state: fitted.restore(state), ValidationError,
                              "rh_cuda_engine_restore")


def test_restore_then_continue_equals_the_uninterrupted_stream():
    p = 4
    whole = backend_for(p)
    whole.update(*batch(1, 60, p), None, config_for(p))
    checkpoint = whole.state()
    expected = whole.update(*batch(2, 40, p), None, config_for(p))[0]
    resumed = backend_for(p)
    resumed.restore(checkpoint)
    assert_states_equal(resumed.update(*batch(2, 40, p), None, config_for(p))[0], expected)
    whole.close()
    resumed.close()


def test_wrong_dtype_or_layout_never_reaches_the_engine(fitted):
    X, y = batch(2, 30, 3)
    config = config_for(3)
    _refusal_leaves_state(fitted, lambda: fitted.update(X.astype(np.float32), y, None, config),
                          BackendContractError, "float32")
    _refusal_leaves_state(fitted, lambda: fitted.update(np.asfortranarray(X), y, None, config),
                          BackendContractError, "C-contiguous")
    _refusal_leaves_state(fitted, lambda: fitted.update(X, y[:-1], None, config),
                          ValidationError, "y has shape")
    _refusal_leaves_state(fitted, lambda: fitted.update(X.tolist(), y, None, config),
                          BackendContractError, "NumPy")


def test_config_for_another_parameter_count_is_refused(fitted):
    X, y = batch(2, 30, 4)
    _refusal_leaves_state(fitted, lambda: fitted.update(X, y, None, config_for(4)),
                          ValidationError, "created for 4")


def test_predict_with_the_wrong_feature_count_is_refused(fitted):
    with pytest.raises(ValidationError, match="fitted with 3"):
        fitted.predict(batch(2, 5, 5)[0])


def test_device_update_on_the_cpu_engine_is_unavailable(fitted):
    lib = load_engine_library("native_cpu")
    config = fitted._engine.config_struct(config_for(3))
    X, y = batch(2, 10, 3)
    device_batch = _abi.make(_abi.RhCudaDeviceBatch, x_design=X.ctypes.data, y=y.ctypes.data,
                             n_rows=10, n_columns=3, batch_weight=10.0)
    out = _abi.make(_abi.RhCudaHostState, coefficients=np.empty(4).ctypes.data,
                    information=np.empty((4, 4)).ctypes.data)
    status = lib.rh_cuda_engine_update_device_with_state(
        fitted._engine.engine, ctypes.byref(device_batch), ctypes.byref(config),
        ctypes.byref(_abi.make(_abi.RhCudaDiagnostics)), ctypes.byref(out))
    with pytest.raises(BackendUnavailableError, match="UNAVAILABLE"):
        _abi.check(lib, status, "rh_cuda_engine_update_device_with_state",
                   engine=fitted._engine.engine)


def test_struct_header_violations_name_the_struct(fitted):
    lib = load_engine_library("native_cpu")
    X, y = batch(2, 10, 3)
    host_batch = _abi.make(_abi.RhCudaHostBatch, x_design=X.ctypes.data, y=y.ctypes.data,
                           n_rows=10, n_columns=3, batch_weight=10.0)
    out = _abi.make(_abi.RhCudaHostState, coefficients=np.empty(4).ctypes.data,
                    information=np.empty((4, 4)).ctypes.data)
    before = fitted.state()
    for field, value in (("struct_size", 16), ("abi_version", 1)):
        config = fitted._engine.config_struct(config_for(3))
        setattr(config, field, value)
        status = lib.rh_cuda_engine_update_host_with_state(
            fitted._engine.engine, ctypes.byref(host_batch), ctypes.byref(config),
            ctypes.byref(_abi.make(_abi.RhCudaDiagnostics)), ctypes.byref(out))
        with pytest.raises(ValidationError, match="RhCudaUpdateConfig"):
            _abi.check(lib, status, "rh_cuda_engine_update_host_with_state",
                       engine=fitted._engine.engine)
    assert_states_equal(fitted.state(), before)


def test_create_failures_use_the_thread_local_message():
    with pytest.raises(ValidationError, match="rh_cuda_engine_create.*INVALID_ARGUMENT") as caught:
        NativeBackend("native_cpu", dtype="float64", n_parameters=3, cuda_fast_math=True)
    assert caught.value.engine_message
    lib = load_engine_library("native_cpu")
    handle = _abi.RhCudaEngine_p()
    options = _abi.make(_abi.RhCudaEngineOptions, dtype=_abi.RH_CUDA_DTYPE_FLOAT64, device_id=0,
                        n_parameters=3)
    status = lib.rh_cuda_engine_create(ctypes.byref(options), ctypes.byref(handle))
    with pytest.raises(ValidationError, match="device_id"):
        _abi.check(lib, status, "rh_cuda_engine_create")
    assert not handle.value


def test_closed_backend_refuses_calls_and_close_is_idempotent():
    backend = backend_for(2)
    backend.close()
    backend.close()
    with pytest.raises(BackendUnavailableError, match="closed"):
        backend.update(*batch(1, 10, 2), None, config_for(2))
