"""A corpus case's estimator parameters as the UpdateConfig every engine receives."""

from __future__ import annotations

from ..config import UpdateConfig
from .corpus import GoldenCase


def update_config(case: GoldenCase) -> UpdateConfig:
    return UpdateConfig.from_settings(case.config, case.n_features_in)
