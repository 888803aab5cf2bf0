"""Drive any engine library through the 17 ABI functions only (ctypes, no estimator).

Every array handed to the engine is a C-contiguous NumPy array in the engine's dtype, kept
alive by a local reference for the duration of the call (the ABI borrows, never keeps).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from .. import _abi
from ..config import UpdateConfig
from ..diagnostics import Diagnostics
from ..state import RenewableState
from .session import EngineCallFailed

DTYPE_CODES = {
    np.dtype(np.float32): _abi.RH_CUDA_DTYPE_FLOAT32,
    np.dtype(np.float64): _abi.RH_CUDA_DTYPE_FLOAT64,
}


def load_engine_library(path: str | Path) -> ctypes.CDLL:
    """Load and bind a library, refusing it (BackendUnavailableError naming the path) when it
    lacks a symbol or reports another ABI version."""
    from .._loader import load_library_path

    return load_library_path(str(path))


def pointer(array: np.ndarray | None) -> int | None:
    return None if array is None else array.ctypes.data


def host_array(values, dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=dtype))


def design_for_engine(X: np.ndarray, fit_intercept: bool, append_intercept: bool) -> np.ndarray:
    """What the engine receives under the column contract: p columns when the engine appends
    the intercept, the expanded (n, P) design otherwise."""
    if append_intercept or not fit_intercept:
        return np.ascontiguousarray(X)
    ones = np.ones((X.shape[0], 1), dtype=X.dtype)
    return np.ascontiguousarray(np.concatenate([X, ones], axis=1))


def make_batch(design: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None):
    weight = (
        float(design.shape[0])
        if sample_weight is None
        else float(np.sum(sample_weight, dtype=np.float64))
    )
    return _abi.make(
        _abi.RhCudaHostBatch,
        x_design=pointer(design),
        y=pointer(y),
        sample_weight=pointer(sample_weight),
        n_rows=design.shape[0],
        n_columns=design.shape[1],
        batch_weight=weight,
    )


class StateBuffers:
    """Caller-owned arrays an engine exports its committed state into."""

    def __init__(self, n_parameters: int, dtype: np.dtype):
        self.coefficients = np.zeros(n_parameters, dtype=dtype)
        self.information = np.zeros((n_parameters, n_parameters), dtype=dtype)
        self.meat = np.zeros((n_parameters, n_parameters), dtype=np.float64)
        self.struct = _abi.make(
            _abi.RhCudaHostState,
            coefficients=pointer(self.coefficients),
            information=pointer(self.information),
            meat=pointer(self.meat),
        )

    def snapshot(self) -> RenewableState:
        return RenewableState(
            coefficients=self.coefficients.copy(),
            information=self.information.copy(),
            n_samples_seen=int(self.struct.n_samples_seen),
            batch_count=int(self.struct.batch_count),
            previous_lambda=float(self.struct.previous_lambda),
            weight_sum=float(self.struct.weight_sum),
            meat=self.meat.copy() if self.struct.meat_available == 1 else None,
        )


class AbiSession:
    """One engine handle of one library."""

    def __init__(self, lib: ctypes.CDLL, device_id: int, dtype: np.dtype, n_parameters: int):
        self.lib = lib
        self.dtype = np.dtype(dtype)
        self.n_parameters = n_parameters
        self.device_id = device_id
        self.handle = ctypes.c_void_p()
        options = _abi.make(
            _abi.RhCudaEngineOptions,
            dtype=DTYPE_CODES[self.dtype],
            device_id=device_id,
            n_parameters=n_parameters,
            reserved0=0,
        )
        status = lib.rh_cuda_engine_create(ctypes.byref(options), ctypes.byref(self.handle))
        if status != _abi.RH_CUDA_SUCCESS:
            raise EngineCallFailed(
                "rh_cuda_engine_create", _abi.status_name(status), _abi.last_error(lib)
            )

    def last_error(self) -> str:
        return _abi.last_error(self.lib, self.handle)

    def _check(self, status: int, call: str) -> None:
        if status != _abi.RH_CUDA_SUCCESS:
            raise EngineCallFailed(call, _abi.status_name(status), self.last_error())

    def restore(self, state: RenewableState) -> None:
        coefficients = host_array(state.coefficients, self.dtype)
        information = host_array(state.information, self.dtype)
        meat = None if state.meat is None else host_array(state.meat, np.float64)
        view = _abi.make(
            _abi.RhCudaHostStateView,
            meat=pointer(meat),
            coefficients=pointer(coefficients),
            information=pointer(information),
            n_samples_seen=int(state.n_samples_seen),
            batch_count=int(state.batch_count),
            previous_lambda=float(state.previous_lambda),
            weight_sum=float(state.weight_sum),
        )
        self._check(
            self.lib.rh_cuda_engine_restore(self.handle, ctypes.byref(view)),
            "rh_cuda_engine_restore",
        )

    def copy_state(self) -> RenewableState:
        buffers = StateBuffers(self.n_parameters, self.dtype)
        status = self.lib.rh_cuda_engine_copy_state(self.handle, ctypes.byref(buffers.struct))
        self._check(status, "rh_cuda_engine_copy_state")
        return buffers.snapshot()

    def update(self, X, y, sample_weight, config: UpdateConfig, append_intercept: bool):
        design = design_for_engine(
            host_array(X, self.dtype), config.fit_intercept, append_intercept
        )
        y = host_array(y, self.dtype)
        weights = None if sample_weight is None else host_array(sample_weight, self.dtype)
        batch = make_batch(design, y, weights)
        abi_config = _abi.make_update_config(config)
        diagnostics = _abi.make(_abi.RhCudaDiagnostics)
        buffers = StateBuffers(self.n_parameters, self.dtype)
        status = self.lib.rh_cuda_engine_update_host_with_state(
            self.handle,
            ctypes.byref(batch),
            ctypes.byref(abi_config),
            ctypes.byref(diagnostics),
            ctypes.byref(buffers.struct),
        )
        self._check(status, "rh_cuda_engine_update_host_with_state")
        return buffers.snapshot(), Diagnostics.from_fields(diagnostics)

    def predict(self, X, config: UpdateConfig, append_intercept: bool) -> np.ndarray:
        design = design_for_engine(
            host_array(X, self.dtype), config.fit_intercept, append_intercept
        )
        output = np.full(design.shape[0], np.nan, dtype=self.dtype)
        request = _abi.make(
            _abi.RhCudaPrediction,
            x_design=pointer(design),
            prediction=pointer(output),
            n_rows=design.shape[0],
            n_columns=design.shape[1],
            n_features_in=config.n_features_in,
            input_location=_abi.RH_CUDA_MEMORY_HOST,
            reserved0=0,
        )
        self._check(
            self.lib.rh_cuda_engine_predict(self.handle, ctypes.byref(request)),
            "rh_cuda_engine_predict",
        )
        return output

    def close(self) -> None:
        if self.handle:
            self.lib.rh_cuda_engine_destroy(self.handle)
            self.handle = ctypes.c_void_p()


class AbiEngine:
    """An engine library under test."""

    speaks_abi = True

    def __init__(self, path: str | Path, device: int | None = None):
        self.path = Path(path)
        self.lib = load_engine_library(self.path)
        self.device_count = self._device_count()
        # The CPU engine only accepts the host id -1; a CUDA engine wants a device ordinal.
        self.device_id = device if device is not None else (0 if self.device_count > 0 else -1)
        self.description = (
            f"{self.path} (ABI {int(self.lib.rh_cuda_abi_version())}, "
            f"{self.device_count} CUDA device(s), device_id {self.device_id})"
        )

    def _device_count(self) -> int:
        count = ctypes.c_int32(0)
        status = self.lib.rh_cuda_device_count(ctypes.byref(count))
        return int(count.value) if status == _abi.RH_CUDA_SUCCESS else 0

    def open(self, dtype, n_parameters: int) -> AbiSession:
        return AbiSession(self.lib, self.device_id, np.dtype(dtype), n_parameters)

    def default_profile(self) -> str:
        if "cuda" in self.path.name.lower() or self.device_count > 0:
            return "cuda"
        return "cpu"
