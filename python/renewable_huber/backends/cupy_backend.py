"""The same core as the numpy backend, run on CuPy arrays on the GPU.

CuPy is imported only when this backend is created; host input is transferred (and cast
to the working dtype) once per call, CuPy input is used in place.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from ..config import UpdateConfig
from ..core import design_matrix, renewable_update
from ..diagnostics import Diagnostics
from ..exceptions import BackendUnavailableError
from ..state import RenewableState
from .numpy_backend import host_state_in_dtype, linear_prediction


def cupy_unavailable_reason() -> str | None:
    try:
        import cupy
    except ImportError as error:
        return (
            f"CuPy is not installed ({error}); install the wheel for your CUDA version, "
            "e.g. pip install cupy-cuda12x"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDA driver/runtime problems surface as assorted types
        return f"CuPy cannot reach a CUDA GPU: {error}"
    if count < 1:
        return "CuPy sees no CUDA GPU"
    return None


class CupyBackend:
    name = "cupy"
    device = "cuda"
    n_jobs = None

    def __init__(self, *, dtype, n_parameters: int):
        reason = cupy_unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"backend 'cupy' is unavailable: {reason}")
        import cupy

        self._cp = cupy
        self.dtype = np.dtype(dtype)
        self.n_parameters = int(n_parameters)
        self._state = self._to_device_state(RenewableState.empty(self.n_parameters, self.dtype))

    def _to_device_state(self, state: RenewableState) -> RenewableState:
        host = host_state_in_dtype(state, self.n_parameters, self.dtype)
        return dataclasses.replace(
            host,
            coefficients=self._cp.asarray(host.coefficients),
            information=self._cp.asarray(host.information),
            meat=None if host.meat is None else self._cp.asarray(host.meat),
        )

    def _on_device(self, array):
        if array is None:
            return None
        if isinstance(array, self._cp.ndarray):
            return array
        if isinstance(array, np.ndarray):
            return self._cp.asarray(array, dtype=self.dtype)
        # Another library's device tensor (e.g. PyTorch CUDA): a zero-copy view.
        return self._cp.from_dlpack(array)

    def restore(self, state: RenewableState) -> None:
        self._state = self._to_device_state(state)

    def update(
        self, X, y, sample_weight, config: UpdateConfig
    ) -> tuple[RenewableState, Diagnostics]:
        cp = self._cp
        design = design_matrix(cp, self._on_device(X), config.fit_intercept)
        new_state, diagnostics = renewable_update(
            cp, self._state, design, self._on_device(y), self._on_device(sample_weight), config
        )
        host = host_state_in_dtype(
            dataclasses.replace(
                new_state,
                coefficients=cp.asnumpy(new_state.coefficients),
                information=cp.asnumpy(new_state.information),
                meat=None if new_state.meat is None else cp.asnumpy(new_state.meat),
            ),
            self.n_parameters,
            self.dtype,
        )
        # The device arrays just computed stay committed; no second upload.
        self._state = dataclasses.replace(
            host,
            coefficients=cp.ascontiguousarray(new_state.coefficients, dtype=self.dtype),
            information=cp.ascontiguousarray(new_state.information, dtype=self.dtype),
            meat=new_state.meat,
        )
        return host, Diagnostics.from_fields(diagnostics)

    def predict(self, X):
        cp = self._cp
        predictions = linear_prediction(self._on_device(X), self._state.coefficients)
        if isinstance(X, np.ndarray):
            return cp.asnumpy(predictions)
        if isinstance(X, cp.ndarray):
            return predictions
        # Hand the result back in the caller's own library, without a copy.
        library = sys.modules[type(X).__module__.split(".")[0]]
        return library.from_dlpack(predictions)
