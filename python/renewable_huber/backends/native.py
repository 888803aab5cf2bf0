"""native_cpu and native_cuda: the compiled engines behind the ABI, driven through ctypes.

The committed state lives inside the engine between batches; `restore` loads it only at the
start or from a checkpoint. Each batch is one rh_cuda_engine_update_host_with_state (or, for
device input on native_cuda, rh_cuda_engine_update_device_with_state) call that also exports
the new state, so a batch costs one boundary crossing. ctypes.CDLL releases the GIL during
every call, so engines in different Python threads run concurrently; one engine is used by one
thread at a time (the ABI's rule), enforced here with a lock.

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
import threading
from typing import Any

import numpy as np

from .. import _abi, _dlpack
from .._engine_messages import parse_refused_value
from .._loader import load_engine_library
from ..config import UpdateConfig
from ..diagnostics import Diagnostics
from ..exceptions import (
    BackendContractError,
    BackendUnavailableError,
    RenewableHuberError,
    ValidationError,
)
from ..state import RenewableState

KINDS = ("native_cpu", "native_cuda")
_HOST_DEVICE_ID = -1


def _header(struct_type) -> dict[str, int]:
    """abi_version and struct_size of `struct_type`, as _abi.make fills them in."""
    return {"abi_version": _abi.ABI_VERSION, "struct_size": ctypes.sizeof(struct_type)}


# The structs built for every batch skip _abi.make's field-name checks (their fields are
# spelled once, below, and covered by the tests); the header is the same.
_HOST_BATCH_HEADER = _header(_abi.RhCudaHostBatch)
_DEVICE_BATCH_HEADER = _header(_abi.RhCudaDeviceBatch)
_HOST_STATE_HEADER = _header(_abi.RhCudaHostState)
_DIAGNOSTICS_HEADER = _header(_abi.RhCudaDiagnostics)
_FEATURES_HEADER = _header(_abi.RhCudaEngineFeatures)

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


def _address_of(array: np.ndarray) -> int:
    """The address of a writable C-contiguous array's first element, as array.ctypes.data
    gives it, without building NumPy's ctypes helper object (microseconds per batch)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(array))


def _host_address(array: np.ndarray) -> int:
    """array.ctypes.data, cheaper: _address_of for a writable array (the usual case), NumPy's
    ctypes helper for a read-only one (ctypes only maps writable buffers)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only, or empty (shorter than one c_char)
        return array.ctypes.data


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
        if kind == "native_cuda":
            count = ctypes.c_int32(0)
            _abi.check(lib, lib.rh_cuda_device_count(ctypes.byref(count)), "rh_cuda_device_count")
            if count.value < 1:
                return "native_cuda: no CUDA device is visible"
    except RenewableHuberError as error:
        return str(error)
    return None


class _OpenMPThreads:
    """omp_set_num_threads / omp_get_max_threads of the runtime the engine loaded, if any."""

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

    def apply(self, count: int) -> None:
        if self._set is not None:
            self._set(count)

    @property
    def set_function(self):
        """omp_set_num_threads itself, or None without OpenMP (called once per batch)."""
        return self._set


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
        self._lock = threading.Lock()
        self._config_cache = None  # (UpdateConfig, its RhCudaUpdateConfig), never handed out
        self.dtype = np.dtype(dtype)
        if self.dtype.name not in _abi.DTYPE_CODES:
            raise ValidationError(f"dtype must be float32 or float64, got {self.dtype}")
        self._bits = self.dtype.itemsize * 8
        if (
            isinstance(n_parameters, bool)
            or not isinstance(n_parameters, (int, np.integer))
            or n_parameters < 1
        ):
            raise ValidationError(f"n_parameters must be a positive int, got {n_parameters!r}")
        _validate_n_jobs(n_jobs)
        self.name = kind
        self.device = "cpu" if kind == "native_cpu" else "cuda"
        self.n_parameters = int(n_parameters)
        self._n_features_in: int | None = None
        self._lib = load_engine_library(kind)

        flags = 0
        if cuda_graphs:
            flags |= _abi.RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS
        if cuda_fast_math:
            flags |= _abi.RH_CUDA_ENGINE_FLAG_FAST_MATH
        self._device_id = _HOST_DEVICE_ID if kind == "native_cpu" else int(device_id)
        options = _abi.make(
            _abi.RhCudaEngineOptions,
            dtype=_abi.DTYPE_CODES[self.dtype.name],
            device_id=self._device_id,
            n_parameters=self.n_parameters,
            reserved0=flags,
        )
        if kind == "native_cpu":
            self._threads = _OpenMPThreads(self._lib)
            self.n_jobs = self._threads.effective(n_jobs)
        else:
            self._threads = None
            self.n_jobs = None
        handle = _abi.RhCudaEngine_p()
        self._apply_threads()
        status = self._lib.rh_cuda_engine_create(ctypes.byref(options), ctypes.byref(handle))
        _abi.check(self._lib, status, "rh_cuda_engine_create")
        self._engine = handle
        stream = _abi.c_uintptr(0)
        self._call("rh_cuda_engine_stream", ctypes.byref(stream))
        self._stream = int(stream.value)
        self._prepare_batch_calls()

    # ------------------------------------------------------------------------------ plumbing
    def _apply_threads(self) -> None:
        if self._threads is not None:
            self._threads.apply(self.n_jobs)

    def _call(self, function: str, *arguments) -> None:
        if self._engine is None:
            raise BackendUnavailableError(f"{self.name} backend is closed; create a new one")
        with self._lock:
            self._apply_threads()
            status = getattr(self._lib, function)(self._engine, *arguments)
            if status != _abi.RH_CUDA_SUCCESS:
                _abi.check(self._lib, status, function, engine=self._engine)

    def _prepare_batch_calls(self) -> None:
        """What every batch's engine call reads and writes, built once per engine: the batch,
        diagnostics and exported-state structs, and the state's landing buffers. Only a call
        holding self._lock fills or reads them (_batch_call), and a committed state is copied
        out of the landing buffers before the lock is released, so no array handed out ever
        aliases memory a later batch overwrites."""
        P = self.n_parameters
        self._host_batch = _abi.RhCudaHostBatch(**_HOST_BATCH_HEADER)
        self._device_batch = _abi.RhCudaDeviceBatch(**_DEVICE_BATCH_HEADER)
        self._batch_diagnostics = _abi.RhCudaDiagnostics(**_DIAGNOSTICS_HEADER)
        # Coefficients then information in one block (one copy per batch), and K (float64).
        self._landing = np.empty(P + P * P, dtype=self.dtype)
        self._landing_meat = np.empty((P, P), dtype=np.float64)
        address = _address_of(self._landing)
        self._exported = _abi.RhCudaHostState(
            **_HOST_STATE_HEADER,
            coefficients=address,
            information=address + P * self._landing.itemsize,
            meat=_address_of(self._landing_meat),
        )
        self._features_out = _abi.RhCudaEngineFeatures(**_FEATURES_HEADER)
        # function name -> (the library's function, byref of its batch struct, of the
        # diagnostics, of the exported state); filled at each function's first batch.
        self._batch_references: dict[str, tuple] = {}
        self._set_threads = None if self._threads is None else self._threads.set_function

    def _batch_call(self, function: str, batch, x_pointer: int, y_pointer: int,
                    weights_pointer, n: int, p: int, batch_weight: float, cfg):
        """One update call on `batch` (self._host_batch or self._device_batch) under the lock;
        returns the committed state (copied out of the landing buffers) and Diagnostics."""
        references = self._batch_references.get(function)
        if references is None:
            references = self._batch_references[function] = (
                getattr(self._lib, function),
                ctypes.byref(batch),
                ctypes.byref(self._batch_diagnostics),
                ctypes.byref(self._exported),
            )
        call, batch_reference, diagnostics_reference, state_reference = references
        with self._lock:
            engine = self._engine
            if engine is None:
                raise BackendUnavailableError(
                    f"{self.name} backend is closed; create a new one"
                )
            if self._set_threads is not None:
                self._set_threads(self.n_jobs)
            batch.x_design = x_pointer
            batch.y = y_pointer
            batch.sample_weight = weights_pointer
            batch.n_rows = n
            batch.n_columns = p
            batch.batch_weight = batch_weight
            status = call(
                engine, batch_reference, ctypes.byref(cfg), diagnostics_reference, state_reference
            )
            if status != _abi.RH_CUDA_SUCCESS:
                _abi.check(self._lib, status, function, engine=engine)
            exported = self._exported
            P = self.n_parameters
            flat = self._landing.copy()
            state = RenewableState(
                flat[:P],
                flat[P:].reshape(P, P),
                exported.n_samples_seen,
                exported.batch_count,
                exported.previous_lambda,
                exported.weight_sum,
                self._landing_meat.copy() if exported.meat_available == 1 else None,
            )
            # ctypes reads int64 fields as int and double fields as float.
            d = self._batch_diagnostics
            diagnostics = Diagnostics(
                d.iterations,
                bool(d.converged),
                d.objective,
                d.lambda_value,
                d.bandwidth,
                bool(d.used_regularized_fallback),
            )
        return state, diagnostics

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
        if array.shape != shape:
            raise ValidationError(f"{name} has shape {array.shape}; expected {shape}")
        return array

    def _update_config(self, config: UpdateConfig):
        if config.n_parameters != self.n_parameters:
            raise ValidationError(
                f"config has {config.n_parameters} parameters (n_features_in "
                f"{config.n_features_in}, fit_intercept {config.fit_intercept}); this engine "
                f"was created for {self.n_parameters}"
            )
        return _abi.make_update_config(config)

    def _config_struct(self, config: UpdateConfig):
        # The estimator passes the same UpdateConfig object while nothing changed; the engine
        # only reads the struct (const), and this one is never handed out to be modified.
        cached = self._config_cache
        if cached is not None and cached[0] is config:
            return cached[1]
        cfg = self._update_config(config)
        self._config_cache = (config, cfg)
        return cfg

    def _new_state_buffers(self):
        # Fresh arrays per batch: a state returned earlier must never be overwritten by a later
        # batch (the estimator may keep it, e.g. as state_). The meat matrix K is float64
        # whatever the dtype.
        P = self.n_parameters
        flat = np.empty(P + P * P, dtype=self.dtype)
        meat = np.empty((P, P), dtype=np.float64)
        address = _address_of(flat)
        out = _abi.RhCudaHostState(
            **_HOST_STATE_HEADER,
            coefficients=address,
            information=address + P * flat.itemsize,
            meat=_address_of(meat),
        )
        return flat[:P], flat[P:].reshape(P, P), (meat, out)

    @staticmethod
    def _committed_state(coefficients, information, meat_and_out) -> RenewableState:
        meat, out = meat_and_out
        return RenewableState(
            coefficients=coefficients,
            information=information,
            n_samples_seen=int(out.n_samples_seen),
            batch_count=int(out.batch_count),
            previous_lambda=float(out.previous_lambda),
            weight_sum=float(out.weight_sum),
            meat=meat if out.meat_available == 1 else None,
        )

    def _is_device_input(self, X) -> bool:
        return self.name == "native_cuda" and not isinstance(X, np.ndarray)

    # ---------------------------------------------------------------------------- Backend API
    @property
    def features(self) -> dict[str, Any]:
        """The engine's requested/enabled flags (bits and names) and CUDA Graph counters, read
        from the engine at every access (a fresh dict)."""
        # The estimator reads the counters after every native_cuda batch: the struct is the
        # engine's own (built once), filled and read under the lock.
        with self._lock:
            if self._engine is None:
                raise BackendUnavailableError(f"{self.name} backend is closed; create a new one")
            out = self._features_out
            status = self._lib.rh_cuda_engine_features(self._engine, ctypes.byref(out))
            if status != _abi.RH_CUDA_SUCCESS:
                _abi.check(self._lib, status, "rh_cuda_engine_features", engine=self._engine)
            # ctypes reads uint64_t fields as Python ints.
            requested, enabled = out.requested_flags, out.enabled_flags
            counters = (out.graph_captures, out.graph_replays, out.graph_fallbacks)
        return {
            "requested_flags": requested,
            "enabled_flags": enabled,
            "graph_captures": counters[0],
            "graph_replays": counters[1],
            "graph_fallbacks": counters[2],
            "requested": _abi.decode_flags(requested),
            "enabled": _abi.decode_flags(enabled),
        }

    def restore(self, state: RenewableState) -> None:
        """Make `state` the engine's committed state (cast to the working dtype on the host)."""
        P = self.n_parameters
        coefficients = np.ascontiguousarray(state.coefficients, dtype=self.dtype)
        information = np.ascontiguousarray(state.information, dtype=self.dtype)
        meat = None if state.meat is None else np.ascontiguousarray(state.meat, dtype=np.float64)
        if (coefficients.shape != (P,) or information.shape != (P, P)
                or (meat is not None and meat.shape != (P, P))):
            raise ValidationError(
                f"state has coefficients {coefficients.shape}, information "
                f"{information.shape} and meat {None if meat is None else meat.shape}; this "
                f"engine needs ({P},), ({P}, {P}) and ({P}, {P}) or None"
            )
        view = _abi.make(
            _abi.RhCudaHostStateView,
            meat=None if meat is None else meat.ctypes.data,
            coefficients=coefficients.ctypes.data,
            information=information.ctypes.data,
            n_samples_seen=int(state.n_samples_seen),
            batch_count=int(state.batch_count),
            previous_lambda=float(state.previous_lambda),
            weight_sum=float(state.weight_sum),
        )
        self._call("rh_cuda_engine_restore", ctypes.byref(view))

    def state(self) -> RenewableState:
        """A host copy of the engine's committed state."""
        coefficients, information, out = self._new_state_buffers()
        self._call("rh_cuda_engine_copy_state", ctypes.byref(out[1]))
        return self._committed_state(coefficients, information, out)

    def update(self, X, y, sample_weight, config: UpdateConfig):
        """One batch; returns (host RenewableState, Diagnostics). Transactional."""
        cfg = self._config_struct(config)
        try:
            if self._is_device_input(X):
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
            weights_pointer, batch_weight = None, float(n)
        else:
            sample_weight = self._host_array(sample_weight, "sample_weight", (n,))
            weights_pointer = _host_address(sample_weight)
            with np.errstate(over="ignore", invalid="ignore"):
                batch_weight = float(np.sum(sample_weight, dtype=np.float64))
            if not math.isfinite(batch_weight):
                _refuse_nonfinite_weights(sample_weight)
        return self._batch_call(
            "rh_cuda_engine_update_host_with_state", self._host_batch, _host_address(X),
            _host_address(y), weights_pointer, n, p, batch_weight, cfg,
        )

    def _borrow(self, array, name: str, ndim: int) -> _dlpack.Borrow:
        # _dlpack.borrow's context manager, built directly (once per array and batch).
        return _dlpack.Borrow(array, name, self._device_id, self._stream, self._bits, ndim)

    def _update_device(self, X, y, sample_weight, cfg, p: int):
        with self._borrow(X, "X", 2) as x_view, self._borrow(y, "y", 1) as y_view:
            n = x_view.shape[0]
            if x_view.shape[1] != p or y_view.shape != (n,):
                raise ValidationError(
                    f"X has shape {x_view.shape} and y {y_view.shape}; expected (n, {p}) and (n,)"
                )
            if sample_weight is None:
                return self._device_update_call(x_view, y_view, None, float(n), cfg, p)
            batch_weight = _device_weight_sum(sample_weight)
            if not math.isfinite(batch_weight):
                _refuse_nonfinite_weights(_device_to_host(sample_weight))
            with self._borrow(sample_weight, "sample_weight", 1) as w_view:
                if w_view.shape != (n,):
                    raise ValidationError(
                        f"sample_weight has shape {w_view.shape}; expected ({n},)"
                    )
                return self._device_update_call(
                    x_view, y_view, w_view.data_pointer, batch_weight, cfg, p
                )

    def _device_update_call(self, x_view, y_view, weights_pointer, batch_weight, cfg, p):
        return self._batch_call(
            "rh_cuda_engine_update_device_with_state", self._device_batch, x_view.data_pointer,
            y_view.data_pointer, weights_pointer, x_view.shape[0], p, batch_weight, cfg,
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
        request = _abi.make(
            _abi.RhCudaPrediction,
            x_design=x_pointer,
            prediction=output_pointer,
            n_rows=n,
            n_columns=p,
            n_features_in=p,
            input_location=location,
            reserved0=0,
        )
        self._call("rh_cuda_engine_predict", ctypes.byref(request))

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
        self._call("rh_cuda_engine_synchronize")

    def close(self) -> None:
        """Destroy the engine (idempotent). Later calls raise BackendUnavailableError."""
        engine, self._engine = getattr(self, "_engine", None), None
        if engine is not None:
            with self._lock:
                self._lib.rh_cuda_engine_destroy(engine)

    def __del__(self):
        # At interpreter shutdown module globals may already be gone; never raise from here.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._engine is None else "open"
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
