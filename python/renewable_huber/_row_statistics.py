"""The ctypes binding of the OPTIONAL row-statistics extension (abi/rh_cuda_row_statistics.h).

An engine library may export rh_cuda_row_statistics_version and rh_cuda_engine_row_statistics
besides the 17 symbols of the core ABI (librh_cpu does; librh_cuda does not yet). `lookup(lib)`
finds them by name at run time and answers None when either is missing or the version is not
ROW_STATISTICS_VERSION, so a caller treats the extension as absent and uses its own code.

`RowStatistics` is one engine used only for its row and Gram code: `compute` returns the sums
over a block of rows at given coefficients, with the shapes and dtypes the NumPy reference
(core/objective.py) gives for the same kinds. Only the standard library, NumPy and the
package's own binding are imported.
"""

from __future__ import annotations

import ctypes
import threading
import weakref

import numpy as np

from . import _abi
from ._engine import HOST_DEVICE_ID, EngineHandle, batch_weight, host_address
from .exceptions import BackendUnavailableError

ROW_STATISTICS_VERSION = 1

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


# (name, restype, argtypes), the C declaration above each.
SIGNATURES = (
    # uint32_t rh_cuda_row_statistics_version(void);
    ("rh_cuda_row_statistics_version", ctypes.c_uint32, ()),
    # RhCudaStatus rh_cuda_engine_row_statistics(RhCudaEngine* engine,
    #     const RhCudaHostBatch* batch, RhCudaRowStatistics* statistics);
    ("rh_cuda_engine_row_statistics", ctypes.c_int32,
     (ctypes.c_void_p, ctypes.POINTER(_abi.RhCudaHostBatch),
      ctypes.POINTER(RhCudaRowStatistics))),
)
SYMBOLS = tuple(name for name, _, _ in SIGNATURES)

_lock = threading.Lock()
_looked_up: dict[int, object] = {}


def lookup(lib: ctypes.CDLL):
    """`lib` with the extension's two functions declared, or None when the library does not
    export both or reports another version (the extension is then absent). Cached per
    library."""
    with _lock:
        key = id(lib)
        if key in _looked_up:
            return _looked_up[key]
        found = None
        # getattr on a CDLL is dlsym: a missing symbol is an AttributeError, nothing more.
        functions = [getattr(lib, name, None) for name in SYMBOLS]
        if all(function is not None for function in functions):
            version = functions[0]
            version.restype, version.argtypes = ctypes.c_uint32, []
            if int(version()) == ROW_STATISTICS_VERSION:
                for (_, restype, argtypes), function in zip(SIGNATURES, functions, strict=True):
                    function.restype = restype
                    function.argtypes = list(argtypes)
                found = lib
        _looked_up[key] = found
        return found


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
    statistics = RhCudaRowStatistics(
        abi_version=_abi.ABI_VERSION, struct_size=ctypes.sizeof(RhCudaRowStatistics),
        statistics=bits, coefficients=host_address(beta), tau=float(tau),
        bandwidth=float(bandwidth), score=host_address(outputs.get("score")),
        curvature_gram=host_address(outputs.get("curvature")),
        majoriser_gram=host_address(outputs.get("majoriser")),
        meat=host_address(outputs.get("meat")),
    )
    return batch, statistics


class RowStatistics:
    """An engine of one dtype and P used for the extension's sums (its committed state is
    never used). One thread at a time, like every engine: see `for_thread`."""

    def __init__(self, lib: ctypes.CDLL, dtype, n_parameters: int):
        if lookup(lib) is None:
            raise BackendUnavailableError(
                f"engine library {lib._name!r} does not export the row-statistics extension "
                f"version {ROW_STATISTICS_VERSION} ({', '.join(SYMBOLS)})"
            )
        self.dtype = np.dtype(dtype)
        self._handle = EngineHandle(lib, name="row-statistics engine", dtype=self.dtype,
                                    n_parameters=n_parameters, device_id=HOST_DEVICE_ID)
        weakref.finalize(self, self._handle.close)

    def compute(self, X, y, w, beta, kinds, tau: float, bandwidth: float) -> dict:
        """The sums over the rows of X (n, P, the design with any intercept column), y and w
        (None: unit weights) at beta, for each kind of KIND_BITS: loss (a scalar), score (P,),
        curvature and majoriser (P, P) in the data's dtype like the NumPy reference; meat
        (P, P) float64 and norm a float, as the reference computes those. The engine sums in
        double. Bad values are ValidationError with the engine's message."""
        n_rows, P = X.shape
        dtype = self.dtype
        bits = 0
        for kind in kinds:
            bits |= KIND_BITS[kind]
        outputs = {
            kind: np.empty((P, P) if kind in ("curvature", "majoriser", "meat") else P,
                           dtype=np.float64)
            for kind in ("score", "curvature", "majoriser", "meat") if kind in kinds
        }
        X = np.ascontiguousarray(X, dtype=dtype)
        y = np.ascontiguousarray(y, dtype=dtype)
        if w is not None:
            w = np.ascontiguousarray(w, dtype=dtype)
        beta = None if beta is None else np.ascontiguousarray(beta, dtype=dtype)
        batch, statistics = request(X, y, w, beta, bits, tau, bandwidth, outputs)
        self._handle.call("rh_cuda_engine_row_statistics", ctypes.byref(batch),
                          ctypes.byref(statistics))
        result = {}
        for kind in kinds:
            if kind == "loss":
                result[kind] = dtype.type(statistics.loss)
            elif kind == "norm":
                result[kind] = float(statistics.weighted_norm)
            elif kind == "meat":
                result[kind] = outputs[kind]
            else:
                result[kind] = outputs[kind].astype(dtype, copy=False)
        return result

    _per_thread = threading.local()

    @classmethod
    def for_thread(cls, lib: ctypes.CDLL, dtype, n_parameters: int) -> RowStatistics:
        """This thread's engine for (library, dtype, P), created on first use and kept for
        the thread's lifetime (a Dask worker thread computes many partitions)."""
        engines = getattr(cls._per_thread, "engines", None)
        if engines is None:
            engines = cls._per_thread.engines = {}
        key = (id(lib), np.dtype(dtype).name, int(n_parameters))
        engine = engines.get(key)
        if engine is None:
            engine = engines[key] = cls(lib, dtype, n_parameters)
        return engine
