"""Replay tolerances (conformance/README.md) and the worst-error bookkeeping of one check.

A value passes when |actual - expected| <= atol + rtol * |expected| (numpy.isclose's rule).
The error of a value is that difference divided by its allowance, so 1.0 is the edge and the
per-case line can say how close an engine came.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# How far a float32 oracle may stray from the float64 computation on the same float32 data
# (golden/generate.py refuses a float32 case beyond it, on every value it stores).
FLOAT32_ORACLE_SLACK = (1e-4, 1e-5)

# The reference on another BLAS kernel or CPU (golden/generate.py --check, `conformance
# --reference`): float64 within the case's tolerance, which the generator derives from the
# case's conditioning. A float32 oracle is not pinned to a few ulps: near the optimum float32
# f no longer resolves progress, and where each kernel stops inside that flat region is a
# rounding decision. Each float32 oracle lies within FLOAT32_ORACLE_SLACK (rtol s_r, atol s_a)
# of the float64 replay, and the float64 replays of two kernels agree within the float64 case
# tolerance (<= 1e-9 relative here), so by the triangle inequality two float32 oracles differ
# by at most 2 s_a + s_r (|v_A| + |v_B|) + 1e-9 |v| <= 2.0003 s_r |v| + 2.0002 s_a: the floor
# (2.5e-4, 2.5e-5) bounds that with room for the second-order terms. Still below the cpu and
# cuda float32 floors, so the engine profiles keep deciding engine replays.
REFERENCE_FLOAT32_FLOOR = (2.5 * FLOAT32_ORACLE_SLACK[0], 2.5 * FLOAT32_ORACLE_SLACK[1])

# Engine profiles: the C engine accumulates in double and solves with its own LU/Cholesky;
# CUDA reorders reductions on the device. These are the floors conformance/README.md fixes;
# the case's own tolerance wins when it is looser.
PROFILES: dict[str, dict[str, tuple[float, float]]] = {
    "reference": {"float32": REFERENCE_FLOAT32_FLOOR, "float64": (0.0, 0.0)},
    "cpu": {"float32": (4e-4, 4e-5), "float64": (2e-8, 3e-9)},
    "cuda": {"float32": (3e-4, 3e-5), "float64": (1e-8, 2e-9)},
}


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
