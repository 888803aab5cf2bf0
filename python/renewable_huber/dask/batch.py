"""A batch held on a Dask cluster: its partitions prepared on the workers, validated as one
batch, and the map-reduce every solver pass runs over them.

The client holds futures only. A pass ships beta (P numbers) to every partition and brings
back its sums over rows (at most P^2 + P + 1 numbers), added in partition order (see
DaskBatch.sums), so the result does not depend on which worker finished first. Worker loss
is the scheduler's business: it recomputes a lost partition from the collection's graph and
reruns the pass on it (up to distributed's allowed-failures); when it gives up, or a task
fails, the error surfaces here before anything is committed.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable

import numpy as np

from .._feature_scaling import FeatureScaling, combine_moments
from .._validation import RANGE_MARGIN, range_limit
from ..config import UpdateConfig
from ..core.transition import solve_problem
from ..diagnostics import Diagnostics
from ..exceptions import (
    BackendUnavailableError,
    EngineError,
    RenewableHuberError,
    ValidationError,
)
from ..state import RenewableState
from ..tau import PILOT_ROWS, row_stride
from .partitions import (
    PartitionSpec,
    add_in_order,
    partition_engine_mode,
    partition_losses,
    partition_moments,
    partition_statistics,
    pilot_rows,
    prepare_partition,
    summarise_partition,
)
from .problem import DistributedProblem

# The most partial sums one reduction step adds (on the client for the last step, on a
# worker for the steps before): a pass brings at most this many P x P matrices anywhere.
REDUCTION_GROUP = 16


def _modules():
    # dask.dataframe (which needs pyarrow) is imported by whoever builds a DataFrame; a batch
    # of dask arrays needs only dask.array and distributed.
    try:
        import dask
        import dask.array
        import distributed
    except ImportError as error:
        raise BackendUnavailableError(
            f"fitting a dask collection needs dask[array,dataframe] and distributed ({error}); "
            "install them with: pip install 'renewable-huber[dask]'"
        ) from None
    return dask, distributed


def is_dask_collection(value) -> bool:
    """True for a dask collection; never imports dask (none exists unless it is imported)."""
    dask = sys.modules.get("dask")
    return dask is not None and bool(dask.is_dask_collection(value))


def _client(distributed):
    try:
        return distributed.get_client()
    except ValueError:
        raise BackendUnavailableError(
            "fitting a dask collection runs on a dask.distributed cluster and no Client is "
            "connected: create one first, e.g. distributed.Client('tcp://scheduler:8786') or "
            "distributed.Client(distributed.LocalCluster(n_workers=2))"
        ) from None


def _kind(value) -> str:
    import dask.array

    if isinstance(value, dask.array.Array):
        return "array"
    # no dask DataFrame or Series exists unless dask.dataframe was imported
    frames = sys.modules.get("dask.dataframe")
    if frames is not None and isinstance(value, frames.DataFrame):
        return "frame"
    if frames is not None and isinstance(value, frames.Series):
        return "series"
    return type(value).__name__


def _vector_parts(name: str, value, X, optimize: bool = True):
    """One delayed piece of `value` per partition of the dask array X, or of the DataFrame X
    read with to_delayed(optimize_graph=optimize) (None pieces for an absent vector)."""
    x_kind = _kind(X)
    if value is None:
        return [None] * (X.npartitions if x_kind == "frame" else X.numblocks[0])
    kind = _kind(value)
    if x_kind == "frame":
        if kind != "series":
            raise ValidationError(
                f"X is a dask DataFrame, so {name} must be the name of a column of X or a "
                f"dask Series partitioned like X, got {type(value).__name__}"
            )
        if value.npartitions != X.npartitions:
            raise ValidationError(
                f"{name} has {value.npartitions} partitions but X has {X.npartitions}; "
                "partition them alike (e.g. take both from one DataFrame)"
            )
        return list(value.to_delayed(optimize_graph=optimize))
    if kind == "series":
        value = value.to_dask_array(lengths=True)
    elif kind != "array":
        raise ValidationError(
            f"X is a dask array, so {name} must be a dask array or Series with X's rows "
            f"(never a local array, which would pass through this process), got "
            f"{type(value).__name__}"
        )
    if value.ndim not in (1, 2) or value.shape[0] != X.shape[0] and not (
        np.isnan(value.shape[0]) or np.isnan(X.shape[0])
    ):
        raise ValidationError(
            f"X has {X.shape[0]} rows but {name} has shape {value.shape}; they must have the "
            "same length"
        )
    if value.chunks[0] != X.chunks[0]:
        value = value.rechunk({0: X.chunks[0]})
    if value.ndim == 2:
        if value.numblocks[1] != 1:
            value = value.rechunk({1: -1})
        return list(value.to_delayed()[:, 0])
    return list(value.to_delayed())


def _is_column(value, columns) -> bool:
    return isinstance(value, Hashable) and not is_dask_collection(value) and value in columns


def _partitions(X, y, sample_weight, spec: PartitionSpec):
    """(delayed X pieces, delayed y pieces or Nones, delayed w pieces or Nones, spec)."""
    x_kind = _kind(X)
    if x_kind == "frame":
        columns = tuple(X.columns)
        named = {}
        for name, value in (("y", y), ("sample_weight", sample_weight)):
            if isinstance(value, str) or _is_column(value, columns):
                if value not in columns:
                    raise ValidationError(
                        f"{name}={value!r} is not a column of X (columns: {list(columns)})"
                    )
                named[name] = value
        features = tuple(c for c in columns if c not in named.values())
        names = features if all(isinstance(c, str) for c in features) else None
        spec = dataclasses.replace(
            spec,
            # the first batch: every partition is checked against the table's own columns
            feature_names=spec.feature_names if spec.feature_names or spec.n_features else names,
            target=named.get("y"), weight=named.get("sample_weight"),
        )
        # Vectors given as their own Series must meet X's partitions one to one, which only
        # the unoptimised graphs guarantee (optimisation may fuse small partitions); columns
        # of X travel inside X's own partitions.
        separate = len(named) < sum(v is not None for v in (y, sample_weight))
        x_parts = list(X.to_delayed(optimize_graph=not separate))
        y_parts = [None] * len(x_parts) if "y" in named else _vector_parts(
            "y", y, X, optimize=False)
        w_parts = [None] * len(x_parts) if "sample_weight" in named else _vector_parts(
            "sample_weight", sample_weight, X, optimize=False)
        return x_parts, y_parts, w_parts, spec, names
    if x_kind != "array":
        raise ValidationError(
            f"X must be a dask array or dask DataFrame here, got {type(X).__name__}"
        )
    if X.ndim != 2:
        raise ValidationError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if isinstance(y, str):
        raise ValidationError(
            f"y={y!r} names a column, but X is a dask array; pass y as a dask array"
        )
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})  # partitions must hold whole rows
    x_parts = list(X.to_delayed()[:, 0])
    y_parts = _vector_parts("y", y, X)
    w_parts = _vector_parts("sample_weight", sample_weight, X)
    return x_parts, y_parts, w_parts, spec, None


class DaskBatch:
    """One batch prepared on the cluster (see prepare_batch). Use as a context manager, or
    call release(): the prepared partitions stay in the workers' memory until then."""

    #: the rows are not in this process: checks that read rows locally are skipped
    on_device = True

    def __init__(self, client, futures, summaries, spec, feature_names,
                 partition_engine: str = "auto"):
        self._client = client
        self._futures = futures
        self._summaries = summaries
        self.spec = spec
        #: rows (zero-weight rows included), features (intercept excluded), total weight
        self.n_rows = sum(s.n_rows for s in summaries)
        self.n_features = next(s.n_features for s in summaries if s.n_rows)
        weight_sum = 0.0
        for summary in summaries:  # partition order, like every reduction here
            weight_sum += summary.weight_sum
        self.weight_sum = weight_sum
        #: the table's column names to record, or None
        self.feature_names = feature_names
        #: the partitions' futures, in partition order (the rows stay on the workers)
        self.futures = futures
        #: the mode the batch was prepared with (partitions.PARTITION_ENGINES)
        self.partition_engine = partition_engine
        #: the engine that sums each partition, in partition order, as its worker resolved
        #: the mode ("native_cpu", "numpy", "native_cuda" or "cupy")
        self.partition_engines = tuple(s.engine for s in summaries)

    def __enter__(self) -> DaskBatch:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def release(self) -> None:
        """Let the workers drop the prepared partitions (other holders of the same keys, e.g.
        another estimator fitting the same collection, keep theirs)."""
        futures, self._futures, self.futures = self._futures, [], []
        _release(futures)

    def _run(self, function, *iterables, **kwargs):
        return _map_in_order(self._client, function, self._futures, *iterables, **kwargs)

    def sums(self, beta, kinds: tuple[str, ...], tau: float, bandwidth: float) -> dict:
        """The batch's sums over rows at beta. Up to REDUCTION_GROUP partitions, their sums
        are added here in partition order; beyond, the workers add consecutive groups of
        REDUCTION_GROUP (each in partition order), level by level, until that few remain,
        so the client receives at most REDUCTION_GROUP partial sums and the association is
        fixed by the number of partitions alone."""
        return self._reduce(partition_statistics, beta=beta, kinds=kinds, tau=tau,
                            bandwidth=bandwidth)

    def losses(self, betas, tau: float, bandwidth: float):
        """The batch's loss sums at each of `betas`, as an array, in one pass: each partition
        sums its rows at every beta, and the partitions' arrays are added elementwise in the
        order of sums(), so entry k equals sums(betas[k], ("loss",), ...)["loss"] bit for bit."""
        return self._reduce(partition_losses, betas=betas, tau=tau,
                            bandwidth=bandwidth)["losses"]

    def _reduce(self, function, **kwargs) -> dict:
        """function(partition, **kwargs) on every partition (each with the engine it was
        prepared for), reduced as sums() says."""
        client = self._client

        def reduce():
            futures = client.map(function, self._futures, pure=False, **kwargs)
            while len(futures) > REDUCTION_GROUP:
                futures = [
                    client.submit(add_in_order, *futures[start:start + REDUCTION_GROUP],
                                  pure=False)
                    for start in range(0, len(futures), REDUCTION_GROUP)
                ]
            return add_in_order(*client.gather(futures))

        return _on_cluster(reduce)

    def pilot_rows(self):
        """The rows (X without intercept, y, w) a host batch would use for tau="auto"."""
        step = row_stride(self.n_rows, PILOT_ROWS)
        starts, offset = [], 0
        for summary in self._summaries:
            starts.append((-offset) % step)
            offset += summary.n_rows
        pieces = self._run(
            pilot_rows, starts, step=step, n_features=self.n_features, pure=False
        )
        # An empty partition has no weights even in a weighted batch: it adds no rows anyway.
        pieces = [piece for piece in pieces if piece[1].shape[0]] or pieces[:1]
        X = np.concatenate([piece[0] for piece in pieces])
        y = np.concatenate([piece[1] for piece in pieces])
        w = None if pieces[0][2] is None else np.concatenate([piece[2] for piece in pieces])
        return X, y, w

    def update(
        self, state: RenewableState, config: UpdateConfig
    ) -> tuple[RenewableState, Diagnostics]:
        """One renewable transition of `state` by this batch; `state` is never modified."""
        if config.n_features_in != self.n_features:
            raise ValidationError(
                f"the batch has {self.n_features} features; the config expects "
                f"{config.n_features_in}"
            )
        fused = ("loss", "score", "curvature") if config.penalty == "none" else ("loss", "score")
        problem = DistributedProblem.for_state(
            np, state, config, self.weight_sum, X=None, y=None, w=None, partitions=self,
            fused=fused,
        )
        return solve_problem(problem, state, config, self.n_rows)


def _release(futures) -> None:
    for future in futures:
        future.release()


def _map_in_order(client, function, futures, *iterables, **kwargs):
    """Map `function` over the partitions' futures (plus per-partition iterables) and gather
    the results in partition order; any failure of the cluster is an EngineError."""
    return _on_cluster(
        lambda: client.gather(client.map(function, futures, *iterables, **kwargs))
    )


def _on_cluster(work):
    """work(), with any failure of the cluster (not a refusal of the input) as EngineError."""
    try:
        return work()
    except RenewableHuberError:
        raise
    except Exception as error:
        raise EngineError(
            f"the dask cluster failed during the batch ({type(error).__name__}: {error}); "
            "nothing was committed and the estimator's state is unchanged"
        ) from error


def _check_batch(summaries, spec: PartitionSpec, weighted: bool) -> None:
    """The whole-batch rules: rows, features, weights not all zero, the range rule."""
    if sum(s.n_rows for s in summaries) == 0:
        raise ValidationError("X has 0 rows; a batch needs at least 1 row")
    features = {s.n_features for s in summaries if s.n_rows}
    if len(features) > 1:
        raise ValidationError(f"the partitions of X have different numbers of columns {features}")
    if weighted and not any(s.has_positive_weight for s in summaries):
        raise ValidationError("sample_weight is all zero; at least one row needs a positive weight")
    limit = range_limit(spec.dtype)
    dtype = spec.dtype.name
    bound = f"above the limit {limit:.3g} (the largest {dtype} / {RANGE_MARGIN:g})"
    weight_total = sum(s.weight_sum for s in summaries)
    if weighted and not weight_total <= limit:
        raise ValidationError(
            f"sample_weight is too large for {dtype}: the batch's weights sum to "
            f"{weight_total:.3g}, {bound}; rescale sample_weight"
        )
    for name, terms, rows, rule in (
        ("X", "x_terms", "x_largest_row", "sum of w_i (||x_i||^2 + 1)"),
        ("y", "y_terms", "y_largest_row", "sum of w_i y_i^2"),
    ):
        total = sum(getattr(s, terms) for s in summaries)
        if not total <= limit:
            worst = max(range(len(summaries)), key=lambda k: getattr(summaries[k], terms))
            raise ValidationError(
                f"{name} is too large for {dtype}: the batch's {rule} is {total:.3g}, {bound}; "
                f"the largest term is in partition {worst}, row "
                f"{getattr(summaries[worst], rows)}; rescale the data"
            )


def _per_partition(function, x_parts, y_parts, w_parts, spec: PartitionSpec) -> list:
    """function(index, X, y, w, spec) as one delayed task per partition, in partition order."""
    import dask

    return [
        dask.delayed(function, pure=True)(index, xk, yk, wk, spec)
        for index, (xk, yk, wk) in enumerate(zip(x_parts, y_parts, w_parts, strict=True))
    ]


def _first_batch_scaling(client, x_parts, y_parts, w_parts, spec: PartitionSpec):
    tasks = _per_partition(partition_moments, x_parts, y_parts, w_parts, spec)
    moments = _on_cluster(lambda: client.gather(client.compute(tasks)))
    combined = moments[0]
    for part in moments[1:]:  # partition order
        combined = combine_moments(combined, part)
    return FeatureScaling.from_moments(combined, spec.dtype)


def prepare_batch(
    X,
    y,
    sample_weight=None,
    *,
    dtype,
    fit_intercept: bool,
    n_features_expected: int | None = None,
    feature_names_expected: tuple[str, ...] | None = None,
    backend: str | None = None,
    standardize: bool = False,
    scaling: FeatureScaling | None = None,
) -> DaskBatch:
    """Prepare a dask collection as one batch on the cluster of the current Client.

    X: a dask array (rows partitioned by its row chunks; column chunks are merged) or a dask
    DataFrame. y: a dask array/Series partitioned like X, or the name of a column of the
    DataFrame X. sample_weight: None or like y. Each partition is validated and converted on
    its worker (and copied to the worker's GPU for a GPU partition engine); the whole-batch
    rules are then checked from per-partition summaries. backend: the estimator's backend,
    which picks the workers' engine when RH_DASK_PARTITION_ENGINE is unset
    (partitions.partition_engine_mode). standardize: standardise the features with
    `scaling`, the stream's FeatureScaling, or for a stream's first batch (scaling None) with
    the one its rows give: their column moments are summed in a pass of their own (each
    partition read and validated once more) and combined in partition order. The batch's
    `spec.scaling` is the one used. Raises ValidationError for bad input,
    BackendUnavailableError when a worker cannot run an explicitly chosen engine, EngineError
    when the cluster fails.
    """
    _, distributed = _modules()
    client = _client(distributed)
    engine = partition_engine_mode(backend=backend)
    if y is None:
        raise ValidationError(
            "y is None: RenewableHuberRegressor requires y to be passed, but the target y is None"
        )
    spec = PartitionSpec(np.dtype(dtype), bool(fit_intercept), n_features_expected,
                         feature_names_expected, engine=engine)
    x_parts, y_parts, w_parts, spec, names = _partitions(X, y, sample_weight, spec)
    if standardize:
        if scaling is None:
            scaling = _first_batch_scaling(client, x_parts, y_parts, w_parts, spec)
        spec = dataclasses.replace(spec, scaling=scaling)
    tasks = _per_partition(prepare_partition, x_parts, y_parts, w_parts, spec)
    futures = client.compute(tasks)
    try:
        summaries = _map_in_order(
            client, summarise_partition, futures, fit_intercept=spec.fit_intercept
        )
        _check_batch(summaries, spec, sample_weight is not None)
    except BaseException:
        _release(futures)
        raise
    return DaskBatch(client, futures, summaries, spec, names, engine)
