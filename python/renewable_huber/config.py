"""Solver configuration of one batch transition, as every engine receives it."""

from __future__ import annotations

import dataclasses
import functools
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
        cls, settings: Mapping[str, Any] | Any, n_features_in: int, tau: float | None = None
    ) -> UpdateConfig:
        """The config of one stream from the estimator's solver parameters (fit_intercept, tau,
        bandwidth_scale, tol, ridge, max_iter, penalty, lambda_scale; anything else is
        ignored), read from `settings` under their constructor names: a mapping (a
        checkpoint's or a golden case's `config`) or an object holding them as attributes
        (ValidatedParams). `tau`, when given, replaces the settings' tau (the number a
        tau="auto" stream chose). Values become plain Python bool, float, int and str."""
        if isinstance(settings, Mapping):
            get = settings.__getitem__
        else:
            # getattr, not vars(): reading an instance's __dict__ slows its attribute access
            # for the rest of its life, and the estimator reads its parameters every batch.
            get = functools.partial(getattr, settings)
        return cls(
            n_features_in=int(n_features_in),
            fit_intercept=bool(get("fit_intercept")),
            tau=float(get("tau") if tau is None else tau),
            bandwidth_scale=float(get("bandwidth_scale")),
            tol=float(get("tol")),
            ridge=float(get("ridge")),
            max_iter=int(get("max_iter")),
            penalty=str(get("penalty")),
            lambda_scale=float(get("lambda_scale")),
        )
