"""renewable_huber: streaming robust (Huber) regression by renewable estimation.

The estimator is RenewableHuberRegressor; engines are chosen with its backend/device
parameters (see renewable_huber.backends). NumPy is the only hard dependency.
"""

from importlib import metadata as _metadata

from .diagnostics import BatchDiagnostics, Diagnostics
from .estimator import RenewableHuberRegressor
from .exceptions import (
    BackendContractError,
    BackendUnavailableError,
    ConvergenceWarning,
    DataConversionWarning,
    EngineError,
    FeatureScaleWarning,
    InferenceUnavailableError,
    NotFittedError,
    PrecisionWarning,
    RenewableHuberError,
    RenewableHuberWarning,
    TauScaleWarning,
    ValidationError,
)
from .paths import get_cmake_dir, get_include, get_library_dir
from .state import RenewableState
from .tau import suggest_tau

try:
    __version__ = _metadata.version("renewable-huber")
except _metadata.PackageNotFoundError:
    # Running from a source tree (PYTHONPATH=python) without an installed distribution.
    __version__ = "0+unknown"

__all__ = [
    "BackendContractError",
    "BackendUnavailableError",
    "BatchDiagnostics",
    "ConvergenceWarning",
    "DataConversionWarning",
    "Diagnostics",
    "EngineError",
    "FeatureScaleWarning",
    "InferenceUnavailableError",
    "NotFittedError",
    "PrecisionWarning",
    "RenewableHuberError",
    "RenewableHuberRegressor",
    "RenewableHuberWarning",
    "RenewableState",
    "TauScaleWarning",
    "ValidationError",
    "get_cmake_dir",
    "get_include",
    "get_library_dir",
    "suggest_tau",
]
