"""The kit's data files other than corpora: the tolerance profiles (conformance/tolerances.json)
and the capabilities files, each against its JSON Schema and against the runner's own loader,
which must refuse what the schema refuses; the profiles' numbers against the rounding argument
of conformance/README.md; and the command line reading its profile names from the data."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from renewable_huber.conformance import load_capabilities, main
from renewable_huber.conformance import tolerances as tolerances_module
from renewable_huber.conformance.tolerances import (
    Tolerance,
    load_profiles,
    shipped_profiles,
)
from renewable_huber.exceptions import ValidationError

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "conformance"
PROFILES_FILE = KIT / "tolerances.json"
PROFILES_SCHEMA = json.loads((KIT / "schema" / "tolerances.schema.json").read_text())
CAPABILITIES_SCHEMA = json.loads((KIT / "schema" / "capabilities.schema.json").read_text())


def _validator(schema) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_profiles_satisfy_their_schema_and_the_loader():
    document = json.loads(PROFILES_FILE.read_text())
    _validator(PROFILES_SCHEMA).validate(document)
    loaded = load_profiles(PROFILES_FILE)
    assert loaded.engine_profiles() == ["cpu", "cuda"]
    assert loaded.kinds["reference"] == "oracle"
    for name, profile in document["profiles"].items():
        for dtype in ("float32", "float64"):
            assert loaded.floors[name][dtype] == (
                profile[dtype]["rtol"],
                profile[dtype]["atol"],
            )


def test_the_runner_reads_the_kit_file_or_its_installed_copy():
    # From the source tree the runner reads the kit's file; from an installed package (make
    # test runs the suite against the venv's install) the copy the wheel ships, which must be
    # the same bytes.
    found = shipped_profiles().path.resolve()
    if found != PROFILES_FILE.resolve():
        assert found.name == PROFILES_FILE.name and "site-packages" in found.parts
        assert found.read_bytes() == PROFILES_FILE.read_bytes()


def test_the_floors_follow_the_rounding_argument():
    """conformance/README.md: two float32 oracles, each within the slack (s_r, s_a) of float64
    replays that agree within 1e-9 relative, differ by at most 2.0003 s_r |v| + 2.0002 s_a;
    the reference floor must cover that, and stay below every engine floor so the engine
    profiles decide engine replays. The cpu float32 floor is at least four times the slack
    (the generator holds a float32 oracle to a quarter of it)."""
    profiles = shipped_profiles()
    slack_rtol, slack_atol = profiles.float32_oracle_slack
    reference_rtol, reference_atol = profiles.floors["reference"]["float32"]
    assert reference_rtol >= 2.0003 * slack_rtol and reference_atol >= 2.0002 * slack_atol
    for engine in profiles.engine_profiles():
        for dtype in ("float32", "float64"):
            engine_rtol, engine_atol = profiles.floors[engine][dtype]
            ref_rtol, ref_atol = profiles.floors["reference"][dtype]
            assert ref_rtol < engine_rtol and ref_atol < engine_atol, (engine, dtype)
    cpu_rtol, cpu_atol = profiles.floors["cpu"]["float32"]
    assert cpu_rtol >= 4 * slack_rtol and cpu_atol >= 4 * slack_atol


def _broken(document: dict, path: str, value) -> dict:
    broken = copy.deepcopy(document)
    *parents, last = path.split(".")
    target = broken
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return broken


_DELETE = object()


@pytest.mark.parametrize(
    "path, value, message",
    [
        ("extra", 1, "keys must be exactly"),
        ("schema", "renewable-huber-capabilities", "schema must be"),
        ("schema_version", 2, "version 1"),
        ("profiles.cpu.float64.rtol", -1e-8, r"profiles\.cpu\.float64\.rtol"),
        ("profiles.cpu.float64.rtol", "2e-8", r"profiles\.cpu\.float64\.rtol"),
        ("profiles.cpu.float64.rtol", True, r"profiles\.cpu\.float64\.rtol"),
        ("profiles.cuda.float32.atol", 1.5, r"profiles\.cuda\.float32\.atol"),
        ("profiles.cuda.float32", {"rtol": 3e-4}, r"profiles\.cuda\.float32: keys"),
        ("profiles.cpu.float16", {"rtol": 1e-3, "atol": 1e-4}, r"profiles\.cpu: keys"),
        ("profiles.cpu.kind", "gpu", r"profiles\.cpu\.kind"),
        ("profiles.reference.kind", "engine", "'reference' of kind 'oracle' is required"),
        ("profiles.cuda", _DELETE, "'cuda' of kind 'engine' is required"),
        ("float32_oracle_slack.rtol", float("inf"), "float32_oracle_slack.rtol"),
        ("float32_oracle_slack.description", _DELETE, "float32_oracle_slack: keys"),
        ("profiles.Fast GPU", {"kind": "engine", "description": "x", "float32":
            {"rtol": 1e-3, "atol": 1e-4}, "float64": {"rtol": 1e-7, "atol": 1e-8}},
         "profile name 'Fast GPU'"),
    ],
)
def test_a_broken_profiles_file_is_refused_by_schema_and_loader(tmp_path, path, value, message):
    document = _broken(json.loads(PROFILES_FILE.read_text()), path, value)
    assert not _validator(PROFILES_SCHEMA).is_valid(document)
    broken = tmp_path / "tolerances.json"
    broken.write_text(json.dumps(document))
    with pytest.raises(ValidationError, match=message) as refused:
        load_profiles(broken)
    assert str(broken) in str(refused.value)


def test_a_profiles_file_that_is_not_json_is_refused(tmp_path):
    broken = tmp_path / "tolerances.json"
    broken.write_text("{not json")
    with pytest.raises(ValidationError, match="cannot read JSON"):
        load_profiles(broken)


def test_a_profile_added_as_data_is_used_without_code(tmp_path):
    document = json.loads(PROFILES_FILE.read_text())
    document["profiles"]["fpga"] = {
        "kind": "engine",
        "description": "an engine on a board with its own reduction order",
        "float32": {"rtol": 5e-4, "atol": 5e-5},
        "float64": {"rtol": 4e-8, "atol": 6e-9},
    }
    _validator(PROFILES_SCHEMA).validate(document)
    path = tmp_path / "tolerances.json"
    path.write_text(json.dumps(document))
    profiles = load_profiles(path)
    assert profiles.engine_profiles() == ["cpu", "cuda", "fpga"]
    assert Tolerance.for_case(1e-9, 1e-11, "fpga", "float64", profiles) == Tolerance(4e-8, 6e-9)
    assert Tolerance.for_case(1e-3, 1e-11, "fpga", "float32", profiles) == Tolerance(1e-3, 5e-5)
    with pytest.raises(ValueError, match="unknown tolerance profile 'gpu'"):
        Tolerance.for_case(1e-9, 1e-11, "gpu", "float64", profiles)


def test_the_command_line_offers_the_engine_profiles_of_the_data(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--reference", "--tolerance-profile", "reference"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err
    assert all(name in err.split("choose from")[1] for name in ("auto", "cpu", "cuda"))


def test_a_broken_shipped_profiles_file_is_one_error_line_and_exit_2(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "tolerances.json"
    document = json.loads(PROFILES_FILE.read_text())
    document["profiles"]["cpu"]["float64"]["atol"] = -3e-9
    broken.write_text(json.dumps(document))
    monkeypatch.setattr(tolerances_module, "default_profiles_path", lambda: broken)
    tolerances_module.shipped_profiles.cache_clear()
    try:
        assert main(["--reference"]) == 2
    finally:
        tolerances_module.shipped_profiles.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "profiles.cpu.float64.atol" in err and str(broken) in err


def test_the_shipped_capabilities_satisfy_their_schema():
    validator = _validator(CAPABILITIES_SCHEMA)
    for path in sorted((KIT / "capabilities").glob("*.json")):
        validator.validate(json.loads(path.read_text()))
        load_capabilities(path)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(extra=True),
        lambda d: d.update(dtypes=["float16"]),
        lambda d: d.update(penalties=[]),
        lambda d: d.update(device_input="yes"),
        lambda d: d.update(schema_version=2),
        lambda d: d.pop("device_predict"),
    ],
)
def test_capabilities_the_schema_refuses_the_loader_refuses(tmp_path, edit):
    document = json.loads((KIT / "capabilities" / "cpu.json").read_text())
    edit(document)
    assert not _validator(CAPABILITIES_SCHEMA).is_valid(document)
    path = tmp_path / "caps.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValidationError):
        load_capabilities(path)


_FLOORS = re.compile(r"max\(case, ([0-9.e+-]+) / ([0-9.e+-]+)\)")


@pytest.mark.parametrize("document", ["conformance/README.md", "docs/corpora.md"])
def test_the_documented_floors_are_the_data(document):
    """The tables of the kit's README and docs/corpora.md restate tolerances.json; a row per
    profile, float32 then float64, each as max(case, rtol / atol)."""
    profiles = shipped_profiles()
    rows = {}
    for line in (REPO / document).read_text(encoding="utf-8").splitlines():
        named = re.search(r"`([a-z0-9_-]+)`", line)
        floors = _FLOORS.findall(line)
        if line.startswith("|") and named and len(floors) == 2:
            rows[named.group(1)] = {
                dtype: (float(rtol), float(atol))
                for dtype, (rtol, atol) in zip(("float32", "float64"), floors, strict=True)
            }
    assert rows == profiles.floors
