"""A worker process lost in the middle of a batch: the scheduler recomputes its partitions and
the batch ends exactly as without the loss, or, when the cluster gives up, partial_fit raises
and the committed state is untouched. Two worker processes; one ends its own process (as a
crash or an out-of-memory kill would) when it starts a solver pass."""

from __future__ import annotations

import numpy as np
import pytest
from dask_support import KillDuringPass, local_cluster, requires_dask

from renewable_huber import RenewableHuberRegressor
from renewable_huber.exceptions import EngineError

try:
    import dask.array as da
except ImportError:  # every test skips (requires_dask)
    da = None

pytestmark = requires_dask


def _stream(seed=11, n=4000, p=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X @ rng.normal(size=p) + rng.standard_t(2, size=n)
    return X, y


def _partitioned(array, parts):
    rows = -(-array.shape[0] // parts)
    return da.from_array(array, chunks=(rows,) + array.shape[1:])


def test_a_worker_killed_mid_batch_is_recovered_without_changing_the_result(tmp_path):
    X, y = _stream()
    local = RenewableHuberRegressor(backend="numpy").partial_fit(X[:2000], y[:2000])
    local.partial_fit(X[2000:], y[2000:])
    marker = tmp_path / "killed"
    with local_cluster(2) as client:
        cluster = RenewableHuberRegressor(backend="numpy")
        cluster.partial_fit(_partitioned(X[:2000], 4), _partitioned(y[:2000], 4))
        # from here, the first worker to start its 3rd solver pass dies (once)
        client.register_plugin(KillDuringPass(str(marker), nth=3))
        cluster.partial_fit(_partitioned(X[2000:], 4), _partitioned(y[2000:], 4))
    assert marker.exists(), "no worker was killed: the test did not exercise a loss"
    assert cluster.n_iter_ == local.n_iter_
    a, b = cluster.state_, local.state_
    assert a.batch_count == 2 and a.n_samples_seen == 4000
    np.testing.assert_allclose(a.coefficients, b.coefficients, rtol=1e-10, atol=0)
    np.testing.assert_allclose(a.information, b.information, rtol=1e-10, atol=0)


def test_a_cluster_that_keeps_losing_workers_commits_nothing(tmp_path):
    X, y = _stream(seed=12)
    # allowed-failures 0: the first task whose worker dies is not retried (KilledWorker)
    with local_cluster(2, distributed__scheduler__allowed_failures=0) as client:
        cluster = RenewableHuberRegressor(backend="numpy")
        cluster.partial_fit(_partitioned(X[:2000], 2), _partitioned(y[:2000], 2))
        before = cluster.state_
        client.register_plugin(KillDuringPass(str(tmp_path / "unused"), nth=1, every_time=True))
        with pytest.raises(EngineError, match="cluster failed during the batch.*nothing was "
                                              "committed"):
            cluster.partial_fit(_partitioned(X[2000:], 2), _partitioned(y[2000:], 2))
    after = cluster.state_
    np.testing.assert_array_equal(after.coefficients, before.coefficients)
    np.testing.assert_array_equal(after.information, before.information)
    assert after.batch_count == 1 and cluster.n_samples_seen_ == 2000
