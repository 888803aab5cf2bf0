"""Fitting batches that live on a Dask cluster (the optional [dask] extra).

RenewableHuberRegressor.partial_fit and fit accept dask collections: a dask array X with a
dask array (or Series) y, or a dask DataFrame X with y a column name or a dask Series. The
rows stay on the workers: each solver pass maps over the partitions, which return their sums
over rows (the loss, X'(w psi), X' diag(w c) X, ...), and the client reduces them in
partition order and runs the reference solvers on P-sized arrays. See docs/dask.md.
"""

from .batch import DaskBatch, is_dask_collection, prepare_batch
from .problem import DistributedProblem, RowsAt

__all__ = ["DaskBatch", "DistributedProblem", "RowsAt", "is_dask_collection", "prepare_batch"]
