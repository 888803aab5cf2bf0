"""The same core on CuPy arrays matches the NumPy reference."""

import numpy as np
import pytest

from renewable_huber import core
from renewable_huber.config import UpdateConfig
from renewable_huber.state import RenewableState


def _cupy_or_skip_reason():
    try:
        import cupy
    except ImportError as error:
        return None, f"CuPy is not importable ({error})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, "CuPy is installed but sees no CUDA device"
    except cupy.cuda.runtime.CUDARuntimeError as error:
        return None, f"CuPy is installed but CUDA is unusable ({error})"
    return cupy, ""


cp, SKIP_REASON = _cupy_or_skip_reason()
pytestmark = [pytest.mark.cupy, pytest.mark.skipif(cp is None, reason=SKIP_REASON)]

# float64 differs only by summation order; float32 also by the order-dependent rounding
# that the golden float32 tolerance absorbs
TOLERANCES = {np.float64: 1e-8, np.float32: 2e-3}


def make_config(penalty, dtype):
    return UpdateConfig(
        n_features_in=5,
        fit_intercept=True,
        tau=1.345,
        bandwidth_scale=1.0,
        # 1e-10 is below float32 resolution: Newton would accept equal-f steps to max_iter
        tol=1e-10 if penalty == "none" and dtype == np.float64 else 1e-6,
        ridge=1e-8,
        max_iter=3000,
        penalty=penalty,
        lambda_scale=1.0,
    )


def stream(xp, batches, config, dtype):
    state = RenewableState(
        coefficients=xp.zeros(config.n_parameters, dtype=dtype),
        information=xp.zeros((config.n_parameters,) * 2, dtype=dtype),
    )
    diagnostics = []
    for X, y, w in batches:
        Xd = core.design_matrix(xp, xp.asarray(X, dtype=dtype), True)
        weights = None if w is None else xp.asarray(w, dtype=dtype)
        state, diag = core.renewable_update(xp, state, Xd, xp.asarray(y, dtype=dtype), weights,
                                            config)
        diagnostics.append(diag)
    return state, diagnostics


def batches(seed):
    rng = np.random.default_rng(seed)
    out = []
    for n, weighted in ((400, False), (300, True), (500, False)):
        X = rng.normal(size=(n, 5))
        y = X @ np.array([1.0, 0.0, -2.0, 0.5, 0.0]) + 0.3 + rng.standard_t(3, size=n)
        y[rng.uniform(size=n) < 0.05] += 40.0
        out.append((X, y, rng.uniform(0.0, 2.0, size=n) if weighted else None))
    return out


@pytest.mark.parametrize("penalty", ["none", "l1"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cupy_stream_matches_numpy(penalty, dtype):
    config = make_config(penalty, dtype)
    data = batches(1)
    host, host_diags = stream(np, data, config, dtype)
    device, device_diags = stream(cp, data, config, dtype)
    assert isinstance(device.coefficients, cp.ndarray)
    assert device.coefficients.dtype == dtype and device.information.dtype == dtype
    rtol = TOLERANCES[dtype]
    np.testing.assert_allclose(cp.asnumpy(device.coefficients), host.coefficients,
                               rtol=rtol, atol=rtol)
    scale = np.max(np.abs(host.information))
    np.testing.assert_allclose(cp.asnumpy(device.information), host.information,
                               rtol=0, atol=rtol * scale)
    assert device.weight_sum == pytest.approx(host.weight_sum, rel=1e-12)
    for d, h in zip(device_diags, host_diags, strict=True):
        assert d.converged and h.converged
        assert d.objective == pytest.approx(h.objective, rel=rtol)
        assert d.bandwidth == h.bandwidth and d.lambda_value == h.lambda_value


def test_cupy_solve_ladder_rungs_match_numpy():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(6, 6))
    spd = A @ A.T + 6 * np.eye(6)
    spd = np.triu(spd) + np.triu(spd, 1).T
    asymmetric = spd + rng.normal(size=(6, 6))
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 10.0]])
    for matrix, method in ((spd, "cholesky"), (asymmetric, "lu"), (indefinite, "lu"),
                           (singular, "svd")):
        b = rng.normal(size=matrix.shape[0])
        host = core.solve_linear(np, matrix, b)
        device = core.solve_linear(cp, cp.asarray(matrix), cp.asarray(b))
        assert host.method == device.method == method
        np.testing.assert_allclose(cp.asnumpy(device.x), host.x, rtol=1e-10, atol=1e-12)
