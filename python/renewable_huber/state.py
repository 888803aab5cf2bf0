"""The renewable state: everything the model keeps between batches (never the data)."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class RenewableState:
    """Host copy of one committed state.

    coefficients: (P,) in the working dtype, intercept LAST when fit_intercept.
    information: (P, P) row-major running sum J (may be asymmetric after a restore).
    n_samples_seen: rows seen, zero-weight rows included. batch_count: batches seen.
    previous_lambda: lambda of the last batch (0 for penalty "none").
    weight_sum: cumulative sum of sample weights N.
    """

    coefficients: np.ndarray
    information: np.ndarray
    n_samples_seen: int = 0
    batch_count: int = 0
    previous_lambda: float = 0.0
    weight_sum: float = 0.0

    @classmethod
    def empty(cls, n_parameters: int, dtype) -> RenewableState:
        dtype = np.dtype(dtype)
        return cls(
            coefficients=np.zeros(n_parameters, dtype=dtype),
            information=np.zeros((n_parameters, n_parameters), dtype=dtype),
        )

    @property
    def n_parameters(self) -> int:
        return int(self.coefficients.shape[0])

    def copy(self) -> RenewableState:
        return dataclasses.replace(
            self,
            coefficients=np.array(self.coefficients, copy=True),
            information=np.array(self.information, copy=True),
        )
