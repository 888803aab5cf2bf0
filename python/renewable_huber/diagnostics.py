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

    @classmethod
    def from_fields(cls, source) -> Diagnostics:
        """Plain Python values from anything with the six fields as attributes: an ABI
        RhCudaDiagnostics struct, or Diagnostics holding device scalars (CuPy)."""
        return cls(
            iterations=int(source.iterations),
            converged=bool(source.converged),
            objective=float(source.objective),
            lambda_value=float(source.lambda_value),
            bandwidth=float(source.bandwidth),
            used_regularized_fallback=bool(source.used_regularized_fallback),
        )

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
