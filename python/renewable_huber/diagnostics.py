"""Diagnostics of one batch transition."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Diagnostics:
    iterations: int
    converged: bool
    objective: float
    lambda_value: float
    bandwidth: float
    used_regularized_fallback: bool = False

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
