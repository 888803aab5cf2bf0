"""Solver configuration of one batch transition, as every engine receives it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class UpdateConfig:
    """The numerical settings of docs/algorithm.md, already validated by the estimator.

    n_features_in is p (intercept never counted); P = p + fit_intercept.
    penalty is "none" or "l1".
    """

    n_features_in: int
    fit_intercept: bool
    tau: float
    bandwidth_scale: float
    tol: float
    ridge: float
    max_iter: int
    penalty: str
    lambda_scale: float

    @property
    def n_parameters(self) -> int:
        return self.n_features_in + int(self.fit_intercept)
