"""The conformance kit against built engine libraries: librh_cpu must pass every replay,
migration and negative case; librh_cpu_broken_history (the historical L1 subgradient dropped)
must be caught. RH_CPU_LIBRARY or RH_BUILD_DIR select the build; otherwise the repo's
build/ctest (what `make test-c` builds) is used, and the tests skip with a reason when none is
built."""

from __future__ import annotations

import os
import types
from pathlib import Path

import numpy as np
import pytest

from renewable_huber.conformance import AbiEngine, main, run_conformance

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO / "conformance" / "corpora"
_CPU_SUBPATH = Path("engines") / "cpu_c"


def _build_dirs() -> list[Path]:
    if os.environ.get("RH_BUILD_DIR"):
        return [Path(os.environ["RH_BUILD_DIR"])]
    return [REPO / "build" / "ctest"]


def _library(name: str) -> Path:
    if name == "librh_cpu.so" and os.environ.get("RH_CPU_LIBRARY"):
        return Path(os.environ["RH_CPU_LIBRARY"])
    if os.environ.get("RH_CPU_LIBRARY"):
        sibling = Path(os.environ["RH_CPU_LIBRARY"]).with_name(name)
        if sibling.is_file():
            return sibling
    for build in _build_dirs():
        candidate = build / _CPU_SUBPATH / name
        if candidate.is_file():
            return candidate
    pytest.skip(f"{name} is not built (set RH_BUILD_DIR or RH_CPU_LIBRARY, or run make test-c)")


@pytest.fixture(scope="module")
def cpu_summary():
    return run_conformance(AbiEngine(_library("librh_cpu.so")))


def test_cpu_engine_passes_every_replay_and_migration_case(cpu_summary):
    failures = [r.line() for r in cpu_summary.results if r.failed]
    assert failures == []
    replays = [r for r in cpu_summary.results if r.kind == "replay"]
    migrations = [r for r in cpu_summary.results if r.kind == "migration"]
    # v1 4 + v2 4 + v3 10 + v4 4 cases; migrations: two sources per cut point (v1 3, v2 7,
    # v3 10, v4 5)
    assert len(replays) == 22 and all(r.outcome == "PASS" for r in replays)
    assert len(migrations) == 50 and all(r.outcome == "PASS" for r in migrations)
    assert any(r.id.startswith("native_core_v4/meat-") for r in replays)
    assert any(r.id.startswith("native_core_v3/") for r in replays)
    assert all(r.worst is not None and r.worst <= 1.0 for r in replays + migrations)


def test_cpu_engine_refuses_every_negative_case_with_state_unchanged(cpu_summary):
    negatives = [r for r in cpu_summary.results if r.kind == "negative"]
    ran = [r for r in negatives if r.outcome != "SKIP"]
    # 49 cases in each dtype, none needing device memory skipped: a host engine must refuse
    # device input with UNAVAILABLE, which the kit checks rather than skips.
    assert len(ran) == 98 and all(r.outcome == "PASS" for r in ran)
    device = [r for r in ran if r.id.startswith("device-batch-on-host-engine")]
    assert device and all(r.detail.startswith("UNAVAILABLE") for r in device)


def test_broken_history_engine_is_caught_on_the_multi_batch_l1_cases():
    summary = run_conformance(AbiEngine(_library("librh_cpu_broken_history.so")))
    by_id = {(r.kind, r.id): r for r in summary.results}
    for case in (
        "native_core_v1/l1-intercept-two-batches",
        "native_core_v2/l1-weighted-three-batches",
        "native_core_v2/l1-float32-no-intercept-true-zeros",
        "native_core_v2/l1-sparse-truth-unpenalised-intercept",
        "native_core_v3/l1-residuals-beyond-tau-plus-h",
        "native_core_v3/l1-target-offset-1e6",
        "native_core_v3/l1-fewer-rows-than-parameters",
    ):
        assert by_id[("replay", case)].outcome == "FAIL", case
    # Cases without a historical subgradient (unpenalised, one batch, lambda 0) still pass:
    # the kit pins the fault, it does not fail everything.
    assert by_id[("replay", "native_core_v1/weighted-none-intercept-two-batches")].outcome == "PASS"
    assert by_id[("replay", "native_core_v2/l1-lambda-scale-zero-stream")].outcome == "PASS"
    assert not summary.passed


def test_cli_main_exits_non_zero_and_prints_fail_lines_for_the_broken_engine(capsys):
    broken = _library("librh_cpu_broken_history.so")
    assert (
        main(["--library", str(broken), "--corpus", str(CORPORA / "native_core_v2.json")])
        == 1
    )
    out = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("FAIL") and "native_core_v2/l1-weighted-three-batches" in line
        for line in out
    )
    assert out[-1].startswith("DOES NOT CONFORM")


def test_cli_main_exits_zero_for_the_cpu_engine_with_its_capabilities(capsys):
    library = _library("librh_cpu.so")
    capabilities = REPO / "conformance" / "capabilities" / "cpu.json"
    assert main(["--library", str(library), "--capabilities", str(capabilities)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "tolerance profile: cpu"
    assert out[-1].startswith("CONFORMS")


def test_cpu_engine_passes_the_row_statistics_extension_checks(cpu_summary):
    """librh_cpu exports the optional extension: its sums on every golden batch agree with the
    NumPy reference, and the sample refusals leave outputs and state untouched."""
    checks = [r for r in cpu_summary.results
              if r.kind == "extension" and not r.id.startswith("row_statistics/device")]
    sums = [r for r in checks if not r.id.startswith("row_statistics/refuses")]
    refusals = [r for r in checks if r.id.startswith("row_statistics/refuses")]
    assert len(sums) == 22 and all(r.outcome == "PASS" and r.worst <= 1.0 for r in sums)
    assert len(refusals) == 5 and all(r.outcome == "PASS" and r.last_error for r in refusals)


def test_the_extension_check_catches_wrong_sums_and_reports_absence(monkeypatch):
    from renewable_huber.conformance import extensions
    from renewable_huber.conformance.capabilities import Capabilities
    from renewable_huber.conformance.corpus import default_corpus_paths, load_corpus

    engine = AbiEngine(_library("librh_cpu.so"))
    cases = [case for case in load_corpus(default_corpus_paths()[0])]
    reference = extensions.reference_row_statistics

    def off_by_1e_8(*args):
        sums, scales, allowances = reference(*args)
        return {**sums, "norm": sums["norm"] * (1.0 + 1e-8)}, scales, allowances

    monkeypatch.setattr(extensions, "reference_row_statistics", off_by_1e_8)
    results = extensions.extension_checks(engine, cases, Capabilities.everything_on_host())
    sums = [r for r in results if "refuses" not in r.id and "/device" not in r.id]
    assert sums and all(r.outcome == "FAIL" and "norm" in r.detail for r in sums)
    # an ABI engine without the symbols: one SKIP line saying so
    bare = types.SimpleNamespace(speaks_abi=True, lib=types.SimpleNamespace(_name="bare"))
    (absent,) = extensions.extension_checks(bare, cases, Capabilities.everything_on_host())
    assert absent.outcome == "SKIP" and absent.detail.startswith("absent:")
    assert "rh_cuda_engine_row_statistics" in absent.detail


# ----------------------------------------------- the row-statistics device call (version 2)


class _LibraryView:
    """A stand-in engine library: the real one's symbols, except `hidden` (missing, as dlsym
    would say) and `replaced` (Python callables in their place)."""

    def __init__(self, lib, *, hidden=(), **replaced):
        self._lib = lib
        self._hidden = set(hidden)
        self._replaced = replaced

    def __getattr__(self, name):
        if name in self._hidden:
            raise AttributeError(name)
        if name in self._replaced:
            return self._replaced[name]
        return getattr(self._lib, name)


def _engine_with(lib_view, engine, device_id=None):
    """An engine under test whose extension calls go to `lib_view` (its sessions are the real
    engine's)."""
    return types.SimpleNamespace(speaks_abi=True, lib=lib_view, open=engine.open,
                                 device_id=engine.device_id if device_id is None else device_id)


def _version(n):
    def version():
        return n
    return version


def _device_lines(results):
    return [r for r in results if r.id.startswith("row_statistics/device")]


@pytest.fixture(scope="module")
def first_corpus():
    from renewable_huber.conformance.corpus import default_corpus_paths, load_corpus

    return list(load_corpus(default_corpus_paths()[0]))


def _extension_results(engine, cases, capabilities_file="cpu.json"):
    from renewable_huber.conformance import extensions
    from renewable_huber.conformance.capabilities import load_capabilities

    capabilities = load_capabilities(REPO / "conformance" / "capabilities" / capabilities_file)
    return extensions.extension_checks(engine, cases, capabilities)


def test_cpu_engine_refuses_the_device_call_with_unavailable(cpu_summary):
    """librh_cpu (no device input) exports version 2: the device call on a primed engine is
    UNAVAILABLE with a message, outputs untouched, state unchanged, in both dtypes."""
    device = _device_lines(cpu_summary.results)
    assert [r.id for r in device] == ["row_statistics/device unavailable[float64]",
                                      "row_statistics/device unavailable[float32]"]
    assert all(r.outcome == "PASS" and r.detail.startswith("UNAVAILABLE: ") for r in device)
    assert all("rh_cuda_engine_row_statistics_device" in r.detail for r in device)


def test_version_2_without_the_device_symbol_fails_and_version_1_is_a_skip(first_corpus):
    engine = AbiEngine(_library("librh_cpu.so"))
    missing = _LibraryView(engine.lib, hidden={"rh_cuda_engine_row_statistics_device"})
    (line,) = _device_lines(_extension_results(_engine_with(missing, engine), first_corpus))
    assert line.outcome == "FAIL"
    assert "version 2" in line.detail
    assert "does not export rh_cuda_engine_row_statistics_device" in line.detail
    # a version 1 engine need not have it (and it is not even looked at)
    old = _LibraryView(engine.lib, rh_cuda_row_statistics_version=_version(1))
    results = _extension_results(_engine_with(old, engine), first_corpus)
    (line,) = _device_lines(results)
    assert line.outcome == "SKIP" and line.detail.startswith("device call: extension version 1")
    assert all(r.outcome == "PASS" for r in results if r not in (line,))


def test_a_host_engine_whose_device_call_does_not_refuse_properly_fails(first_corpus):
    """The UNAVAILABLE check can fail: a device call answering SUCCESS, one that writes an
    output, one that sets no message, one that commits an update before refusing."""
    import ctypes

    from renewable_huber import _abi
    from renewable_huber.config import UpdateConfig

    engine = AbiEngine(_library("librh_cpu.so"))
    real = engine.lib

    def succeeds(handle, batch, request):
        return _abi.RH_CUDA_SUCCESS

    def writes_the_loss(handle, batch, request):
        real.rh_cuda_engine_row_statistics_device(handle, batch, request)
        request._obj.loss = 0.0
        return _abi.RH_CUDA_UNAVAILABLE

    def says_nothing(handle, batch, request):
        return _abi.RH_CUDA_UNAVAILABLE

    def updates_first(handle, batch, request):
        # commits one more update of the (host) rows it was handed, then refuses
        rows = _abi.RhCudaHostBatch.from_buffer_copy(batch._obj)
        config = _abi.make_update_config(UpdateConfig(
            n_features_in=rows.n_columns, fit_intercept=False, tau=1.345, bandwidth_scale=1.0,
            tol=1e-8, ridge=1e-8, max_iter=100, penalty="none", lambda_scale=1.0))
        diagnostics = _abi.make(_abi.RhCudaDiagnostics)
        assert real.rh_cuda_engine_update_host(handle, ctypes.byref(rows), ctypes.byref(config),
                                               ctypes.byref(diagnostics)) == 0
        return real.rh_cuda_engine_row_statistics_device(handle, batch, request)

    expectations = {
        succeeds: "status SUCCESS, expected UNAVAILABLE",
        writes_the_loss: "an output was written",
        says_nothing: "no last-error text",
        updates_first: "the committed state changed",
    }
    for fake, problem in expectations.items():
        view = _LibraryView(real, rh_cuda_engine_row_statistics_device=fake)
        device = _device_lines(_extension_results(_engine_with(view, engine), first_corpus))
        assert len(device) == 2, fake.__name__
        assert all(r.outcome == "FAIL" and problem in r.detail for r in device), (
            fake.__name__, [r.line() for r in device])


def test_device_input_without_cupy_is_one_skip_naming_what_is_missing(first_corpus,
                                                                      monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    engine = AbiEngine(_library("librh_cpu.so"))
    results = _extension_results(engine, first_corpus, "cuda.json")
    (line,) = _device_lines(results)
    assert line.outcome == "SKIP"
    assert "CuPy" in line.detail and "rh_cuda_engine_row_statistics_device not run" in line.detail
    assert "CUDA device" in line.detail  # librh_cpu runs on the host (device_id -1)
    assert all(r.outcome == "PASS" for r in results if r is not line)


class _FakeCupy:
    """The few CuPy calls the kit's device path makes, over host memory: `array` copies into a
    NumPy array and hands out a DLPack producer claiming it is on CUDA device 0 (its address is
    the copy's), so a library view whose device call reads host memory can stand in for a GPU
    engine. Counts the synchronisations and records each producer."""

    def __init__(self):
        fake = self

        class Device:
            def __init__(self, device_id):
                self.device_id = device_id

            def __enter__(self):
                return self

            def __exit__(self, *exc_info):
                return False

            def synchronize(self):
                fake.synchronised += 1

        self.cuda = types.SimpleNamespace(
            Device=Device, runtime=types.SimpleNamespace(getDeviceCount=lambda: 1))
        self.synchronised = 0
        self.producers = []

    def array(self, values, dtype=None, order="K"):
        from dlpack_fakes import FakeCudaProducer

        copy = np.array(values, dtype=dtype, order="C")
        producer = FakeCudaProducer(copy.shape, bits=copy.dtype.itemsize * 8,
                                    data=copy.ctypes.data)
        producer.host = copy  # keeps the memory alive while the producer is
        self.producers.append(producer)
        return producer


def test_the_device_path_runs_on_stand_in_device_rows_and_can_fail(first_corpus, monkeypatch):
    """Without a GPU: CuPy replaced by _FakeCupy, and the device call by one that reads the
    (host) rows through the host call. The kit's device path (copies, synchronisation, DLPack
    borrow on the engine's stream, the request builders, the reference) then passes every
    golden batch; the refusals fail as they must for such an engine (its NaN message names
    RhCudaHostBatch, and it accepts a host x_design); a device call whose sums are off fails."""
    import ctypes
    import sys

    from renewable_huber import _abi

    engine = AbiEngine(_library("librh_cpu.so"))
    real = engine.lib
    fake_cupy = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)

    def through_the_host_call(handle, batch, request):
        rows = _abi.RhCudaHostBatch.from_buffer_copy(batch._obj)
        return real.rh_cuda_engine_row_statistics(handle, ctypes.byref(rows), request)

    view = _LibraryView(real, rh_cuda_engine_row_statistics_device=through_the_host_call)
    results = _device_lines(_extension_results(_engine_with(view, engine, device_id=0),
                                               first_corpus, "cuda.json"))
    by_id = {r.id: r for r in results}
    sums = [r for r in results if "refuses" not in r.id]
    assert len(sums) == len(first_corpus) == 4
    assert all(r.outcome == "PASS" and r.worst <= 1.0 for r in sums), [r.line() for r in sums]
    assert fake_cupy.synchronised > 0
    # every array went through DLPack with the engine's stream (librh_cpu: 0, passed as 1)
    assert fake_cupy.producers and all(p.streams == [1] for p in fake_cupy.producers)
    nan = by_id["row_statistics/device refuses NaN in y"]
    assert nan.outcome == "FAIL" and "RhCudaHostBatch read RhCudaDeviceBatch" in nan.detail
    assert nan.last_error.startswith("RhCudaHostBatch.y[4]")
    host_x = by_id["row_statistics/device refuses host x_design"]
    assert host_x.outcome == "FAIL" and "status SUCCESS" in host_x.detail

    def off_by_1e_8(handle, batch, request):
        status = through_the_host_call(handle, batch, request)
        request._obj.weighted_norm *= 1.0 + 1e-8
        return status

    view = _LibraryView(real, rh_cuda_engine_row_statistics_device=off_by_1e_8)
    results = _device_lines(_extension_results(_engine_with(view, engine, device_id=0),
                                               first_corpus, "cuda.json"))
    sums = [r for r in results if "refuses" not in r.id]
    assert sums and all(r.outcome == "FAIL" and "norm" in r.detail for r in sums)


# CUDA: the kit's device checks on librh_cuda (skipped with the reason without a GPU, librh_cuda
# or CuPy).


def _all_cases():
    from renewable_huber.conformance.corpus import default_corpus_paths, load_corpus

    return [case for path in default_corpus_paths() for case in load_corpus(path)]


@pytest.mark.cuda
def test_cuda_engine_passes_the_device_call_checks(cuda_engine):
    pytest.importorskip("cupy", reason="CuPy is not installed")
    engine = AbiEngine(cuda_engine)
    cases = _all_cases()
    results = _extension_results(engine, cases, "cuda.json")
    device = _device_lines(results)
    for line in device:
        print(line.line())
    assert [r.line() for r in device if r.outcome != "PASS"] == []
    sums = [r for r in device if "refuses" not in r.id]
    assert len(sums) == len(cases) == 22 and all(r.worst <= 1.0 for r in sums)
    by_id = {r.id: r for r in device}
    nan = by_id["row_statistics/device refuses NaN in y"]
    assert nan.last_error.startswith("RhCudaDeviceBatch.y[4]")
    host_x = by_id["row_statistics/device refuses host x_design"]
    assert "RhCudaDeviceBatch.x_design" in host_x.last_error
    assert len(device) == 24


@pytest.mark.cuda
def test_cuda_device_call_checks_can_fail(cuda_engine, first_corpus, monkeypatch):
    """The same checks on librh_cuda against a reference whose weighted norm is off by 1e-8
    relative: every device case fails, naming the norm."""
    pytest.importorskip("cupy", reason="CuPy is not installed")
    from renewable_huber.conformance import extensions

    reference = extensions.reference_row_statistics

    def off_by_1e_8(*args):
        sums, scales, allowances = reference(*args)
        return {**sums, "norm": sums["norm"] * (1.0 + 1e-8)}, scales, allowances

    monkeypatch.setattr(extensions, "reference_row_statistics", off_by_1e_8)
    device = _device_lines(_extension_results(AbiEngine(cuda_engine), first_corpus, "cuda.json"))
    sums = [r for r in device if "refuses" not in r.id]
    assert len(sums) == 4 and all(r.outcome == "FAIL" and "norm" in r.detail for r in sums)
