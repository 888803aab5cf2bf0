"""Replay tolerances and the worst-error bookkeeping of one check.

A value passes when |actual - expected| <= atol + rtol * |expected| (numpy.isclose's rule).
The error of a value is that difference divided by its allowance, so 1.0 is the edge and the
per-case line can say how close an engine came.

The numbers are data, not code: the kit's tolerance profiles (conformance/tolerances.json,
schema conformance/schema/tolerances.schema.json; installed beside this package in a wheel)
give, per profile and dtype, the floors a case's own tolerance is raised to. Why each floor
has its value is conformance/README.md's business; this module only reads and applies them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from pathlib import Path

import numpy as np

from ..exceptions import ValidationError
from .corpus import data_file

SCHEMA_NAME = "renewable-huber-tolerance-profiles"
DTYPES = ("float32", "float64")
KINDS = ("oracle", "engine")
# The profile `--reference` and golden/generate.py --check compare with, and the two the runner
# picks on its own (for a CUDA library or a host with devices, else the host engine).
REFERENCE_PROFILE = "reference"
REQUIRED_PROFILES = {REFERENCE_PROFILE: "oracle", "cpu": "engine", "cuda": "engine"}
_TOP_KEYS = {"schema", "schema_version", "rule", "float32_oracle_slack", "profiles"}
_PROFILE_KEYS = {"kind", "description", *DTYPES}
# the schema's propertyNames pattern
_PROFILE_NAME = re.compile(r"[a-z][a-z0-9_-]*")


def default_profiles_path() -> Path:
    return data_file("conformance/tolerances.json")


@dataclasses.dataclass(frozen=True)
class ProfileSet:
    """A parsed tolerance-profiles document."""

    path: Path
    # profile name -> kind ("oracle" or "engine")
    kinds: dict[str, str]
    # profile name -> dtype -> (rtol, atol)
    floors: dict[str, dict[str, tuple[float, float]]]
    float32_oracle_slack: tuple[float, float]

    def engine_profiles(self) -> list[str]:
        return sorted(name for name, kind in self.kinds.items() if kind == "engine")


def _bound(value, where: str) -> float:
    # bool is an int to Python and never a tolerance
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{where} must be a number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise ValidationError(f"{where} must be a finite number in [0, 1), got {value!r}")
    return value


def _pair(document, where: str, extra_keys: frozenset[str] = frozenset()) -> tuple[float, float]:
    wanted = {"rtol", "atol"} | extra_keys
    if not isinstance(document, dict) or set(document) != wanted:
        keys = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValidationError(f"{where}: keys must be exactly {sorted(wanted)}, got {keys}")
    return _bound(document["rtol"], f"{where}.rtol"), _bound(document["atol"], f"{where}.atol")


def load_profiles(path: str | Path) -> ProfileSet:
    """Read and check a tolerance-profiles file (the checks of its JSON Schema, by hand: the
    base install has no jsonschema). Raises ValidationError naming the file and the field."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValidationError(f"tolerance profiles {path}: cannot read JSON ({error})") from error
    where = f"tolerance profiles {path}"
    if not isinstance(document, dict) or set(document) != _TOP_KEYS:
        keys = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValidationError(f"{where}: keys must be exactly {sorted(_TOP_KEYS)}, got {keys}")
    if document["schema"] != SCHEMA_NAME or document["schema_version"] != 1:
        raise ValidationError(
            f"{where}: schema must be {SCHEMA_NAME!r} version 1, got "
            f"{document['schema']!r} version {document['schema_version']!r}"
        )
    slack = _pair(
        document["float32_oracle_slack"],
        f"{where}: float32_oracle_slack",
        frozenset({"description"}),
    )
    profiles = document["profiles"]
    if not isinstance(profiles, dict) or not profiles:
        raise ValidationError(f"{where}: 'profiles' must be a non-empty object")
    kinds: dict[str, str] = {}
    floors: dict[str, dict[str, tuple[float, float]]] = {}
    for name, profile in profiles.items():
        if not _PROFILE_NAME.fullmatch(name):
            raise ValidationError(
                f"{where}: profile name {name!r} must match {_PROFILE_NAME.pattern} "
                "(lower case; it is a command-line choice)"
            )
        at = f"{where}: profiles.{name}"
        if not isinstance(profile, dict) or set(profile) != _PROFILE_KEYS:
            keys = sorted(profile) if isinstance(profile, dict) else type(profile).__name__
            raise ValidationError(f"{at}: keys must be exactly {sorted(_PROFILE_KEYS)}, got {keys}")
        if profile["kind"] not in KINDS:
            raise ValidationError(
                f"{at}.kind must be one of {list(KINDS)}, got {profile['kind']!r}"
            )
        kinds[name] = profile["kind"]
        floors[name] = {dtype: _pair(profile[dtype], f"{at}.{dtype}") for dtype in DTYPES}
    for name, kind in REQUIRED_PROFILES.items():
        if kinds.get(name) != kind:
            raise ValidationError(
                f"{where}: profile {name!r} of kind {kind!r} is required, got "
                f"{kinds.get(name, 'none')!r}"
            )
    return ProfileSet(path, kinds, floors, slack)


@functools.cache
def shipped_profiles() -> ProfileSet:
    """The kit's own profiles, read once per process."""
    return load_profiles(default_profiles_path())


def prediction_scales(design, coefficients) -> tuple[np.ndarray, np.ndarray]:
    """The allowance of a prediction x . beta follows from its coefficients' allowance: with
    |d beta_j| <= atol + rtol |beta_j|, |d (x . beta)| <= atol ||x||_1 + rtol (|x| . |beta|).
    A prediction that cancels (terms of size 4 summing to 0.3) is thus held to the accuracy
    its terms can have, not to a relative tolerance of the small sum. Returns (magnitude,
    atol_scale) for Comparison.close, never below the plain rule's (|x . beta|, 1). design:
    the probe rows with the intercept column when there is one."""
    design = np.abs(np.asarray(design, dtype=np.float64))
    beta = np.asarray(coefficients, dtype=np.float64)
    magnitude = np.maximum(np.abs(design @ beta), design @ np.abs(beta))
    return magnitude, np.maximum(1.0, design.sum(axis=1))


def meat_scales(expected) -> tuple[np.ndarray, np.ndarray]:
    """K is compared as a matrix: every entry within atol + rtol max|K|. Its entries span the
    squares of the residuals' range, and K moves with the estimate it is formed at by about n
    times that estimate's rounding, so an off-diagonal entry near zero is held to the accuracy
    the matrix can have, not to a relative tolerance of its own. Returns (magnitude, atol_scale)
    for Comparison.close, shaped like K."""
    expected = np.asarray(expected, dtype=np.float64)
    return np.full(expected.shape, float(np.abs(expected).max())), np.ones(expected.shape)


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    @classmethod
    def for_case(
        cls,
        case_rtol: float,
        case_atol: float,
        profile: str,
        dtype: str,
        profiles: ProfileSet | None = None,
    ):
        """The looser of the case's tolerance and the profile's floor for its dtype, entry by
        entry; profiles: the shipped ones unless given."""
        profiles = shipped_profiles() if profiles is None else profiles
        if profile not in profiles.floors:
            raise ValueError(
                f"unknown tolerance profile {profile!r}; use one of {sorted(profiles.floors)}"
            )
        profile_rtol, profile_atol = profiles.floors[profile][dtype]
        return cls(max(case_rtol, profile_rtol), max(case_atol, profile_atol))


class Comparison:
    """Collects the worst tolerance ratio and every exact mismatch of one case."""

    def __init__(self, tolerance: Tolerance):
        self.tolerance = tolerance
        self.worst = 0.0
        self.worst_where = ""
        self.mismatches: list[str] = []

    def close(self, where: str, actual, expected, scales=None) -> None:
        """scales: (magnitude, atol_scale) replacing |expected| and 1 in the allowance, for
        values computed from others (predictions: prediction_scales)."""
        actual = np.asarray(actual, dtype=np.float64)
        expected = np.asarray(expected, dtype=np.float64)
        if actual.shape != expected.shape:
            self.mismatches.append(f"{where}: shape {actual.shape}, expected {expected.shape}")
            return
        if not np.all(np.isfinite(actual)):
            self.mismatches.append(f"{where}: non-finite values {actual[~np.isfinite(actual)][:3]}")
            return
        magnitude, atol_scale = (np.abs(expected), 1.0) if scales is None else scales
        allowance = self.tolerance.atol * atol_scale + self.tolerance.rtol * magnitude
        difference = np.abs(actual - expected)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(difference == 0.0, 0.0, difference / allowance)
        if ratio.size == 0:
            return
        index = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        value = float(ratio[index])
        if value > self.worst:
            self.worst = value
            suffix = "" if actual.ndim == 0 else str(list(int(i) for i in index))
            self.worst_where = (
                f"{where}{suffix} got {float(actual[index])!r} want {float(expected[index])!r}"
            )

    def exact(self, where: str, actual, expected) -> None:
        if actual != expected:
            self.mismatches.append(f"{where}: got {actual!r}, expected {expected!r}")

    @property
    def passed(self) -> bool:
        return not self.mismatches and self.worst <= 1.0

    def failure_summary(self) -> str:
        parts = list(self.mismatches[:3])
        if len(self.mismatches) > 3:
            parts.append(f"... {len(self.mismatches) - 3} more mismatches")
        if self.worst > 1.0:
            parts.append(f"worst {self.worst:.3g}x tolerance at {self.worst_where}")
        return "; ".join(parts)
