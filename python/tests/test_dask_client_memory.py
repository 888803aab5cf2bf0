"""The rows of a batch persisted on the workers never pass through the client: fitting it
allocates in the client a small fraction of the batch (tracemalloc sees NumPy's buffers),
and the fit equals the in-process one."""

from __future__ import annotations

import tracemalloc

import numpy as np
from dask_support import local_cluster, requires_dask

from renewable_huber import RenewableHuberRegressor

try:
    import dask.array as da
except ImportError:  # every test skips (requires_dask)
    da = None

pytestmark = requires_dask


def test_fitting_a_persisted_batch_allocates_a_fraction_of_it_in_the_client(cpu_library,
                                                                           monkeypatch):
    n, p = 60_000, 40
    # The worker processes (which inherit this environment) sum with librh_cpu, the default
    # engine, and must not fall back to NumPy.
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "native_cpu")
    with local_cluster(2) as client:
        rng = da.random.default_rng(5)
        X = rng.standard_normal((n, p), chunks=(15_000, p))
        y = X @ np.linspace(-1.0, 1.0, p) + rng.standard_t(3, size=n, chunks=15_000)
        X, y = client.persist([X, y])
        client.gather(client.compute([X.sum(), y.sum()]))  # materialised on the workers
        batch_bytes = n * (p + 1) * 8
        tracemalloc.start()
        try:
            model = RenewableHuberRegressor(backend="numpy").fit(X, y)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        local_X, local_y = X.compute(), y.compute()
    assert peak < batch_bytes / 8, f"the client allocated {peak} bytes for a {batch_bytes} batch"
    local = RenewableHuberRegressor(backend="numpy").fit(local_X, local_y)
    assert model.n_iter_ == local.n_iter_
    np.testing.assert_allclose(model.state_.coefficients, local.state_.coefficients,
                               rtol=1e-10, atol=0)
