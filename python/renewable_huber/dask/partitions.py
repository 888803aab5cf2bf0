"""What runs on the workers: one partition of a batch, validated and kept in the working dtype
(in host memory, or on the worker's GPU for a GPU engine), and its sums over rows at a given
beta.

Nothing here imports dask: these are plain functions of arrays that the scheduler ships to the
workers. A partition's sums come from one of four engines:

- "native_cpu": librh_cpu's optional row-statistics extension (abi/rh_cuda_row_statistics.h),
  the engine's own row pass and Gram code, summing in double;
- "numpy": the reference's own row functions (core/objective.py) evaluated on a problem that
  holds one partition, exactly as the in-process NumPy engine computes them for a whole batch;
- "native_cuda": librh_cuda's row-statistics extension (version >= 2: its device call) over
  rows kept on the worker's GPU, summing in double;
- "cupy": the reference's row functions evaluated with CuPy over rows kept on the worker's GPU,
  exactly as the in-process cupy backend computes them.

A GPU engine's partition is copied to the worker's current CUDA device once, when it is
prepared (the host copy is dropped), and every pass reads it there; the sums come back as host
NumPy values of the numpy engine's shapes and dtypes, so the reduction and the client's solve
do not depend on the engine.

The client picks a mode (PARTITION_ENGINES; partition_engine_mode: the RH_DASK_PARTITION_ENGINE
environment variable of the client process, else one that follows the estimator's backend)
and prepares the batch with it. "auto" is native_cpu on a worker that can load librh_cpu with
the extension and numpy on one that cannot; "prefer_native_cuda" is native_cuda on a worker
that can run it and "auto" on one that cannot; "prefer_cupy" is cupy where it can run and
numpy elsewhere. An explicit engine ("native_cpu", "numpy", "native_cuda", "cupy") never falls
back: a worker that cannot run it fails the batch with BackendUnavailableError naming what it
lacks.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from .._feature_scaling import Moments, column_moments
from .._validation import _validate_vector, validate_X
from ..core import design_matrix
from ..core.objective import (
    RenewableProblem,
    curvature_gram,
    loss_sum,
    majoriser_gram,
    meat_gram,
    residual,
    score_product,
    weighted_squared_norm,
)
from ..exceptions import ValidationError

# The statistics a pass can ask for (partition_statistics computes each).
KINDS = ("loss", "score", "curvature", "majoriser", "meat", "norm")

#: how workers compute a partition's sums (see the module's docstring)
PARTITION_ENGINES = ("auto", "native_cpu", "numpy", "native_cuda", "cupy", "prefer_native_cuda",
                     "prefer_cupy")
PARTITION_ENGINE_VARIABLE = "RH_DASK_PARTITION_ENGINE"
#: the engines that keep a partition on the worker's GPU
GPU_ENGINES = ("native_cuda", "cupy")
#: a preferring mode -> (its GPU engine, the host mode of a worker that cannot run it)
PREFERRED = {"prefer_native_cuda": ("native_cuda", "auto"), "prefer_cupy": ("cupy", "numpy")}
#: the mode an unset RH_DASK_PARTITION_ENGINE gives for each estimator backend ("auto" for
#: any other): the reference's arithmetic for numpy and cupy fits, a native engine's own row
#: pass for native ones; GPU workers only for a GPU backend, and only where they have a GPU
BACKEND_DEFAULTS = {"numpy": "numpy", "cupy": "prefer_cupy", "native_cpu": "auto",
                    "native_cuda": "prefer_native_cuda"}


def partition_engine_mode(value: str | None = None, backend: str | None = None) -> str:
    """`value`, else the client's RH_DASK_PARTITION_ENGINE, else BACKEND_DEFAULTS of the
    estimator's backend ("auto" for any other); ValidationError for anything but
    PARTITION_ENGINES."""
    if value is None:
        value = os.environ.get(PARTITION_ENGINE_VARIABLE) or BACKEND_DEFAULTS.get(backend, "auto")
    if value not in PARTITION_ENGINES:
        raise ValidationError(
            f"{PARTITION_ENGINE_VARIABLE}={value!r} is not a partition engine; expected one of "
            f"{', '.join(PARTITION_ENGINES)}"
        )
    return value


@dataclasses.dataclass(frozen=True)
class PartitionSpec:
    """How every partition of one batch is read: the working dtype, the intercept, the
    expected features, and the target and weight columns when y and sample_weight are
    columns of the table X."""

    dtype: np.dtype
    fit_intercept: bool
    n_features: int | None
    feature_names: tuple[str, ...] | None
    target: Any = None
    weight: Any = None
    #: the mode the batch was prepared with (PARTITION_ENGINES)
    engine: str = "auto"
    #: the stream's FeatureScaling with standardize=True: features are standardised as read
    scaling: Any = None


@dataclasses.dataclass(frozen=True)
class PartitionSummary:
    """What the client needs to validate the whole batch and size it (float64 sums), and the
    engine that sums this partition (as resolved on its worker when summarised)."""

    n_rows: int
    n_features: int
    weight_sum: float
    has_positive_weight: bool
    x_terms: float  # sum w (||x||^2 + 1), the range rule's X term
    x_largest_row: int
    y_terms: float  # sum w y^2
    y_largest_row: int
    engine: str = "numpy"


@dataclasses.dataclass(frozen=True)
class Partition:
    """One partition on its worker: the design (intercept column last), y, and w (None for
    unit weights), all in the working dtype; NumPy arrays in host memory, or CuPy arrays on
    the worker's GPU when `engine` is one of GPU_ENGINES.

    engine: a GPU engine, or the host mode ("auto", "native_cpu" or "numpy") its passes use.
    weight: the weights' float64 sum (n_rows without weights), kept for a GPU partition.
    summary: a GPU partition's summary, computed from its host rows before they were copied."""

    index: int
    X: Any
    y: Any
    w: Any
    engine: str = "auto"
    weight: float | None = None
    summary: PartitionSummary | None = None

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def on_device(self) -> bool:
        return self.engine in GPU_ENGINES


def _in_partition(index: int, error: ValidationError) -> ValidationError:
    return type(error)(f"partition {index} of the batch: {error}")


def prepare_partition(index: int, X, y, w, spec: PartitionSpec) -> Partition:
    """Validate one partition with the package's input rules (rows counted from the start of
    the partition), convert it to the working dtype (features standardised with spec.scaling),
    intercept column appended, and place it where the engine of spec.engine on this worker
    reads it (its GPU for a GPU engine). BackendUnavailableError when spec.engine names an
    engine this worker cannot run."""
    gpu = _gpu_engine(spec.engine)
    X, y, w = _validated_rows(index, X, y, w, spec)
    if int(X.shape[0]) == 0:
        return _empty_partition(index, X, spec)
    if spec.scaling is not None:
        try:
            X = spec.scaling.transform(X)
        except ValidationError as error:
            raise _in_partition(index, error) from None
    design = np.ascontiguousarray(design_matrix(np, X, spec.fit_intercept))
    if gpu is None:
        return Partition(index=index, X=design, y=y, w=w, engine=host_mode(spec.engine))
    host = Partition(index=index, X=design, y=y, w=w, engine="numpy")
    return _to_device(host, gpu, spec.fit_intercept)


def partition_moments(index: int, X, y, w, spec: PartitionSpec) -> Moments:
    """The weighted column moments of one partition's features, validated as
    prepare_partition validates them (the first batch of a standardised stream)."""
    X, _, w = _validated_rows(index, X, y, w, spec)
    if int(X.shape[0]) == 0:
        n_features = int(X.shape[1]) if len(X.shape) == 2 else spec.n_features or 0
        return Moments(0.0, np.zeros(n_features), np.zeros(n_features))
    return column_moments(X, w, fit_intercept=spec.fit_intercept)


def _validated_rows(index: int, X, y, w, spec: PartitionSpec):
    """(X, y, w) of one partition as host arrays in the working dtype after the package's input
    rules; a partition without rows comes back unchecked (X without the target and weight
    columns)."""
    try:
        if spec.target is not None:
            y = X[spec.target]
        if spec.weight is not None:
            w = X[spec.weight]
        if spec.target is not None or spec.weight is not None:
            X = X.drop(columns=[c for c in (spec.target, spec.weight) if c is not None])
        if int(X.shape[0]) == 0:
            return X, y, w
        X, _, _ = validate_X(
            X,
            dtype=spec.dtype,
            accepts_device=False,
            backend_name="numpy",
            n_features_expected=spec.n_features,
            feature_names_expected=spec.feature_names,
        )
        n_rows = int(X.shape[0])
        y = _validate_vector("y", y, n_rows, spec.dtype, False, False, "numpy", False)
        if w is not None:
            w = _validate_vector("sample_weight", w, n_rows, spec.dtype, False, False, "numpy",
                                 False)
            if bool((w < 0).any()):
                first = int(np.argmax(w < 0))
                raise ValidationError(
                    f"sample_weight must be >= 0, got {w[first]!r} at row {first}"
                )
    except ValidationError as error:
        raise _in_partition(index, error) from None
    return X, y, w


def host_mode(mode: str) -> str:
    """The host mode ("auto", "native_cpu" or "numpy") a partition of `mode` uses when it is
    not on a GPU (a preferring mode's fallback; numpy for an empty partition of a GPU
    engine)."""
    if mode in PREFERRED:
        return PREFERRED[mode][1]
    return "numpy" if mode in GPU_ENGINES else mode


def _empty_partition(index: int, X, spec: PartitionSpec) -> Partition:
    n_features = int(X.shape[1]) if len(X.shape) == 2 else spec.n_features or 0
    P = n_features + (1 if spec.fit_intercept else 0)
    empty = np.zeros(0, dtype=spec.dtype)
    return Partition(index=index, X=np.zeros((0, P), dtype=spec.dtype), y=empty, w=None,
                     engine=host_mode(spec.engine))


# ---------------------------------------------------------------------------- GPU engines
def _worker_name() -> str:
    """' on worker ADDRESS' inside a dask worker, else ''."""
    import sys

    distributed = sys.modules.get("distributed")
    if distributed is None:
        return ""
    try:
        return f" on worker {distributed.get_worker().address}"
    except (ValueError, AttributeError):
        return ""


def gpu_engine_unavailable_reason(engine: str) -> str | None:
    """None when this process can run the GPU partition engine `engine` ("native_cuda" or
    "cupy"), else what it lacks. Both keep the rows in CuPy arrays, so both need CuPy and a
    GPU; native_cuda also needs librh_cuda with the row-statistics extension's device call."""
    from ..backends.cupy_backend import cupy_unavailable_reason

    reason = cupy_unavailable_reason()
    if reason is not None:
        return reason if engine == "cupy" else (
            f"native_cuda partitions are held in CuPy arrays, and {reason}")
    if engine == "cupy":
        return None
    from .._loader import load_engine_library
    from .._row_statistics import (
        DEVICE_CALL,
        DEVICE_CALL_VERSION,
        extension_version,
        has_device_call,
    )
    from ..backends.native import unavailable_reason

    reason = unavailable_reason("native_cuda")
    if reason is not None:
        return reason
    lib = load_engine_library("native_cuda")
    if not has_device_call(lib):
        version = extension_version(lib)
        found = ("does not export the row-statistics extension" if version == 0 else
                 f"exports the row-statistics extension version {version}")
        return (f"the librh_cuda it loads ({lib._name}) {found}; {DEVICE_CALL} needs version "
                f">= {DEVICE_CALL_VERSION} (rebuild or reinstall librh_cuda)")
    return None


def _gpu_engine(mode: str) -> str | None:
    """The GPU engine a partition of `mode` uses on this worker, or None (host rows).
    An explicit GPU engine this worker cannot run is BackendUnavailableError naming why."""
    if mode in GPU_ENGINES:
        reason = gpu_engine_unavailable_reason(mode)
        if reason is not None:
            from ..exceptions import BackendUnavailableError

            raise BackendUnavailableError(
                f"partition engine {mode!r} ({PARTITION_ENGINE_VARIABLE}={mode}) cannot run"
                f"{_worker_name()}: {reason}"
            )
        return mode
    if mode in PREFERRED:
        engine = PREFERRED[mode][0]
        return engine if gpu_engine_unavailable_reason(engine) is None else None
    return None


def _to_device(partition: Partition, engine: str, fit_intercept: bool) -> Partition:
    """`partition` copied to this thread's current CUDA device for `engine` (one copy of each
    array; the host arrays are not kept), with its summary and weight sum computed first from
    the host rows."""
    import cupy

    summary = dataclasses.replace(summarise_partition(partition, fit_intercept), engine=engine)
    w = partition.w
    weight = float(partition.n_rows) if w is None else float(np.sum(w, dtype=np.float64))
    X = cupy.asarray(partition.X)
    y = cupy.asarray(partition.y)
    w = None if w is None else cupy.asarray(w)
    cupy.cuda.get_current_stream().synchronize()
    return Partition(index=partition.index, X=X, y=y, w=w, engine=engine, weight=weight,
                     summary=summary)


# --------------------------------------------------------------------------- summaries
def summarise_partition(partition: Partition, fit_intercept: bool) -> PartitionSummary:
    if partition.summary is not None:
        return partition.summary
    engine = _host_engine(partition)
    X, y = partition.X, partition.y
    n_features = int(X.shape[1]) - (1 if fit_intercept else 0)
    if partition.n_rows == 0:
        return PartitionSummary(0, n_features, 0.0, False, 0.0, 0, 0.0, 0, engine)
    weights = 1.0 if partition.w is None else partition.w.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        X64 = X.astype(np.float64)
        # The design's intercept column already contributes the rule's "+ 1".
        norms = np.einsum("ij,ij->i", X64, X64) + (0.0 if fit_intercept else 1.0)
        x_terms = weights * norms
        y64 = y.astype(np.float64)
        y_terms = weights * (y64 * y64)
        weight_sum = float(partition.n_rows) if partition.w is None else float(np.sum(weights))
    positive = partition.w is None or bool((partition.w > 0).any())
    return PartitionSummary(
        n_rows=partition.n_rows,
        n_features=n_features,
        weight_sum=weight_sum,
        has_positive_weight=positive,
        x_terms=float(np.sum(x_terms)),
        x_largest_row=int(np.argmax(x_terms)),
        y_terms=float(np.sum(y_terms)),
        y_largest_row=int(np.argmax(y_terms)),
        engine=engine,
    )


def _host_engine(partition: Partition) -> str:
    """The engine a host partition's passes use on this worker ("native_cpu" or "numpy");
    BackendUnavailableError for an explicit native_cpu this worker cannot run."""
    if partition.on_device:
        return partition.engine
    if partition.engine == "numpy" or partition.n_rows == 0:
        return "numpy"
    native = _native_row_statistics(partition, required=partition.engine == "native_cpu")
    return "numpy" if native is None else "native_cpu"


def pilot_rows(partition: Partition, start: int, step: int, n_features: int):
    """Rows start, start + step, ... of the partition without the intercept column: its share
    of the batch's evenly spaced pilot rows (renewable_huber.tau), as host arrays."""
    rows = slice(start, None, step)
    # a GPU partition's rows: get() is the copy to the host
    copy = (lambda a: a.get()) if partition.on_device else (lambda a: a.copy())
    w = None if partition.w is None else copy(partition.w[rows])
    return copy(partition.X[rows, :n_features]), copy(partition.y[rows]), w


# ------------------------------------------------------------------------------- sums
def _rows_problem(partition: Partition, tau: float, bandwidth: float, xp=np) -> RenewableProblem:
    """A problem holding only this partition's rows (arrays of `xp`): the row functions read
    X, y, w, tau and h, nothing of the state."""
    w = partition.w
    if w is None:
        w = xp.ones(partition.n_rows, dtype=partition.X.dtype)
    return RenewableProblem(
        xp=xp, X=partition.X, y=partition.y, w=w, beta0=None, information=None,
        weight_sum=math.nan, tau=tau, bandwidth=bandwidth, ridge=0.0, lambda_value=0.0,
        mask=None, historical=None,
    )


def _native_row_statistics(partition: Partition, required: bool):
    """This worker thread's librh_cpu row-statistics engine for the partition's dtype and P,
    or None (extension absent) unless `required`, which raises BackendUnavailableError."""
    from .._loader import load_engine_library
    from .._row_statistics import RowStatistics, lookup
    from ..exceptions import BackendUnavailableError

    try:
        lib = load_engine_library("native_cpu")
    except BackendUnavailableError:
        if required:
            raise
        return None
    if lookup(lib) is None:
        if required:
            raise BackendUnavailableError(
                f"{PARTITION_ENGINE_VARIABLE}=native_cpu, but the librh_cpu this worker loads "
                "does not export the row-statistics extension (rebuild or reinstall it)"
            )
        return None
    return RowStatistics.for_thread(lib, partition.X.dtype, partition.X.shape[1])


def partition_statistics(
    partition: Partition, beta, kinds: tuple[str, ...], tau: float, bandwidth: float,
    engine: str | None = None,
) -> dict[str, Any]:
    """The requested sums over this partition's rows at beta (see KINDS) as host values,
    computed by the partition's own engine, or for a host partition by `engine` when given
    (a host mode; a preferring mode means its host fallback)."""
    if partition.on_device:
        if engine is not None and engine not in (partition.engine, *PREFERRED):
            raise ValidationError(
                f"partition {partition.index} is held on a GPU for the {partition.engine} "
                f"engine; it cannot be summed by {engine!r}"
            )
        if partition.engine == "native_cuda":
            return native_cuda_partition_statistics(partition, beta, kinds, tau, bandwidth)
        return cupy_partition_statistics(partition, beta, kinds, tau, bandwidth)
    engine = host_mode(partition.engine if engine is None else engine)
    if engine != "numpy" and partition.n_rows > 0:
        native = _native_row_statistics(partition, required=engine == "native_cpu")
        if native is not None:
            return native.compute(partition.X, partition.y, partition.w, beta, kinds, tau,
                                  bandwidth)
    return numpy_partition_statistics(partition, beta, kinds, tau, bandwidth)


def partition_losses(
    partition: Partition, betas, tau: float, bandwidth: float, engine: str | None = None
) -> dict[str, Any]:
    """{"losses": the loss sums of this partition's rows at each of `betas`}, each computed as
    partition_statistics computes "loss" (so added elementwise over partitions they equal
    the sums at each beta bit for bit); one array, in the losses' own type."""
    return {"losses": np.asarray([
        partition_statistics(partition, beta, ("loss",), tau, bandwidth, engine)["loss"]
        for beta in betas
    ])}


def _reference_statistics(problem: RenewableProblem, beta, kinds) -> dict[str, Any]:
    """The reference's row functions (core/objective.py) on `problem` at beta."""
    r = residual(problem, beta) if any(kind != "norm" for kind in kinds) else None
    compute = {
        "loss": lambda: loss_sum(problem, r),
        "score": lambda: score_product(problem, r),
        "curvature": lambda: curvature_gram(problem, r),
        "majoriser": lambda: majoriser_gram(problem, r),
        "meat": lambda: meat_gram(problem, r),
        "norm": lambda: weighted_squared_norm(problem),
    }
    return {kind: compute[kind]() for kind in kinds}


def numpy_partition_statistics(
    partition: Partition, beta, kinds: tuple[str, ...], tau: float, bandwidth: float
) -> dict[str, Any]:
    """partition_statistics by the reference's row functions (core/objective.py)."""
    return _reference_statistics(_rows_problem(partition, tau, bandwidth), beta, kinds)


def cupy_partition_statistics(
    partition: Partition, beta, kinds: tuple[str, ...], tau: float, bandwidth: float
) -> dict[str, Any]:
    """partition_statistics by the reference's row functions evaluated with CuPy on the
    partition's device (beta copied there as it is, like the in-process cupy backend's
    coefficients), returned as host NumPy values of the numpy engine's types."""
    import cupy

    with cupy.cuda.Device(partition.X.device.id):
        problem = _rows_problem(partition, tau, bandwidth, xp=cupy)
        sums = _reference_statistics(problem, cupy.asarray(beta) if beta is not None else None,
                                     kinds)
        return {
            kind: value if isinstance(value, float) else cupy.asnumpy(value)[()]
            for kind, value in sums.items()
        }


def native_cuda_partition_statistics(
    partition: Partition, beta, kinds: tuple[str, ...], tau: float, bandwidth: float
) -> dict[str, Any]:
    """partition_statistics by librh_cuda's row-statistics device call over the partition's
    rows on its device (this worker thread's engine for the dtype, P and device)."""
    import cupy

    from .._loader import load_engine_library
    from .._row_statistics import RowStatistics

    device = partition.X.device.id
    lib = load_engine_library("native_cuda")
    engine = RowStatistics.for_thread(lib, partition.X.dtype, partition.X.shape[1], device)
    with cupy.cuda.Device(device):
        return engine.compute_device(partition.X, partition.y, partition.w, beta, kinds, tau,
                                     bandwidth, weight=partition.weight)


def add_in_order(*parts: dict[str, Any]) -> dict[str, Any]:
    """The elementwise sum of statistics dictionaries, added left to right (partition order)."""
    totals = dict(parts[0])
    for part in parts[1:]:
        for kind, value in part.items():
            totals[kind] = totals[kind] + value
    return totals
