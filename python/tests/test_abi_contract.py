"""The ABI cannot drift: the manifest, the header, the compiled layout, the ctypes mirror and
the export tables of the built engines must all say the same thing.

The layout probe comes from $RH_BUILD_DIR/abi/tests when RH_BUILD_DIR is set, else abi/tests
is configured and built on its own into a temporary folder (skipped only without cmake).
Engine libraries come from RH_CPU_LIBRARY / RH_CUDA_LIBRARY, $RH_BUILD_DIR/engines/..., or
the installed package.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from renewable_huber import _abi, _loader

REPO = Path(__file__).resolve().parents[2]
HEADER = REPO / "abi" / "rh_cuda.h"
MANIFEST_PATH = REPO / "abi" / "rh_cuda_contract.json"
MANIFEST = json.loads(MANIFEST_PATH.read_text())
EXPECTED_SYMBOL_COUNT = 17
HEADER_CHECK_TARGETS = [
    "rh_abi_header_c99",
    "rh_abi_header_c11",
    "rh_abi_header_cxx17",
    "rh_abi_static_asserts_c11",
    "rh_abi_static_asserts_cxx17",
]


# ------------------------------------------------------------------------------ build access
def _cmake_build(source: Path, build: Path, *targets: str) -> subprocess.CompletedProcess:
    configure = ["cmake", "-S", str(source), "-B", str(build)]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    subprocess.run(configure, check=True, capture_output=True, text=True)
    command = ["cmake", "--build", str(build), "-j2"]
    if targets:
        command += ["--target", *targets]
    return subprocess.run(command, capture_output=True, text=True)


@pytest.fixture(scope="module")
def abi_build(tmp_path_factory) -> tuple[Path, Path]:
    """(build tree to run `cmake --build` in, folder holding rh_abi_layout)."""
    build_dir = os.environ.get("RH_BUILD_DIR")
    if build_dir:
        probe_dir = Path(build_dir) / "abi" / "tests"
        assert probe_dir.is_dir(), (
            f"RH_BUILD_DIR={build_dir} has no abi/tests (RH_BUILD_TESTS off?)"
        )
        return Path(build_dir), probe_dir
    if shutil.which("cmake") is None:
        pytest.skip(
            "cmake is not installed and RH_BUILD_DIR is unset: cannot build the layout probe"
        )
    path = tmp_path_factory.mktemp("abi_tests_build")
    result = _cmake_build(REPO / "abi" / "tests", path)
    assert result.returncode == 0, result.stdout + result.stderr
    return path, path


@pytest.fixture(scope="module")
def layout(abi_build) -> dict:
    probe = abi_build[1] / ("rh_abi_layout.exe" if os.name == "nt" else "rh_abi_layout")
    assert probe.is_file(), f"layout probe missing at {probe}"
    output = subprocess.run([str(probe)], check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def _engine_library_paths() -> list[Path]:
    build_dir = os.environ.get("RH_BUILD_DIR")
    candidates = []
    engines = (("native_cpu", "cpu_c", "rh_cpu"), ("native_cuda", "cuda", "rh_cuda"))
    for kind, subdir, base in engines:
        override = os.environ.get(_loader.ENVIRONMENT_OVERRIDES[kind])
        if override:
            candidates.append(Path(override))
        if build_dir:
            candidates.append(Path(build_dir) / "engines" / subdir / f"lib{base}.so")
        candidates.extend(
            _loader.PACKAGE_LIBRARY_DIR / name for name in _loader.library_file_names(kind)
        )
    unique: dict[Path, Path] = {}
    for path in candidates:
        if path.is_file():
            unique.setdefault(path.resolve(), path)
    return list(unique.values())


ENGINE_LIBRARIES = _engine_library_paths()
needs_engine = pytest.mark.skipif(
    not ENGINE_LIBRARIES,
    reason="no engine library built (set RH_BUILD_DIR or RH_CPU_LIBRARY, or pip install .)",
)


# ----------------------------------------------------------------------------- header parsing
def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def _normalise(c_type: str) -> str:
    c_type = re.sub(r"\s+", " ", c_type).strip()
    return re.sub(r"\s*\*", "*", c_type)


def _parse_header_declarations() -> list[dict]:
    text = _strip_comments(HEADER.read_text())
    pattern = re.compile(r"RH_CUDA_API\s+([A-Za-z_][\w\s\*]*?)\s*\b(rh_cuda_\w+)\s*\(([^)]*)\)\s*;")
    declarations = []
    for returns, name, params in pattern.findall(text):
        params = _normalise(params)
        declarations.append(
            {
                "name": name,
                "returns": _normalise(returns),
                "params": (
                    [] if params in ("", "void") else [_normalise(p) for p in params.split(",")]
                ),
            }
        )
    return declarations


def _header_defines() -> dict[str, int]:
    defines = {}
    header = _strip_comments(HEADER.read_text())
    for name, value in re.findall(r"#define\s+(RH_CUDA_\w+)\s+(.+)", header):
        value = value.strip()
        shift = re.fullmatch(r"\(\(uint64_t\)1u << (\d+)\)", value)
        if shift:
            defines[name] = 1 << int(shift.group(1))
        elif re.fullmatch(r"\d+u?", value):
            defines[name] = int(value.rstrip("u"))
    return defines


def _param_type(param: str) -> str:
    """'const RhCudaEngineOptions* options' -> 'const RhCudaEngineOptions*'."""
    return _normalise(re.sub(r"\s*[A-Za-z_]\w*$", "", param))


# The independent C-type -> ctypes mapping the binding must follow (const is not a ctypes notion).
_SCALARS = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "uintptr_t": ctypes.c_uint64}


def _expected_ctype(c_type: str):
    c_type = _normalise(c_type)
    if c_type == "const char*":
        return ctypes.c_char_p
    c_type = c_type.removeprefix("const ")
    if c_type == "RhCudaStatus":
        return ctypes.c_int32
    if c_type == "RhCudaEngine*":
        return ctypes.c_void_p
    if c_type == "RhCudaEngine**":
        return ctypes.POINTER(ctypes.c_void_p)
    if c_type.endswith("*"):
        base = c_type[:-1]
        return ctypes.POINTER(_SCALARS.get(base) or getattr(_abi, base))
    return _SCALARS[c_type]


# ---------------------------------------------------------------------------------- tests
def test_manifest_versions_match_the_binding_and_the_header():
    assert MANIFEST["abi_version"] == _abi.ABI_VERSION == 2
    assert MANIFEST["python_api_version"] == _abi.PYTHON_API_VERSION == 4
    assert _header_defines()["RH_CUDA_ABI_VERSION"] == 2


def test_layout_probe_equals_the_manifest(layout):
    assert layout["abi_version"] == MANIFEST["abi_version"]
    assert layout["pointer_size"] == MANIFEST["pointer_size"]
    assert layout["constants"] == MANIFEST["constants"]
    manifest_structs = {
        name: {
            "size": struct["size"],
            "fields": [{k: f[k] for k in ("name", "offset", "width")} for f in struct["fields"]],
        }
        for name, struct in MANIFEST["structs"].items()
    }
    assert len(manifest_structs) == 10
    assert layout["structs"] == manifest_structs


def test_ctypes_structs_equal_the_compiled_layout(layout):
    assert [cls.__name__ for cls in _abi.STRUCTS] == list(layout["structs"])
    for cls in _abi.STRUCTS:
        expected = layout["structs"][cls.__name__]
        assert ctypes.sizeof(cls) == expected["size"], cls.__name__
        assert [name for name, _ in cls._fields_] == [f["name"] for f in expected["fields"]]
        for field in expected["fields"]:
            descriptor = getattr(cls, field["name"])
            assert (descriptor.offset, descriptor.size) == (field["offset"], field["width"]), (
                f"{cls.__name__}.{field['name']}"
            )


def test_ctypes_field_types_follow_the_manifest_types():
    by_c_type = {
        "uint32_t": ctypes.c_uint32,
        "int32_t": ctypes.c_int32,
        "int64_t": ctypes.c_int64,
        "uint64_t": ctypes.c_uint64,
        "double": ctypes.c_double,
        "const void*": ctypes.c_void_p,
        "void*": ctypes.c_void_p,
    }
    checked = 0
    for name, struct in MANIFEST["structs"].items():
        fields = dict(getattr(_abi, name)._fields_)
        for field in struct["fields"]:
            assert fields[field["name"]] is by_c_type[field["type"]], f"{name}.{field['name']}"
            checked += 1
    assert checked == 83


def test_constants_equal_manifest_header_and_binding(layout):
    defines = _header_defines()
    checked = 0
    for group in MANIFEST["constants"].values():
        for name, value in group.items():
            assert getattr(_abi, name) == value, name
            assert defines[name] == value, name
            checked += 1
    assert checked == 17
    assert _abi.STATUS_NAMES == {
        value: name.removeprefix("RH_CUDA_")
        for name, value in MANIFEST["constants"]["status"].items()
    }


def test_header_declares_exactly_the_manifest_symbols_in_order():
    declarations = _parse_header_declarations()
    assert len(declarations) == EXPECTED_SYMBOL_COUNT
    assert len(MANIFEST["symbols"]) == EXPECTED_SYMBOL_COUNT
    for declared, symbol in zip(declarations, MANIFEST["symbols"], strict=True):
        name = symbol["name"]
        assert declared["name"] == name
        declared_returns = declared["returns"]
        if declared_returns == "RhCudaStatus":
            declared_returns = "int32_t"
        assert declared_returns == _normalise(symbol["returns"]), name
        assert declared["params"] == [_normalise(p) for p in symbol["params"]], name


def test_binding_signatures_follow_the_header():
    declarations = _parse_header_declarations()
    assert len(declarations) == EXPECTED_SYMBOL_COUNT
    assert len(_abi.SIGNATURES) == EXPECTED_SYMBOL_COUNT
    assert _abi.SYMBOLS == tuple(d["name"] for d in declarations)
    for (name, restype, argtypes), declared in zip(_abi.SIGNATURES, declarations, strict=True):
        assert restype is _expected_ctype(declared["returns"]), name
        expected = [_expected_ctype(_param_type(p)) for p in declared["params"]]
        assert list(argtypes) == expected, name


def test_binding_signatures_follow_the_manifest():
    # _abi.py keeps its own (name, restype, argtypes) table: ctypes needs a type per parameter,
    # and the conformance kit imports _abi without the manifest, which the package does not
    # ship. This is the check that the table says what the manifest says, symbol by symbol.
    symbols = MANIFEST["symbols"]
    assert len(symbols) == EXPECTED_SYMBOL_COUNT
    assert _abi.SYMBOLS == tuple(symbol["name"] for symbol in symbols)
    for (name, restype, argtypes), symbol in zip(_abi.SIGNATURES, symbols, strict=True):
        assert restype is _expected_ctype(symbol["returns"]), name
        assert list(argtypes) == [_expected_ctype(_param_type(p)) for p in symbol["params"]], name


def test_binding_source_quotes_each_c_declaration():
    source = Path(_abi.__file__).read_text()
    comment_text = " ".join(
        line.strip().lstrip("#").strip()
        for line in source.splitlines()
        if line.strip().startswith("#")
    )
    comment_text = _normalise(comment_text)
    for declared in _parse_header_declarations():
        params = ", ".join(declared["params"]) or "void"
        returns = declared["returns"]
        quoted = _normalise(f"{returns} {declared['name']}({params});")
        assert quoted in comment_text, declared["name"]


def test_header_compiles_as_c99_c11_cxx17_and_twice(abi_build):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    result = subprocess.run(
        ["cmake", "--build", str(abi_build[0]), "--target", *HEADER_CHECK_TARGETS],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_static_asserts_fail_when_the_manifest_drifts(tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    shutil.copytree(REPO / "abi", tmp_path / "abi")
    drifted = json.loads(MANIFEST_PATH.read_text())
    drifted["structs"]["RhCudaUpdateConfig"]["size"] = 80
    (tmp_path / "abi" / "rh_cuda_contract.json").write_text(json.dumps(drifted))
    result = _cmake_build(
        tmp_path / "abi" / "tests", tmp_path / "build", "rh_abi_static_asserts_c11"
    )
    assert result.returncode != 0
    assert "sizeof(RhCudaUpdateConfig) == 80" in result.stdout + result.stderr


def _exported_symbols(library: Path) -> tuple[list[str], list[str]]:
    """(function symbols, anything else that is not a linker marker) from nm -D."""
    output = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], check=True, capture_output=True, text=True
    ).stdout
    linker_markers = {"_init", "_fini", "__bss_start", "_edata", "_end", "__bss_start__", "__end__",
                      "_bss_end__", "__data_start", "data_start"}
    functions, unexpected = [], []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, name = parts[-2], parts[-1].split("@")[0]
        if kind == "A":
            # Symbol-version definition nodes (e.g. from a version script) carry no code or data.
            continue
        if kind in ("T", "t", "W") and name not in linker_markers:
            functions.append(name)
        elif name not in linker_markers:
            unexpected.append(f"{kind} {name}")
    return functions, unexpected


@needs_engine
@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) is not installed")
@pytest.mark.parametrize("library", ENGINE_LIBRARIES, ids=lambda p: p.name)
def test_engine_exports_exactly_the_17_symbols(library):
    """The 17 required symbols, plus each optional extension of the manifest either whole or
    not at all (both project engines export row_statistics, version 2's device call
    included)."""
    functions, unexpected = _exported_symbols(library)
    assert unexpected == []
    core = sorted(symbol["name"] for symbol in MANIFEST["symbols"])
    assert len(core) == EXPECTED_SYMBOL_COUNT
    extra = set(functions) - set(core)
    for extension in MANIFEST.get("extensions", []):
        names = {symbol["name"] for symbol in extension["symbols"]}
        assert not names & set(core)
        present = names & extra
        assert present in (set(), names), f"{extension['name']}: only {sorted(present)} exported"
        extra -= names
    assert extra == set()
    assert sorted(set(functions) & set(core)) == core
    if library.name.startswith(("librh_cpu", "librh_cuda")):
        assert "rh_cuda_engine_row_statistics" in functions
        assert "rh_cuda_engine_row_statistics_device" in functions


@needs_engine
@pytest.mark.parametrize("library", ENGINE_LIBRARIES, ids=lambda p: p.name)
def test_runtime_abi_version_equals_header_and_manifest(library):
    lib = _loader.load_library_path(library)
    header_version = _header_defines()["RH_CUDA_ABI_VERSION"]
    assert lib.rh_cuda_abi_version() == header_version == MANIFEST["abi_version"]


@needs_engine
@pytest.mark.parametrize("library", ENGINE_LIBRARIES, ids=lambda p: p.name)
def test_bound_library_carries_the_binding_signatures(library):
    lib = _loader.load_library_path(library)
    declarations = _parse_header_declarations()
    assert len(declarations) == EXPECTED_SYMBOL_COUNT
    for declared in declarations:
        function = getattr(lib, declared["name"])
        assert function.restype is _expected_ctype(declared["returns"]), declared["name"]
        assert list(function.argtypes) == [
            _expected_ctype(_param_type(p)) for p in declared["params"]
        ], declared["name"]


def test_earlier_accepted_sizes_end_where_an_appended_field_begins(layout):
    # ABI 2 callers built before the meat matrix K pass 56-byte state structs: each earlier
    # size the manifest lists must be the offset of a field, i.e. a prefix of whole fields.
    checked = 0
    for name, struct in MANIFEST["structs"].items():
        for size in struct.get("accepted_sizes_before", []):
            offsets = [f["offset"] for f in layout["structs"][name]["fields"]]
            assert size in offsets and size < struct["size"], name
            assert ctypes.sizeof(getattr(_abi, name)) == struct["size"]
            checked += 1
    assert checked == 2
    assert _abi.STATE_SIZE_WITHOUT_MEAT == 56
