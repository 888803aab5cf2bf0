"""The meat matrix K on librh_cpu: equal to the NumPy reference's, in float64 for both dtypes,
carried through restore/export, ended by L1 batches, and invisible to ABI 2 callers built before
it (their 56-byte state structs keep working and never see K)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from inference_support import P_FEATURES, batches, config, reference_stream, state_fields

from renewable_huber import RenewableHuberRegressor, _abi
from renewable_huber.backends.native import NativeBackend
from renewable_huber.exceptions import ValidationError
from renewable_huber.state import RenewableState

pytestmark = pytest.mark.usefixtures("cpu_library")

@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-7), (np.float32, 2e-3)])
def test_engine_meat_equals_the_numpy_reference(dtype, rtol):
    data = batches()
    engine = NativeBackend("native_cpu", dtype=dtype, n_parameters=P_FEATURES + 1)
    for X, y, w in data:
        state, _ = engine.update(X.astype(dtype), y.astype(dtype), w.astype(dtype), config())
    expected = reference_stream(data, dtype)
    assert state.meat.dtype == np.float64
    np.testing.assert_array_equal(state.meat, state.meat.T)
    np.testing.assert_allclose(state.meat, expected.meat, rtol=rtol,
                               atol=rtol * np.abs(expected.meat).max())
    np.testing.assert_array_equal(engine.state().meat, state.meat)


def test_meat_survives_restore_and_an_l1_batch_ends_it():
    data = batches()
    engine = NativeBackend("native_cpu", dtype=np.float64, n_parameters=P_FEATURES + 1)
    state, _ = engine.update(*data[0], config())
    twin = NativeBackend("native_cpu", dtype=np.float64, n_parameters=P_FEATURES + 1)
    twin.restore(state)
    np.testing.assert_array_equal(twin.state().meat, state.meat)
    a, _ = engine.update(*data[1], config())
    b, _ = twin.update(*data[1], config())
    np.testing.assert_array_equal(a.meat, b.meat)
    after_l1, _ = engine.update(*data[2], config("l1"))
    assert after_l1.meat is None
    again, _ = engine.update(*data[0], config())
    assert again.meat is None  # K does not come back within the stream
    twin.restore(RenewableState(**{**state_fields(state), "meat": None}))
    assert twin.state().meat is None


def test_a_meat_with_a_negative_diagonal_is_refused_and_the_state_kept():
    engine = NativeBackend("native_cpu", dtype=np.float64, n_parameters=P_FEATURES + 1)
    state, _ = engine.update(*batches(1)[0], config())
    bad = state.meat.copy()
    bad[2, 2] = -1.0
    with pytest.raises(ValidationError, match=r"^rh_cuda_engine_restore failed with "
                       r"INVALID_ARGUMENT: RhCudaHostStateView\.meat\[2, 2\] is negative: "
                       r"diagonal entries must be >= 0 \(this one is -1\)$"):
        engine.restore(RenewableState(**{**state_fields(state), "meat": bad}))
    bad[2, 2] = np.nan
    with pytest.raises(ValidationError, match=r"meat\[2, 2\] is nan: values must be finite$"):
        engine.restore(RenewableState(**{**state_fields(state), "meat": bad}))
    np.testing.assert_array_equal(engine.state().meat, state.meat)


# ---- raw ABI calls with the 56-byte structs of callers built before K


class OldStateView(ctypes.Structure):
    _fields_ = _abi.RhCudaHostStateView._fields_[:8]


class OldState(ctypes.Structure):
    _fields_ = _abi.RhCudaHostState._fields_[:8]


def test_old_struct_layouts_are_the_prefix_before_meat():
    assert ctypes.sizeof(OldStateView) == ctypes.sizeof(OldState) == 56
    assert _abi.STATE_SIZE_WITHOUT_MEAT == 56
    assert ctypes.sizeof(_abi.RhCudaHostStateView) == 64
    assert ctypes.sizeof(_abi.RhCudaHostState) == 72


def _engine(lib, P):
    options = _abi.make(_abi.RhCudaEngineOptions, dtype=_abi.RH_CUDA_DTYPE_FLOAT64,
                        device_id=-1, n_parameters=P, reserved0=0)
    handle = _abi.RhCudaEngine_p()
    _abi.check(lib, lib.rh_cuda_engine_create(ctypes.byref(options), ctypes.byref(handle)),
               "rh_cuda_engine_create")
    return handle


def _update(lib, engine, X, y, state_struct):
    batch = _abi.make(_abi.RhCudaHostBatch, x_design=X.ctypes.data, y=y.ctypes.data,
                      sample_weight=None, n_rows=X.shape[0], n_columns=X.shape[1],
                      batch_weight=float(X.shape[0]))
    cfg = _abi.make_update_config(config())
    diagnostics = _abi.make(_abi.RhCudaDiagnostics)
    return lib.rh_cuda_engine_update_host_with_state(
        engine, ctypes.byref(batch), ctypes.byref(cfg), ctypes.byref(diagnostics),
        as_pointer(state_struct, _abi.RhCudaHostState))


def as_pointer(struct, full_type):
    """A pointer to `struct` typed as the full struct, as a C caller's cast would be."""
    return ctypes.cast(ctypes.pointer(struct), ctypes.POINTER(full_type))


def test_an_old_caller_streams_restores_and_exports_with_56_byte_structs():
    from renewable_huber._loader import load_engine_library

    lib = load_engine_library("native_cpu")
    P = P_FEATURES + 1
    data = batches(2)
    old_engine, new_engine = _engine(lib, P), _engine(lib, P)
    try:
        coefficients, information = np.empty(P), np.empty((P, P))
        # an old export struct followed by canary bytes the engine must not touch
        buffer = (ctypes.c_uint8 * 72)(*([0xA5] * 72))
        old_out = OldState.from_buffer(buffer)
        old_out.abi_version, old_out.struct_size = _abi.ABI_VERSION, 56
        old_out.coefficients = coefficients.ctypes.data
        old_out.information = information.ctypes.data
        X, y, _ = data[0]
        assert _update(lib, old_engine, X, y, old_out) == _abi.RH_CUDA_SUCCESS
        assert bytes(buffer[56:]) == b"\xa5" * 16
        meat = np.empty((P, P))
        new_out = _abi.make(_abi.RhCudaHostState, coefficients=np.empty(P).ctypes.data,
                            information=np.empty((P, P)).ctypes.data, meat=meat.ctypes.data)
        assert _update(lib, new_engine, X, y, new_out) == _abi.RH_CUDA_SUCCESS
        assert new_out.meat_available == 1 and new_out.reserved1 == 0
        # the old caller's stream is the same stream (K is only added alongside)
        np.testing.assert_array_equal(coefficients, np.ctypeslib.as_array(
            ctypes.cast(new_out.coefficients, ctypes.POINTER(ctypes.c_double)), (P,)))

        # an old caller restores its state into the new engine: K is unavailable from then on
        view = OldStateView(abi_version=_abi.ABI_VERSION, struct_size=56,
                            coefficients=coefficients.ctypes.data,
                            information=information.ctypes.data,
                            n_samples_seen=old_out.n_samples_seen,
                            batch_count=old_out.batch_count,
                            previous_lambda=old_out.previous_lambda,
                            weight_sum=old_out.weight_sum)
        view_pointer = as_pointer(view, _abi.RhCudaHostStateView)
        restored = lib.rh_cuda_engine_restore(new_engine, view_pointer)
        assert restored == _abi.RH_CUDA_SUCCESS
        meat[:] = 7.0
        new_out.meat_available = 5
        assert lib.rh_cuda_engine_copy_state(new_engine, ctypes.byref(new_out)) == 0
        assert new_out.meat_available == 0
        assert (meat == 7.0).all()  # nothing of K is written when the engine holds none
        X, y, _ = data[1]
        assert _update(lib, new_engine, X, y, new_out) == 0
        assert new_out.meat_available == 0

        # sizes between the old and the full one are refused, naming both
        new_out.struct_size = 64
        assert lib.rh_cuda_engine_copy_state(new_engine, ctypes.byref(new_out)) == (
            _abi.RH_CUDA_INVALID_ARGUMENT)
        message = lib.rh_cuda_engine_last_error(new_engine).decode()
        assert "RhCudaHostState.struct_size is 64: must be 56" in message
        assert "or at least 72" in message
    finally:
        lib.rh_cuda_engine_destroy(old_engine)
        lib.rh_cuda_engine_destroy(new_engine)


def test_estimator_on_native_cpu_gives_the_numpy_standard_errors(tmp_path):
    data = batches(4, n=2000, seed=3)
    fitted = {}
    for backend in ("numpy", "native_cpu"):
        model = RenewableHuberRegressor(inference=True, backend=backend, tol=1e-10)
        for X, y, w in data:
            model.partial_fit(X, y, sample_weight=w)
        fitted[backend] = model
    np.testing.assert_allclose(fitted["native_cpu"].bse_, fitted["numpy"].bse_, rtol=1e-7)
    fitted["native_cpu"].save(tmp_path / "m.npz")
    resumed = RenewableHuberRegressor.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(resumed.bse_, fitted["native_cpu"].bse_)
