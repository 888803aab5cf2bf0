"""The renewable state: everything the model keeps between batches (never the data)."""

from __future__ import annotations

import dataclasses

import numpy as np

# The state's four counters, in RenewableState's (and the ABI state structs') field order.
COUNTER_NAMES = ("n_samples_seen", "batch_count", "previous_lambda", "weight_sum")


def counters_of(source) -> tuple[int, int, float, float]:
    """The four counters of `source` (a RenewableState, an ABI state struct or view, a corpus's
    expected state: anything holding them as attributes) as plain Python numbers in
    COUNTER_NAMES order, which is also their place in RenewableState's arguments:
    RenewableState(coefficients, information, *counters_of(source), meat)."""
    return (
        int(source.n_samples_seen),
        int(source.batch_count),
        float(source.previous_lambda),
        float(source.weight_sum),
    )


# init=False: the __init__ below does what the generated one of a frozen dataclass does, in one
# step instead of one object.__setattr__ call per field (~1.5 us per state, built every batch).
@dataclasses.dataclass(frozen=True, init=False)
class RenewableState:
    """Host copy of one committed state.

    coefficients: (P,) in the working dtype, intercept LAST when fit_intercept.
    information: (P, P) row-major running sum J (may be asymmetric after a restore).
    n_samples_seen: rows seen, zero-weight rows included. batch_count: batches seen.
    previous_lambda: lambda of the last batch (0 for penalty "none").
    weight_sum: cumulative sum of sample weights N.
    meat: (P, P) float64 running sum K = sum_b X_b' diag(w psi(r_b)^2) X_b of the sandwich
    covariance (docs/algorithm.md, "Inference"), or None when the stream cannot give standard
    errors: it did not ask for them (the estimator's inference=False), it was restored from a
    state that carried no K (an older checkpoint or caller), or an L1-penalised batch was
    folded in.
    """

    coefficients: np.ndarray
    information: np.ndarray
    n_samples_seen: int = 0
    batch_count: int = 0
    previous_lambda: float = 0.0
    weight_sum: float = 0.0
    meat: np.ndarray | None = None

    def __init__(
        self,
        coefficients: np.ndarray,
        information: np.ndarray,
        n_samples_seen: int = 0,
        batch_count: int = 0,
        previous_lambda: float = 0.0,
        weight_sum: float = 0.0,
        meat: np.ndarray | None = None,
    ):
        # Frozen: the fields are written once, here, straight into the instance dictionary.
        self.__dict__.update(
            coefficients=coefficients,
            information=information,
            n_samples_seen=n_samples_seen,
            batch_count=batch_count,
            previous_lambda=previous_lambda,
            weight_sum=weight_sum,
            meat=meat,
        )

    @classmethod
    def empty(cls, n_parameters: int, dtype, *, with_meat: bool = True) -> RenewableState:
        """The state before the first batch. with_meat=False starts a stream that accumulates
        no K (no standard errors, and no cost for them: the estimator's inference=False)."""
        dtype = np.dtype(dtype)
        return cls(
            coefficients=np.zeros(n_parameters, dtype=dtype),
            information=np.zeros((n_parameters, n_parameters), dtype=dtype),
            meat=np.zeros((n_parameters, n_parameters), dtype=np.float64) if with_meat else None,
        )

    @property
    def effective_weight(self) -> float:
        """The cumulative sample weight under renewable-huber 0.7.x's name (= weight_sum)."""
        return float(self.weight_sum)

    @property
    def inference_available(self) -> bool:
        """True when the state carries K for every batch of its stream."""
        return self.meat is not None

    @property
    def n_parameters(self) -> int:
        return int(self.coefficients.shape[0])

    def copy(self) -> RenewableState:
        return dataclasses.replace(
            self,
            coefficients=np.array(self.coefficients, copy=True),
            information=np.array(self.information, copy=True),
            meat=None if self.meat is None else np.array(self.meat, copy=True),
        )
