"""The NumPy reference core presented as an engine, so `--reference` replays the corpus
against the oracle that produced it (catching a corpus or a reference that drifted)."""

from __future__ import annotations

import numpy as np

from ..config import UpdateConfig
from ..core import design_matrix, renewable_update
from ..state import RenewableState, counters_of


class ReferenceSession:
    def __init__(self, dtype: np.dtype, n_parameters: int):
        self.dtype = np.dtype(dtype)
        self.state = RenewableState.empty(n_parameters, self.dtype)

    def restore(self, state: RenewableState) -> None:
        self.state = RenewableState(
            np.array(state.coefficients, dtype=self.dtype),
            np.array(state.information, dtype=self.dtype),
            *counters_of(state),
            meat=None if state.meat is None else np.array(state.meat, dtype=np.float64),
        )

    def copy_state(self) -> RenewableState:
        return self.state.copy()

    def update(self, X, y, sample_weight, config: UpdateConfig, append_intercept: bool):
        # The reference has a single column convention; append_intercept is an ABI notion.
        design = design_matrix(np, np.asarray(X, dtype=self.dtype), config.fit_intercept)
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=self.dtype)
        self.state, diagnostics = renewable_update(
            np, self.state, design, np.asarray(y, dtype=self.dtype), weights, config
        )
        return self.state.copy(), diagnostics

    def predict(self, X, config: UpdateConfig, append_intercept: bool) -> np.ndarray:
        design = design_matrix(np, np.asarray(X, dtype=self.dtype), config.fit_intercept)
        return design @ self.state.coefficients

    def last_error(self) -> str:
        return ""

    def close(self) -> None:
        pass


class ReferenceEngine:
    description = "NumPy reference (renewable_huber.core)"
    speaks_abi = False

    def open(self, dtype, n_parameters: int) -> ReferenceSession:
        return ReferenceSession(dtype, n_parameters)

    def default_profile(self) -> str:
        return "reference"
