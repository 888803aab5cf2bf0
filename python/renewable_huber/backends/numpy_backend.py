"""The reference backend: the array-namespace core run on NumPy, on the host."""

from __future__ import annotations

import numpy as np

from ..config import UpdateConfig
from ..core import design_matrix, renewable_update
from ..diagnostics import Diagnostics
from ..exceptions import BackendContractError, ValidationError
from ..state import RenewableState, counters_of


class NumpyBackend:
    name = "numpy"
    device = "cpu"
    n_jobs = None

    def __init__(self, *, dtype, n_parameters: int):
        self.dtype = np.dtype(dtype)
        self.n_parameters = int(n_parameters)
        self._state = RenewableState.empty(self.n_parameters, self.dtype)

    def restore(self, state: RenewableState) -> None:
        self._state = host_state_in_dtype(state.copy(), self.n_parameters, self.dtype)

    def update(
        self, X, y, sample_weight, config: UpdateConfig
    ) -> tuple[RenewableState, Diagnostics]:
        _require_host(X)
        design = design_matrix(np, X, config.fit_intercept)
        new_state, diagnostics = renewable_update(
            np, self._state, design, y, sample_weight, config
        )
        new_state = host_state_in_dtype(new_state, self.n_parameters, self.dtype)
        self._state = new_state
        # The caller may keep what it gets; the committed arrays stay private.
        return new_state.copy(), diagnostics

    def predict(self, X):
        _require_host(X)
        return linear_prediction(X, self._state.coefficients)


def _require_host(X) -> None:
    if not isinstance(X, np.ndarray):
        raise BackendContractError(
            f"the numpy backend takes NumPy arrays, got {type(X).__module__}.{type(X).__name__}"
        )


def linear_prediction(X, coefficients):
    """X (n, p) times the slopes, plus the trailing intercept when there is one."""
    n_features = X.shape[1]
    predictions = X @ coefficients[:n_features]
    if coefficients.shape[0] > n_features:
        predictions = predictions + coefficients[n_features]
    return predictions


def host_state_in_dtype(
    state: RenewableState, n_parameters: int, dtype: np.dtype
) -> RenewableState:
    """`state` as host arrays in the working dtype (copied only when a conversion is
    needed), with plain-Python counters."""
    coefficients = np.asarray(state.coefficients, dtype=dtype)
    information = np.ascontiguousarray(state.information, dtype=dtype)
    if coefficients.shape != (n_parameters,) or information.shape != (n_parameters, n_parameters):
        raise ValidationError(
            f"state has coefficients {coefficients.shape} and information {information.shape}; "
            f"this backend was created for {n_parameters} parameters"
        )
    return RenewableState(
        coefficients, information, *counters_of(state), meat=host_meat(state.meat, n_parameters)
    )


def host_meat(meat, n_parameters: int):
    """K as a contiguous host float64 (P, P) array, or None when the state has none."""
    if meat is None:
        return None
    meat = np.ascontiguousarray(meat, dtype=np.float64)
    if meat.shape != (n_parameters, n_parameters):
        raise ValidationError(
            f"state has meat {meat.shape}; this backend was created for {n_parameters} parameters"
        )
    return meat
