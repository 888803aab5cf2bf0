"""Noiseless targets (y an exact linear function of X): every batch must end converged. There
the objective sits at its own rounding floor (about 1e-36 in float64) and Newton's direction at
the rounding of beta, so near the end every trial along it can be rejected by rounding alone;
the solve then ends converged because that direction passes the step test
(docs/algorithm.md, "Unpenalised", rule 3). Before that rule, the relative test on F alone
reported "line search exhausted" for one batch of the first stream below under OpenBLAS's
Prescott kernels (the CLI's data-file tests failed there); .ci/blas-kernels runs this module
under every kernel family the CPU has."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor


@pytest.fixture(params=["numpy", "native_cpu"])
def backend(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
    return request.param


def exact_stream(features: int, rows: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    y = X @ np.linspace(1.0, -1.0, features)  # no noise, no intercept: an exact fit
    return X, y


@pytest.mark.parametrize("features,batch,seed", [(2, 10, 0), (5, 10, 1), (2, 37, 2)])
def test_every_batch_of_a_noiseless_stream_converges(backend, features, batch, seed):
    X, y = exact_stream(features, 1_500, seed)
    model = RenewableHuberRegressor(backend=backend)
    for start in range(0, X.shape[0], batch):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a convergence warning fails the test
            model.partial_fit(X[start:start + batch], y[start:start + batch])
        assert model.diagnostics_["converged"], (start // batch + 1, model.diagnostics_)
    np.testing.assert_allclose(model.coef_, np.linspace(1.0, -1.0, features), atol=1e-12)
    assert abs(model.intercept_) < 1e-12
