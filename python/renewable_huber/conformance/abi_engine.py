"""Drive any engine library through the 17 ABI functions only (ctypes, no estimator).

Each session is one _engine.EngineHandle (the engine handle the estimator's native backends
use too) whose failed calls raise EngineCallFailed. Every array handed to the engine is a
C-contiguous NumPy array in the engine's dtype, kept alive by a local reference for the duration
of the call (the ABI borrows, never keeps).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from .. import _abi
from .._engine import EngineHandle, batch_weight, host_address
from ..config import UpdateConfig
from .session import EngineCallFailed


def load_engine_library(path: str | Path) -> ctypes.CDLL:
    """Load and bind a library, refusing it (BackendUnavailableError naming the path) when it
    lacks a symbol or reports another ABI version."""
    from .._loader import load_library_path

    return load_library_path(str(path))


def host_array(values, dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=dtype))


def design_for_engine(X: np.ndarray, fit_intercept: bool, append_intercept: bool) -> np.ndarray:
    """What the engine receives under the column contract: p columns when the engine appends
    the intercept, the expanded (n, P) design otherwise."""
    if append_intercept or not fit_intercept:
        return np.ascontiguousarray(X)
    ones = np.ones((X.shape[0], 1), dtype=X.dtype)
    return np.ascontiguousarray(np.concatenate([X, ones], axis=1))


def _call_failed(lib, status: int, call: str, engine=None) -> None:
    """The kit's failure report: the call, the status's name and the engine's own text (the
    thread's when no engine exists yet)."""
    raise EngineCallFailed(call, _abi.status_name(status), _abi.last_error(lib, engine))


class AbiSession:
    """One engine handle of one library."""

    def __init__(self, lib: ctypes.CDLL, device_id: int, dtype: np.dtype, n_parameters: int):
        self.lib = lib
        self.dtype = np.dtype(dtype)
        self.n_parameters = n_parameters
        self.device_id = device_id
        self.engine = EngineHandle(
            lib,
            name=f"the engine session of {getattr(lib, '_name', lib)}",
            dtype=self.dtype,
            n_parameters=n_parameters,
            device_id=device_id,
            failure=_call_failed,
        )

    @property
    def handle(self):
        """The RhCudaEngine* (a c_void_p) while open, else None."""
        return self.engine.engine

    def last_error(self) -> str:
        return self.engine.last_error()

    def restore(self, state) -> None:
        self.engine.restore(state)

    def copy_state(self):
        return self.engine.copy_state()

    def update(self, X, y, sample_weight, config: UpdateConfig, append_intercept: bool):
        design = design_for_engine(
            host_array(X, self.dtype), config.fit_intercept, append_intercept
        )
        y = host_array(y, self.dtype)
        weights = None if sample_weight is None else host_array(sample_weight, self.dtype)
        n_rows, n_columns = design.shape
        return self.engine.update(
            False, host_address(design), host_address(y), host_address(weights), n_rows,
            n_columns, batch_weight(weights, n_rows), self.engine.config_struct(config),
        )

    def predict(self, X, config: UpdateConfig, append_intercept: bool) -> np.ndarray:
        design = design_for_engine(
            host_array(X, self.dtype), config.fit_intercept, append_intercept
        )
        output = np.full(design.shape[0], np.nan, dtype=self.dtype)
        self.engine.predict(
            host_address(design), host_address(output), design.shape[0], design.shape[1],
            config.n_features_in, _abi.RH_CUDA_MEMORY_HOST,
        )
        return output

    def close(self) -> None:
        self.engine.close()


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
