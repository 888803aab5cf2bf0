"""Diagnostics of one batch transition."""

from __future__ import annotations

import dataclasses


# init=False: the __init__ below does what the generated one of a frozen dataclass does, in one
# step instead of one object.__setattr__ call per field (~1.5 us per batch).
@dataclasses.dataclass(frozen=True, init=False)
class Diagnostics:
    iterations: int
    converged: bool
    objective: float
    lambda_value: float
    bandwidth: float
    used_regularized_fallback: bool = False

    def __init__(
        self,
        iterations: int,
        converged: bool,
        objective: float,
        lambda_value: float,
        bandwidth: float,
        used_regularized_fallback: bool = False,
    ):
        # Frozen: the fields are written once, here, straight into the instance dictionary.
        self.__dict__.update(
            iterations=iterations,
            converged=converged,
            objective=objective,
            lambda_value=lambda_value,
            bandwidth=bandwidth,
            used_regularized_fallback=used_regularized_fallback,
        )

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
