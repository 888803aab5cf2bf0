"""Packaging: the release configuration in pyproject.toml, the glibc symbol-version shim, and the
wheel checker (packaging/check_wheel.py) on wheels assembled here from small compiled ELF files,
so every rule it enforces is seen both passing and failing. The real wheels are built and
checked end to end by `make test-wheel` (docs/packaging.md)."""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_wheel", ROOT / "packaging/check_wheel.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_wheel"] = module
    spec.loader.exec_module(module)
    return module


check_wheel = _load_checker()

needs_elf_tools = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and shutil.which("cc") and shutil.which("readelf")),
    reason="needs Linux with cc and readelf",
)
x86_64_glibc = pytest.mark.skipif(
    platform.machine() != "x86_64" or not platform.libc_ver()[0] == "glibc",
    reason="the symbol versions asserted are x86-64 glibc's",
)


# ----------------------------------------------------------------------------- pyproject.toml


def test_cibuildwheel_builds_manylinux_2_28_wheels_for_both_linux_architectures():
    cibw = PYPROJECT["tool"]["cibuildwheel"]
    linux = cibw["linux"]
    assert set(linux["archs"]) == {"x86_64", "aarch64"}
    assert linux["manylinux-x86_64-image"] == "manylinux_2_28"
    assert linux["manylinux-aarch64-image"] == "manylinux_2_28"
    repair = " && ".join(linux["repair-wheel-command"])
    assert "auditwheel repair" in repair
    assert "check_wheel.py --kind base --max-glibc 2.28" in repair
    assert "*-musllinux_*" in cibw["skip"]
    # The portable wheel never carries librh_cuda, and is parallel where the image has OpenMP.
    assert cibw["config-settings"]["cmake.define.RH_BUILD_CUDA"] == "OFF"
    assert cibw["config-settings"]["cmake.define.RH_OPENMP"] == "ON"


def test_cibuildwheel_repairs_macos_and_windows_wheels_with_their_tools():
    cibw = PYPROJECT["tool"]["cibuildwheel"]
    assert cibw["macos"]["repair-wheel-command"].startswith("delocate-wheel")
    assert cibw["macos"]["config-settings"]["cmake.define.RH_OPENMP"] == "OFF"
    assert cibw["windows"]["repair-wheel-command"].startswith("delvewheel repair")


def test_cibuildwheel_tests_every_supported_python_from_the_installed_wheel():
    cibw = PYPROJECT["tool"]["cibuildwheel"]
    minimum = re.fullmatch(r">=3\.(\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    built = sorted(int(re.fullmatch(r"cp3(\d+)-\*", s).group(1)) for s in cibw["build"])
    assert built[0] == int(minimum)
    assert built == list(range(built[0], built[-1] + 1))
    commands = " ; ".join(cibw["test-command"])
    assert "run_conformance.py native_cpu" in commands
    assert "renewable-huber info" in commands


def test_cuda_extras_require_the_cuda_distribution_of_this_exact_version():
    extras = PYPROJECT["project"]["optional-dependencies"]
    for major in (12, 13):
        assert extras[f"cuda{major}"] == [f"renewable-huber-cuda{major}=={VERSION}"]
    # The base install stays NumPy-only.
    assert PYPROJECT["project"]["dependencies"] == ["numpy>=1.23"]


def test_project_urls_if_any_are_https_links():
    # The project has no public home yet: no URL is invented; any that is added must be https.
    urls = PYPROJECT["project"].get("urls", {})
    assert all(url.startswith("https://") for url in urls.values())


def test_sdist_leaves_out_benchmark_records_but_keeps_what_the_build_needs():
    excluded = PYPROJECT["tool"]["scikit-build"]["sdist"]["exclude"]
    assert "benchmarks/records" in excluded
    for needed in ("cmake", "engines", "abi", "golden", "conformance", "python", "packaging"):
        assert not any(needed == e or needed.startswith(e + "/") for e in excluded), needed


def test_cuda_wheel_template_installs_only_the_cuda_component():
    template = (ROOT / "packaging/cuda/pyproject.toml.in").read_text()
    for placeholder in ("@DEPENDENCIES@", "@URLS@"):
        template = template.replace(placeholder, "")
    rendered = tomllib.loads(re.sub(r"@[A-Z_]+@", "0", template))
    build = rendered["tool"]["scikit-build"]
    assert build["install"]["components"] == ["rh_cuda"]
    assert build["wheel"]["packages"] == []
    assert rendered["tool"]["scikit-build"]["cmake"]["define"]["RH_BUILD_CPU"] == "OFF"


# ------------------------------------------------------------------- compiled ELF fixtures


def _compile_shared(folder: Path, soname: str, source: str, *flags: str) -> Path:
    src = folder / f"{soname}.c"
    src.write_text(source)
    out = folder / soname
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", f"-Wl,-soname,{soname}", str(src), "-o",
                    str(out), *flags], check=True, capture_output=True)
    return out


LOG_SOURCE = "#include <math.h>\ndouble rh_probe(double x) { return log(x); }\n"


def _glibc_versions(library: Path) -> set[str]:
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(library)], capture_output=True,
                             text=True, check=True).stdout
    return set(re.findall(r"\blog@(GLIBC_[0-9.]+)", symbols))


@needs_elf_tools
@x86_64_glibc
def test_glibc_compat_header_binds_log_to_the_original_symbol_version(tmp_path):
    plain = _compile_shared(tmp_path, "libplain.so", LOG_SOURCE, "-lm")
    shimmed = _compile_shared(tmp_path, "libshim.so", LOG_SOURCE, "-lm", "-include",
                              str(ROOT / "cmake/rh_glibc_compat.h"))
    glibc = tuple(int(p) for p in platform.libc_ver()[1].split("."))
    if glibc >= (2, 29):
        assert _glibc_versions(plain) == {"GLIBC_2.29"}
    assert _glibc_versions(shimmed) == {"GLIBC_2.2.5"}
    # Same function, same values: the old version only differs in errno handling.
    import ctypes

    for library in (plain, shimmed):
        probe = ctypes.CDLL(str(library)).rh_probe
        probe.restype, probe.argtypes = ctypes.c_double, [ctypes.c_double]
        assert probe(2.0) == pytest.approx(0.6931471805599453, abs=0.0, rel=1e-15)


# -------------------------------------------------------------------- the wheel checker


def _write_wheel(path: Path, members: dict[str, bytes], metadata: str,
                 entry_points: str | None = "[console_scripts]\nrenewable-huber = x:main\n"):
    dist = path.name.split("-")[0] + "-" + path.name.split("-")[1] + ".dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{dist}/METADATA", metadata)
        archive.writestr(f"{dist}/licenses/LICENSE", "MIT")
        if entry_points is not None:
            archive.writestr(f"{dist}/entry_points.txt", entry_points)
    return path


BASE_METADATA = (
    f"Metadata-Version: 2.2\nName: renewable-huber\nVersion: {VERSION}\n"
    "Project-URL: Homepage, https://example.invalid/a\n"
    "Project-URL: Source, https://example.invalid/b\n"
    "Requires-Dist: numpy>=1.23\n"
    f'Requires-Dist: renewable-huber-cuda12=={VERSION}; extra == "cuda12"\n'
    f'Requires-Dist: renewable-huber-cuda13=={VERSION}; extra == "cuda13"\n'
)


def _base_members(engine: bytes) -> dict[str, bytes]:
    members = {name: b"" for name in check_wheel.BASE_MEMBERS}
    members["renewable_huber/_lib/librh_cpu.so.2"] = engine
    return members


@pytest.fixture(scope="module")
def elves(tmp_path_factory):
    """Small shared libraries standing in for the engines."""
    if not (sys.platform.startswith("linux") and shutil.which("cc") and shutil.which("readelf")):
        pytest.skip("needs Linux with cc and readelf")
    folder = tmp_path_factory.mktemp("elves")
    shim = ["-include", str(ROOT / "cmake/rh_glibc_compat.h")] if platform.machine() in (
        "x86_64", "aarch64") else []
    stubs = {}
    for soname in ("libcublas.so.13", "libcusolver.so.12"):
        function = soname.split(".")[0][3:]
        source = f"int rh_stub_{function}(void) {{ return 1; }}\n"
        stubs[soname] = _compile_shared(folder, soname, source)
    cuda_source = ("int rh_stub_cublas(void); int rh_stub_cusolver(void);\n"
                   "int rh_engine(void) { return rh_stub_cublas() + rh_stub_cusolver(); }\n")
    link = [str(stubs["libcublas.so.13"]), str(stubs["libcusolver.so.12"])]
    return {
        "portable": _compile_shared(folder, "librh_cpu.so.2", LOG_SOURCE, "-lm", *shim),
        "newer_glibc": _compile_shared(folder, "new/librh_cpu.so.2".replace("/", "_"),
                                       LOG_SOURCE, "-lm"),
        "openmp": _compile_shared(folder, "omp_librh_cpu.so.2",
                                  "#include <omp.h>\nint rh_threads(void) "
                                  "{ return omp_get_max_threads(); }\n", "-fopenmp"),
        "cuda": _compile_shared(folder, "librh_cuda.so.2", cuda_source, *link,
                                "-Wl,-rpath,$ORIGIN:$ORIGIN/../../nvidia/cu13/lib"),
        "cuda_no_rpath": _compile_shared(folder, "bare_librh_cuda.so.2", cuda_source, *link),
        "cublas": stubs["libcublas.so.13"],
    }


def _failures(wheel: Path, kind: str = "base", **options) -> list[str]:
    return check_wheel.check_wheel(wheel, kind, **options).failures


def test_a_complete_portable_base_wheel_passes(tmp_path, elves):
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                         f"{platform.machine()}.whl",
                         _base_members(elves["portable"].read_bytes()), BASE_METADATA)
    assert _failures(wheel, max_glibc="2.28") == []


@pytest.mark.parametrize("tag, problem", [
    ("linux_x86_64", "not repaired"),
    ("manylinux_2_34_x86_64", "needs glibc 2.34, newer than 2.28"),
])
def test_platform_tags_must_be_manylinux_within_the_glibc_limit(tmp_path, elves, tag, problem):
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-{tag}.whl",
                         _base_members(elves["portable"].read_bytes()), BASE_METADATA)
    assert any(problem in f for f in _failures(wheel, max_glibc="2.28"))


def test_a_version_specific_tag_is_refused_for_a_ctypes_package(tmp_path, elves):
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-cp312-cp312-manylinux_2_17_"
                         "x86_64.whl", _base_members(elves["portable"].read_bytes()),
                         BASE_METADATA)
    assert any("expected py3-none" in f for f in _failures(wheel))


@x86_64_glibc
def test_an_engine_needing_a_newer_glibc_than_allowed_fails(tmp_path, elves):
    if platform.libc_ver()[1] < "2.29":
        pytest.skip("this glibc has no log@GLIBC_2.29")
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                         "x86_64.whl", _base_members(elves["newer_glibc"].read_bytes()),
                         BASE_METADATA)
    assert any("needs GLIBC_2.29, newer than the allowed 2.28" in f
               for f in _failures(wheel, max_glibc="2.28"))


def test_an_unbundled_openmp_runtime_fails(tmp_path, elves):
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                         "x86_64.whl", _base_members(elves["openmp"].read_bytes()),
                         BASE_METADATA)
    assert any("needs libgomp.so.1, which is neither bundled" in f for f in _failures(wheel))
    # Bundled beside it (what auditwheel repair does), the same library passes that rule.
    members = _base_members(elves["openmp"].read_bytes())
    members["renewable_huber.libs/libgomp.so.1"] = b"not inspected"
    bundled = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                           "x86_64.whl", members, BASE_METADATA)
    assert not any("libgomp" in f for f in _failures(bundled))


@pytest.mark.parametrize("drop, problem", [
    ("renewable_huber/_lib/librh_cpu.so.2", "librh_cpu.so.2 is missing"),
    ("renewable_huber/include/rh_cuda.h", "rh_cuda.h is missing"),
    ("renewable_huber/py.typed", "py.typed is missing"),
    ("renewable_huber/conformance/data/native_core_v3.json", "native_core_v3.json is missing"),
])
def test_each_required_member_of_the_base_wheel_is_checked(tmp_path, elves, drop, problem):
    members = _base_members(elves["portable"].read_bytes())
    del members[drop]
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                         "x86_64.whl", members, BASE_METADATA)
    assert any(problem in f for f in _failures(wheel))


def test_base_metadata_rules(tmp_path, elves):
    plain_http = BASE_METADATA.replace("https://example.invalid/a", "http://example.invalid/a")
    no_extra = BASE_METADATA.replace(f"renewable-huber-cuda13=={VERSION}", "renewable-huber-cuda13")
    cases = {
        "is not an https link": plain_http,
        "extra cuda13 does not require renewable-huber-cuda13": no_extra,
    }
    for problem, metadata in cases.items():
        wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                             "x86_64.whl", _base_members(elves["portable"].read_bytes()), metadata)
        assert any(problem in f for f in _failures(wheel)), problem
    no_command = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                              "x86_64.whl", _base_members(elves["portable"].read_bytes()),
                              BASE_METADATA, entry_points=None)
    assert any("renewable-huber command" in f for f in _failures(no_command))


def test_the_base_wheel_must_not_carry_librh_cuda(tmp_path, elves):
    members = _base_members(elves["portable"].read_bytes())
    members["renewable_huber/_lib/librh_cuda.so.2"] = b""
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                         "x86_64.whl", members, BASE_METADATA)
    assert any("CUDA wheels are separate" in f for f in _failures(wheel))


CUDA_METADATA = (
    f"Metadata-Version: 2.2\nName: renewable-huber-cuda13\nVersion: {VERSION}\n"
    "Project-URL: Homepage, https://example.invalid/a\n"
    "Project-URL: Source, https://example.invalid/b\n"
    f"Requires-Dist: renewable-huber=={VERSION}\n"
    "Requires-Dist: nvidia-cublas<14,>=13\n"
    "Requires-Dist: nvidia-cusolver<13,>=12\n"
)


def _cuda_wheel(tmp_path: Path, engine: Path, extra: dict[str, bytes] | None = None,
                metadata: str = CUDA_METADATA) -> Path:
    members = {
        "renewable_huber/_lib/librh_cuda.so.2": engine.read_bytes(),
        **{name: b"" for name in check_wheel.CUDA_MEMBERS},
        **(extra or {}),
    }
    return _write_wheel(tmp_path / f"renewable_huber_cuda13-{VERSION}-py3-none-manylinux_2_35_"
                        "x86_64.whl", members, metadata, entry_points=None)


def test_a_cuda_wheel_needing_nvidia_wheels_through_its_runpath_passes(tmp_path, elves):
    assert _failures(_cuda_wheel(tmp_path, elves["cuda"]), "cuda", cuda_major=13) == []


def test_a_cuda_wheel_without_the_nvidia_runpath_fails(tmp_path, elves):
    failures = _failures(_cuda_wheel(tmp_path, elves["cuda_no_rpath"]), "cuda", cuda_major=13)
    assert any("lacks $ORIGIN/../../nvidia/cu13/lib" in f for f in failures)


def test_a_cuda_wheel_for_the_other_major_fails_on_its_libraries(tmp_path, elves):
    failures = _failures(_cuda_wheel(tmp_path, elves["cuda"]), "cuda", cuda_major=12)
    assert any("needs libcublas.so.13, which is neither bundled" in f for f in failures)
    assert any("distribution renewable_huber_cuda13, expected renewable_huber_cuda12" in f
               for f in failures)


def test_a_cuda_wheel_must_not_bundle_nvidia_libraries_or_overwrite_the_base_wheel(
        tmp_path, elves):
    failures = _failures(_cuda_wheel(tmp_path, elves["cuda"], extra={
        "renewable_huber_cuda13.libs/libcublas.so.13": elves["cublas"].read_bytes(),
        "renewable_huber/__init__.py": b"",
    }), "cuda", cuda_major=13)
    assert any("NVIDIA libraries bundled" in f for f in failures)
    assert any("carries files of the base wheel" in f for f in failures)


def test_a_cuda_wheel_must_pin_the_base_version_and_require_nvidia_wheels(tmp_path, elves):
    loose = CUDA_METADATA.replace(f"renewable-huber=={VERSION}", "renewable-huber")
    failures = _failures(_cuda_wheel(tmp_path, elves["cuda"], metadata=loose), "cuda",
                         cuda_major=13)
    assert any(f"does not require renewable-huber=={VERSION}" in f for f in failures)
    no_solver = re.sub(r"Requires-Dist: nvidia-cusolver.*\n", "", CUDA_METADATA)
    failures = _failures(_cuda_wheel(tmp_path, elves["cuda"], metadata=no_solver), "cuda",
                         cuda_major=13)
    assert any("does not require nvidia-cusolver" in f for f in failures)


def test_manylinux_tags_map_to_the_glibc_they_promise():
    assert check_wheel.manylinux_glibc("manylinux2014_x86_64") == (2, 17)
    assert check_wheel.manylinux_glibc("manylinux_2_28_aarch64") == (2, 28)
    assert check_wheel.manylinux_glibc("manylinux1_x86_64") == (2, 5)
    assert check_wheel.manylinux_glibc("macosx_11_0_arm64") is None


def test_the_checker_command_exits_non_zero_with_the_problems_listed(tmp_path, elves, capsys):
    members = _base_members(elves["portable"].read_bytes())
    del members["renewable_huber/include/rh_cuda.h"]
    wheel = _write_wheel(tmp_path / f"renewable_huber-{VERSION}-py3-none-manylinux_2_17_"
                         "x86_64.whl", members, BASE_METADATA)
    assert check_wheel.main(["--kind", "base", str(wheel)]) == 1
    assert "FAIL renewable_huber/include/rh_cuda.h is missing" in capsys.readouterr().out
