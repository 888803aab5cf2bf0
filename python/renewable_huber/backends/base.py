"""What the estimator needs from a backend. Every backend (numpy, cupy, native_cpu,
native_cuda) implements this protocol; the estimator owns validation and the fitted
attributes, the backend owns the arithmetic and any engine-resident state."""

from __future__ import annotations

from typing import Any, Protocol

from ..config import UpdateConfig
from ..diagnostics import Diagnostics
from ..state import RenewableState


class Backend(Protocol):
    #: "numpy", "cupy", "native_cpu" or "native_cuda"
    name: str
    #: "cpu" or "cuda"
    device: str
    #: numpy dtype of the working precision
    dtype: Any
    #: effective thread count (native_cpu), else None
    n_jobs: int | None

    def restore(self, state: RenewableState) -> None:
        """Make `state` the committed state (the initial empty state or a checkpoint's)."""

    def update(
        self, X, y, sample_weight, config: UpdateConfig
    ) -> tuple[RenewableState, Diagnostics]:
        """One renewable batch transition on the committed state.

        X: (n, p) WITHOUT the intercept column, already validated and in the working dtype
        (host NumPy, or a device array for cupy/native_cuda). y: (n,). sample_weight: (n,) or
        None. Returns the new committed state as a host RenewableState and the diagnostics.
        Transactional: on any exception the committed state is unchanged.
        """

    def predict(self, X):
        """X: (n, p) without the intercept column. Returns (n,) predictions; host input gives
        a NumPy array, device input an array of the caller's library."""
