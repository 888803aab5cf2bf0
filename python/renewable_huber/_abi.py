"""The ctypes mirror of abi/rh_cuda.h (ABI version 2), one to one.

Constants and structs keep their C names so a reader can grep the header for any of them.
`bind(lib)` declares argtypes/restype of the 17 functions once per library; `make` builds a
struct with its abi_version/struct_size header filled in; `check` turns a status into the
package's exception. Tests compare everything here with the manifest, the header and the
compiled layout probe, so this file cannot drift silently.

Only the standard library (ctypes, functools) and the package's exceptions are imported: the
conformance kit uses this module to drive arbitrary engine libraries without the estimator.
"""

from __future__ import annotations

import ctypes
import functools

from .exceptions import BackendUnavailableError, EngineError, ValidationError

ABI_VERSION = 2
PYTHON_API_VERSION = 4

# ------------------------------------------------------------------------------ status codes
RH_CUDA_SUCCESS = 0
RH_CUDA_INVALID_ARGUMENT = 1
RH_CUDA_UNAVAILABLE = 2
RH_CUDA_ALLOCATION_FAILED = 3
RH_CUDA_CUDA_ERROR = 4
RH_CUDA_CUBLAS_ERROR = 5
RH_CUDA_CUSOLVER_ERROR = 6
RH_CUDA_NUMERICAL_ERROR = 7
RH_CUDA_INTERNAL_ERROR = 8

STATUS_NAMES = {
    RH_CUDA_SUCCESS: "SUCCESS",
    RH_CUDA_INVALID_ARGUMENT: "INVALID_ARGUMENT",
    RH_CUDA_UNAVAILABLE: "UNAVAILABLE",
    RH_CUDA_ALLOCATION_FAILED: "ALLOCATION_FAILED",
    RH_CUDA_CUDA_ERROR: "CUDA_ERROR",
    RH_CUDA_CUBLAS_ERROR: "CUBLAS_ERROR",
    RH_CUDA_CUSOLVER_ERROR: "CUSOLVER_ERROR",
    RH_CUDA_NUMERICAL_ERROR: "NUMERICAL_ERROR",
    RH_CUDA_INTERNAL_ERROR: "INTERNAL_ERROR",
}

# ----------------------------------------------------------------------- dtypes and penalties
RH_CUDA_DTYPE_FLOAT32 = 1
RH_CUDA_DTYPE_FLOAT64 = 2

RH_CUDA_PENALTY_NONE = 0
RH_CUDA_PENALTY_L1 = 1

RH_CUDA_MEMORY_HOST = 1
RH_CUDA_MEMORY_DEVICE = 2

RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS = 1 << 0
RH_CUDA_ENGINE_FLAG_FAST_MATH = 1 << 1

DTYPE_CODES = {"float32": RH_CUDA_DTYPE_FLOAT32, "float64": RH_CUDA_DTYPE_FLOAT64}
PENALTY_CODES = {"none": RH_CUDA_PENALTY_NONE, "l1": RH_CUDA_PENALTY_L1}
ENGINE_FLAG_NAMES = {
    RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS: "cuda_graphs",
    RH_CUDA_ENGINE_FLAG_FAST_MATH: "fast_math",
}
_KNOWN_ENGINE_FLAGS = sum(ENGINE_FLAG_NAMES)

# uintptr_t: the ABI is 64-bit only (manifest pointer_size 8).
c_uintptr = ctypes.c_uint64


# ------------------------------------------------------------------------------------ structs
class RhCudaEngineOptions(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("n_parameters", ctypes.c_int64),
        ("reserved0", ctypes.c_uint64),
    ]


class RhCudaHostStateView(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("coefficients", ctypes.c_void_p),
        ("information", ctypes.c_void_p),
        ("n_samples_seen", ctypes.c_int64),
        ("batch_count", ctypes.c_int64),
        ("previous_lambda", ctypes.c_double),
        ("weight_sum", ctypes.c_double),
        ("meat", ctypes.c_void_p),
    ]


class RhCudaHostState(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("coefficients", ctypes.c_void_p),
        ("information", ctypes.c_void_p),
        ("n_samples_seen", ctypes.c_int64),
        ("batch_count", ctypes.c_int64),
        ("previous_lambda", ctypes.c_double),
        ("weight_sum", ctypes.c_double),
        ("meat", ctypes.c_void_p),
        ("meat_available", ctypes.c_int32),
        ("reserved1", ctypes.c_int32),
    ]


# Both state structs as ABI 2 callers built before K lay them out: struct_size 56, the offset
# of `meat`. Engines still accept it and then neither take nor give K.
STATE_SIZE_WITHOUT_MEAT = RhCudaHostState.meat.offset


class RhCudaUpdateConfig(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("n_features_in", ctypes.c_int64),
        ("max_iter", ctypes.c_int64),
        ("tau", ctypes.c_double),
        ("bandwidth_scale", ctypes.c_double),
        ("tolerance", ctypes.c_double),
        ("ridge", ctypes.c_double),
        ("penalty", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("lambda_scale", ctypes.c_double),
    ]


class RhCudaHostBatch(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("x_design", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("sample_weight", ctypes.c_void_p),
        ("n_rows", ctypes.c_int64),
        ("n_columns", ctypes.c_int64),
        ("batch_weight", ctypes.c_double),
    ]


class RhCudaDeviceBatch(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("x_design", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("sample_weight", ctypes.c_void_p),
        ("n_rows", ctypes.c_int64),
        ("n_columns", ctypes.c_int64),
        ("batch_weight", ctypes.c_double),
    ]


class RhCudaPrediction(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("x_design", ctypes.c_void_p),
        ("prediction", ctypes.c_void_p),
        ("n_rows", ctypes.c_int64),
        ("n_columns", ctypes.c_int64),
        ("n_features_in", ctypes.c_int64),
        ("input_location", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
    ]


class RhCudaDiagnostics(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("iterations", ctypes.c_int64),
        ("converged", ctypes.c_int32),
        ("used_regularized_fallback", ctypes.c_int32),
        ("objective", ctypes.c_double),
        ("lambda_value", ctypes.c_double),
        ("bandwidth", ctypes.c_double),
    ]


class RhCudaRuntimeInfo(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("runtime_version", ctypes.c_int32),
        ("driver_version", ctypes.c_int32),
        ("device_count", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
    ]


class RhCudaEngineFeatures(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("requested_flags", ctypes.c_uint64),
        ("enabled_flags", ctypes.c_uint64),
        ("graph_captures", ctypes.c_uint64),
        ("graph_replays", ctypes.c_uint64),
        ("graph_fallbacks", ctypes.c_uint64),
    ]


STRUCTS = (
    RhCudaEngineOptions,
    RhCudaHostStateView,
    RhCudaHostState,
    RhCudaUpdateConfig,
    RhCudaHostBatch,
    RhCudaDeviceBatch,
    RhCudaPrediction,
    RhCudaDiagnostics,
    RhCudaRuntimeInfo,
    RhCudaEngineFeatures,
)

# RhCudaEngine is opaque: a handle is a plain pointer.
RhCudaEngine_p = ctypes.c_void_p
_status = ctypes.c_int32
_P = ctypes.POINTER

# ---------------------------------------------------------------------------------- functions
# (name, restype, argtypes) in header order; the C declaration is the comment above each.
SIGNATURES = (
    # uint32_t rh_cuda_abi_version(void);
    ("rh_cuda_abi_version", ctypes.c_uint32, ()),
    # const char* rh_cuda_last_error(void);
    ("rh_cuda_last_error", ctypes.c_char_p, ()),
    # RhCudaStatus rh_cuda_is_available(int32_t* available);
    ("rh_cuda_is_available", _status, (_P(ctypes.c_int32),)),
    # RhCudaStatus rh_cuda_device_count(int32_t* count);
    ("rh_cuda_device_count", _status, (_P(ctypes.c_int32),)),
    # RhCudaStatus rh_cuda_runtime_info(RhCudaRuntimeInfo* info);
    ("rh_cuda_runtime_info", _status, (_P(RhCudaRuntimeInfo),)),
    # RhCudaStatus rh_cuda_engine_create(const RhCudaEngineOptions* options,
    #                                    RhCudaEngine** out_engine);
    ("rh_cuda_engine_create", _status, (_P(RhCudaEngineOptions), _P(RhCudaEngine_p))),
    # RhCudaStatus rh_cuda_engine_destroy(RhCudaEngine* engine);
    ("rh_cuda_engine_destroy", _status, (RhCudaEngine_p,)),
    # RhCudaStatus rh_cuda_engine_restore(RhCudaEngine* engine, const RhCudaHostStateView* state);
    ("rh_cuda_engine_restore", _status, (RhCudaEngine_p, _P(RhCudaHostStateView))),
    # RhCudaStatus rh_cuda_engine_copy_state(RhCudaEngine* engine, RhCudaHostState* state);
    ("rh_cuda_engine_copy_state", _status, (RhCudaEngine_p, _P(RhCudaHostState))),
    # RhCudaStatus rh_cuda_engine_update_host(RhCudaEngine* engine, const RhCudaHostBatch* batch,
    #                                         const RhCudaUpdateConfig* config,
    #                                         RhCudaDiagnostics* diagnostics);
    (
        "rh_cuda_engine_update_host",
        _status,
        (RhCudaEngine_p, _P(RhCudaHostBatch), _P(RhCudaUpdateConfig), _P(RhCudaDiagnostics)),
    ),
    # RhCudaStatus rh_cuda_engine_update_host_with_state(RhCudaEngine* engine,
    #                                                    const RhCudaHostBatch* batch,
    #                                                    const RhCudaUpdateConfig* config,
    #                                                    RhCudaDiagnostics* diagnostics,
    #                                                    RhCudaHostState* state);
    (
        "rh_cuda_engine_update_host_with_state",
        _status,
        (
            RhCudaEngine_p,
            _P(RhCudaHostBatch),
            _P(RhCudaUpdateConfig),
            _P(RhCudaDiagnostics),
            _P(RhCudaHostState),
        ),
    ),
    # RhCudaStatus rh_cuda_engine_stream(RhCudaEngine* engine, uintptr_t* stream);
    ("rh_cuda_engine_stream", _status, (RhCudaEngine_p, _P(c_uintptr))),
    # RhCudaStatus rh_cuda_engine_update_device_with_state(RhCudaEngine* engine,
    #                                                      const RhCudaDeviceBatch* batch,
    #                                                      const RhCudaUpdateConfig* config,
    #                                                      RhCudaDiagnostics* diagnostics,
    #                                                      RhCudaHostState* state);
    (
        "rh_cuda_engine_update_device_with_state",
        _status,
        (
            RhCudaEngine_p,
            _P(RhCudaDeviceBatch),
            _P(RhCudaUpdateConfig),
            _P(RhCudaDiagnostics),
            _P(RhCudaHostState),
        ),
    ),
    # RhCudaStatus rh_cuda_engine_predict(RhCudaEngine* engine, const RhCudaPrediction* prediction);
    ("rh_cuda_engine_predict", _status, (RhCudaEngine_p, _P(RhCudaPrediction))),
    # RhCudaStatus rh_cuda_engine_synchronize(RhCudaEngine* engine);
    ("rh_cuda_engine_synchronize", _status, (RhCudaEngine_p,)),
    # RhCudaStatus rh_cuda_engine_features(RhCudaEngine* engine, RhCudaEngineFeatures* features);
    ("rh_cuda_engine_features", _status, (RhCudaEngine_p, _P(RhCudaEngineFeatures))),
    # const char* rh_cuda_engine_last_error(const RhCudaEngine* engine);
    ("rh_cuda_engine_last_error", ctypes.c_char_p, (RhCudaEngine_p,)),
)

SYMBOLS = tuple(name for name, _, _ in SIGNATURES)

_BOUND_MARK = "_renewable_huber_abi_bound"


def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare argtypes/restype of the 17 functions on `lib` (once; later calls are no-ops).

    A missing symbol raises BackendUnavailableError naming it, before anything is declared.
    """
    if getattr(lib, _BOUND_MARK, False):
        return lib
    missing = [name for name in SYMBOLS if not hasattr(lib, name)]
    if missing:
        raise BackendUnavailableError(
            f"engine library {lib._name!r} does not export {', '.join(missing)}; "
            f"it is not an rh_cuda ABI {ABI_VERSION} engine"
        )
    for name, restype, argtypes in SIGNATURES:
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = list(argtypes)
    setattr(lib, _BOUND_MARK, True)
    return lib


@functools.cache
def _layout(struct_type: type[ctypes.Structure]) -> tuple[frozenset[str], int]:
    """(the field names, the size) of an ABI struct type: fixed by its definition."""
    return frozenset(name for name, _ in struct_type._fields_), ctypes.sizeof(struct_type)


def make(struct_type: type[ctypes.Structure], **fields) -> ctypes.Structure:
    """A `struct_type` with abi_version and struct_size filled in, plus the given fields."""
    known, size = _layout(struct_type)
    if not known.issuperset(fields):
        unknown = sorted(set(fields) - known)
        raise TypeError(f"{struct_type.__name__} has no field(s) {', '.join(unknown)}")
    header_fields = {"abi_version", "struct_size"} & fields.keys()
    if header_fields:
        raise TypeError(
            f"{struct_type.__name__}: {', '.join(sorted(header_fields))} is filled in by make()"
        )
    return struct_type(abi_version=ABI_VERSION, struct_size=size, **fields)


def make_update_config(config) -> RhCudaUpdateConfig:
    """The RhCudaUpdateConfig of a renewable_huber.config.UpdateConfig (penalty name -> code).
    An unknown penalty name is a ValidationError naming it."""
    if config.penalty not in PENALTY_CODES:
        raise ValidationError(f"penalty must be 'none' or 'l1', got {config.penalty!r}")
    return make(
        RhCudaUpdateConfig,
        n_features_in=config.n_features_in,
        max_iter=config.max_iter,
        tau=config.tau,
        bandwidth_scale=config.bandwidth_scale,
        tolerance=config.tol,
        ridge=config.ridge,
        penalty=PENALTY_CODES[config.penalty],
        reserved0=0,
        lambda_scale=config.lambda_scale,
    )


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status, f"UNKNOWN_STATUS({status})")


def decode_flags(bits: int) -> list[str]:
    """Names of the RH_CUDA_ENGINE_FLAG_* bits set in `bits`; unknown bits as hex."""
    return list(_flag_names(bits))


# A pure function of the bits, asked after every native_cuda batch with the same few values.
@functools.lru_cache(maxsize=64)
def _flag_names(bits: int) -> tuple[str, ...]:
    names = [name for flag, name in ENGINE_FLAG_NAMES.items() if bits & flag]
    unknown = bits & ~_KNOWN_ENGINE_FLAGS
    if unknown:
        names.append(f"unknown(0x{unknown:x})")
    return tuple(names)


def last_error(lib: ctypes.CDLL, engine=None) -> str:
    """The engine's last-error text, or the thread's when `engine` is None."""
    raw = lib.rh_cuda_last_error() if engine is None else lib.rh_cuda_engine_last_error(engine)
    return raw.decode("utf-8", errors="replace") if raw else ""


def check(lib: ctypes.CDLL, status: int, call: str, engine=None) -> None:
    """Raise the package exception for a non-SUCCESS `status` returned by `call`.

    INVALID_ARGUMENT -> ValidationError, UNAVAILABLE -> BackendUnavailableError, anything else
    -> EngineError. The message names the call, the status and the engine's own text, which is
    also kept on the exception as `engine_message` (with `status` and `status_name`).
    """
    if status == RH_CUDA_SUCCESS:
        return
    text = last_error(lib, engine)
    name = status_name(status)
    message = f"{call} failed with {name}: {text or '(the engine gave no message)'}"
    if status == RH_CUDA_INVALID_ARGUMENT:
        error: Exception = ValidationError(message)
    elif status == RH_CUDA_UNAVAILABLE:
        error = BackendUnavailableError(message)
    else:
        error = EngineError(message)
    error.status = status
    error.status_name = name
    error.engine_message = text
    raise error
