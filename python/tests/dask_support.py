"""Shared pieces of the Dask test modules: a small LocalCluster, and the worker plugin that
kills its own worker process in the middle of a solver pass."""

from __future__ import annotations

import contextlib
import os

import pytest

try:
    import dask.array  # noqa: F401
    import distributed
except ImportError:
    distributed = None
try:
    import dask.dataframe  # noqa: F401  (the [dask] extra's dataframe part; needs pyarrow)
except ImportError as error:
    _dataframe_missing = str(error)
else:
    _dataframe_missing = None

#: The mark of every Dask test module: without the [dask] extra each test skips with this
#: reason. (A module-level importorskip would also report a skip under a -m selection that
#: picks none of the module's tests, e.g. the GPU host's `-m cuda`.)
requires_dask = pytest.mark.skipif(
    distributed is None or _dataframe_missing is not None,
    reason="dask.distributed / dask.dataframe are not installed (pip install '.[dask]')",
)
#: The mark of tests that fit dask arrays only (no DataFrame, no Parquet): they need dask.array
#: and distributed but not dask.dataframe and its pyarrow, so a host given only those runs
#: them (the GPU host: see docs/dask.md, "GPU workers").
requires_dask_array = pytest.mark.skipif(
    distributed is None,
    reason="dask.distributed / dask.array are not installed (pip install '.[dask]')",
)


@contextlib.contextmanager
def local_cluster(n_workers: int = 2, *, processes: bool = True, **config):
    """A LocalCluster of n_workers single-threaded workers (processes, or threads of this
    process when processes=False: faster to start and to reach) and a Client on it; config:
    dask settings for its lifetime (dotted names with "__" for ".")."""
    import dask

    settings = {name.replace("__", "."): value for name, value in config.items()}
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=processes,
            dashboard_address=":0",  # a free port: 8787 may be taken on a shared machine
        )
        with cluster, distributed.Client(cluster) as client:
            yield client


class KillDuringPass(distributed.WorkerPlugin if distributed is not None else object):
    """Ends its worker's process (os._exit, as a crash or an OOM kill would) when the worker
    starts its `nth` partition-statistics task, once per marker file: with every_time, on
    every such task of every worker instead."""

    def __init__(self, marker: str, nth: int = 2, every_time: bool = False):
        self.marker = marker
        self.nth = nth
        self.every_time = every_time
        self.started = 0

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or "partition_statistics" not in str(key):
            return
        self.started += 1
        if self.started < self.nth:
            return
        if not self.every_time:
            if os.path.exists(self.marker):
                return
            with open(self.marker, "w") as file:
                file.write(str(key))
        os._exit(1)
