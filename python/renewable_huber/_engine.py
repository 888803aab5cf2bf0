"""One engine handle: an engine of one library behind the ABI, and every struct and buffer its
calls read and write, built in one place.

`EngineHandle` creates the engine (`engine_options`), restores a state (`state_view`), exports
one (`StateLanding`), runs batches, predictions and the other calls, and destroys it. Both the
estimator's native backends (backends/native.py: array checks, DLPack borrowing, OpenMP threads,
user-facing error names) and the conformance kit (conformance/abi_engine.py: any library, host
arrays only) drive their engines through it; what differs between them is passed in: the
thread-count setter to call before each engine call, and what a failed call raises
(`_abi.check`'s package exceptions by default).

The ABI's rule is one thread per engine at a time: every call holds the handle's lock. The
structs a batch reads and writes are built once per handle and filled under the lock, and a
committed state is handed out in the landing buffers the engine wrote, which the landing then
gives up for fresh ones before the lock is released, so no array handed out ever aliases memory
a later call overwrites (and no copy of the P x P information is made per batch).

Imports: ctypes, threading, NumPy and the package's ABI mirror, state, diagnostics, config and
exceptions; never the estimator.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np

from . import _abi
from ._validation import aligned
from .config import UpdateConfig
from .diagnostics import Diagnostics
from .exceptions import BackendUnavailableError, ValidationError
from .state import RenewableState, counters_of

#: The device_id of an engine that computes on the host (librh_cpu's only id).
HOST_DEVICE_ID = -1


def _header(struct_type) -> dict[str, int]:
    """abi_version and struct_size of `struct_type`, as _abi.make fills them in."""
    return {"abi_version": _abi.ABI_VERSION, "struct_size": ctypes.sizeof(struct_type)}


# The structs built for every batch, engine and restore skip _abi.make's field-name checks
# (their fields are spelled once, below, and covered by the tests); the header is the same.
_ENGINE_OPTIONS_HEADER = _header(_abi.RhCudaEngineOptions)
_STATE_VIEW_HEADER = _header(_abi.RhCudaHostStateView)
_HOST_BATCH_HEADER = _header(_abi.RhCudaHostBatch)
_DEVICE_BATCH_HEADER = _header(_abi.RhCudaDeviceBatch)
_HOST_STATE_HEADER = _header(_abi.RhCudaHostState)
_DIAGNOSTICS_HEADER = _header(_abi.RhCudaDiagnostics)
_FEATURES_HEADER = _header(_abi.RhCudaEngineFeatures)

_HOST_UPDATE = "rh_cuda_engine_update_host_with_state"
_DEVICE_UPDATE = "rh_cuda_engine_update_device_with_state"


# ----------------------------------------------------------------------------- addresses
def address_of(array: np.ndarray) -> int:
    """The address of a writable C-contiguous array's first element, as array.ctypes.data
    gives it, without building NumPy's ctypes helper object (microseconds per batch)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(array))


def host_address(array: np.ndarray | None) -> int | None:
    """array.ctypes.data, cheaper: address_of for a writable array (the usual case), NumPy's
    ctypes helper for a read-only or empty one (ctypes only maps writable buffers); None
    (NULL) for None."""
    if array is None:
        return None
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only, or empty (shorter than one c_char)
        return array.ctypes.data


# ------------------------------------------------------------------------------ builders
# The codes by dtype object, for the native dtypes: dtype.name is a Python-level property of
# NumPy's, asked twice per new engine.
_DTYPE_CODES = {np.dtype(name): code for name, code in _abi.DTYPE_CODES.items()}


def dtype_code(dtype) -> int:
    """The RH_CUDA_DTYPE_* code of a NumPy dtype; ValidationError for any other dtype."""
    dtype = np.dtype(dtype)
    code = _DTYPE_CODES.get(dtype)
    if code is not None:
        return code
    code = _abi.DTYPE_CODES.get(dtype.name)
    if code is None:
        raise ValidationError(f"dtype must be float32 or float64, got {dtype}")
    return code


def engine_options(dtype, n_parameters: int, device_id: int, flags: int = 0):
    """The RhCudaEngineOptions of an engine in `dtype` for `n_parameters` parameters on
    `device_id` (HOST_DEVICE_ID for a host engine), with the RH_CUDA_ENGINE_FLAG_* `flags`."""
    return _abi.RhCudaEngineOptions(
        **_ENGINE_OPTIONS_HEADER,
        dtype=dtype_code(dtype),
        device_id=int(device_id),
        n_parameters=int(n_parameters),
        reserved0=int(flags),
    )


def engine_array(array, dtype) -> np.ndarray:
    """`array` as the engines take host arrays (docs/abi.md): C-contiguous in `dtype` and
    aligned to its elements (pickled or Dask-transferred buffers may not be); the array itself
    when it already is one, else a copy."""
    return aligned(np.ascontiguousarray(array, dtype=dtype))


def state_view(state: RenewableState, dtype, n_parameters: int):
    """(RhCudaHostStateView of `state`, the arrays it points at): the arrays as contiguous,
    aligned host arrays in `dtype` (K in float64), copied only when a conversion is needed; the
    caller keeps them alive for the engine call. A shape that does not fit `n_parameters` is a
    ValidationError naming all three."""
    P = n_parameters
    coefficients = engine_array(state.coefficients, dtype)
    information = engine_array(state.information, dtype)
    meat = None if state.meat is None else engine_array(state.meat, np.float64)
    if (coefficients.shape != (P,) or information.shape != (P, P)
            or (meat is not None and meat.shape != (P, P))):
        raise ValidationError(
            f"state has coefficients {coefficients.shape}, information "
            f"{information.shape} and meat {None if meat is None else meat.shape}; this "
            f"engine needs ({P},), ({P}, {P}) and ({P}, {P}) or None"
        )
    n_samples_seen, batch_count, previous_lambda, weight_sum = counters_of(state)
    view = _abi.RhCudaHostStateView(
        **_STATE_VIEW_HEADER,
        coefficients=host_address(coefficients),
        information=host_address(information),
        n_samples_seen=n_samples_seen,
        batch_count=batch_count,
        previous_lambda=previous_lambda,
        weight_sum=weight_sum,
        meat=host_address(meat),
    )
    return view, (coefficients, information, meat)


def batch_weight(sample_weight: np.ndarray | None, n_rows: int) -> float:
    """The batch struct's batch_weight: n_rows without weights, else their float64 sum (inf or
    NaN when they are not finite or their sum overflows; the engine refuses it, and the caller
    may name the bad weight first)."""
    if sample_weight is None:
        return float(n_rows)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sum(sample_weight, dtype=np.float64))


class StateLanding:
    """Caller-owned buffers an engine exports a committed state into: coefficients then
    information in one block of the working dtype, K in float64, and the RhCudaHostState
    (`struct`) pointing at them."""

    __slots__ = ("n_parameters", "dtype", "block", "meat", "struct")

    def __init__(self, n_parameters: int, dtype):
        self.n_parameters = n_parameters
        self.dtype = np.dtype(dtype)
        self.struct = _abi.RhCudaHostState(**_HOST_STATE_HEADER)
        self._take_fresh_buffers(with_meat=True)

    def _take_fresh_buffers(self, *, with_meat: bool) -> None:
        """New buffers for the next export (K's only `with_meat`), and the struct pointed at
        them. Empty, not zeroed: an engine writes every element it exports (the counters and
        meat_available with them), and buffers a failed call may have written are never handed
        out."""
        P = self.n_parameters
        self.block = np.empty(P + P * P, dtype=self.dtype)
        address = address_of(self.block)
        s = self.struct
        s.coefficients = address
        s.information = address + P * self.block.itemsize
        if with_meat:
            self.meat = np.empty((P, P), dtype=np.float64)
            s.meat = address_of(self.meat)

    def committed(self) -> RenewableState:
        """The state the engine exported here, in the buffers it wrote: the landing gives them
        up and takes fresh ones for the next export, so the arrays handed out are the caller's
        alone without a copy. The one place an exported state struct is read (once per batch:
        ctypes already reads its int64 fields as int and its doubles as float, so no conversion
        is needed)."""
        P = self.n_parameters
        block, s = self.block, self.struct
        meat = self.meat if s.meat_available == 1 else None
        state = RenewableState(
            block[:P],
            block[P:].reshape(P, P),
            s.n_samples_seen,
            s.batch_count,
            s.previous_lambda,
            s.weight_sum,
            meat,
        )
        self._take_fresh_buffers(with_meat=meat is not None)
        return state


# -------------------------------------------------------------------------------- handle
FailureHandler = Callable[..., None]

# (UpdateConfig, its RhCudaUpdateConfig) that config_struct built last, in any handle; a tuple
# replaced whole (atomic for a reader in another thread).
_last_config_struct: tuple[UpdateConfig, ctypes.Structure] | None = None


class EngineHandle:
    """One engine of `lib` (an ABI-bound library) in `dtype` for `n_parameters` parameters on
    `device_id`, created at construction.

    name: how error messages call it (e.g. "native_cpu backend"). flags: the engine options'
    RH_CUDA_ENGINE_FLAG_* bits. threads: (omp_set_num_threads, count) to call before every
    engine call, or None. failure(lib, status, call, engine): raises for a failed call (engine
    is None for rh_cuda_engine_create); `_abi.check` by default.
    """

    def __init__(
        self,
        lib,
        *,
        name: str,
        dtype,
        n_parameters: int,
        device_id: int,
        flags: int = 0,
        threads: tuple[Callable[[int], None], int] | None = None,
        failure: FailureHandler = _abi.check,
    ):
        self.lib = lib
        self.name = name
        self.dtype = np.dtype(dtype)
        self.n_parameters = int(n_parameters)
        self.device_id = int(device_id)
        self._failure = failure
        self._lock = threading.Lock()
        self._set_threads, self._n_threads = threads if threads is not None else (None, None)
        self._config_cache = None  # (UpdateConfig, its RhCudaUpdateConfig), never handed out
        self.engine = None  # the RhCudaEngine* (a c_void_p) while open, else None
        options = engine_options(self.dtype, self.n_parameters, self.device_id, flags)
        handle = _abi.RhCudaEngine_p()
        if self._set_threads is not None:
            self._set_threads(self._n_threads)
        status = lib.rh_cuda_engine_create(ctypes.byref(options), ctypes.byref(handle))
        if status != _abi.RH_CUDA_SUCCESS:
            failure(lib, status, "rh_cuda_engine_create", None)
        self.engine = handle
        # What every batch's engine call reads and writes, built once per engine (the batch
        # struct of each input kind at its first batch, in _batch_calls).
        self._diagnostics = _abi.RhCudaDiagnostics(**_DIAGNOSTICS_HEADER)
        self._landing = StateLanding(self.n_parameters, self.dtype)
        self._committed = self._landing.committed
        self._features = _abi.RhCudaEngineFeatures(**_FEATURES_HEADER)
        # device input? -> (the batch struct, the library's function, byref of the batch, of
        # the diagnostics, of the exported state); filled at each function's first batch (a
        # stand-in library may lack the function it is never asked for).
        self._batch_calls: dict[bool, tuple] = {}

    def _closed(self) -> BackendUnavailableError:
        return BackendUnavailableError(f"{self.name} is closed; create a new one")

    # ------------------------------------------------------------------------ calls
    def call(self, function: str, *arguments) -> None:
        """lib.`function`(engine, *arguments) under the lock; a failure raises."""
        if self.engine is None:
            raise self._closed()
        with self._lock:
            if self._set_threads is not None:
                self._set_threads(self._n_threads)
            status = getattr(self.lib, function)(self.engine, *arguments)
            if status != _abi.RH_CUDA_SUCCESS:
                self._failure(self.lib, status, function, self.engine)

    def last_error(self) -> str:
        """The engine's last-error text ('' when it has none)."""
        return _abi.last_error(self.lib, self.engine)

    def stream(self) -> int:
        """The engine's CUDA stream (0: the default stream, or a host engine)."""
        stream = _abi.c_uintptr(0)
        self.call("rh_cuda_engine_stream", ctypes.byref(stream))
        return int(stream.value)

    def config_struct(self, config: UpdateConfig):
        """The RhCudaUpdateConfig of `config`, for this engine's parameter count. The same
        UpdateConfig object gives the same struct, in this engine and in the next one made
        (a cold stream's engine takes the struct of the last stream's config when the estimator
        hands it the same config object): engines only read it, and it is never handed out to
        be modified."""
        global _last_config_struct
        cached = self._config_cache
        if cached is not None and cached[0] is config:
            return cached[1]
        if config.n_parameters != self.n_parameters:
            raise ValidationError(
                f"config has {config.n_parameters} parameters (n_features_in "
                f"{config.n_features_in}, fit_intercept {config.fit_intercept}); this engine "
                f"was created for {self.n_parameters}"
            )
        cached = _last_config_struct
        if cached is None or cached[0] is not config:
            cached = _last_config_struct = (config, _abi.make_update_config(config))
        self._config_cache = cached
        return cached[1]

    def restore(self, state: RenewableState) -> None:
        """Make `state` the engine's committed state (cast to the working dtype on the host)."""
        view, _arrays = state_view(state, self.dtype, self.n_parameters)
        self.call("rh_cuda_engine_restore", ctypes.byref(view))

    def copy_state(self) -> RenewableState:
        """A host copy of the engine's committed state, in arrays of its own."""
        landing = StateLanding(self.n_parameters, self.dtype)
        self.call("rh_cuda_engine_copy_state", ctypes.byref(landing.struct))
        return landing.committed()

    def update(self, device: bool, x_pointer: int, y_pointer: int, weights_pointer,
               n_rows: int, n_columns: int, weight: float, cfg):
        """One update call (rh_cuda_engine_update_device_with_state when `device`, else the
        host one) on the batch at the given addresses with the RhCudaUpdateConfig `cfg`;
        returns the committed state (the caller's own arrays) and its Diagnostics."""
        references = self._batch_calls.get(device)
        if references is None:
            batch = (_abi.RhCudaDeviceBatch(**_DEVICE_BATCH_HEADER) if device
                     else _abi.RhCudaHostBatch(**_HOST_BATCH_HEADER))
            references = self._batch_calls[device] = (
                batch,
                getattr(self.lib, _DEVICE_UPDATE if device else _HOST_UPDATE),
                ctypes.byref(batch),
                ctypes.byref(self._diagnostics),
                ctypes.byref(self._landing.struct),
            )
        batch, function, batch_reference, diagnostics_reference, state_reference = references
        with self._lock:
            engine = self.engine
            if engine is None:
                raise self._closed()
            if self._set_threads is not None:
                self._set_threads(self._n_threads)
            batch.x_design = x_pointer
            batch.y = y_pointer
            batch.sample_weight = weights_pointer
            batch.n_rows = n_rows
            batch.n_columns = n_columns
            batch.batch_weight = weight
            status = function(
                engine, batch_reference, ctypes.byref(cfg), diagnostics_reference, state_reference
            )
            if status != _abi.RH_CUDA_SUCCESS:
                self._failure(
                    self.lib, status, _DEVICE_UPDATE if device else _HOST_UPDATE, engine
                )
            state = self._committed()
            # ctypes reads int64 fields as int and double fields as float.
            d = self._diagnostics
            diagnostics = Diagnostics(
                d.iterations,
                bool(d.converged),
                d.objective,
                d.lambda_value,
                d.bandwidth,
                bool(d.used_regularized_fallback),
            )
        return state, diagnostics

    def predict(self, x_pointer: int, output_pointer: int, n_rows: int, n_columns: int,
                n_features_in: int, location: int) -> None:
        """rh_cuda_engine_predict into the (n_rows,) output at `output_pointer`; `location` is
        RH_CUDA_MEMORY_HOST or RH_CUDA_MEMORY_DEVICE."""
        request = _abi.make(
            _abi.RhCudaPrediction,
            x_design=x_pointer,
            prediction=output_pointer,
            n_rows=n_rows,
            n_columns=n_columns,
            n_features_in=n_features_in,
            input_location=location,
            reserved0=0,
        )
        self.call("rh_cuda_engine_predict", ctypes.byref(request))

    def features(self) -> tuple[int, int, int, int, int]:
        """(requested_flags, enabled_flags, graph_captures, graph_replays, graph_fallbacks),
        read from the engine (its own struct, filled and read under the lock)."""
        with self._lock:
            if self.engine is None:
                raise self._closed()
            out = self._features
            status = self.lib.rh_cuda_engine_features(self.engine, ctypes.byref(out))
            if status != _abi.RH_CUDA_SUCCESS:
                self._failure(self.lib, status, "rh_cuda_engine_features", self.engine)
            # ctypes reads uint64_t fields as Python ints.
            return (out.requested_flags, out.enabled_flags, out.graph_captures,
                    out.graph_replays, out.graph_fallbacks)

    def synchronize(self) -> None:
        self.call("rh_cuda_engine_synchronize")

    def close(self) -> None:
        """Destroy the engine (idempotent). Later calls raise BackendUnavailableError."""
        engine, self.engine = self.engine, None
        if engine is not None:
            with self._lock:
                self.lib.rh_cuda_engine_destroy(engine)
