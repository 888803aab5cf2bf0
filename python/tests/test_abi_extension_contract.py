"""The optional row-statistics extension against its three descriptions: the manifest's
"extensions" section, abi/rh_cuda_row_statistics.h and the ctypes binding
(renewable_huber._row_statistics), plus its C layout as a C compiler sees it. The core ABI's own
tests (test_abi_contract.py) keep seeing exactly 17 required symbols."""

from __future__ import annotations

import ctypes
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from renewable_huber import _abi, _row_statistics

REPO = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((REPO / "abi" / "rh_cuda_contract.json").read_text())
EXTENSION = next(e for e in MANIFEST["extensions"] if e["name"] == "row_statistics")
HEADER = REPO / "abi" / EXTENSION["header"]
STRUCT = EXTENSION["structs"]["RhCudaRowStatistics"]


def _header_text() -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", HEADER.read_text(), flags=re.S)


def _normalise(c_type: str) -> str:
    return re.sub(r"\s*\*", "*", re.sub(r"\s+", " ", c_type).strip())


def test_the_extension_is_optional_versioned_and_outside_the_17():
    assert EXTENSION["optional"] is True
    # version 2: rows in device memory (rh_cuda_engine_row_statistics_device) added to version 1
    assert EXTENSION["version"] == _row_statistics.ROW_STATISTICS_VERSION == 2
    core = {symbol["name"] for symbol in MANIFEST["symbols"]}
    assert len(core) == 17
    names = {symbol["name"] for symbol in EXTENSION["symbols"]}
    assert not names & core
    assert set(_row_statistics.SYMBOLS) == names
    assert not names & set(_abi.SYMBOLS)
    # the core header declares none of them
    core_header = (REPO / "abi" / "rh_cuda.h").read_text()
    assert not any(name in core_header for name in names)


def test_the_header_declares_the_manifest_symbols_and_constants():
    text = _header_text()
    pattern = re.compile(r"RH_CUDA_API\s+([A-Za-z_][\w\s\*]*?)\s*\b(rh_cuda_\w+)\s*\(([^)]*)\)\s*;")
    declared = []
    for returns, name, params in pattern.findall(text):
        params = _normalise(params)
        declared.append({"name": name, "returns": _normalise(returns),
                         "params": [] if params in ("", "void") else
                         [_normalise(p) for p in params.split(",")]})
    expected = [{**s, "returns": "RhCudaStatus" if s["returns"] == "int32_t" else s["returns"]}
                for s in EXTENSION["symbols"]]
    assert declared == expected
    defines = {}
    for name, value in re.findall(r"#define\s+(RH_CUDA_\w+)\s+(.+)", text):
        shift = re.fullmatch(r"\(\(uint64_t\)1u << (\d+)\)", value.strip())
        hexa = re.fullmatch(r"\(\(uint64_t\)0x([0-9a-f]+)u\)", value.strip())
        if shift:
            defines[name] = 1 << int(shift.group(1))
        elif hexa:
            defines[name] = int(hexa.group(1), 16)
        elif re.fullmatch(r"\d+u?", value.strip()):
            defines[name] = int(value.strip().rstrip("u"))
    assert defines[EXTENSION["version_define"]] == EXTENSION["version"]
    for name, value in EXTENSION["constants"]["statistic"].items():
        assert defines[name] == value == getattr(_row_statistics, name), name
    # the bits cover exactly the Dask partition kinds
    from renewable_huber.dask.partitions import KINDS

    assert set(_row_statistics.KIND_BITS) == set(KINDS)
    assert sum(_row_statistics.KIND_BITS.values()) == _row_statistics.RH_CUDA_STATISTIC_ALL


def test_the_ctypes_struct_follows_the_manifest():
    cls = _row_statistics.RhCudaRowStatistics
    assert ctypes.sizeof(cls) == STRUCT["size"]
    assert [name for name, _ in cls._fields_] == [f["name"] for f in STRUCT["fields"]]
    for field in STRUCT["fields"]:
        member = getattr(cls, field["name"])
        assert (member.offset, member.size) == (field["offset"], field["width"]), field["name"]


def test_the_binding_signatures_follow_the_manifest():
    pointers = {"RhCudaEngine*": ctypes.c_void_p,
                "const RhCudaHostBatch*": ctypes.POINTER(_abi.RhCudaHostBatch),
                "const RhCudaDeviceBatch*": ctypes.POINTER(_abi.RhCudaDeviceBatch),
                "RhCudaRowStatistics*": ctypes.POINTER(_row_statistics.RhCudaRowStatistics)}
    scalars = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32}
    for (name, restype, argtypes), symbol in zip(_row_statistics.SIGNATURES,
                                                 EXTENSION["symbols"], strict=True):
        assert name == symbol["name"]
        assert restype is scalars[symbol["returns"]]
        expected = [pointers[_normalise(re.sub(r"\s*[A-Za-z_]\w*$", "", p))]
                    for p in symbol["params"]]
        assert list(argtypes) == expected, name


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")
def test_the_c_layout_equals_the_manifest(tmp_path):
    lines = ['#include <stddef.h>', '#include "rh_cuda_row_statistics.h"',
             f'_Static_assert(sizeof(RhCudaRowStatistics) == {STRUCT["size"]}, "size");']
    for field in STRUCT["fields"]:
        lines.append(
            f'_Static_assert(offsetof(RhCudaRowStatistics, {field["name"]}) == '
            f'{field["offset"]} && sizeof(((RhCudaRowStatistics*)0)->{field["name"]}) == '
            f'{field["width"]}, "{field["name"]}");'
        )
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", f"-I{REPO / 'abi'}", str(source)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    # and the check can fail: a wrong offset is a compile error
    source.write_text(source.read_text().replace(
        f"offsetof(RhCudaRowStatistics, meat) == {STRUCT['fields'][-1]['offset']}",
        "offsetof(RhCudaRowStatistics, meat) == 1"))
    broken = subprocess.run(
        ["cc", "-std=c11", "-fsyntax-only", f"-I{REPO / 'abi'}", str(source)],
        capture_output=True, text=True,
    )
    assert broken.returncode != 0
