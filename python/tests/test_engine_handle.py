"""The one engine handle (_engine.py) that the native backends and the conformance kit share,
its struct builders, the state-counter and config builders, and the backend facts table.

Expected values are stated here independently: the documented backend names, devices and
library variables; states restored through the handle come back bit for bit; a refused call
names the engine's own reason and leaves the committed state unchanged."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from renewable_huber import _abi, _backend_facts, _loader, _validation
from renewable_huber._engine import (
    HOST_DEVICE_ID,
    EngineHandle,
    StateLanding,
    batch_weight,
    dtype_code,
    engine_options,
    state_view,
)
from renewable_huber.backends.native import NativeBackend
from renewable_huber.config import UpdateConfig
from renewable_huber.conformance.abi_engine import AbiEngine
from renewable_huber.conformance.session import EngineCallFailed
from renewable_huber.exceptions import BackendUnavailableError, ValidationError
from renewable_huber.state import COUNTER_NAMES, RenewableState, counters_of

P = 4


def _config(**changes) -> UpdateConfig:
    values = dict(n_features_in=P - 1, fit_intercept=True, tau=1.345, bandwidth_scale=1.0,
                  tol=1e-8, ridge=1e-8, max_iter=100, penalty="none", lambda_scale=1.0)
    values.update(changes)
    return UpdateConfig(**values)


def _some_state(dtype=np.float64, with_meat=True) -> RenewableState:
    rng = np.random.default_rng(5)
    information = rng.normal(size=(P, P))
    information = information @ information.T + P * np.eye(P)
    meat = information * 0.5 if with_meat else None
    return RenewableState(rng.normal(size=P).astype(dtype), information.astype(dtype), 40, 2,
                          0.0, 37.5, meat)


def _handle(library, **options) -> EngineHandle:
    lib = _loader.load_library_path(str(library))
    return EngineHandle(lib, name="test engine", dtype=options.pop("dtype", np.float64),
                        n_parameters=P, device_id=HOST_DEVICE_ID, **options)


def _assert_same_state(got: RenewableState, want: RenewableState) -> None:
    assert got.coefficients.tobytes() == np.asarray(want.coefficients).tobytes()
    assert got.information.tobytes() == np.asarray(want.information).tobytes()
    assert counters_of(got) == counters_of(want)
    if want.meat is None:
        assert got.meat is None
    else:
        assert got.meat.tobytes() == np.asarray(want.meat, dtype=np.float64).tobytes()


# -- backend facts ----------------------------------------------------------------------------


def test_backend_facts_give_the_documented_names_devices_and_library_variables():
    facts = _backend_facts.FACTS
    assert _backend_facts.BACKENDS == ("numpy", "cupy", "native_cpu", "native_cuda")
    assert {name: f.device for name, f in facts.items()} == {
        "numpy": "cpu", "cupy": "cuda", "native_cpu": "cpu", "native_cuda": "cuda"}
    assert _backend_facts.DEVICE_INPUT_BACKENDS == ("cupy", "native_cuda")
    assert _backend_facts.ENGINE_CHECKS_FINITE_BACKENDS == ("native_cpu", "native_cuda")
    assert _backend_facts.NATIVE_BACKENDS == ("native_cpu", "native_cuda")
    # Every module reads the table: the validation's names, the loader's variables and files.
    assert _validation.BACKEND_NAMES == ("auto", "numpy", "cupy", "native_cpu", "native_cuda")
    assert _loader.ENVIRONMENT_OVERRIDES == {
        "native_cpu": "RH_CPU_LIBRARY", "native_cuda": "RH_CUDA_LIBRARY"}
    assert _loader.library_file_names("native_cpu", "linux") == [
        f"librh_cpu.so.{_abi.ABI_VERSION}", "librh_cpu.so"]


# -- builders ---------------------------------------------------------------------------------


def test_config_from_settings_reads_constructor_names_and_ignores_other_keys():
    settings = {"fit_intercept": 1, "tau": 2, "bandwidth_scale": 0.5, "tol": 1e-6,
                "ridge": 0, "max_iter": np.int64(30), "penalty": "l1", "lambda_scale": 1,
                "backend": "numpy", "dtype": "float32"}
    config = UpdateConfig.from_settings(settings, np.int64(3))
    assert config == UpdateConfig(3, True, 2.0, 0.5, 1e-6, 0.0, 30, "l1", 1.0)
    assert [type(v) for v in (config.n_features_in, config.fit_intercept, config.tau,
                              config.max_iter)] == [int, bool, float, int]
    assert UpdateConfig.from_settings(settings, 3, tau=0.75).tau == 0.75
    # An object holding the parameters as attributes (the estimator's ValidatedParams).
    assert UpdateConfig.from_settings(SimpleNamespace(**settings), 3) == config


def test_counters_of_gives_plain_numbers_in_field_order():
    state = RenewableState(np.zeros(2), np.zeros((2, 2)), np.int64(7), np.int32(3),
                           np.float32(0.5), np.float64(6.25))
    counters = counters_of(state)
    assert counters == (7, 3, 0.5, 6.25)
    assert [type(v) for v in counters] == [int, int, float, float]
    assert COUNTER_NAMES == ("n_samples_seen", "batch_count", "previous_lambda", "weight_sum")


def test_struct_builders_fill_the_abi_fields():
    options = engine_options(np.float32, 5, HOST_DEVICE_ID, _abi.RH_CUDA_ENGINE_FLAG_FAST_MATH)
    assert (options.abi_version, options.struct_size) == (
        _abi.ABI_VERSION, _abi.ctypes.sizeof(_abi.RhCudaEngineOptions))
    assert (options.dtype, options.device_id, options.n_parameters, options.reserved0) == (
        _abi.RH_CUDA_DTYPE_FLOAT32, -1, 5, _abi.RH_CUDA_ENGINE_FLAG_FAST_MATH)
    state = _some_state()
    view, (coefficients, information, meat) = state_view(state, np.float64, P)
    assert view.coefficients == coefficients.ctypes.data
    assert view.information == information.ctypes.data and view.meat == meat.ctypes.data
    assert (view.n_samples_seen, view.batch_count, view.previous_lambda, view.weight_sum) == (
        40, 2, 0.0, 37.5)
    no_meat, _ = state_view(_some_state(with_meat=False), np.float64, P)
    assert no_meat.meat is None
    assert batch_weight(None, 12) == 12.0
    assert batch_weight(np.array([0.5, 1.5, 2.0], dtype=np.float32), 3) == 4.0
    assert batch_weight(np.array([1e308, 1e308]), 2) == np.inf


def test_builders_refuse_what_the_engine_could_misread():
    with pytest.raises(ValidationError, match="dtype must be float32 or float64, got int64"):
        dtype_code(np.int64)
    wrong = RenewableState(np.zeros(P - 1), np.zeros((P, P)))
    with pytest.raises(ValidationError, match=r"coefficients \(3,\).*needs \(4,\)"):
        state_view(wrong, np.float64, P)


def test_a_landing_hands_out_its_buffers_and_takes_fresh_ones():
    landing = StateLanding(P, np.float32)
    landing.struct.n_samples_seen, landing.struct.batch_count = 9, 1
    landing.struct.weight_sum = 9.0
    exported = landing.block
    exported[:] = np.arange(P + P * P)
    meat = landing.meat
    state = landing.committed()
    # The state is the buffer the engine wrote, not a copy of it.
    assert np.shares_memory(state.coefficients, exported)
    assert np.shares_memory(state.information, exported)
    np.testing.assert_array_equal(state.coefficients, np.arange(P))
    np.testing.assert_array_equal(state.information.ravel(), np.arange(P, P + P * P))
    assert counters_of(state) == (9, 1, 0.0, 9.0)
    assert state.meat is None  # meat_available is 0
    # The next export goes to a fresh block the struct points at; K's buffer, not handed out,
    # is kept.
    assert not np.shares_memory(landing.block, exported)
    assert landing.struct.coefficients == landing.block.ctypes.data
    assert landing.struct.information == landing.block.ctypes.data + P * 4
    assert landing.meat is meat and landing.struct.meat == meat.ctypes.data
    landing.block[:] = -1.0  # a later export changes nothing handed out
    np.testing.assert_array_equal(state.coefficients, np.arange(P))
    # K handed out: the landing takes a fresh buffer for it too.
    landing.struct.meat_available = 1
    meat[:] = 2.5
    with_meat = landing.committed()
    assert with_meat.meat is meat
    assert not np.shares_memory(landing.meat, meat)
    assert landing.struct.meat == landing.meat.ctypes.data
    landing.meat[:] = 0.0
    np.testing.assert_array_equal(with_meat.meat, np.full((P, P), 2.5))


# -- the handle on librh_cpu --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_restore_then_copy_state_round_trips_bit_for_bit(cpu_library, dtype):
    handle = _handle(cpu_library, dtype=dtype)
    for with_meat in (True, False):
        state = _some_state(dtype, with_meat)
        handle.restore(state)
        _assert_same_state(handle.copy_state(), state)
    handle.close()


def test_a_refused_call_raises_the_engines_reason_and_changes_nothing(cpu_library):
    handle = _handle(cpu_library)
    state = _some_state()
    handle.restore(state)
    bad = RenewableState(state.coefficients.copy(), state.information, 40, 0, 0.0, 37.5)
    with pytest.raises(ValidationError, match="rh_cuda_engine_restore failed with "
                       "INVALID_ARGUMENT: RhCudaHostStateView.batch_count is 0") as refused:
        handle.restore(bad)
    assert refused.value.status == _abi.RH_CUDA_INVALID_ARGUMENT
    _assert_same_state(handle.copy_state(), state)
    with pytest.raises(ValidationError, match="this engine was created for 4"):
        handle.config_struct(_config(n_features_in=P))
    handle.close()


def test_config_struct_is_reused_for_the_same_config_object(cpu_library):
    handle = _handle(cpu_library)
    config = _config(penalty="l1", lambda_scale=0.5)
    cfg = handle.config_struct(config)
    assert handle.config_struct(config) is cfg
    assert (cfg.n_features_in, cfg.penalty, cfg.lambda_scale, cfg.tolerance) == (
        P - 1, _abi.RH_CUDA_PENALTY_L1, 0.5, 1e-8)
    assert handle.config_struct(_config(penalty="l1", lambda_scale=0.5)) is not cfg
    handle.close()


def test_a_new_handle_takes_the_struct_of_the_same_config_object_for_its_own_p(cpu_library):
    config = _config(penalty="l1", lambda_scale=0.5)
    first, second = _handle(cpu_library), _handle(cpu_library)
    cfg = first.config_struct(config)
    assert second.config_struct(config) is cfg  # a cold stream's engine: built once
    lib = _loader.load_library_path(str(cpu_library))
    wider = EngineHandle(lib, name="wider engine", dtype=np.float64, n_parameters=P + 1,
                         device_id=HOST_DEVICE_ID)
    with pytest.raises(ValidationError, match=f"this engine was created for {P + 1}"):
        wider.config_struct(config)
    other = second.config_struct(_config(penalty="l1", lambda_scale=0.25))
    assert other is not cfg and other.lambda_scale == 0.25 and cfg.lambda_scale == 0.5
    assert first.config_struct(config) is cfg
    for handle in (first, second, wider):
        handle.close()


def test_a_closed_handle_refuses_every_call(cpu_library):
    handle = _handle(cpu_library)
    handle.close()
    handle.close()  # idempotent
    for call in (handle.copy_state, handle.stream, handle.features, handle.synchronize,
                 lambda: handle.update(False, 0, 0, None, 1, P, 1.0, None)):
        with pytest.raises(BackendUnavailableError, match="test engine is closed"):
            call()


def test_create_failure_goes_through_the_failure_handler(cpu_library):
    lib = _loader.load_library_path(str(cpu_library))
    with pytest.raises(ValidationError, match="rh_cuda_engine_create failed with "
                       "INVALID_ARGUMENT: RhCudaEngineOptions.device_id"):
        EngineHandle(lib, name="x", dtype=np.float64, n_parameters=P, device_id=3)
    calls = []

    def record(lib, status, call, engine):
        calls.append((status, call, engine, _abi.last_error(lib, engine)))
        raise RuntimeError("recorded")

    with pytest.raises(RuntimeError, match="recorded"):
        EngineHandle(lib, name="x", dtype=np.float64, n_parameters=P, device_id=3,
                     failure=record)
    [(status, call, engine, text)] = calls
    assert (status, call, engine) == (_abi.RH_CUDA_INVALID_ARGUMENT, "rh_cuda_engine_create",
                                      None)
    assert "device_id" in text


def test_backend_and_kit_drive_their_engines_through_the_same_handle(cpu_library):
    backend = NativeBackend("native_cpu", dtype="float64", n_parameters=P, n_jobs=1)
    session = AbiEngine(cpu_library).open(np.float64, P)
    assert type(backend._engine) is EngineHandle and type(session.engine) is EngineHandle
    state = _some_state()
    backend.restore(state)
    session.restore(state)
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, P - 1))
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.2 + rng.standard_t(3, size=30)
    config = _config()
    from_backend, diagnostics = backend.update(X, y, None, config)
    from_kit, kit_diagnostics = session.update(X, y, None, config, True)
    _assert_same_state(from_kit, from_backend)
    assert kit_diagnostics == diagnostics
    np.testing.assert_array_equal(session.predict(X, config, True), backend.predict(X))
    # The kit reports a refusal as EngineCallFailed with the engine's own text.
    y[3] = np.nan
    with pytest.raises(EngineCallFailed, match=r"rh_cuda_engine_update_host_with_state "
                       r"returned INVALID_ARGUMENT: RhCudaHostBatch\.y\[3\] is nan") as failed:
        session.update(X, y, None, config, True)
    assert failed.value.message == session.last_error()
    _assert_same_state(session.copy_state(), from_backend)
    backend.close()
    session.close()
