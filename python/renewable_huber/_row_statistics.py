"""The ctypes binding of the OPTIONAL row-statistics extension (abi/rh_cuda_row_statistics.h).

An engine library may export the extension's functions besides the 17 symbols of the core ABI
(librh_cpu and librh_cuda do). Versions only add: version 1 is the version query and
rh_cuda_engine_row_statistics (rows in host memory); version 2 adds
rh_cuda_engine_row_statistics_device (rows in device memory on the engine's device).
`lookup(lib)` finds them by name at run time and answers None when the version query or the
host call is missing or the version is below 1, so a caller treats the extension as absent and
uses its own code; `has_device_call(lib)` says whether the device call is there too (version
>= 2 and its symbol exported).

`RowStatistics` is one engine used only for its row and Gram code: `compute` returns the sums
over a block of host rows at given coefficients, `compute_device` over rows in device memory
(CuPy arrays, borrowed through DLPack as the native_cuda backend borrows device input), both
with the shapes and dtypes the NumPy reference (core/objective.py) gives for the same kinds.
Only the standard library, NumPy and the package's own binding are imported here; CuPy only
by whoever hands in device arrays.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import weakref

import numpy as np

from . import _abi, _dlpack
from ._engine import HOST_DEVICE_ID, EngineHandle, batch_weight, engine_array, host_address
from .exceptions import BackendUnavailableError, ValidationError

#: the version of the extension this binding describes (every function of SIGNATURES)
ROW_STATISTICS_VERSION = 2
#: the version that introduced each call: a library of an older version lacks it
HOST_CALL_VERSION = 1
DEVICE_CALL_VERSION = 2

RH_CUDA_STATISTIC_LOSS = 1 << 0
RH_CUDA_STATISTIC_SCORE = 1 << 1
RH_CUDA_STATISTIC_CURVATURE = 1 << 2
RH_CUDA_STATISTIC_MAJORISER = 1 << 3
RH_CUDA_STATISTIC_MEAT = 1 << 4
RH_CUDA_STATISTIC_NORM = 1 << 5
RH_CUDA_STATISTIC_ALL = 0x3F

#: the statistic bit of each kind of renewable_huber.dask.partitions.KINDS
KIND_BITS = {
    "loss": RH_CUDA_STATISTIC_LOSS,
    "score": RH_CUDA_STATISTIC_SCORE,
    "curvature": RH_CUDA_STATISTIC_CURVATURE,
    "majoriser": RH_CUDA_STATISTIC_MAJORISER,
    "meat": RH_CUDA_STATISTIC_MEAT,
    "norm": RH_CUDA_STATISTIC_NORM,
}
_GRAM_KINDS = ("curvature", "majoriser", "meat")


class RhCudaRowStatistics(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("statistics", ctypes.c_uint64),
        ("coefficients", ctypes.c_void_p),
        ("tau", ctypes.c_double),
        ("bandwidth", ctypes.c_double),
        ("loss", ctypes.c_double),
        ("weighted_norm", ctypes.c_double),
        ("score", ctypes.c_void_p),
        ("curvature_gram", ctypes.c_void_p),
        ("majoriser_gram", ctypes.c_void_p),
        ("meat", ctypes.c_void_p),
    ]


HOST_CALL = "rh_cuda_engine_row_statistics"
DEVICE_CALL = "rh_cuda_engine_row_statistics_device"

# (name, restype, argtypes), the C declaration above each, in the header's order.
SIGNATURES = (
    # uint32_t rh_cuda_row_statistics_version(void);
    ("rh_cuda_row_statistics_version", ctypes.c_uint32, ()),
    # RhCudaStatus rh_cuda_engine_row_statistics(RhCudaEngine* engine,
    #     const RhCudaHostBatch* batch, RhCudaRowStatistics* statistics);
    (HOST_CALL, ctypes.c_int32,
     (ctypes.c_void_p, ctypes.POINTER(_abi.RhCudaHostBatch),
      ctypes.POINTER(RhCudaRowStatistics))),
    # Version 2. RhCudaStatus rh_cuda_engine_row_statistics_device(RhCudaEngine* engine,
    #     const RhCudaDeviceBatch* batch, RhCudaRowStatistics* statistics);
    (DEVICE_CALL, ctypes.c_int32,
     (ctypes.c_void_p, ctypes.POINTER(_abi.RhCudaDeviceBatch),
      ctypes.POINTER(RhCudaRowStatistics))),
)
SYMBOLS = tuple(name for name, _, _ in SIGNATURES)
#: what a library must export for the extension to count as present (version 1)
HOST_SYMBOLS = SYMBOLS[:2]
_SIGNATURE = {name: (restype, argtypes) for name, restype, argtypes in SIGNATURES}

_lock = threading.Lock()
# id(lib) -> (lib, version or 0 when absent, device call declared); lib is kept so that its id
# cannot be reused by another object while the entry exists.
_looked_up: dict[int, tuple[object, int, bool]] = {}


def _declare(lib, name: str):
    function = getattr(lib, name)
    function.restype, argtypes = _SIGNATURE[name]
    function.argtypes = list(argtypes)
    return function


def _find(lib) -> tuple[int, bool]:
    """(the library's extension version, or 0 when the extension is absent; whether the
    device call is usable), declaring what is found. Cached per library."""
    with _lock:
        entry = _looked_up.get(id(lib))
        if entry is not None and entry[0] is lib:
            return entry[1], entry[2]
        version, device = 0, False
        # getattr on a CDLL is dlsym: a missing symbol is an AttributeError, nothing more.
        if all(getattr(lib, name, None) is not None for name in HOST_SYMBOLS):
            query = _declare(lib, "rh_cuda_row_statistics_version")
            found = int(query())
            if found >= HOST_CALL_VERSION:
                version = found
                _declare(lib, HOST_CALL)
                if found >= DEVICE_CALL_VERSION and getattr(lib, DEVICE_CALL, None) is not None:
                    _declare(lib, DEVICE_CALL)
                    device = True
        _looked_up[id(lib)] = (lib, version, device)
        return version, device


def lookup(lib: ctypes.CDLL):
    """`lib` with the extension's functions declared, or None when the library does not
    export the version query and the host call or reports a version below 1 (the extension
    is then absent). Any later version is accepted: versions only add."""
    version, _ = _find(lib)
    return lib if version else None


def extension_version(lib: ctypes.CDLL) -> int:
    """The extension version `lib` reports, 0 when the extension is absent."""
    return _find(lib)[0]


def has_device_call(lib: ctypes.CDLL) -> bool:
    """True when `lib` has the extension at version >= 2 and exports its device call."""
    return _find(lib)[1]


def _outputs(kinds, n_parameters: int) -> dict:
    """The float64 output arrays the requested kinds need (score (P,), the Grams (P, P))."""
    P = n_parameters
    return {
        kind: np.empty((P, P) if kind in _GRAM_KINDS else P, dtype=np.float64)
        for kind in ("score", *_GRAM_KINDS) if kind in kinds
    }


def statistics_request(beta, bits: int, tau: float, bandwidth: float,
                       outputs: dict) -> RhCudaRowStatistics:
    """The RhCudaRowStatistics of one call at beta (a host array in the engine dtype, or None
    for NORM alone) with `outputs` (score, curvature, majoriser, meat: float64 host arrays,
    absent ones NULL). The arrays must stay alive and C-contiguous for the call."""
    return RhCudaRowStatistics(
        abi_version=_abi.ABI_VERSION, struct_size=ctypes.sizeof(RhCudaRowStatistics),
        statistics=bits, coefficients=host_address(beta), tau=float(tau),
        bandwidth=float(bandwidth), score=host_address(outputs.get("score")),
        curvature_gram=host_address(outputs.get("curvature")),
        majoriser_gram=host_address(outputs.get("majoriser")),
        meat=host_address(outputs.get("meat")),
    )


def request(X, y, w, beta, bits: int, tau: float, bandwidth: float, outputs: dict):
    """The (RhCudaHostBatch, RhCudaRowStatistics) of one rh_cuda_engine_row_statistics call
    over the design X (its intercept column included), y and w (None: unit weights, and
    batch_weight n_rows) at beta, with `outputs` (score, curvature, majoriser, meat: float64
    arrays, absent ones NULL). The arrays must stay alive and C-contiguous for the call."""
    batch = _abi.make(
        _abi.RhCudaHostBatch, x_design=host_address(X), y=host_address(y),
        sample_weight=host_address(w), n_rows=X.shape[0], n_columns=X.shape[1],
        batch_weight=batch_weight(w, X.shape[0]),
    )
    return batch, statistics_request(beta, bits, tau, bandwidth, outputs)


def device_request(x_pointer: int, y_pointer: int, w_pointer: int | None, n_rows: int,
                   n_columns: int, weight: float, beta, bits: int, tau: float,
                   bandwidth: float, outputs: dict):
    """The (RhCudaDeviceBatch, RhCudaRowStatistics) of one rh_cuda_engine_row_statistics_device
    call: the rows at the given device addresses (w_pointer None: unit weights, and `weight`
    must then be n_rows; else the weights' sum), beta and the outputs in host memory."""
    batch = _abi.make(
        _abi.RhCudaDeviceBatch, x_design=x_pointer, y=y_pointer, sample_weight=w_pointer,
        n_rows=int(n_rows), n_columns=int(n_columns), batch_weight=float(weight),
    )
    return batch, statistics_request(beta, bits, tau, bandwidth, outputs)


@contextlib.contextmanager
def borrowed_device_request(X, y, w, weight, *, device_id: int, stream: int, dtype, beta,
                            bits: int, tau: float, bandwidth: float, kinds=None,
                            outputs: dict | None = None):
    """Borrow X (n, P), y (n,) and w (n,) or None through DLPack on the engine's stream (their
    producer's pending work ordered before it, as the native_cuda backend borrows device input;
    C-contiguous arrays of `dtype` on `device_id`, never copied or cast), and yield the
    (RhCudaDeviceBatch, RhCudaRowStatistics, outputs) of one rh_cuda_engine_row_statistics_device
    call over them; the borrows end on exit. weight: the weights' float64 sum (ignored without
    w: n). outputs: the host arrays for the P-sized results, made for `kinds` when None."""
    element_bits = np.dtype(dtype).itemsize * 8
    with contextlib.ExitStack() as stack:
        x_view = stack.enter_context(_dlpack.Borrow(X, "X", device_id, stream, element_bits, 2))
        y_view = stack.enter_context(_dlpack.Borrow(y, "y", device_id, stream, element_bits, 1))
        n_rows, P = x_view.shape
        if y_view.shape != (n_rows,):
            raise ValidationError(
                f"X has shape {x_view.shape} and y {y_view.shape}; expected (n, P) and (n,)"
            )
        w_pointer = None
        if w is not None:
            w_view = stack.enter_context(
                _dlpack.Borrow(w, "sample_weight", device_id, stream, element_bits, 1))
            if w_view.shape != (n_rows,):
                raise ValidationError(
                    f"sample_weight has shape {w_view.shape}; expected ({n_rows},)"
                )
            w_pointer = w_view.data_pointer
        if outputs is None:
            outputs = _outputs(kinds, P)
        batch, statistics = device_request(
            x_view.data_pointer, y_view.data_pointer, w_pointer, n_rows, P,
            float(n_rows) if w is None else weight, beta, bits, tau, bandwidth, outputs)
        yield batch, statistics, outputs


class RowStatistics:
    """An engine of one dtype and P (on `device_id`: HOST_DEVICE_ID for librh_cpu, a CUDA
    device for librh_cuda) used for the extension's sums; its committed state is never used.
    One thread at a time, like every engine: see `for_thread`."""

    def __init__(self, lib: ctypes.CDLL, dtype, n_parameters: int,
                 device_id: int = HOST_DEVICE_ID):
        if lookup(lib) is None:
            raise BackendUnavailableError(
                f"engine library {lib._name!r} does not export the row-statistics extension "
                f"version >= {HOST_CALL_VERSION} ({', '.join(HOST_SYMBOLS)})"
            )
        self.dtype = np.dtype(dtype)
        self.device_id = int(device_id)
        self._handle = EngineHandle(lib, name="row-statistics engine", dtype=self.dtype,
                                    n_parameters=n_parameters, device_id=self.device_id)
        weakref.finalize(self, self._handle.close)
        self._stream = None  # the engine's CUDA stream, read at the first device call

    def _bits(self, kinds) -> int:
        bits = 0
        for kind in kinds:
            bits |= KIND_BITS[kind]
        return bits

    def _beta(self, beta):
        return None if beta is None else engine_array(beta, self.dtype)

    def _results(self, kinds, statistics: RhCudaRowStatistics, outputs: dict) -> dict:
        """loss (a scalar) in the engine dtype, score (P,) and the Grams (P, P) float64 and norm
        a float, as the NumPy reference computes them (the Newton system is float64 for every
        dtype)."""
        result = {}
        for kind in kinds:
            if kind == "loss":
                result[kind] = self.dtype.type(statistics.loss)
            elif kind == "norm":
                result[kind] = float(statistics.weighted_norm)
            else:
                result[kind] = outputs[kind]
        return result

    def compute(self, X, y, w, beta, kinds, tau: float, bandwidth: float) -> dict:
        """The sums over the host rows of X (n, P, the design with any intercept column), y
        and w (None: unit weights) at beta, for each kind of KIND_BITS, shaped as _results
        says. The engine sums in double. Bad values are ValidationError with the engine's
        message."""
        dtype = self.dtype
        outputs = _outputs(kinds, X.shape[1])
        X = engine_array(X, dtype)
        y = engine_array(y, dtype)
        if w is not None:
            w = engine_array(w, dtype)
        beta = self._beta(beta)
        batch, statistics = request(X, y, w, beta, self._bits(kinds), tau, bandwidth, outputs)
        self._handle.call(HOST_CALL, ctypes.byref(batch), ctypes.byref(statistics))
        return self._results(kinds, statistics, outputs)

    def compute_device(self, X, y, w, beta, kinds, tau: float, bandwidth: float,
                       weight: float | None = None) -> dict:
        """compute() over rows in device memory on the engine's device: X (n, P), y (n,) and w
        (n,) or None, C-contiguous arrays of the engine dtype exporting DLPack (CuPy), read in
        place and never copied or cast (anything else is a BackendContractError naming the
        array). Their producer's pending work is ordered before the engine's stream through
        DLPack, as the native_cuda backend does for device input. beta and the results are in
        host memory. weight: the weights' float64 sum when the caller knows it (else it is
        summed on the device); without w it is n. BackendUnavailableError when the library
        has no device call (extension version below 2)."""
        if not has_device_call(self._handle.lib):
            raise BackendUnavailableError(
                f"engine library {self._handle.lib._name!r} does not export "
                f"{DEVICE_CALL} (row-statistics extension version >= {DEVICE_CALL_VERSION}); "
                f"it reports version {extension_version(self._handle.lib)}"
            )
        if self._stream is None:
            self._stream = self._handle.stream()
        if w is not None and weight is None:
            from .backends.native import _device_weight_sum

            weight = _device_weight_sum(w)
        with borrowed_device_request(
            X, y, w, weight, device_id=self.device_id, stream=self._stream, dtype=self.dtype,
            beta=self._beta(beta), bits=self._bits(kinds), tau=tau, bandwidth=bandwidth,
            kinds=kinds,
        ) as (batch, statistics, outputs):
            self._handle.call(DEVICE_CALL, ctypes.byref(batch), ctypes.byref(statistics))
        return self._results(kinds, statistics, outputs)

    _per_thread = threading.local()

    @classmethod
    def for_thread(cls, lib: ctypes.CDLL, dtype, n_parameters: int,
                   device_id: int = HOST_DEVICE_ID) -> RowStatistics:
        """This thread's engine for (library, dtype, P, device), created on first use and kept
        for the thread's lifetime (a Dask worker thread computes many partitions)."""
        engines = getattr(cls._per_thread, "engines", None)
        if engines is None:
            engines = cls._per_thread.engines = {}
        key = (id(lib), np.dtype(dtype).name, int(n_parameters), int(device_id))
        engine = engines.get(key)
        if engine is None:
            engine = engines[key] = cls(lib, dtype, n_parameters, device_id)
        return engine
