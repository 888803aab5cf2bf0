"""The GPU partition engines of Dask workers: native_cuda (librh_cuda's row-statistics device
call) and cupy (the reference's row functions on CuPy arrays), over partitions copied once to
the worker's GPU.

On a GPU host (marked cuda; each skips with its reason without CuPy, a GPU, or a librh_cuda
exporting the device call): every sum of a GPU partition against the numpy engine on the same
rows, and whole fits on a LocalCluster against the in-process fit of the same per-row
arithmetic. Anywhere (CI included): the binding's device request, and the refusals of an
explicit GPU engine that cannot run, with CuPy, the GPU or the library faked away."""

from __future__ import annotations

import ctypes
import dataclasses
import sys
import types

import numpy as np
import pytest
from dask_support import local_cluster, requires_dask_array
from test_dask_partition_engines import _close, _definitions, _fake_library
from test_dask_partition_engines import _rows as partition_rows

from renewable_huber import RenewableHuberRegressor, _abi, _loader, _row_statistics
from renewable_huber.backends import native
from renewable_huber.dask import partitions
from renewable_huber.dask.partitions import (
    KINDS,
    Partition,
    PartitionSpec,
    partition_losses,
    partition_statistics,
    pilot_rows,
    prepare_partition,
    summarise_partition,
)
from renewable_huber.exceptions import BackendUnavailableError, ValidationError

TAU, H = 1.345, 0.3
GPU_ENGINES = ("native_cuda", "cupy")


def _rows(rng, n=3000, p=6, weighted=False):
    return partition_rows(rng, n, p, weighted, zero_every=11)


# ------------------------------------------------------------------------ GPU host only
@pytest.fixture(scope="module", params=GPU_ENGINES)
def gpu_engine(request):
    """A GPU partition engine that runs here; skips with what is missing."""
    if request.param == "native_cuda":
        request.getfixturevalue("cuda_engine")  # librh_cuda found (RH_CUDA_LIBRARY) and usable
    reason = partitions.gpu_engine_unavailable_reason(request.param)
    if reason is not None:
        pytest.skip(f"partition engine {request.param} cannot run here: {reason}")
    return request.param


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "no-intercept"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weights"])
def test_gpu_partition_sums_equal_the_numpy_engine(gpu_engine, dtype, fit_intercept, weighted):
    import cupy

    rng = np.random.default_rng([5, fit_intercept, weighted, dtype == "float32"])
    X, y, w, beta = _rows(rng, weighted=weighted)
    host = prepare_partition(0, X, y, w, PartitionSpec(np.dtype(dtype), fit_intercept, 6, None,
                                                       engine="numpy"))
    device = prepare_partition(0, X, y, w, PartitionSpec(np.dtype(dtype), fit_intercept, 6,
                                                         None, engine=gpu_engine))
    # the rows live on this thread's GPU, in the working dtype, C-contiguous, nowhere else
    assert device.on_device and device.engine == gpu_engine
    for name in ("X", "y") + (("w",) if weighted else ()):
        array = getattr(device, name)
        assert isinstance(array, cupy.ndarray), name
        assert array.dtype == np.dtype(dtype) and array.flags.c_contiguous, name
        assert array.device.id == cupy.cuda.runtime.getDevice(), name
        assert np.array_equal(array.get(), getattr(host, name)), name
    assert device.w is None if not weighted else device.weight == pytest.approx(
        float(np.sum(host.w, dtype=np.float64)), rel=1e-15)
    summary = summarise_partition(device, fit_intercept)
    assert summary == dataclasses.replace(summarise_partition(host, fit_intercept),
                                          engine=gpu_engine)
    for a, b in zip(pilot_rows(device, 3, 7, 6), pilot_rows(host, 3, 7, 6), strict=True):
        assert (a is None and b is None) or (type(a) is np.ndarray and np.array_equal(a, b))

    P = host.X.shape[1]
    at = (np.append(beta, 0.7) if fit_intercept else beta)[:P] + 0.2 * rng.normal(size=P)
    at = at.astype(dtype)
    gpu = partition_statistics(device, at, KINDS, TAU, H)
    reference = partition_statistics(host, at, KINDS, TAU, H, engine="numpy")
    expected = _definitions(host, at)
    float32 = dtype == "float32"
    for kind in KINDS:
        # host values, of the numpy engine's types and shapes: the client cannot tell them apart
        assert type(gpu[kind]) is type(reference[kind]), kind
        assert np.asarray(gpu[kind]).dtype == np.asarray(reference[kind]).dtype, kind
        assert np.shape(gpu[kind]) == np.shape(reference[kind]), kind
        # Against the numpy engine (working-dtype residuals): float32 rounding. Against the
        # definitions in float64: librh_cuda sums in double as librh_cpu does (the tolerances
        # of the native_cpu test), the cupy engine in the reference's arithmetic.
        assert _close(gpu[kind], reference[kind], 2e-4 if float32 else 1e-12), kind
        if gpu_engine == "native_cuda":
            rtol = 1e-7 if float32 and kind not in ("meat", "norm") else 1e-12
        else:
            rtol = 2e-4 if float32 else 1e-12
        assert _close(gpu[kind], expected[kind], rtol), kind
    for kind in ("curvature", "majoriser", "meat"):
        assert np.array_equal(gpu[kind], gpu[kind].T), kind
    # a hinted line search's losses: each equal to its own pass bit for bit
    betas = [at, (0.5 * at).astype(dtype), np.zeros(P, dtype)]
    losses = partition_losses(device, betas, TAU, H)["losses"]
    for loss, point in zip(losses, betas, strict=True):
        assert loss == partition_statistics(device, point, ("loss",), TAU, H)["loss"]


@pytest.mark.cuda
def test_gpu_partition_empty_and_zero_weight(gpu_engine):
    rng = np.random.default_rng(9)
    X, y, _, beta = _rows(rng, n=40)
    spec = PartitionSpec(np.dtype("float64"), True, 6, None, engine=gpu_engine)
    zero = prepare_partition(0, X, y, np.zeros(40), spec)
    assert zero.on_device
    sums = partition_statistics(zero, np.append(beta, 0.0), KINDS, TAU, H)
    for kind in KINDS:
        assert not np.any(sums[kind]), kind
    empty = prepare_partition(1, np.zeros((0, 6)), np.zeros(0), None, spec)
    assert not empty.on_device  # nothing to copy: an empty partition sums to zero on the host
    assert summarise_partition(empty, True).n_rows == 0


def _stream(seed: int, sizes, p=7):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=p)
    out = []
    for n in sizes:
        X = rng.normal(size=(n, p)) * rng.uniform(0.5, 2.0, size=p)
        y = X @ beta + 1.5 + rng.standard_t(3, size=n) + 15.0 * (rng.random(n) < 0.03)
        w = rng.uniform(0.2, 2.0, size=n)
        out.append((X, y, w))
    return out


@pytest.fixture(scope="module")
def gpu_client(gpu_engine):
    """Two worker threads of this process (their GPU is this process's current device)."""
    with local_cluster(2, processes=False) as client:
        yield client


def _assert_states_within(a, b, rtol):
    for name in ("coefficients", "information"):
        actual, expected = getattr(a, name), getattr(b, name)
        scale = max(float(np.max(np.abs(expected))), 1e-300)
        assert float(np.max(np.abs(actual - expected))) <= rtol * scale, name
    assert a.n_samples_seen == b.n_samples_seen and a.batch_count == b.batch_count


@pytest.mark.cuda
@requires_dask_array
@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_a_fit_on_gpu_workers_equals_the_in_process_fit(gpu_engine, gpu_client, penalty,
                                                         monkeypatch, request):
    """Each GPU engine against the in-process engine whose solver follows the same steps: the
    client solves with the reference's solver, so cupy workers are held to the in-process cupy
    backend, and native_cuda workers (librh_cuda's sums in double) to the in-process native_cpu
    engine (the reference's solver over sums in double): the same iterations per batch and
    states within 1e-10. native_cuda workers are also held to the in-process native_cuda
    engine, whose own device solver stops at a point of the same tolerance by other roundings
    (docs/dask.md): the same iterations, states within the solve's tolerance."""
    import dask.array as da

    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", gpu_engine)
    params = dict(penalty=penalty, tol=1e-8, max_iter=200, ridge=1e-8)
    if gpu_engine == "native_cuda":
        request.getfixturevalue("cpu_library")  # librh_cpu found
    same_steps = "native_cpu" if gpu_engine == "native_cuda" else "cupy"
    local = RenewableHuberRegressor(backend=same_steps, **params)
    device_local = (RenewableHuberRegressor(backend="native_cuda", **params)
                    if gpu_engine == "native_cuda" else None)
    cluster = RenewableHuberRegressor(backend=gpu_engine, **params)
    for X, y, w in _stream(17, (6000, 2500, 4000)):
        local.partial_fit(X, y, sample_weight=w)
        rows = 1500
        cluster.partial_fit(da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows),
                            sample_weight=da.from_array(w, chunks=rows))
        assert cluster.n_iter_ == local.n_iter_
        assert cluster.diagnostics_["converged"] == local.diagnostics_["converged"]
        _assert_states_within(cluster.state_, local.state_, 1e-10)
        if device_local is not None:
            device_local.partial_fit(X, y, sample_weight=w)
            assert cluster.n_iter_ == device_local.n_iter_
            _assert_states_within(cluster.state_, device_local.state_, params["tol"])


@pytest.mark.cuda
@requires_dask_array
def test_gpu_backends_use_gpu_workers_by_default(gpu_engine, gpu_client, monkeypatch):
    """Unset RH_DASK_PARTITION_ENGINE: a GPU backend's batch is summed by its GPU engine on
    workers that can run it; the partitions stay on the GPU between passes."""
    import dask.array as da

    from renewable_huber.dask import prepare_batch

    monkeypatch.delenv("RH_DASK_PARTITION_ENGINE", raising=False)
    X, y, _ = _stream(3, (4000,))[0]
    with prepare_batch(da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000),
                       dtype=np.float64, fit_intercept=True, backend=gpu_engine) as batch:
        assert batch.partition_engine == f"prefer_{gpu_engine}"
        assert batch.partition_engines == (gpu_engine,) * 4
        held = gpu_client.gather(gpu_client.map(lambda part: type(part.X).__module__,
                                                batch.futures, pure=False))
        assert all(module.startswith("cupy") for module in held)
    with prepare_batch(da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000),
                       dtype=np.float64, fit_intercept=True, backend="numpy") as batch:
        assert batch.partition_engines == ("numpy",) * 4  # a CPU backend: host rows


# --------------------------------------------------------------------- anywhere (CI too)
def test_the_device_request_points_at_the_device_rows_and_host_outputs():
    outputs = {"score": np.empty(3), "meat": np.empty((3, 3))}
    beta = np.array([1.0, 2.0, 3.0])
    batch, statistics = _row_statistics.device_request(
        0x10000, 0x20000, None, 50, 3, 50.0, beta, _row_statistics.RH_CUDA_STATISTIC_SCORE
        | _row_statistics.RH_CUDA_STATISTIC_MEAT, TAU, H, outputs)
    assert isinstance(batch, _abi.RhCudaDeviceBatch)
    assert (batch.abi_version, batch.struct_size) == (_abi.ABI_VERSION,
                                                      ctypes.sizeof(_abi.RhCudaDeviceBatch))
    assert (batch.x_design, batch.y, batch.sample_weight) == (0x10000, 0x20000, None)
    assert (batch.n_rows, batch.n_columns, batch.batch_weight) == (50, 3, 50.0)
    assert statistics.statistics == 0b10010
    assert statistics.coefficients == beta.ctypes.data
    assert (statistics.tau, statistics.bandwidth) == (TAU, H)
    assert statistics.score == outputs["score"].ctypes.data
    assert statistics.meat == outputs["meat"].ctypes.data
    assert statistics.curvature_gram is None and statistics.majoriser_gram is None
    weighted, _ = _row_statistics.device_request(0x10000, 0x20000, 0x30000, 50, 3, 12.5, beta,
                                                 1, TAU, H, {})
    assert (weighted.sample_weight, weighted.batch_weight) == (0x30000, 12.5)


def test_a_library_without_the_device_call_is_refused_before_any_array_is_read(cpu_library,
                                                                              monkeypatch):
    lib = _loader.load_library_path(cpu_library)
    engine = _row_statistics.RowStatistics(lib, np.float64, 3)
    monkeypatch.setattr(_row_statistics, "has_device_call", lambda lib: False)
    monkeypatch.setattr(_row_statistics, "extension_version", lambda lib: 1)
    with pytest.raises(BackendUnavailableError,
                       match=r"does not export rh_cuda_engine_row_statistics_device "
                             r"\(row-statistics extension version >= 2\); it reports version 1"):
        engine.compute_device(object(), object(), None, np.zeros(3), ("loss",), TAU, H)


@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weights"])
def test_the_device_path_borrows_on_the_engine_stream_and_sums_as_the_host_path(cpu_library,
                                                                               weighted):
    """Without a GPU: compute_device over stand-in device rows (DLPack producers over host
    memory that claim CUDA device 0) through a device call forwarded to the host call gives
    compute()'s sums bit for bit, every array borrowed once on the engine's stream; a y of
    the wrong length is refused before the call."""
    from dlpack_fakes import FakeCudaProducer
    from test_conformance_native import _LibraryView

    lib = _loader.load_library_path(cpu_library)
    X, y, w, beta = _rows(np.random.default_rng(11), n=500, weighted=weighted)
    X = np.ascontiguousarray(np.column_stack([X, np.ones(len(y))]))
    at = np.append(beta, 0.7)
    engine = _row_statistics.RowStatistics(lib, np.float64, X.shape[1])
    expected = engine.compute(X, y, w, at, KINDS, TAU, H)
    calls = []

    def forwarded(handle, batch, request):
        calls.append(_abi.RhCudaDeviceBatch.from_buffer_copy(batch._obj))
        rows = _abi.RhCudaHostBatch.from_buffer_copy(batch._obj)
        return lib.rh_cuda_engine_row_statistics(handle, ctypes.byref(rows), request)

    engine._handle.lib = _LibraryView(lib, rh_cuda_engine_row_statistics_device=forwarded)
    engine.device_id, engine._stream = 0, 5

    def device(array):
        producer = FakeCudaProducer(array.shape, data=array.ctypes.data)
        producer.host = array
        return producer

    arrays = [device(X), device(y)] + ([device(w)] if weighted else [])
    got = engine.compute_device(*arrays[:2], arrays[2] if weighted else None, at, KINDS, TAU, H,
                                weight=None if w is None else float(np.sum(w)))
    for kind in KINDS:
        assert np.array_equal(got[kind], expected[kind]), kind
        assert type(got[kind]) is type(expected[kind]), kind
    (batch,) = calls
    assert batch.n_rows == 500 and batch.n_columns == X.shape[1]
    assert batch.batch_weight == (500.0 if w is None else float(np.sum(w)))
    assert all(p.streams == [5] and p.deleter_calls == 1 for p in arrays)
    with pytest.raises(ValidationError, match=r"X has shape \(500, 7\) and y \(499,\)"):
        engine.compute_device(arrays[0], device(y[:499]), None, at, KINDS, TAU, H)
    assert len(calls) == 1


def _spec(engine: str) -> PartitionSpec:
    return PartitionSpec(np.dtype("float64"), True, 6, None, engine=engine)


def _fake_cupy(monkeypatch, devices: int):
    """A CuPy whose runtime reports `devices` GPUs (enough for the availability checks)."""
    runtime = types.SimpleNamespace(getDeviceCount=lambda: devices)
    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", module)


def _prepare(engine: str, n: int = 20):
    X, y, w, _ = _rows(np.random.default_rng(1), n=n)
    return prepare_partition(3, X, y, w, _spec(engine))


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_an_explicit_gpu_engine_without_cupy_is_refused(engine, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    expected = rf"partition engine '{engine}' \(RH_DASK_PARTITION_ENGINE={engine}\) cannot run: "
    expected += ("CuPy is not installed" if engine == "cupy" else
                 "native_cuda partitions are held in CuPy arrays, and CuPy is not installed")
    with pytest.raises(BackendUnavailableError, match=expected):
        _prepare(engine)
    # an empty partition too: the engine is refused, not the rows
    with pytest.raises(BackendUnavailableError, match=expected):
        _prepare(engine, n=0)


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_an_explicit_gpu_engine_without_a_gpu_is_refused(engine, monkeypatch):
    _fake_cupy(monkeypatch, devices=0)
    with pytest.raises(BackendUnavailableError, match=f"'{engine}'.*CuPy sees no CUDA GPU"):
        _prepare(engine)


def test_native_cuda_without_librh_cuda_is_refused(monkeypatch, tmp_path):
    _fake_cupy(monkeypatch, devices=1)
    missing = tmp_path / "nowhere" / "librh_cuda.so"
    monkeypatch.setenv("RH_CUDA_LIBRARY", str(missing))
    with pytest.raises(BackendUnavailableError,
                       match=r"'native_cuda'.*native_cuda engine library not loaded from "
                             r"\$RH_CUDA_LIBRARY.*nowhere"):
        _prepare("native_cuda")


@pytest.mark.parametrize(("version", "found"), [
    (0, "does not export the row-statistics extension"),
    (1, "exports the row-statistics extension version 1"),
])
def test_native_cuda_without_the_device_call_is_refused(monkeypatch, version, found):
    _fake_cupy(monkeypatch, devices=1)
    old = _fake_library(version, device_symbol=False)
    monkeypatch.setattr(native, "unavailable_reason", lambda kind: None)
    monkeypatch.setattr(_loader, "load_engine_library", lambda kind: old)
    with pytest.raises(BackendUnavailableError,
                       match=rf"'native_cuda'.*the librh_cuda it loads \(v{version}\) {found}; "
                             r"rh_cuda_engine_row_statistics_device needs version >= 2 "
                             r"\(rebuild or reinstall librh_cuda\)"):
        _prepare("native_cuda")


def test_preferring_modes_fall_back_to_host_rows_per_worker(cpu_library, monkeypatch):
    """prefer_cupy is numpy, prefer_native_cuda is auto (here native_cpu) on a worker without
    CuPy: a client with a GPU and CPU-only workers works, and the batch says which engine
    summed each partition."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    cupy_fallback = _prepare("prefer_cupy")
    assert not cupy_fallback.on_device and cupy_fallback.engine == "numpy"
    assert summarise_partition(cupy_fallback, True).engine == "numpy"
    cuda_fallback = _prepare("prefer_native_cuda")
    assert not cuda_fallback.on_device and cuda_fallback.engine == "auto"
    assert summarise_partition(cuda_fallback, True).engine == "native_cpu"
    rng = np.random.default_rng(2)
    beta = rng.normal(size=7)
    numpy_sums = partition_statistics(_prepare("numpy"), beta, KINDS, TAU, H)
    for kind in KINDS:
        assert np.array_equal(partition_statistics(cupy_fallback, beta, KINDS, TAU, H)[kind],
                              numpy_sums[kind]), kind


def test_a_gpu_partition_is_summed_by_its_own_engine_only():
    fake = Partition(index=4, X=np.zeros((2, 2)), y=np.zeros(2), w=None, engine="cupy")
    with pytest.raises(ValidationError, match="partition 4 is held on a GPU for the cupy "
                                              "engine; it cannot be summed by 'native_cpu'"):
        partition_statistics(fake, np.zeros(2), ("loss",), TAU, H, engine="native_cpu")


@requires_dask_array
def test_a_cluster_batch_with_an_engine_no_worker_can_run_commits_nothing(monkeypatch):
    """RH_DASK_PARTITION_ENGINE=cupy on workers without CuPy: the batch fails with the
    workers' reason before anything is committed (no silent fallback)."""
    import dask.array as da

    monkeypatch.setitem(sys.modules, "cupy", None)  # the workers are threads of this process
    rng = np.random.default_rng(8)
    X, y, _, _ = _rows(rng, n=400)
    with local_cluster(1, processes=False):
        model = RenewableHuberRegressor(backend="numpy")
        model.partial_fit(X[:100], y[:100])
        before = model.state_dict()
        before_coefficients = model.state_.coefficients.copy()
        monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "cupy")
        with pytest.raises(BackendUnavailableError,
                           match=r"partition engine 'cupy'.*cannot run on worker .*CuPy is not "
                                 r"installed"):
            model.partial_fit(da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100))
        after = model.state_dict()
        assert model.n_samples_seen_ == 100 and after["batch_count"] == before["batch_count"]
        np.testing.assert_array_equal(model.state_.coefficients, before_coefficients)


# The cupy engine's plumbing (placement once at prepare, summaries, pilot rows, host results
# of the numpy engine's types, the batch's engine record, a whole cluster fit) without a GPU:
# a stand-in for CuPy whose "device arrays" are NumPy arrays of a subclass. Its arithmetic is
# NumPy's, so its sums equal the numpy engine's bit for bit; what the GPU's own arithmetic
# gives is the cuda-marked tests' business above.
class _StandInArray(np.ndarray):
    device = types.SimpleNamespace(id=0)

    def get(self):
        return np.array(self)


class _Device:
    def __init__(self, device_id=None):
        self.id = device_id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _stand_in_cupy() -> types.ModuleType:
    module = types.ModuleType("cupy")
    module.ndarray = _StandInArray
    module.asarray = lambda a, dtype=None: np.array(a, dtype=dtype).view(_StandInArray)
    module.asnumpy = lambda a: np.array(a)
    module.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0),
        Device=_Device,
        get_current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None),
    )
    module.__getattr__ = lambda name: getattr(np, name)  # the array functions: NumPy's
    return module


@pytest.fixture
def stand_in_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _stand_in_cupy())


@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weights"])
def test_the_cupy_engine_plumbing_with_a_numpy_stand_in(stand_in_cupy, weighted):
    rng = np.random.default_rng([12, weighted])
    X, y, w, beta = _rows(rng, n=500, weighted=weighted)
    device = prepare_partition(0, X, y, w, _spec("cupy"))
    host = prepare_partition(0, X, y, w, _spec("numpy"))
    assert device.on_device and type(device.X) is _StandInArray
    assert (device.w is None) == (not weighted)
    assert summarise_partition(device, True) == dataclasses.replace(
        summarise_partition(host, True), engine="cupy")
    for a, b in zip(pilot_rows(device, 1, 9, 6), pilot_rows(host, 1, 9, 6), strict=True):
        assert (a is None and b is None) or (type(a) is np.ndarray and np.array_equal(a, b))
    at = np.append(beta, 0.7)
    sums = partition_statistics(device, at, KINDS, TAU, H)
    reference = partition_statistics(host, at, KINDS, TAU, H)
    for kind in KINDS:
        assert type(sums[kind]) is type(reference[kind]), kind
        assert np.array_equal(sums[kind], reference[kind]), kind


@requires_dask_array
def test_a_cluster_fit_through_the_cupy_engine_plumbing(stand_in_cupy, monkeypatch):
    import dask.array as da

    from renewable_huber.dask import prepare_batch

    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "cupy")
    local = RenewableHuberRegressor(backend="numpy", tol=1e-8)
    cluster = RenewableHuberRegressor(backend="numpy", tol=1e-8)
    with local_cluster(2, processes=False):
        for X, y, w in _stream(4, (3000, 1200)):
            local.partial_fit(X, y, sample_weight=w)
            cluster.partial_fit(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                                sample_weight=da.from_array(w, chunks=700))
            assert cluster.n_iter_ == local.n_iter_
            for name in ("coefficients", "information"):
                actual, expected = getattr(cluster.state_, name), getattr(local.state_, name)
                scale = float(np.max(np.abs(expected)))
                assert float(np.max(np.abs(actual - expected))) <= 1e-10 * scale, name
        with prepare_batch(da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700),
                           dtype=np.float64, fit_intercept=True, backend="numpy") as batch:
            assert batch.partition_engine == "cupy"
            assert batch.partition_engines == ("cupy",) * 2
