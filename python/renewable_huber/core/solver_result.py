"""What a batch solver hands to the state transition."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class SolverResult:
    """beta: the accepted coefficients; residual: y - X beta at them (reused for J_new);
    objective: f(beta) (smooth part, without the current L1 penalty)."""

    beta: Any
    residual: Any
    iterations: int
    converged: bool
    objective: float
    used_regularized_fallback: bool = False
