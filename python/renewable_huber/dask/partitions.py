"""What runs on the workers: one partition of a batch, validated and kept in the working dtype,
and its sums over rows at a given beta.

Nothing here imports dask: these are plain functions of NumPy arrays that the scheduler ships
to the workers. A partition's sums come from one of two engines (PARTITION_ENGINES):

- "native_cpu": librh_cpu's optional row-statistics extension (abi/rh_cuda_row_statistics.h),
  the engine's own row pass and Gram code, summing in double;
- "numpy": the reference's own row functions (core/objective.py) evaluated on a problem that
  holds one partition, exactly as the in-process NumPy engine computes them for a whole batch.

"auto" (the default) uses native_cpu on a worker that can load librh_cpu with the extension and
numpy on one that cannot. The client picks the mode (partition_engine_mode: the
RH_DASK_PARTITION_ENGINE environment variable of the client process, else "numpy" when the
estimator's backend is numpy or cupy, else "auto") and sends it
with every pass; an explicit "native_cpu" fails on a worker without the library instead of
falling back.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

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
PARTITION_ENGINES = ("auto", "native_cpu", "numpy")
PARTITION_ENGINE_VARIABLE = "RH_DASK_PARTITION_ENGINE"


def partition_engine_mode(value: str | None = None, backend: str | None = None) -> str:
    """`value`, else the client's RH_DASK_PARTITION_ENGINE, else "numpy" for the estimator
    backends that compute with NumPy's arithmetic (numpy, cupy: the reference end to end),
    else "auto"; ValidationError for anything but PARTITION_ENGINES."""
    if value is None:
        value = os.environ.get(PARTITION_ENGINE_VARIABLE) or (
            "numpy" if backend in ("numpy", "cupy") else "auto"
        )
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


@dataclasses.dataclass(frozen=True)
class Partition:
    """One partition on its worker: the design (intercept column last), y, and w (None for
    unit weights), all in the working dtype."""

    index: int
    X: np.ndarray
    y: np.ndarray
    w: np.ndarray | None

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])


@dataclasses.dataclass(frozen=True)
class PartitionSummary:
    """What the client needs to validate the whole batch and size it (float64 sums)."""

    n_rows: int
    n_features: int
    weight_sum: float
    has_positive_weight: bool
    x_terms: float  # sum w (||x||^2 + 1), the range rule's X term
    x_largest_row: int
    y_terms: float  # sum w y^2
    y_largest_row: int


def _in_partition(index: int, error: ValidationError) -> ValidationError:
    return type(error)(f"partition {index} of the batch: {error}")


def prepare_partition(index: int, X, y, w, spec: PartitionSpec) -> Partition:
    """Validate one partition with the package's input rules (rows counted from the start of
    the partition) and convert it to the working dtype, intercept column appended."""
    try:
        if spec.target is not None:
            y = X[spec.target]
        if spec.weight is not None:
            w = X[spec.weight]
        if spec.target is not None or spec.weight is not None:
            X = X.drop(columns=[c for c in (spec.target, spec.weight) if c is not None])
        if int(X.shape[0]) == 0:
            return _empty_partition(index, X, spec)
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
    design = np.ascontiguousarray(design_matrix(np, X, spec.fit_intercept))
    return Partition(index=index, X=design, y=y, w=w)


def _empty_partition(index: int, X, spec: PartitionSpec) -> Partition:
    n_features = int(X.shape[1]) if len(X.shape) == 2 else spec.n_features or 0
    P = n_features + (1 if spec.fit_intercept else 0)
    empty = np.zeros(0, dtype=spec.dtype)
    return Partition(index=index, X=np.zeros((0, P), dtype=spec.dtype), y=empty, w=None)


def summarise_partition(partition: Partition, fit_intercept: bool) -> PartitionSummary:
    X, y = partition.X, partition.y
    n_features = int(X.shape[1]) - (1 if fit_intercept else 0)
    if partition.n_rows == 0:
        return PartitionSummary(0, n_features, 0.0, False, 0.0, 0, 0.0, 0)
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
    )


def pilot_rows(partition: Partition, start: int, step: int, n_features: int):
    """Rows start, start + step, ... of the partition without the intercept column: its share
    of the batch's evenly spaced pilot rows (renewable_huber.tau)."""
    rows = slice(start, None, step)
    w = None if partition.w is None else partition.w[rows].copy()
    return partition.X[rows, :n_features].copy(), partition.y[rows].copy(), w


def _rows_problem(partition: Partition, tau: float, bandwidth: float) -> RenewableProblem:
    """A problem holding only this partition's rows: the row functions read X, y, w, tau and
    h, nothing of the state."""
    w = partition.w
    if w is None:
        w = np.ones(partition.n_rows, dtype=partition.X.dtype)
    return RenewableProblem(
        xp=np, X=partition.X, y=partition.y, w=w, beta0=None, information=None,
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
    engine: str = "auto",
) -> dict[str, Any]:
    """The requested sums over this partition's rows at beta (see KINDS), computed by
    `engine` (PARTITION_ENGINES; "auto" as the client resolved it is passed through)."""
    if engine != "numpy" and partition.n_rows > 0:
        native = _native_row_statistics(partition, required=engine == "native_cpu")
        if native is not None:
            return native.compute(partition.X, partition.y, partition.w, beta, kinds, tau,
                                  bandwidth)
    return numpy_partition_statistics(partition, beta, kinds, tau, bandwidth)


def partition_losses(
    partition: Partition, betas, tau: float, bandwidth: float, engine: str = "auto"
) -> dict[str, Any]:
    """{"losses": the loss sums of this partition's rows at each of `betas`}, each computed as
    partition_statistics computes "loss" (so added elementwise over partitions they equal
    the sums at each beta bit for bit); one array, in the losses' own type."""
    return {"losses": np.asarray([
        partition_statistics(partition, beta, ("loss",), tau, bandwidth, engine)["loss"]
        for beta in betas
    ])}


def numpy_partition_statistics(
    partition: Partition, beta, kinds: tuple[str, ...], tau: float, bandwidth: float
) -> dict[str, Any]:
    """partition_statistics by the reference's row functions (core/objective.py)."""
    problem = _rows_problem(partition, tau, bandwidth)
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


def add_in_order(*parts: dict[str, Any]) -> dict[str, Any]:
    """The elementwise sum of statistics dictionaries, added left to right (partition order)."""
    totals = dict(parts[0])
    for part in parts[1:]:
        for kind, value in part.items():
            totals[kind] = totals[kind] + value
    return totals
