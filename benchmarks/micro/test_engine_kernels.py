"""Micro-benchmarks of librh_cpu's pieces, through the ABI only (no estimator layer).

Run on demand (the microbench marker is deselected by default):
    RH_CPU_LIBRARY=build/.../librh_cpu.so PYTHONPATH=python \
        python3 -m pytest benchmarks/micro -m microbench --benchmark-columns=median,iqr,rounds

The ABI has no per-kernel entry point, so each piece is isolated by what a call must do:
  predict           one pass over X (X . beta): the memory-bound row pass alone
  newton_1_iter     update with max_iter=1: checks, one fused row pass, the Gram, one solve
  newton_full       update to convergence: the cost per extra iteration is full - 1 iter
  gram_growth       max_iter=1 at fixed rows, p = 8 vs 64: the Gram's O(n p^2) term
  solve_dominated   few rows, wide p: the O(p^3) dense solve dominates
Every update starts from the restored empty state (outside the timer), so rounds repeat the
same work.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

pytest.importorskip("pytest_benchmark")
_abi = pytest.importorskip("renewable_huber._abi")
_loader = pytest.importorskip("renewable_huber._loader")
_engine = pytest.importorskip("renewable_huber._engine")
_state = pytest.importorskip("renewable_huber.state")

pytestmark = pytest.mark.microbench

DTYPES = ("float32", "float64")
_pointer = _engine.host_address


class EngineCase:
    """One engine (the package's engine handle) with its data, an empty state to restore and
    ready-made ABI structs; the timed calls go to the library directly."""

    def __init__(self, lib, rows: int, features: int, dtype: str, max_iter: int,
                 penalty: int = _abi.RH_CUDA_PENALTY_NONE) -> None:
        rng = np.random.default_rng(7)
        self.lib = lib
        self.X = rng.standard_normal((rows, features)).astype(dtype)
        self.y = (self.X @ rng.standard_normal(features) + 0.2 * rng.standard_normal(rows)
                  ).astype(dtype)
        n_parameters = features + 1
        self.handle = _engine.EngineHandle(
            lib, name="microbenchmark engine", dtype=dtype, n_parameters=n_parameters,
            device_id=_engine.HOST_DEVICE_ID,
        )
        self.engine = self.handle.engine
        self.empty, self._empty_arrays = _engine.state_view(
            _state.RenewableState.empty(n_parameters, dtype, with_meat=False), dtype, n_parameters
        )
        self.batch = _abi.make(_abi.RhCudaHostBatch, x_design=_pointer(self.X),
                               y=_pointer(self.y), sample_weight=None, n_rows=rows,
                               n_columns=features, batch_weight=float(rows))
        self.config = _abi.make(_abi.RhCudaUpdateConfig, n_features_in=features,
                                max_iter=max_iter, tau=1.345, bandwidth_scale=1.0,
                                tolerance=1e-6, ridge=1e-8, penalty=penalty, reserved0=0,
                                lambda_scale=1.0)
        self.diagnostics = _abi.make(_abi.RhCudaDiagnostics)
        self.prediction = np.empty(rows, dtype)
        self.predict_request = _abi.make(
            _abi.RhCudaPrediction, x_design=_pointer(self.X),
            prediction=_pointer(self.prediction), n_rows=rows, n_columns=features,
            n_features_in=features, input_location=_abi.RH_CUDA_MEMORY_HOST, reserved0=0)

    def restore_empty(self) -> None:
        self.handle.call("rh_cuda_engine_restore", ctypes.byref(self.empty))

    def update(self) -> None:
        status = self.lib.rh_cuda_engine_update_host(
            self.engine, ctypes.byref(self.batch), ctypes.byref(self.config),
            ctypes.byref(self.diagnostics))
        _abi.check(self.lib, status, "rh_cuda_engine_update_host", self.engine)

    def predict(self) -> None:
        _abi.check(self.lib, self.lib.rh_cuda_engine_predict(self.engine,
                                                             ctypes.byref(self.predict_request)),
                   "rh_cuda_engine_predict", self.engine)

    def committed_coefficients(self) -> np.ndarray:
        return self.handle.copy_state().coefficients

    def close(self) -> None:
        self.handle.close()


@pytest.fixture(scope="module")
def lib():
    try:
        return _loader.load_engine_library("native_cpu")
    except Exception as error:  # noqa: BLE001 - no engine here: skip with the reason
        pytest.skip(f"librh_cpu unavailable: {error}")


@pytest.fixture
def make_case(lib):
    made = []

    def factory(*args, **kwargs) -> EngineCase:
        case = EngineCase(lib, *args, **kwargs)
        made.append(case)
        return case

    yield factory
    for case in made:
        case.close()


def _bench_update(benchmark, case: EngineCase, expect_iterations=None):
    benchmark.pedantic(case.update, setup=case.restore_empty, rounds=30, warmup_rounds=2)
    benchmark.extra_info["iterations"] = int(case.diagnostics.iterations)
    if expect_iterations is not None:
        assert case.diagnostics.iterations == expect_iterations


SHAPES = [(4_096, 16), (65_536, 32)]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("rows, features", SHAPES)
def test_predict_row_pass(benchmark, make_case, rows, features, dtype):
    case = make_case(rows, features, dtype, max_iter=100)
    case.restore_empty()
    case.update()
    benchmark(case.predict)
    beta = case.committed_coefficients().astype(np.float64)
    expected = case.X.astype(np.float64) @ beta[:-1] + beta[-1]
    np.testing.assert_allclose(case.prediction, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("rows, features", SHAPES)
def test_newton_one_iteration(benchmark, make_case, rows, features, dtype):
    _bench_update(benchmark, make_case(rows, features, dtype, max_iter=1), expect_iterations=1)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("rows, features", SHAPES)
def test_newton_full_solve(benchmark, make_case, rows, features, dtype):
    _bench_update(benchmark, make_case(rows, features, dtype, max_iter=100))


@pytest.mark.parametrize("features", [8, 64])
def test_gram_growth_with_features(benchmark, make_case, features):
    _bench_update(benchmark, make_case(32_768, features, "float64", max_iter=1),
                  expect_iterations=1)


def test_solve_dominated_wide_batch(benchmark, make_case):
    _bench_update(benchmark, make_case(512, 384, "float64", max_iter=1), expect_iterations=1)


def test_lamm_l1_full_solve(benchmark, make_case):
    _bench_update(benchmark, make_case(65_536, 32, "float64", max_iter=100,
                                       penalty=_abi.RH_CUDA_PENALTY_L1))
