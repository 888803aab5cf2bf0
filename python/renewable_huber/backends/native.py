"""native_cpu and native_cuda: the compiled engines behind the ABI, driven through ctypes.

The committed state lives inside the engine between batches; `restore` loads it only at the
start or from a checkpoint. Each batch is one rh_cuda_engine_update_host_with_state (or, for
device input on native_cuda, rh_cuda_engine_update_device_with_state) call that also exports
the new state, so a batch costs one boundary crossing. ctypes.CDLL releases the GIL during
every call, so engines in different Python threads run concurrently; one engine is used by one
thread at a time (the ABI's rule), enforced by the engine handle's lock. The engine itself, and
every struct and buffer its calls read and write, is an _engine.EngineHandle (shared with the
conformance kit); this module adds what the estimator needs around it: array checks, DLPack
borrowing of device input, OpenMP threads and refusals restated in the user's names.

Thread count (native_cpu): the engine parallelises with OpenMP, whose thread count is a
per-thread setting of the caller. Before each engine call this backend calls
omp_set_num_threads in the calling thread, through the OpenMP runtime the engine library
already loaded (libgomp, libomp or libiomp5, found through the engine's own handle, whose
symbol lookup covers its dependencies). n_jobs=None uses the runtime's default
(omp_get_max_threads when the backend is created, i.e. OMP_NUM_THREADS or the core count),
-1 uses os.cpu_count(), a positive int that many; `n_jobs` reports the effective count, 1 when
the engine was built without OpenMP.
"""

from __future__ import annotations

import ctypes
import math
import os
from typing import Any

import numpy as np

from .. import _abi, _dlpack
from .._backend_facts import FACTS, NATIVE_BACKENDS
from .._engine import HOST_DEVICE_ID, EngineHandle, batch_weight, dtype_code, host_address
from .._engine_messages import parse_refused_value
from .._loader import load_engine_library
from ..config import UpdateConfig
from ..exceptions import (
    BackendContractError,
    BackendUnavailableError,
    RenewableHuberError,
    ValidationError,
)
from ..state import RenewableState

KINDS = NATIVE_BACKENDS

# The batch struct's field -> the estimator's (and this backend's) argument name.
_USER_NAMES = {"x_design": "X", "y": "y", "sample_weight": "sample_weight"}
_BATCH_STRUCTS = ("RhCudaHostBatch", "RhCudaDeviceBatch")


def _user_named_refusal(error: ValidationError) -> ValidationError | None:
    """The engine's NaN/Inf refusal of a batch value restated with the user's array name and
    position first; the engine's own text (call, status, field) follows unchanged. None for
    other errors (negative weights included: the estimator names those before the call)."""
    text = getattr(error, "engine_message", None)
    if getattr(error, "status", None) != _abi.RH_CUDA_INVALID_ARGUMENT:
        return None
    refused = parse_refused_value(text)
    if (refused is None or not refused.non_finite or refused.struct not in _BATCH_STRUCTS
            or refused.field not in _USER_NAMES):
        return None
    name = _USER_NAMES[refused.field]
    named = ValidationError(
        f"{name} contains NaN or infinity (first at {refused.where()}): {error}"
    )
    named.status = error.status
    named.status_name = error.status_name
    named.engine_message = text
    return named


def _refuse_nonfinite_weights(weights: np.ndarray) -> None:
    """Called when the weights' float64 sum is not finite: the engines refuse a non-finite
    batch_weight before they look at the weights, so name the first bad weight here. Finite
    weights whose sum overflows are left to the engine's batch_weight check."""
    bad = ~np.isfinite(weights)
    if bad.any():
        index = int(np.argmax(bad))
        raise ValidationError(f"sample_weight contains NaN or infinity (first at index {index})")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise BackendUnavailableError(f"unknown native backend {kind!r}; expected one of {KINDS}")


def unavailable_reason(kind: str) -> str | None:
    """None when `kind`'s engine loads and can create an engine here, else why not."""
    _check_kind(kind)
    try:
        lib = load_engine_library(kind)
        available = ctypes.c_int32(0)
        _abi.check(lib, lib.rh_cuda_is_available(ctypes.byref(available)), "rh_cuda_is_available")
        if available.value != 1:
            detail = _abi.last_error(lib)
            return f"{kind}: the engine library loads but reports it cannot run here" + (
                f" ({detail})" if detail else ""
            )
        if FACTS[kind].device == "cuda":
            count = ctypes.c_int32(0)
            _abi.check(lib, lib.rh_cuda_device_count(ctypes.byref(count)), "rh_cuda_device_count")
            if count.value < 1:
                return "native_cuda: no CUDA device is visible"
    except RenewableHuberError as error:
        return str(error)
    return None


# The attribute of a library that holds its _OpenMPThreads (as _abi.bind marks a library).
_OPENMP_MARK = "_renewable_huber_openmp"


class _OpenMPThreads:
    """omp_set_num_threads / omp_get_max_threads of the runtime the engine loaded, if any."""

    @classmethod
    def of(cls, lib: ctypes.CDLL) -> _OpenMPThreads:
        """The library's own, made at its first engine: the functions' prototypes are declared
        once per library (as _abi.bind declares the engine's), not once per engine."""
        threads = getattr(lib, _OPENMP_MARK, None)
        if threads is None:
            threads = cls(lib)
            setattr(lib, _OPENMP_MARK, threads)
        return threads

    def __init__(self, lib: ctypes.CDLL):
        self._set = self._get = None
        try:
            self._set = lib.omp_set_num_threads
            self._get = lib.omp_get_max_threads
        except AttributeError:
            return
        self._set.restype = None
        self._set.argtypes = [ctypes.c_int]
        self._get.restype = ctypes.c_int
        self._get.argtypes = []

    def effective(self, n_jobs: int | None) -> int:
        if self._set is None:
            return 1
        if n_jobs is None:
            return int(self._get())
        if n_jobs == -1:
            return os.cpu_count() or 1
        return int(n_jobs)

    def setter(self, count: int):
        """(omp_set_num_threads, count) for the engine handle to call before every engine
        call, or None without OpenMP."""
        return None if self._set is None else (self._set, count)


def _validate_n_jobs(n_jobs) -> None:
    if n_jobs is None or n_jobs == -1:
        return
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise ValidationError(f"n_jobs must be None, -1 or a positive int, got {n_jobs!r}")


class NativeBackend:
    """One engine (librh_cpu or librh_cuda) holding one committed state."""

    def __init__(
        self,
        kind: str,
        *,
        dtype,
        n_parameters: int,
        n_jobs: int | None = None,
        cuda_graphs: bool = False,
        cuda_fast_math: bool = False,
        device_id: int = 0,
    ):
        _check_kind(kind)
        self._engine = None
        self.dtype = np.dtype(dtype)
        dtype_code(self.dtype)  # ValidationError for a dtype the ABI has no code for
        self._bits = self.dtype.itemsize * 8
        if (
            isinstance(n_parameters, bool)
            or not isinstance(n_parameters, (int, np.integer))
            or n_parameters < 1
        ):
            raise ValidationError(f"n_parameters must be a positive int, got {n_parameters!r}")
        _validate_n_jobs(n_jobs)
        self.name = kind
        self.device = FACTS[kind].device
        self._device_input = FACTS[kind].accepts_device_arrays
        self.n_parameters = int(n_parameters)
        self._n_features_in: int | None = None
        lib = load_engine_library(kind)

        flags = 0
        self._graphs_requested = bool(cuda_graphs)
        self._fixed_features = None  # the features tuple, once read, when graphs are off
        if cuda_graphs:
            flags |= _abi.RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS
        if cuda_fast_math:
            flags |= _abi.RH_CUDA_ENGINE_FLAG_FAST_MATH
        self._device_id = HOST_DEVICE_ID if self.device == "cpu" else int(device_id)
        threads = None
        if self.device == "cpu":
            openmp = _OpenMPThreads.of(lib)
            self.n_jobs = openmp.effective(n_jobs)
            threads = openmp.setter(self.n_jobs)
        else:
            self.n_jobs = None
        self._engine = EngineHandle(
            lib,
            name=f"{kind} backend",
            dtype=self.dtype,
            n_parameters=self.n_parameters,
            device_id=self._device_id,
            flags=flags,
            threads=threads,
        )
        # The engine's stream orders device input behind its producer; host input needs none.
        self._stream = self._engine.stream() if self._device_input else 0
        self._cupy_reader = (
            _dlpack.CupyBatchReader(self._device_id, self._stream, self.dtype)
            if self._device_input else None
        )

    def _host_array(self, array, name: str, shape: tuple[int, ...]) -> np.ndarray:
        # The estimator already validated and cast; these checks only keep a wrong caller from
        # handing the engine memory it would misread.
        if not isinstance(array, np.ndarray):
            raise BackendContractError(
                f"{name}: {self.name} takes host NumPy arrays here, got {type(array).__name__}"
            )
        if array.dtype != self.dtype:
            raise BackendContractError(f"{name} is {array.dtype}; the engine works in {self.dtype}")
        if not array.flags.c_contiguous:
            raise BackendContractError(f"{name} must be C-contiguous")
        if not array.flags.aligned:
            raise BackendContractError(
                f"{name} is not aligned to its {array.itemsize}-byte elements (the estimator "
                "copies such arrays; pass an aligned copy)"
            )
        if array.shape != shape:
            raise ValidationError(f"{name} has shape {array.shape}; expected {shape}")
        return array

    def _is_device_input(self, X) -> bool:
        return self._device_input and not isinstance(X, np.ndarray)

    # ---------------------------------------------------------------------------- Backend API
    @property
    def features(self) -> dict[str, Any]:
        """The engine's requested/enabled flags (bits and names) and CUDA Graph counters, as a
        fresh dict. Read from the engine at every access when it was asked for CUDA Graphs (the
        counters move with every batch); otherwise once, since neither the flags an engine was
        created with nor graph counters that never start can change (one ABI call less per
        batch: the estimator records them after each one)."""
        known = self._fixed_features
        if known is None:
            known = self._engine.features()
            if not self._graphs_requested:
                self._fixed_features = known
        requested, enabled, captures, replays, fallbacks = known
        return {
            "requested_flags": requested,
            "enabled_flags": enabled,
            "graph_captures": captures,
            "graph_replays": replays,
            "graph_fallbacks": fallbacks,
            "requested": _abi.decode_flags(requested),
            "enabled": _abi.decode_flags(enabled),
        }

    def restore(self, state: RenewableState) -> None:
        """Make `state` the engine's committed state (cast to the working dtype on the host)."""
        self._engine.restore(state)

    def state(self) -> RenewableState:
        """A host copy of the engine's committed state."""
        return self._engine.copy_state()

    def update(self, X, y, sample_weight, config: UpdateConfig):
        """One batch; returns (host RenewableState, Diagnostics). Transactional."""
        cfg = self._engine.config_struct(config)
        try:
            # _is_device_input, inline (once per batch)
            if self._device_input and not isinstance(X, np.ndarray):
                result = self._update_device(X, y, sample_weight, cfg, config.n_features_in)
            else:
                result = self._update_host(X, y, sample_weight, cfg, config.n_features_in)
        except ValidationError as error:
            named = _user_named_refusal(error)
            if named is None:
                raise
            raise named from None
        self._n_features_in = config.n_features_in
        return result

    def _update_host(self, X, y, sample_weight, cfg, p: int):
        if not isinstance(X, np.ndarray) or X.ndim != 2:
            raise BackendContractError(f"X must be a 2-D NumPy array here, got {type(X).__name__}")
        n = X.shape[0]
        X = self._host_array(X, "X", (n, p))
        y = self._host_array(y, "y", (n,))
        if sample_weight is None:
            weights_pointer, weight = None, float(n)
        else:
            sample_weight = self._host_array(sample_weight, "sample_weight", (n,))
            weights_pointer = host_address(sample_weight)
            weight = batch_weight(sample_weight, n)
            if not math.isfinite(weight):
                _refuse_nonfinite_weights(sample_weight)
        return self._engine.update(
            False, host_address(X), host_address(y), weights_pointer, n, p, weight, cfg
        )

    def _borrow(self, array, name: str, ndim: int) -> _dlpack.Borrow:
        # _dlpack.borrow's context manager, built directly (once per array and batch).
        return _dlpack.Borrow(array, name, self._device_id, self._stream, self._bits, ndim)

    def _update_device(self, X, y, sample_weight, cfg, p: int):
        if sample_weight is None:
            read = self._cupy_reader.pointers(X, y, p)
            if read is not None:
                x_pointer, y_pointer, n = read
                return self._engine.update(True, x_pointer, y_pointer, None, n, p, float(n), cfg)
        with self._borrow(X, "X", 2) as x_view, self._borrow(y, "y", 1) as y_view:
            n = x_view.shape[0]
            if x_view.shape[1] != p or y_view.shape != (n,):
                raise ValidationError(
                    f"X has shape {x_view.shape} and y {y_view.shape}; expected (n, {p}) and (n,)"
                )
            if sample_weight is None:
                return self._device_update_call(x_view, y_view, None, float(n), cfg, p)
            weight = _device_weight_sum(sample_weight)
            if not math.isfinite(weight):
                _refuse_nonfinite_weights(_device_to_host(sample_weight))
            with self._borrow(sample_weight, "sample_weight", 1) as w_view:
                if w_view.shape != (n,):
                    raise ValidationError(
                        f"sample_weight has shape {w_view.shape}; expected ({n},)"
                    )
                return self._device_update_call(
                    x_view, y_view, w_view.data_pointer, weight, cfg, p
                )

    def _device_update_call(self, x_view, y_view, weights_pointer, weight, cfg, p):
        return self._engine.update(
            True, x_view.data_pointer, y_view.data_pointer, weights_pointer, x_view.shape[0], p,
            weight, cfg,
        )

    def _prediction_columns(self, p: int) -> None:
        if self._n_features_in is not None and p != self._n_features_in:
            raise ValidationError(
                f"X has {p} features; the model was fitted with {self._n_features_in}"
            )
        if self.n_parameters - p not in (0, 1):
            raise ValidationError(
                f"X has {p} features; this engine has {self.n_parameters} parameters "
                f"(expected {self.n_parameters} or {self.n_parameters - 1} features)"
            )

    def predict(self, X):
        """(n,) predictions; host input gives NumPy, device input an array of its own library."""
        if self._is_device_input(X):
            return self._predict_device(X)
        if not isinstance(X, np.ndarray) or X.ndim != 2:
            raise BackendContractError(f"X must be a 2-D NumPy array here, got {type(X).__name__}")
        n, p = X.shape
        X = self._host_array(X, "X", (n, p))
        self._prediction_columns(p)
        output = np.empty(n, dtype=self.dtype)
        self._predict_call(X.ctypes.data, output.ctypes.data, n, p, _abi.RH_CUDA_MEMORY_HOST)
        return output

    def _predict_call(self, x_pointer, output_pointer, n, p, location) -> None:
        self._engine.predict(x_pointer, output_pointer, n, p, p, location)

    def _predict_device(self, X):
        with self._borrow(X, "X", 2) as x_view:
            n, p = x_view.shape
            self._prediction_columns(p)
            output = _empty_like_library(X, n, self.dtype)
            with self._borrow(output, "prediction", 1) as out_view:
                self._predict_call(
                    x_view.data_pointer, out_view.data_pointer, n, p, _abi.RH_CUDA_MEMORY_DEVICE
                )
        return output

    def synchronize(self) -> None:
        self._engine.synchronize()

    def close(self) -> None:
        """Destroy the engine (idempotent). Later calls raise BackendUnavailableError."""
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.close()

    def __del__(self):
        # At interpreter shutdown module globals may already be gone; never raise from here.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._engine is None or self._engine.engine is None else "open"
        return (
            f"NativeBackend({self.name!r}, dtype={self.dtype.name}, P={self.n_parameters}, "
            f"{state})"
        )


def _array_library(array) -> str:
    module = type(array).__module__.split(".")[0]
    if module not in ("cupy", "torch"):
        raise BackendContractError(
            f"device input must be a CuPy array or a PyTorch CUDA tensor, got "
            f"{type(array).__module__}.{type(array).__name__}"
        )
    return module


def _device_weight_sum(sample_weight) -> float:
    """sum(sample_weight) in float64 on the device, whatever the working dtype."""
    if _array_library(sample_weight) == "cupy":
        return float(sample_weight.sum(dtype="float64"))
    import torch

    return float(_dlpack.detach_if_requires_grad(sample_weight).sum(dtype=torch.float64))


def _device_to_host(array) -> np.ndarray:
    """A host copy of a CuPy array or PyTorch CUDA tensor (error paths only)."""
    if _array_library(array) == "cupy":
        return array.get()
    return _dlpack.detach_if_requires_grad(array).cpu().numpy()


def _empty_like_library(X, n: int, dtype: np.dtype):
    """An uninitialised (n,) output on X's device, in X's array library."""
    if _array_library(X) == "cupy":
        import cupy

        with cupy.cuda.Device(X.device.id):
            return cupy.empty(n, dtype=dtype)
    import torch

    return torch.empty((n,), dtype=getattr(torch, dtype.name), device=X.device)
