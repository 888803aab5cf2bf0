"""The loader and the status-to-exception mapping: clear errors naming what was tried, and a
library of another ABI version refused before any other call into it."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from renewable_huber import _abi, _loader
from renewable_huber.backends.native import NativeBackend, unavailable_reason
from renewable_huber.exceptions import (
    BackendUnavailableError,
    EngineError,
    RenewableHuberError,
    ValidationError,
)

C_COMPILER = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

# Any call other than rh_cuda_abi_version bumps other_calls, so the test can prove the loader
# asked the version first and nothing else.
STUB_SOURCE = """
#include <stdint.h>
int other_calls = 0;
uint32_t rh_cuda_abi_version(void) { return %(version)du; }
const char* rh_cuda_last_error(void) { ++other_calls; return "stub"; }
int32_t rh_cuda_is_available(int32_t* available) { ++other_calls; *available = 1; return 0; }
"""


def _build_stub(tmp_path, version: int):
    if C_COMPILER is None:
        pytest.skip("no C compiler to build the stub engine")
    source = tmp_path / f"stub_v{version}.c"
    library = tmp_path / f"librh_stub_v{version}.so"
    source.write_text(STUB_SOURCE % {"version": version})
    subprocess.run([C_COMPILER, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def test_missing_override_names_the_path_tried(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere" / "librh_cpu.so"
    monkeypatch.setenv("RH_CPU_LIBRARY", str(missing))
    with pytest.raises(BackendUnavailableError) as caught:
        _loader.load_engine_library("native_cpu")
    message = str(caught.value)
    assert str(missing) in message and "no such file" in message and "RH_CPU_LIBRARY" in message
    assert unavailable_reason("native_cpu") == message
    with pytest.raises(BackendUnavailableError, match="nowhere"):
        NativeBackend("native_cpu", dtype="float64", n_parameters=2)


def test_without_override_every_package_candidate_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv("RH_CUDA_LIBRARY", raising=False)
    monkeypatch.setattr(_loader, "PACKAGE_LIBRARY_DIR", tmp_path)
    with pytest.raises(BackendUnavailableError) as caught:
        _loader.load_engine_library("native_cuda")
    for name in _loader.library_file_names("native_cuda"):
        assert str(tmp_path / name) in str(caught.value)
    assert "RH_CUDA_LIBRARY" in str(caught.value)


@pytest.mark.parametrize("platform,names", [
    ("linux", ["librh_cpu.so.2", "librh_cpu.so"]),
    ("darwin", ["librh_cpu.2.dylib", "librh_cpu.dylib"]),
    ("win32", ["rh_cpu.dll", "librh_cpu.dll"]),
])
def test_only_the_running_platforms_library_names_are_tried(platform, names):
    assert _abi.ABI_VERSION == 2
    assert _loader.library_file_names("native_cpu", platform) == names


def test_found_library_is_reused_until_the_override_changes(cpu_library, tmp_path, monkeypatch):
    first = _loader.load_engine_library("native_cpu")
    with monkeypatch.context() as patched:
        patched.setattr(_loader, "library_candidates",
                        lambda kind: pytest.fail("the library was searched for again"))
        assert _loader.load_engine_library("native_cpu") is first
    # Another override is another search, and its failure is reported, not the cached library.
    stub = _build_stub(tmp_path, _abi.ABI_VERSION + 1)
    monkeypatch.setenv("RH_CPU_LIBRARY", str(stub))
    with pytest.raises(BackendUnavailableError, match="ABI version"):
        _loader.load_engine_library("native_cpu")
    monkeypatch.setenv("RH_CPU_LIBRARY", str(cpu_library))
    assert _loader.load_engine_library("native_cpu") is first


def test_file_that_is_not_a_library_is_refused_with_the_loader_reason(tmp_path, monkeypatch):
    bogus = tmp_path / "librh_cpu.so"
    bogus.write_text("not an ELF file")
    monkeypatch.setenv("RH_CPU_LIBRARY", str(bogus))
    with pytest.raises(BackendUnavailableError, match="cannot load"):
        _loader.load_engine_library("native_cpu")


def test_unknown_kind_is_refused():
    with pytest.raises(BackendUnavailableError, match="unknown native engine"):
        _loader.load_engine_library("native_tpu")


def test_other_abi_version_is_refused_before_any_other_call(tmp_path):
    library = _build_stub(tmp_path, version=3)
    with pytest.raises(BackendUnavailableError, match="ABI version 3.*needs version 2"):
        _loader.load_library_path(library)
    probe = ctypes.CDLL(str(library))
    assert ctypes.c_int.in_dll(probe, "other_calls").value == 0


def test_mismatched_library_through_the_environment_is_refused(tmp_path, monkeypatch):
    library = _build_stub(tmp_path, version=1)
    monkeypatch.setenv("RH_CPU_LIBRARY", str(library))
    reason = unavailable_reason("native_cpu")
    assert reason is not None and "ABI version 1" in reason and str(library) in reason


def test_right_version_with_missing_symbols_is_refused_naming_them(tmp_path):
    library = _build_stub(tmp_path, version=2)
    with pytest.raises(BackendUnavailableError, match="rh_cuda_engine_create"):
        _loader.load_library_path(library)


class FakeLibrary:
    """Stands in for a bound engine library in the status-mapping tests."""

    def __init__(self, engine_text: str, thread_text: str = "thread text"):
        self.engine_text, self.thread_text = engine_text.encode(), thread_text.encode()

    def rh_cuda_engine_last_error(self, engine):
        return self.engine_text

    def rh_cuda_last_error(self):
        return self.thread_text


@pytest.mark.parametrize(
    "status, error_type",
    [
        (_abi.RH_CUDA_INVALID_ARGUMENT, ValidationError),
        (_abi.RH_CUDA_UNAVAILABLE, BackendUnavailableError),
        (_abi.RH_CUDA_ALLOCATION_FAILED, EngineError),
        (_abi.RH_CUDA_CUDA_ERROR, EngineError),
        (_abi.RH_CUDA_CUBLAS_ERROR, EngineError),
        (_abi.RH_CUDA_CUSOLVER_ERROR, EngineError),
        (_abi.RH_CUDA_NUMERICAL_ERROR, EngineError),
        (_abi.RH_CUDA_INTERNAL_ERROR, EngineError),
        (42, EngineError),
    ],
)
def test_status_maps_to_the_documented_exception(status, error_type):
    with pytest.raises(error_type) as caught:
        _abi.check(
            FakeLibrary("tau must be finite > 0, got 0"), status, "rh_cuda_engine_update_host",
            engine=1,
        )
    error = caught.value
    expected_name = _abi.STATUS_NAMES.get(status, f"UNKNOWN_STATUS({status})")
    assert error.status_name == expected_name
    assert str(error) == (
        f"rh_cuda_engine_update_host failed with {expected_name}: tau must be finite > 0, got 0"
    )
    assert error.engine_message == "tau must be finite > 0, got 0"
    assert isinstance(error, RenewableHuberError)


def test_success_raises_nothing_and_calls_without_engine_use_the_thread_text():
    _abi.check(FakeLibrary("unused"), _abi.RH_CUDA_SUCCESS, "rh_cuda_is_available")
    with pytest.raises(ValidationError, match="thread text"):
        _abi.check(
            FakeLibrary("engine text"), _abi.RH_CUDA_INVALID_ARGUMENT, "rh_cuda_engine_create"
        )


def test_make_fills_the_header_and_refuses_unknown_fields():
    config = _abi.make(_abi.RhCudaUpdateConfig, tau=1.5)
    assert (config.abi_version, config.struct_size, config.tau) == (2, 72, 1.5)
    with pytest.raises(TypeError, match="no field"):
        _abi.make(_abi.RhCudaUpdateConfig, tolerence=1e-6)
    with pytest.raises(TypeError, match="filled in by make"):
        _abi.make(_abi.RhCudaUpdateConfig, struct_size=8)


def test_decode_flags_names_known_and_unknown_bits():
    assert _abi.decode_flags(0) == []
    assert _abi.decode_flags(3) == ["cuda_graphs", "fast_math"]
    assert _abi.decode_flags(2 | 16) == ["fast_math", "unknown(0x10)"]


@pytest.mark.parametrize("preset", [None, "300"])
def test_loading_an_engine_leaves_the_process_environment_as_it_was(cpu_library, preset):
    """GOMP_SPINCOUNT is set only around the load (libgomp reads it then) and removed after;
    a value the user set is kept. In a fresh interpreter, so the library is really loaded."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    if preset is not None:
        env["GOMP_SPINCOUNT"] = preset
    code = (
        "import os; from renewable_huber._loader import load_library_path; "
        f"load_library_path({str(cpu_library)!r}); print(os.environ.get('GOMP_SPINCOUNT'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == str(preset)


def test_the_package_declares_its_types_and_ships_its_license():
    from pathlib import Path

    import renewable_huber

    package = Path(renewable_huber.__file__).resolve().parent
    assert (package / "py.typed").is_file()
    root = package.parents[1]
    if (root / "pyproject.toml").is_file():  # a source checkout
        assert "MIT License" in (root / "LICENSE").read_text()
