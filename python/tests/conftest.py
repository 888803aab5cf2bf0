"""Shared test plumbing: where the built engine libraries are.

A library is taken from its environment override (RH_CPU_LIBRARY / RH_CUDA_LIBRARY), else the
ctest build named by RH_BUILD_DIR (the Makefile sets it), else the installed package. Tests that
need one skip with the reason when none exists; CI always has librh_cpu, so they run there."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings

from renewable_huber._loader import PACKAGE_LIBRARY_DIR, library_file_names

# CI replays the same examples every run (a red CI must be reproducible); local runs explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

_ENGINES = {
    "native_cpu": ("RH_CPU_LIBRARY", Path("engines") / "cpu_c", "librh_cpu.so"),
    "native_cuda": ("RH_CUDA_LIBRARY", Path("engines") / "cuda", "librh_cuda.so"),
}


def locate_engine_library(kind: str) -> Path | None:
    variable, build_subdir, filename = _ENGINES[kind]
    candidates = [os.environ.get(variable)]
    if os.environ.get("RH_BUILD_DIR"):
        candidates.append(Path(os.environ["RH_BUILD_DIR"]) / build_subdir / filename)
    candidates.extend(PACKAGE_LIBRARY_DIR / name for name in library_file_names(kind))
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def _library_fixture(kind: str):
    variable = _ENGINES[kind][0]
    path = locate_engine_library(kind)
    if path is None:
        pytest.skip(f"{kind} library not found: pip install . or set RH_BUILD_DIR / {variable}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(variable, str(path))
        yield path


@pytest.fixture(scope="module")
def cpu_library():
    """Path of librh_cpu, exported as RH_CPU_LIBRARY for the module's duration."""
    yield from _library_fixture("native_cpu")


@pytest.fixture(scope="module")
def cuda_library():
    """Path of librh_cuda, exported as RH_CUDA_LIBRARY for the module's duration."""
    yield from _library_fixture("native_cuda")


@pytest.fixture(scope="module")
def cuda_engine(cuda_library):
    """librh_cuda found and usable here (a GPU and its driver); skips with the reason when not."""
    from renewable_huber.backends.native import unavailable_reason

    reason = unavailable_reason("native_cuda")
    if reason is not None:
        pytest.skip(f"native_cuda unavailable here: {reason}")
    return cuda_library


@pytest.fixture(params=["numpy", "native_cpu", pytest.param("native_cuda", marks=pytest.mark.cuda),
                        pytest.param("cupy", marks=pytest.mark.cuda)])
def engine(request):
    """Estimator keyword arguments for each engine; an engine that cannot run here skips with
    its reason."""
    if request.param == "numpy":
        return {"backend": "numpy"}
    if request.param == "cupy":
        from renewable_huber.backends.cupy_backend import cupy_unavailable_reason

        reason = cupy_unavailable_reason()
        if reason is not None:
            pytest.skip(f"cupy backend unavailable here: {reason}")
        return {"backend": "cupy", "device": "cuda"}
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
        return {"backend": "native_cpu"}
    request.getfixturevalue("cuda_engine")
    return {"backend": "native_cuda", "device": "cuda"}


@pytest.fixture
def interruptible():
    """Python's own SIGINT handler for the test. A runner started with SIGINT ignored (as a
    background job is) passes that on: Ctrl-C tests would never stop, and a subprocess could not
    even trap the signal. A caught signal is reset to its default by exec, an ignored one stays
    ignored, so the test's subprocesses start with SIGINT at its default too."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
