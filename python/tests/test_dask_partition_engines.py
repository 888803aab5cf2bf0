"""The engines a Dask worker computes a partition's sums with: librh_cpu's optional
row-statistics extension (abi/rh_cuda_row_statistics.h) against the NumPy reference row
functions, both against a float64 computation from the definitions; how the mode is chosen; and
the binding's refusals. Plain functions of NumPy arrays: no cluster is started here."""

from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from renewable_huber import _abi, _row_statistics
from renewable_huber._loader import load_library_path
from renewable_huber.dask.partitions import (
    KINDS,
    PartitionSpec,
    add_in_order,
    numpy_partition_statistics,
    partition_engine_mode,
    partition_losses,
    partition_statistics,
    prepare_partition,
)
from renewable_huber.exceptions import BackendUnavailableError, ValidationError

TAU, H = 1.345, 0.3


def _rows(rng, n, p, weighted, zero_every):
    """Heavy-tailed rows with uneven column scales (X, y, weights or None, beta); every
    zero_every-th weight is zero."""
    X = rng.normal(size=(n, p)) * rng.uniform(0.5, 3.0, size=p)
    beta = rng.normal(size=p)
    y = X @ beta + 0.7 + rng.standard_t(2, size=n)
    w = None
    if weighted:
        w = rng.uniform(0.0, 2.0, size=n)
        w[::zero_every] = 0.0
    return X, y, w, beta


def _partition(rng, dtype, fit_intercept, weighted, n=2600, p=5):
    X, y, w, beta = _rows(rng, n, p, weighted, zero_every=9)
    spec = PartitionSpec(np.dtype(dtype), fit_intercept, p, None)
    partition = prepare_partition(0, X, y, w, spec)
    P = partition.X.shape[1]
    at = (np.append(beta, 0.7) if fit_intercept else beta)[:P] + 0.2 * rng.normal(size=P)
    return partition, at.astype(dtype)


def _definitions(partition, beta):
    """Every kind from its formula, in float64 from the stored values."""
    X = partition.X.astype(np.float64)
    y = partition.y.astype(np.float64)
    w = np.ones(len(y)) if partition.w is None else partition.w.astype(np.float64)
    r = y - X @ beta.astype(np.float64)
    psi = np.clip(r, -TAU, TAU)
    rho = np.where(np.abs(r) <= TAU, 0.5 * r * r, TAU * np.abs(r) - 0.5 * TAU * TAU)
    c = np.clip(0.5 + (TAU - np.abs(r)) / (2 * H), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        m = np.maximum(c, np.minimum(1.0, TAU / np.abs(r)))
    return {
        "loss": np.sum(w * rho),
        "score": X.T @ (w * psi),
        "curvature": X.T @ ((w * c)[:, None] * X),
        "majoriser": X.T @ ((w * m)[:, None] * X),
        "meat": X.T @ ((w * psi * psi)[:, None] * X),
        "norm": np.sum(w * np.sum(X * X, axis=1)),
    }


def _close(actual, expected, rtol):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = max(float(np.max(np.abs(expected))), 1e-300)
    return float(np.max(np.abs(actual - expected))) <= rtol * scale


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "no-intercept"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weights"])
def test_native_and_numpy_partition_sums_agree_to_rounding(cpu_library, dtype, fit_intercept,
                                                           weighted):
    rng = np.random.default_rng([7, fit_intercept, weighted, dtype == "float32"])
    partition, beta = _partition(rng, dtype, fit_intercept, weighted)
    native = partition_statistics(partition, beta, KINDS, TAU, H, engine="native_cpu")
    numpy = partition_statistics(partition, beta, KINDS, TAU, H, engine="numpy")
    expected = _definitions(partition, beta)
    # The NumPy reference keeps the loss in the working dtype and sums score, the Grams, the
    # meat and the norm in float64 (the Newton system is float64 for every dtype); the native
    # results come back the same way.
    float32 = dtype == "float32"
    for kind in KINDS:
        wanted = np.dtype(dtype) if kind == "loss" else np.float64
        assert np.asarray(native[kind]).dtype == np.asarray(numpy[kind]).dtype == wanted, kind
        assert np.shape(native[kind]) == np.shape(numpy[kind]), kind
        # native sums in double: 1e-12 of the definitions, the loss rounded once to float32
        # where the dtype is float32 (the reference's residuals are float32 ones: 2e-4)
        native_rtol = 1e-7 if float32 and kind == "loss" else 1e-12
        assert _close(native[kind], expected[kind], native_rtol), kind
        assert _close(numpy[kind], expected[kind], 2e-4 if float32 else 1e-12), kind
        assert _close(native[kind], numpy[kind], 2e-4 if float32 else 1e-12), kind
    for kind in ("curvature", "majoriser", "meat"):
        assert np.array_equal(native[kind], native[kind].T), kind


def test_the_extension_is_absent_or_whole(cpu_library):
    lib = load_library_path(cpu_library)
    assert _row_statistics.lookup(lib) is lib
    version = lib.rh_cuda_row_statistics_version()
    assert version >= _row_statistics.HOST_CALL_VERSION
    assert _row_statistics.extension_version(lib) == version
    # the device call is there exactly from version 2 on (librh_cpu's answers UNAVAILABLE)
    assert _row_statistics.has_device_call(lib) == (
        version >= _row_statistics.DEVICE_CALL_VERSION
        and hasattr(lib, "rh_cuda_engine_row_statistics_device"))
    # a library without the symbols, or another version of them: absent, never half-bound
    assert _row_statistics.lookup(types.SimpleNamespace(_name="none")) is None
    with pytest.raises(BackendUnavailableError, match="does not export the row-statistics"):
        _row_statistics.RowStatistics(types.SimpleNamespace(_name="none"), np.float64, 3)


class _Version:
    """A stand-in for a ctypes function pointer answering a fixed version."""

    def __init__(self, value):
        self.value, self.restype, self.argtypes = value, None, None

    def __call__(self):
        return self.value


def _fake_library(version, device_symbol):
    functions = {"rh_cuda_row_statistics_version": _Version(version),
                 "rh_cuda_engine_row_statistics": _Version(0)}
    if device_symbol:
        functions["rh_cuda_engine_row_statistics_device"] = _Version(0)
    return types.SimpleNamespace(_name=f"v{version}", **functions)


@pytest.mark.parametrize(("version", "device_symbol", "present", "device"), [
    (0, True, False, False),   # below version 1: absent, never half-bound
    (1, False, True, False),   # the host call only
    (1, True, True, False),    # a device symbol a version-1 library does not promise: unused
    (2, False, True, False),   # version 2 without its symbol: the host call only
    (2, True, True, True),
    (7, True, True, True),     # a later version: versions only add
])
def test_versions_only_add(version, device_symbol, present, device):
    lib = _fake_library(version, device_symbol)
    assert (_row_statistics.lookup(lib) is lib) == present
    assert _row_statistics.extension_version(lib) == (version if present else 0)
    assert _row_statistics.has_device_call(lib) == device
    host = lib.rh_cuda_engine_row_statistics
    if present:  # declared with the header's signature
        assert host.restype is ctypes.c_int32
        assert host.argtypes[1] == ctypes.POINTER(_abi.RhCudaHostBatch)
    else:
        assert host.argtypes is None
    if device:
        call = lib.rh_cuda_engine_row_statistics_device
        assert call.argtypes[1] == ctypes.POINTER(_abi.RhCudaDeviceBatch)
    elif device_symbol:
        assert lib.rh_cuda_engine_row_statistics_device.argtypes is None


def test_bad_values_are_refused_with_the_engine_message(cpu_library):
    lib = load_library_path(cpu_library)
    engine = _row_statistics.RowStatistics(lib, np.float64, 3)
    X = np.ones((4, 3))
    y = np.array([1.0, np.nan, 0.0, 2.0])
    with pytest.raises(ValidationError, match=r"RhCudaHostBatch\.y\[1\] is nan"):
        engine.compute(X, y, None, np.zeros(3), ("loss",), TAU, H)
    with pytest.raises(ValidationError, match=r"RhCudaRowStatistics\.coefficients\[2\] is inf"):
        engine.compute(X, np.ones(4), None, np.array([0.0, 0.0, np.inf]), ("score",), TAU, H)
    with pytest.raises(ValidationError, match=r"RhCudaRowStatistics\.bandwidth is 0"):
        engine.compute(X, np.ones(4), None, np.zeros(3), ("curvature",), TAU, 0.0)
    with pytest.raises(ValidationError, match=r"RhCudaHostBatch\.n_columns is 2"):
        engine.compute(X[:, :2], np.ones(4), None, np.zeros(3), ("loss",), TAU, H)


def test_zero_weight_and_empty_partitions(cpu_library):
    rng = np.random.default_rng(3)
    partition, beta = _partition(rng, "float64", True, True, n=50)
    zero = prepare_partition(0, partition.X[:, :-1], partition.y, np.zeros(50),
                             PartitionSpec(np.dtype("float64"), True, 5, None))
    native = partition_statistics(zero, beta, KINDS, TAU, H, engine="native_cpu")
    for kind in KINDS:
        assert not np.any(native[kind]), kind
    empty = prepare_partition(1, np.zeros((0, 5)), np.zeros(0), None,
                              PartitionSpec(np.dtype("float64"), True, 5, None))
    sums = partition_statistics(empty, beta, KINDS, TAU, H, engine="native_cpu")
    reference = numpy_partition_statistics(empty, beta, KINDS, TAU, H)
    for kind in KINDS:
        assert np.array_equal(sums[kind], reference[kind]), kind


def test_the_mode_comes_from_the_client_environment(monkeypatch):
    monkeypatch.delenv("RH_DASK_PARTITION_ENGINE", raising=False)
    assert partition_engine_mode() == "auto"
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "numpy")
    assert partition_engine_mode() == "numpy"
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "cuda")
    with pytest.raises(ValidationError, match="RH_DASK_PARTITION_ENGINE='cuda' is not a "
                                              "partition engine; expected one of auto"):
        partition_engine_mode()


def test_unset_the_mode_follows_the_estimator_backend(monkeypatch):
    """numpy and cupy fits stay in the reference's arithmetic on the workers; native backends
    use the native row pass where the workers have it; GPU workers only for a GPU backend (and
    only where a worker can run the GPU engine); the variable, when set, decides."""
    monkeypatch.delenv("RH_DASK_PARTITION_ENGINE", raising=False)
    assert partition_engine_mode(backend="numpy") == "numpy"
    assert partition_engine_mode(backend="cupy") == "prefer_cupy"
    assert partition_engine_mode(backend="native_cpu") == "auto"
    assert partition_engine_mode(backend="native_cuda") == "prefer_native_cuda"
    assert partition_engine_mode() == "auto"
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "native_cpu")
    assert partition_engine_mode(backend="numpy") == "native_cpu"
    assert partition_engine_mode(backend="native_cuda") == "native_cpu"
    assert partition_engine_mode("cupy", backend="native_cpu") == "cupy"


def test_auto_falls_back_to_numpy_and_native_cpu_refuses_without_the_library(monkeypatch,
                                                                              tmp_path):
    rng = np.random.default_rng(4)
    partition, beta = _partition(rng, "float64", True, False, n=40)
    monkeypatch.setenv("RH_CPU_LIBRARY", str(tmp_path / "missing" / "librh_cpu.so"))
    fallback = partition_statistics(partition, beta, KINDS, TAU, H, engine="auto")
    reference = numpy_partition_statistics(partition, beta, KINDS, TAU, H)
    for kind in KINDS:
        assert np.array_equal(fallback[kind], reference[kind]), kind
    with pytest.raises(BackendUnavailableError, match="missing"):
        partition_statistics(partition, beta, KINDS, TAU, H, engine="native_cpu")


class _PassCounting:
    """A DaskBatch stand-in over partitions held here: sums() and losses() reduce as the
    cluster does (add_in_order, partition order) and count their passes."""

    def __init__(self, partitions, engine):
        self.partitions, self.engine, self.passes = partitions, engine, 0

    def sums(self, beta, kinds, tau, bandwidth):
        self.passes += 1
        return add_in_order(*(partition_statistics(p, beta, kinds, tau, bandwidth, self.engine)
                              for p in self.partitions))

    def losses(self, betas, tau, bandwidth):
        self.passes += 1
        return add_in_order(*(partition_losses(p, betas, tau, bandwidth, self.engine)
                              for p in self.partitions))["losses"]


@pytest.mark.parametrize("engine", ["numpy", "native_cpu"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_long_line_search_costs_three_passes_and_changes_nothing(cpu_library, engine, dtype):
    """After rejected trials the distributed problem sums the loss at the next trial points in
    one pass (expect_line_search: after 2 rejections the next 4, after 6 the next 8, after 14
    the rest). The accepted step, its point and its objective equal the one-pass-per-trial
    search bit for bit, and the in-memory search's step."""
    from renewable_huber.config import UpdateConfig
    from renewable_huber.core.newton_solver import _line_search
    from renewable_huber.core.objective import RenewableProblem, gradient, hessian, objective
    from renewable_huber.dask.problem import DistributedProblem
    from renewable_huber.state import RenewableState

    rng = np.random.default_rng([11, dtype == "float32"])
    spec = PartitionSpec(np.dtype(dtype), True, 4, None)
    X = rng.normal(size=(3000, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 3.0]) + rng.standard_t(2, size=3000)
    parts = [prepare_partition(i, X[i * 1000:(i + 1) * 1000], y[i * 1000:(i + 1) * 1000], None,
                               spec) for i in range(3)]
    config = UpdateConfig(n_features_in=4, fit_intercept=True, tau=TAU, bandwidth_scale=1.0,
                          tol=1e-8, ridge=0.0, max_iter=50, penalty="none", lambda_scale=0.0)
    state = RenewableState.empty(5, dtype, with_meat=False)
    design = np.hstack([X, np.ones((3000, 1))]).astype(dtype)
    memory = RenewableProblem.from_batch(np, state, design, y.astype(dtype), None, config)

    def distributed():
        cluster = _PassCounting(parts, engine)
        return cluster, DistributedProblem.for_state(
            np, state, config, 3000.0, X=None, y=None, w=None, partitions=cluster,
            fused=("loss", "score", "curvature"))

    beta = memory.beta0
    step = np.linalg.solve(hessian(memory, beta), gradient(memory, beta))
    direction = (step * 2.0**12).astype(dtype)  # the right step is near t = 2^-12
    expected = _line_search(memory, beta, objective(memory, beta), direction)
    assert expected is not None and expected[3] <= 0.25

    cluster, problem = distributed()
    F = objective(problem, beta)
    cluster.passes = 0
    hinted = _line_search(problem, beta, F, direction)
    assert hinted[3] == expected[3]
    accepted_trial = -int(np.log2(hinted[3]))  # 0 for t = 1
    blocks = [(2, 6), (6, 14), (14, 27)]  # trial indices each hint's pass covers
    assert cluster.passes == 2 + sum(1 for first, _ in blocks if accepted_trial >= first)

    # The same search with one pass per trial (no hint): the same point and objective.
    cluster, plain = distributed()
    plain_F = objective(plain, beta)
    trial_t, trials = 1.0, 0
    while True:
        trials += 1
        candidate = beta - trial_t * direction
        value = objective(plain, candidate)
        if value <= plain_F:
            break
        trial_t *= 0.5
    assert trial_t == hinted[3] and trials == cluster.passes - 1 > 3
    assert np.array_equal(candidate, hinted[0]) and value == hinted[2]
