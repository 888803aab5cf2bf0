"""A corpus case's estimator parameters as the UpdateConfig every engine receives."""

from __future__ import annotations

from ..config import UpdateConfig
from .corpus import GoldenCase


def update_config(case: GoldenCase) -> UpdateConfig:
    c = case.config
    return UpdateConfig(
        n_features_in=case.n_features_in,
        fit_intercept=bool(c["fit_intercept"]),
        tau=float(c["tau"]),
        bandwidth_scale=float(c["bandwidth_scale"]),
        tol=float(c["tol"]),
        ridge=float(c["ridge"]),
        max_iter=int(c["max_iter"]),
        penalty=str(c["penalty"]),
        lambda_scale=float(c["lambda_scale"]),
    )
