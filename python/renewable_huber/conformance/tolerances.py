"""Replay tolerances (spec/GOLDEN.md) and the worst-error bookkeeping of one check.

A value passes when |actual - expected| <= atol + rtol * |expected| (numpy.isclose's rule).
The error of a value is that difference divided by its allowance, so 1.0 is the edge and the
per-case line can say how close an engine came.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# Engine profiles: the C engine accumulates in double and solves with its own LU/Cholesky;
# CUDA reorders reductions on the device. These are the floors GOLDEN.md fixes; the case's own
# tolerance wins when it is looser.
PROFILES: dict[str, dict[str, tuple[float, float]]] = {
    "reference": {"float32": (0.0, 0.0), "float64": (0.0, 0.0)},
    "cpu": {"float32": (4e-4, 4e-5), "float64": (2e-8, 3e-9)},
    "cuda": {"float32": (3e-4, 3e-5), "float64": (1e-8, 2e-9)},
}


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    @classmethod
    def for_case(cls, case_rtol: float, case_atol: float, profile: str, dtype: str):
        if profile not in PROFILES:
            raise ValueError(
                f"unknown tolerance profile {profile!r}; use one of {sorted(PROFILES)}"
            )
        profile_rtol, profile_atol = PROFILES[profile][dtype]
        return cls(max(case_rtol, profile_rtol), max(case_atol, profile_atol))


class Comparison:
    """Collects the worst tolerance ratio and every exact mismatch of one case."""

    def __init__(self, tolerance: Tolerance):
        self.tolerance = tolerance
        self.worst = 0.0
        self.worst_where = ""
        self.mismatches: list[str] = []

    def close(self, where: str, actual, expected) -> None:
        actual = np.asarray(actual, dtype=np.float64)
        expected = np.asarray(expected, dtype=np.float64)
        if actual.shape != expected.shape:
            self.mismatches.append(f"{where}: shape {actual.shape}, expected {expected.shape}")
            return
        if not np.all(np.isfinite(actual)):
            self.mismatches.append(f"{where}: non-finite values {actual[~np.isfinite(actual)][:3]}")
            return
        allowance = self.tolerance.atol + self.tolerance.rtol * np.abs(expected)
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
