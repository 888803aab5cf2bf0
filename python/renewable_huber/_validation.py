"""The one place where estimator parameters and user arrays are checked.

Every backend receives data that already satisfies the package's input rules, so the rules here
are the rules of the whole package: no backend re-validates them. One rule is
delegated: with `engine_checks_finite` (the native engines, which refuse NaN/Inf in X, y and
sample_weight naming the array and the first bad position before anything is committed), an
array that reaches the engine unchanged (host input already in the working dtype and
C-contiguous, or device input) is not scanned for NaN/Inf here; the native backend turns the
engine's refusal into a ValidationError naming the user's array. Arrays that were cast or
copied are still scanned here, which also reports values that overflow float32 as such.

Range rule (batches to fit, host arrays): finite values can still overflow the engines'
arithmetic. Every engine forms the weighted Gram X' diag(w c) X of the design with the
intercept column (c <= 1, so each entry is at most sum_i w_i (||x_i||^2 + 1) by Cauchy-Schwarz;
LAMM computes that sum itself as its curvature bound), and the loss rho(r) is r^2 / 2 wherever
|r| <= tau, which at the start of a stream (r = y) is sum_i w_i y_i^2 / 2. The rule:

    sum_i w_i                 <= finfo(dtype).max / RANGE_MARGIN   (named: sample_weight)
    sum_i w_i y_i^2           <= finfo(dtype).max / RANGE_MARGIN   (named: y, its largest entry)
    sum_i w_i (||x_i||^2 + 1) <= finfo(dtype).max / RANGE_MARGIN   (named: X, its largest row)

RANGE_MARGIN = 1e6 leaves six decimal orders of magnitude for what the input cannot bound:
the information matrix adds one such Gram per batch, and the solves multiply and add its
entries. The intercept column is counted even when fit_intercept=False (a bound, at most the
batch's weight sum higher). The first two are O(n) and checked before any engine runs. The
third would cost a pass over X per batch (measured: 14 ms on a 100,000 x 16 float64 batch
whose native update takes 13 ms), so it explains a refusal instead: every engine refuses a
batch whose Gram, objective or state is not finite before committing anything, and the
estimator then raises the rule's ValidationError naming X and its largest row when X broke
it, whatever the engine. A huge value in a row whose curvature is zero can stay out of the Gram
and so be accepted by an engine whose arithmetic never overflows.
Device arrays are not range-checked (it would cost a device reduction and a synchronisation
per batch); their overflow is left to the engine. predict is not refused up front (a large X
with small coefficients predicts finite values); a prediction that overflows is refused
after the fact, naming the row (check_predictions).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ._backend_facts import BACKEND_CHOICES
from .exceptions import (
    BackendContractError,
    BackendUnavailableError,
    DataConversionWarning,
    InputTypeError,
    ValidationError,
    caller_stacklevel,
    sklearn_compatible,
)

# Defaults of the estimator's constructor; checkpoints of format 1 may predate some
# parameters and take these values for the missing ones (formats 1 to 4 predate `inference`,
# formats 1 to 5 `standardize`: see checkpoint._config).
DEFAULT_PARAMS: dict[str, Any] = {
    "tau": 1.345,
    "penalty": "none",
    "lambda_scale": 1.0,
    "bandwidth_scale": 1.0,
    "fit_intercept": True,
    "max_iter": 100,
    "tol": 1e-6,
    "ridge": 1e-8,
    "backend": "auto",
    "device": "auto",
    "dtype": "float64",
    "n_jobs": None,
    "cuda_graphs": False,
    "cuda_fast_math": False,
    "inference": False,
    "standardize": False,
}
PARAM_NAMES: tuple[str, ...] = tuple(DEFAULT_PARAMS)

BACKEND_NAMES = BACKEND_CHOICES
DEVICE_NAMES = ("auto", "cpu", "cuda")
PENALTIES = ("none", "l1")
DTYPE_NAMES = ("float32", "float64")
# tau="auto": chosen from the first batch of a stream (see renewable_huber.tau).
TAU_AUTO = "auto"
# Batches to fit keep their Gram and squared targets below finfo(dtype).max / RANGE_MARGIN.
RANGE_MARGIN = 1e6

# DLPack's device type code for ordinary host memory.
_DLPACK_CPU = 1


class UnknownBackendError(BackendUnavailableError, ValidationError):
    """A backend name outside the known set. The spec lists an unknown backend both as a
    configuration violation and as an unavailable backend, so it is catchable as either."""


@dataclasses.dataclass(frozen=True)
class ValidatedParams:
    """Constructor parameters after validation, normalised to plain Python/NumPy types
    (tau: a float, or "auto" until the stream's first batch fixes it)."""

    tau: float | str
    penalty: str
    lambda_scale: float
    bandwidth_scale: float
    fit_intercept: bool
    max_iter: int
    tol: float
    ridge: float
    backend: str
    device: str
    dtype: np.dtype
    n_jobs: int | None
    cuda_graphs: bool
    cuda_fast_math: bool
    inference: bool
    standardize: bool

    def as_config_dict(self) -> dict[str, Any]:
        """JSON-ready form (the `config` of a checkpoint)."""
        values = dataclasses.asdict(self)
        values["dtype"] = self.dtype.name
        return values

    def __post_init__(self):
        # Compared on every batch: built once (dtype.name is a Python-level property).
        object.__setattr__(self, "_stream_layout", (
            self.fit_intercept,
            self.dtype.name,
            self.backend,
            self.device,
            self.n_jobs,
            self.cuda_graphs,
            self.cuda_fast_math,
            self.inference,
            self.standardize,
        ))

    def stream_layout(self) -> tuple:
        """Parameters fixed for the life of a stream: changing them needs a new stream."""
        return self._stream_layout


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _real(name: str, value, *, lower: float, strict: bool) -> float:
    relation = ">" if strict else ">="
    requirement = f"{name} must be a finite real number {relation} {lower:g}"
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValidationError(f"{requirement}, got {value!r} of type {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number < lower or (strict and number == lower):
        raise ValidationError(f"{requirement}, got {value!r}")
    return number


def _tau(value) -> float | str:
    if isinstance(value, str) and value == TAU_AUTO:
        return TAU_AUTO
    requirement = "tau must be a finite real number > 0 (in the target's units) or 'auto'"
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValidationError(f"{requirement}, got {value!r} of type {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise ValidationError(f"{requirement}, got {value!r}")
    return number


def _flag(name: str, value) -> bool:
    if not _is_bool(value):
        raise ValidationError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _choice(name: str, value, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValidationError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _dtype(value) -> np.dtype:
    requirement = "dtype must be 'float32' or 'float64'"
    if isinstance(value, str):
        if value not in DTYPE_NAMES:
            raise ValidationError(f"{requirement}, got {value!r}")
        return np.dtype(value)
    # np.float32, np.float64 and np.dtype objects are accepted as spellings of the names;
    # anything else (None would silently mean float64 to NumPy) is refused.
    if value in (np.float32, np.float64) or (
        isinstance(value, np.dtype) and value.name in DTYPE_NAMES
    ):
        return np.dtype(value)
    raise ValidationError(f"{requirement}, got {value!r}")


def _max_iter(value) -> int:
    if _is_bool(value) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValidationError(f"max_iter must be an integer >= 1, got {value!r}")
    return int(value)


def _n_jobs(value) -> int | None:
    if value is None:
        return None
    if _is_bool(value) or not isinstance(value, numbers.Integral) or not (
        int(value) == -1 or int(value) >= 1
    ):
        raise ValidationError(f"n_jobs must be None, -1 or a positive integer, got {value!r}")
    return int(value)


def validate_backend_name(value) -> str:
    if not isinstance(value, str) or value not in BACKEND_NAMES:
        allowed = ", ".join(repr(c) for c in BACKEND_NAMES)
        raise UnknownBackendError(f"backend must be one of {allowed}, got {value!r}")
    return value


def validate_params(params: Mapping[str, Any]) -> ValidatedParams:
    """Check every constructor parameter; raise ValidationError naming the first bad one."""
    unknown = sorted(set(params) - set(PARAM_NAMES))
    if unknown:
        raise ValidationError(f"unknown parameter(s) {unknown}; valid: {list(PARAM_NAMES)}")
    missing = sorted(set(PARAM_NAMES) - set(params))
    if missing:
        raise ValidationError(f"missing parameter(s) {missing}")
    validated = ValidatedParams(
        tau=_tau(params["tau"]),
        penalty=_choice("penalty", params["penalty"], PENALTIES),
        lambda_scale=_real("lambda_scale", params["lambda_scale"], lower=0.0, strict=False),
        bandwidth_scale=_real("bandwidth_scale", params["bandwidth_scale"], lower=0.0, strict=True),
        fit_intercept=_flag("fit_intercept", params["fit_intercept"]),
        max_iter=_max_iter(params["max_iter"]),
        tol=_real("tol", params["tol"], lower=0.0, strict=True),
        ridge=_real("ridge", params["ridge"], lower=0.0, strict=False),
        backend=validate_backend_name(params["backend"]),
        device=_choice("device", params["device"], DEVICE_NAMES),
        dtype=_dtype(params["dtype"]),
        n_jobs=_n_jobs(params["n_jobs"]),
        cuda_graphs=_flag("cuda_graphs", params["cuda_graphs"]),
        cuda_fast_math=_flag("cuda_fast_math", params["cuda_fast_math"]),
        inference=_flag("inference", params["inference"]),
        standardize=_flag("standardize", params["standardize"]),
    )
    if validated.cuda_fast_math and validated.dtype != np.float32:
        raise ValidationError(
            "cuda_fast_math=True requires dtype='float32' (fast math is a float32-only "
            f"engine mode), got dtype={validated.dtype.name!r}"
        )
    return validated


# ---------------------------------------------------------------------------------------
# Arrays


class Batch(NamedTuple):
    """One validated batch: X (n, p), y (n,), sample_weight (n,) or None, all either host
    NumPy arrays in the working dtype (C-contiguous) or untouched device arrays."""

    X: Any
    y: Any
    sample_weight: Any
    feature_names: tuple[str, ...] | None
    on_device: bool


def is_device_array(array) -> bool:
    """True for arrays living in accelerator memory (CuPy, PyTorch CUDA, ...)."""
    if isinstance(array, np.ndarray):
        return False
    if hasattr(type(array), "__dlpack_device__"):
        try:
            device_type = array.__dlpack_device__()[0]
        except Exception:  # a broken exporter is judged by the CUDA interface below
            device_type = None
        if device_type is not None:
            return int(device_type) != _DLPACK_CPU
    # Looked up on the type: PyTorch's property raises for tensors that require grad.
    return hasattr(type(array), "__cuda_array_interface__")


def _plain_cupy_type():
    """cupy.ndarray when CuPy is imported, else None (no CuPy array can exist then). An array
    of exactly this type is on the device, never sparse, without gradients and without column
    names: what the general checks below find for it, without asking."""
    cupy = sys.modules.get("cupy")
    return None if cupy is None else getattr(cupy, "ndarray", None)


def _library_of(array):
    return sys.modules[type(array).__module__.split(".")[0]]


# Dtype names by the identity of the dtype object (NumPy's, CuPy's, which are NumPy's, or
# PyTorch's), holding the object so that an identity is never reused. Dtype objects are
# immutable, and naming one is costly per batch: dtype.name is a Python-level property of
# NumPy's, and PyTorch's dtypes cost NumPy an exception each time. Bounded: dtype objects
# minted anew for every array are simply named again.
_DTYPE_NAMES: dict[int, tuple[Any, str]] = {}
_DTYPE_NAMES_LIMIT = 64


def _dtype_name(dtype_object) -> str:
    known = _DTYPE_NAMES.get(id(dtype_object))
    if known is not None and known[0] is dtype_object:
        return known[1]
    try:
        name = np.dtype(dtype_object).name
    except TypeError:
        # PyTorch spells dtypes "torch.float32".
        name = str(dtype_object).rsplit(".", 1)[-1]
    if len(_DTYPE_NAMES) < _DTYPE_NAMES_LIMIT:
        _DTYPE_NAMES[id(dtype_object)] = (dtype_object, name)
    return name


def _device_dtype_name(array) -> str:
    return _dtype_name(array.dtype)


def _is_sparse(array) -> bool:
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(array)


def _detached(array):
    # Gradients are irrelevant to a fit; a tensor that requires grad refuses conversion.
    if getattr(array, "requires_grad", False) and hasattr(array, "detach"):
        return array.detach()
    return array


def _reject_sparse(name: str, array) -> None:
    if _is_sparse(array):
        raise TypeError(
            f"{name} is a SciPy sparse matrix; renewable_huber needs dense input and never "
            f"densifies silently: call {name}.toarray() first"
        )


def aligned(array: np.ndarray) -> np.ndarray:
    """`array`, or a copy when its elements are not at addresses that are multiples of their
    size (np.frombuffer at an odd offset, buffers deserialised out of band): BLAS kernels with
    aligned vector loads (OpenBLAS's Prescott kernels) and the engines (which refuse such
    pointers, docs/abi.md) must not be handed one. A copy is aligned."""
    return array if array.flags.aligned else array.copy()


def _host_array(
    name: str, array, dtype: np.dtype, *, engine_checks_finite: bool = False
) -> np.ndarray:
    if (type(array) is np.ndarray and array.dtype == dtype and array.flags.c_contiguous
            and array.flags.aligned):
        # Already what the conversion below would return unchanged (`converted is raw`).
        if not engine_checks_finite:
            _check_host_finite(name, array, array)
        return array
    if hasattr(array, "to_numpy") and not isinstance(array, np.ndarray):
        array = array.to_numpy()
    if isinstance(array, np.ma.MaskedArray):
        raise ValidationError(
            f"{name} is a masked array; its mask would be dropped silently: fill or remove the "
            f"masked values first (e.g. {name}.filled(value) or {name}.compressed())"
        )
    try:
        raw = np.asarray(array)
    except (TypeError, ValueError) as error:
        raise ValidationError(f"{name} could not be read as a numeric array: {error}") from None
    if raw.dtype.kind == "c":
        raise ValidationError(
            f"Complex data not supported: {name} is complex ({raw.dtype}); only real numbers "
            "are accepted"
        )
    if raw.dtype.kind not in "biufO":
        raise ValidationError(f"{name} must be numeric, got an array of dtype {raw.dtype}")
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            # Not ascontiguousarray: it would turn a 0-d array into a 1-d one.
            converted = np.asarray(raw, dtype=dtype, order="C")
    except (TypeError, ValueError) as error:
        # A TypeError from NumPy (a dict, a list in a cell) stays a TypeError as well.
        kind = InputTypeError if isinstance(error, TypeError) else ValidationError
        raise kind(
            f"{name} must contain real numbers only (no missing, complex or text values): {error}"
        ) from None
    converted = aligned(converted)
    # `converted is raw` means no cast and no copy: the engine reads the values as given and
    # refuses NaN/Inf itself. A cast (e.g. to float32) may create infinities: scan those here.
    if not (engine_checks_finite and converted is raw):
        _check_host_finite(name, raw, converted)
    return converted


def _check_host_finite(name: str, raw: np.ndarray, converted: np.ndarray) -> None:
    finite = np.isfinite(converted)
    if finite.all():
        return
    position = tuple(int(i) for i in np.argwhere(~finite)[0])
    where = (
        f"row {position[0]}, column {position[1]}" if len(position) == 2 else
        f"index {position[0]}" if position else "the scalar"
    )
    original = raw[position] if raw.ndim else raw[()]
    if raw.dtype.kind in "biuf" and np.isfinite(original):
        raise ValidationError(
            f"{name} has a value at {where} ({original!r}) that overflows {converted.dtype}; "
            "rescale the data or use dtype='float64'"
        )
    raise ValidationError(f"{name} contains NaN or infinity (first at {where})")


def _device_address(array) -> tuple[int, int] | None:
    """(address, element size) of a device array, read without a synchronisation: CuPy's and
    PyTorch's own attributes first (CuPy's __cuda_array_interface__ synchronises its stream by
    default), the CUDA array interface otherwise; None when none is available."""
    data = getattr(array, "data", None)
    if hasattr(data, "ptr") and hasattr(array, "itemsize"):  # CuPy
        return int(data.ptr), int(array.itemsize)
    if callable(getattr(array, "data_ptr", None)) and callable(
            getattr(array, "element_size", None)):  # PyTorch
        return int(array.data_ptr()), int(array.element_size())
    try:
        interface = array.__cuda_array_interface__
    except Exception:  # no interface, or PyTorch's property refusing a grad tensor
        return None
    if not isinstance(interface, Mapping):
        return None
    return int(interface["data"][0]), np.dtype(interface["typestr"]).itemsize


def _check_device_alignment(name: str, array) -> None:
    """A device array whose address is not a multiple of its element size is refused before
    any library touches it: a misaligned access by a CUDA kernel (CuPy's finiteness scan, the
    engine) leaves the process's CUDA context unusable. Plain DLPack producers are checked by
    the engine before its first kernel."""
    found = _device_address(array)
    if found is None:
        return
    address, itemsize = found
    if itemsize and address % itemsize:
        raise BackendContractError(
            f"{name} is a device array at address {address:#x}, not aligned to its "
            f"{itemsize}-byte elements; pass an aligned array (e.g. a copy: {name}.copy())"
        )


def _check_device_array(name: str, array, dtype: np.dtype, *, check_finite: bool = True) -> None:
    # CuPy (like NumPy) hands out NumPy's dtype singletons: the very working dtype object needs
    # no name comparison (dtype.name is a Python-level property of NumPy's, costly per batch).
    if array.dtype is not dtype:
        dtype_name = _device_dtype_name(array)
        if dtype_name.startswith("complex"):
            raise ValidationError(
                f"Complex data not supported: {name} is complex ({dtype_name}); only real "
                "numbers are accepted"
            )
        working = _dtype_name(dtype)
        if dtype_name != working:
            raise BackendContractError(
                f"{name} is a device array of dtype {dtype_name} but the estimator works in "
                f"{working}; device input is never cast: convert it on the device first "
                f"(e.g. {name}.astype('{working}')) or set dtype='{dtype_name}'"
            )
    # The array's own library reduces on the device: only one boolean crosses to the host.
    if check_finite and not bool(_library_of(array).isfinite(array).all()):
        raise ValidationError(f"{name} contains NaN or infinity")


def _shape(array) -> tuple[int, ...]:
    return tuple(map(int, array.shape))


def _check_X_shape(shape: tuple[int, ...], n_features_expected: int | None) -> None:
    if len(shape) != 2:
        hint = (
            ". Reshape your data: X.reshape(-1, 1) for a single feature, X.reshape(1, -1) for "
            "a single sample" if len(shape) == 1 else ""
        )
        raise ValidationError(f"X must be 2-D (n_samples, n_features), got shape {shape}{hint}")
    if shape[0] < 1:
        raise ValidationError(
            f"X has 0 sample(s) (shape={shape}) while a minimum of 1 is required."
        )
    if shape[1] < 1:
        raise ValidationError(
            f"X has 0 feature(s) (shape={shape}) while a minimum of 1 is required."
        )
    if n_features_expected is not None and shape[1] != n_features_expected:
        raise ValidationError(
            f"X has {shape[1]} features, but RenewableHuberRegressor is expecting "
            f"{n_features_expected} features as input (the stream's first batch had "
            f"{n_features_expected})"
        )


def _table_feature_names(X) -> tuple[Any, ...] | None:
    if hasattr(X, "to_numpy") and hasattr(X, "columns") and not isinstance(X, np.ndarray):
        return tuple(X.columns)
    return None


def _check_feature_names(
    names: tuple[Any, ...] | None, expected: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    """Return the names to record when this is the first batch; enforce them afterwards."""
    all_strings = names is not None and all(isinstance(n, str) for n in names)
    if expected is None or names is None:
        return names if all_strings else None
    if names == expected:
        return expected
    if sorted(map(str, names)) == sorted(expected) and all_strings:
        raise ValidationError(
            "feature names must be in the same order as at the first batch: expected "
            f"{list(expected)}, got {list(names)}"
        )
    unseen = [n for n in names if n not in expected]
    missing = [n for n in expected if n not in names]
    raise ValidationError(
        "feature names differ from those seen at the first batch: "
        f"unexpected {unseen}, missing {missing} (expected {list(expected)})"
    )


def validate_X(
    X,
    *,
    dtype: np.dtype,
    accepts_device: bool,
    backend_name: str,
    n_features_expected: int | None = None,
    feature_names_expected: tuple[str, ...] | None = None,
    engine_checks_finite: bool = False,
) -> tuple[Any, tuple[str, ...] | None, bool]:
    """Validate a design matrix; returns (X, feature names to record or None, on_device).

    engine_checks_finite: the backend's engine refuses NaN/Inf itself (see the module
    docstring); only arrays that reach it unchanged skip the scan here."""
    if type(X) is np.ndarray:
        # A plain NumPy array: not sparse, no gradient, on the host, without column names
        # (what the general path below finds for it, without asking).
        host = _host_array("X", X, dtype, engine_checks_finite=engine_checks_finite)
        _check_X_shape(host.shape, n_features_expected)
        return host, None, False
    if X is None:
        raise ValidationError(
            "X is None: expected array-like (array or non-string sequence), got None"
        )
    if type(X) is _plain_cupy_type():
        on_device, names = True, None
    else:
        _reject_sparse("X", X)
        X = _detached(X)
        on_device = is_device_array(X)
        names = _check_feature_names(_table_feature_names(X), feature_names_expected)
    if on_device:
        _require_device_backend("X", X, accepts_device, backend_name)
        _check_device_alignment("X", X)
        _check_X_shape(_shape(X), n_features_expected)
        _check_device_array("X", X, dtype, check_finite=not engine_checks_finite)
        return X, names, True
    host = _host_array("X", X, dtype, engine_checks_finite=engine_checks_finite)
    _check_X_shape(host.shape, n_features_expected)
    return host, names, False


def _require_device_backend(name: str, array, accepts_device: bool, backend_name: str) -> None:
    if not accepts_device:
        library = type(array).__module__.split(".")[0]
        raise BackendContractError(
            f"{name} is a device array ({library}) but backend {backend_name!r} computes on the "
            "host; pass host (NumPy) arrays or use backend='cupy' or 'native_cuda'"
        )


def _validate_vector(name: str, array, n_rows: int, dtype: np.dtype, on_device: bool,
                     accepts_device: bool, backend_name: str, engine_checks_finite: bool):
    if type(array) is np.ndarray and not on_device and array.ndim == 1:
        # The general path below, for a plain 1-D NumPy array with a host X.
        array = _host_array(name, array, dtype, engine_checks_finite=engine_checks_finite)
        if array.shape[0] != n_rows:
            raise ValidationError(
                f"X has {n_rows} rows but {name} has {array.shape[0]} entries; they must have "
                "the same length"
            )
        return array
    # A plain CuPy array beside a device X needs none of these probes (_plain_cupy_type).
    if not (on_device and type(array) is _plain_cupy_type()):
        _reject_sparse(name, array)
        array = _detached(array)
        if is_device_array(array) != on_device:
            raise BackendContractError(
                f"X is {'a device' if on_device else 'a host'} array but {name} is "
                f"{'a device' if not on_device else 'a host'} array; pass all arrays on the "
                "same device"
            )
    if on_device:
        _require_device_backend(name, array, accepts_device, backend_name)
        _check_device_alignment(name, array)
        shape = _shape(array)
    else:
        array = _host_array(name, array, dtype, engine_checks_finite=engine_checks_finite)
        shape = array.shape
    if name == "y" and len(shape) == 2 and shape[1] == 1:
        warnings.warn(
            sklearn_compatible(DataConversionWarning)(
                "A column-vector y was passed when a 1d array was expected. Please change the "
                "shape of y to (n_samples,), for example using ravel()."
            ),
            stacklevel=caller_stacklevel(),
        )
        array = array.reshape(-1)
        shape = (shape[0],)
    if len(shape) != 1:
        column = " or a single column (n_samples, 1)" if name == "y" else ""
        raise ValidationError(f"{name} must be 1-D (n_samples,){column}, got shape {shape}")
    if shape[0] != n_rows:
        raise ValidationError(
            f"X has {n_rows} rows but {name} has {shape[0]} entries; they must have the same length"
        )
    if on_device:
        _check_device_array(name, array, dtype, check_finite=not engine_checks_finite)
    return array


def _check_weights(sample_weight) -> None:
    if bool((sample_weight < 0).any()):
        if isinstance(sample_weight, np.ndarray):
            first = int(np.argmax(sample_weight < 0))
            raise ValidationError(
                f"sample_weight must be >= 0, got {sample_weight[first]!r} at index {first}"
            )
        raise ValidationError("sample_weight must be >= 0, got a negative weight")
    if not bool((sample_weight != 0).any()):
        raise ValidationError(
            "sample_weight is all zero; at least one row needs a positive weight"
        )


def validate_batch(
    X,
    y,
    sample_weight,
    *,
    dtype: np.dtype,
    accepts_device: bool,
    backend_name: str,
    n_features_expected: int | None = None,
    feature_names_expected: tuple[str, ...] | None = None,
    engine_checks_finite: bool = False,
    check_range: bool = False,
) -> Batch:
    """Apply every input rule to one batch (NaN/Inf in arrays that reach the engine unchanged
    left to the engine when engine_checks_finite; see the module docstring). check_range: the
    batch is to be fitted, so host arrays must also satisfy the range rule."""
    if y is None:
        raise ValidationError(
            "y is None: RenewableHuberRegressor requires y to be passed, but the target y is None"
        )
    X, names, on_device = validate_X(
        X,
        dtype=dtype,
        accepts_device=accepts_device,
        backend_name=backend_name,
        n_features_expected=n_features_expected,
        feature_names_expected=feature_names_expected,
        engine_checks_finite=engine_checks_finite,
    )
    n_rows = _shape(X)[0] if on_device else X.shape[0]
    y = _validate_vector(
        "y", y, n_rows, dtype, on_device, accepts_device, backend_name, engine_checks_finite
    )
    if sample_weight is not None:
        sample_weight = _validate_vector(
            "sample_weight", sample_weight, n_rows, dtype, on_device, accepts_device,
            backend_name, engine_checks_finite,
        )
        _check_weights(sample_weight)
    if check_range and not on_device:
        _check_target_range(y, sample_weight)
    return Batch(X=X, y=y, sample_weight=sample_weight, feature_names=names, on_device=on_device)


_BLAS_SINGLE_THREAD_LENGTH = 10_000
_RANGE_LIMITS = {np.dtype(np.float32): float(np.finfo(np.float32).max) / RANGE_MARGIN,
                 np.dtype(np.float64): float(np.finfo(np.float64).max) / RANGE_MARGIN}


def range_limit(dtype) -> float:
    """The bound of the range rule (module docstring) for a working dtype."""
    return _RANGE_LIMITS[np.dtype(dtype)]


def _check_target_range(y: np.ndarray, sample_weight: np.ndarray | None) -> None:
    """The range rule's O(n) part, up front: the weights and sum w y^2 (module docstring)."""
    limit = _RANGE_LIMITS[y.dtype]  # y is in the working dtype (validated)
    # An overflowing sum gives inf (NaN input NaN): both fail the comparison, and the exact test
    # decides. np.vdot is the same BLAS dot product as np.dot, but does not turn an overflow
    # into a RuntimeWarning; should a NumPy version raise one under np.seterr(over="raise"), the
    # exact test decides as for any other overflow.
    try:
        if sample_weight is None:
            # The common case, without an np.errstate context (about a microsecond per batch).
            fine = _square_sum(y, None) <= limit
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                fine = (_square_sum(y, sample_weight) <= limit
                        and float(sample_weight.sum()) <= limit)
    except FloatingPointError:
        fine = False
    if not fine:
        _check_range_exactly(None, y, sample_weight, limit)


def _square_sum(y: np.ndarray, sample_weight: np.ndarray | None) -> float:
    """sum w y^2 (w = 1 without weights) by dot products of at most 10,000 entries: OpenBLAS
    runs those on the calling thread (a longer one would wake its thread pool, whose spinning
    threads then compete with the engine's), and no temporary the size of the batch is made
    (np.square(y) of a 65,536-row batch cost fresh pages every batch)."""
    step = _BLAS_SINGLE_THREAD_LENGTH
    total = 0.0
    for start in range(0, y.shape[0], step):
        part = y[start:start + step]
        weighted = part if sample_weight is None else sample_weight[start:start + step] * part
        total += float(np.vdot(weighted, part))
    return total


def explain_design_overflow(X, y, sample_weight) -> None:
    """After an engine refused a batch with a numerical error: the ValidationError of the range
    rule when X's Gram is what overflowed (module docstring); nothing otherwise."""
    if isinstance(X, np.ndarray):
        _check_range_exactly(X, y, sample_weight, range_limit(X.dtype))


def _check_range_exactly(X, y, sample_weight, limit: float) -> None:
    """X None: the weights and y only."""
    # NaN/Inf are not a range question: the finite checks report them (here for converted
    # arrays, in the engine for arrays it reads unchanged, see the module docstring), always
    # before anything is committed.
    if not all(
        np.isfinite(array).all() for array in (X, y, sample_weight) if array is not None
    ):
        return
    dtype = y.dtype
    weights = 1.0 if sample_weight is None else sample_weight.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if X is not None:
            X64 = X.astype(np.float64)
            row_terms = weights * (np.einsum("ij,ij->i", X64, X64) + 1.0)
        y64 = y.astype(np.float64)
        y_terms = weights * (y64 * y64)
        x_total = 0.0 if X is None else float(row_terms.sum())
        y_total = float(y_terms.sum())
        weight_total = None if sample_weight is None else float(weights.sum())
    weighted = "" if sample_weight is None else "w_i "
    advice = "rescale the data (e.g. divide each column by its scale)" + (
        " or use dtype='float64'" if dtype == np.float32 else ""
    )
    if weight_total is not None and not weight_total <= limit:
        index = int(np.argmax(weights))
        raise ValidationError(
            f"sample_weight is too large for {dtype.name}: the engines form X'WX, whose "
            f"intercept entry is the sum of the weights, and this batch's weights sum to "
            f"{weight_total:.3g}, above the limit {limit:.3g} (the largest "
            f"{dtype.name} / {RANGE_MARGIN:g}); the largest weight is at index {index} "
            f"({float(sample_weight[index]):.6g}); rescale sample_weight"
        )
    if not x_total <= limit:
        row = int(np.argmax(row_terms))
        column = int(np.argmax(np.abs(X64[row])))
        weight = "" if sample_weight is None else f", weight {float(sample_weight[row]):.6g}"
        raise ValidationError(
            f"X is too large for {dtype.name}: the engines form X'WX, and this batch's sum of "
            f"{weighted}(||x_i||^2 + 1) over its rows is {x_total:.3g}, above the limit "
            f"{limit:.3g} (the largest {dtype.name} / {RANGE_MARGIN:g}); the largest row is "
            f"row {row} (value {float(X[row, column]):.6g} at column {column}{weight}); {advice}"
        )
    if not y_total <= limit:
        index = int(np.argmax(y_terms))
        weight = "" if sample_weight is None else f", weight {float(sample_weight[index]):.6g}"
        raise ValidationError(
            f"y is too large for {dtype.name}: the Huber loss is r^2/2 within tau, and this "
            f"batch's sum of {weighted}y_i^2 is {y_total:.3g}, above the limit {limit:.3g} "
            f"(the largest {dtype.name} / {RANGE_MARGIN:g}); the largest entry is at index "
            f"{index} (value {float(y[index]):.6g}{weight}); {advice}"
        )


def check_predictions(predictions):
    """Refuse host predictions that overflowed the working dtype (X @ coef beyond its range),
    naming the first such row; device predictions are returned unchecked."""
    if not isinstance(predictions, np.ndarray):
        return predictions
    finite = np.isfinite(predictions)
    if not finite.all():
        row = int(np.argmax(~finite))
        raise ValidationError(
            f"the prediction for X row {row} overflows {predictions.dtype.name} "
            f"({float(predictions[row])}): X @ coef_ is beyond the working dtype's range there; "
            "rescale X" + (" or use dtype='float64'" if predictions.dtype == np.float32 else "")
        )
    return predictions
