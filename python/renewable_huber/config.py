"""Solver configuration of one batch transition, as every engine receives it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


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

    @classmethod
    def from_settings(
        cls, settings: Mapping[str, Any], n_features_in: int, tau: float | None = None
    ) -> UpdateConfig:
        """The config of one stream from the estimator's solver parameters, read from
        `settings` under their constructor names (fit_intercept, tau, bandwidth_scale, tol,
        ridge, max_iter, penalty, lambda_scale; other keys are ignored): a checkpoint's or a
        golden case's `config`, or ValidatedParams.as_config_dict(). `tau`, when given,
        replaces settings["tau"] (the number a tau="auto" stream chose). Values become plain
        Python bool, float, int and str."""
        return cls(
            n_features_in=int(n_features_in),
            fit_intercept=bool(settings["fit_intercept"]),
            tau=float(settings["tau"] if tau is None else tau),
            bandwidth_scale=float(settings["bandwidth_scale"]),
            tol=float(settings["tol"]),
            ridge=float(settings["ridge"]),
            max_iter=int(settings["max_iter"]),
            penalty=str(settings["penalty"]),
            lambda_scale=float(settings["lambda_scale"]),
        )
