"""renewable_huber: streaming robust (Huber) regression by renewable estimation.

The estimator is RenewableHuberRegressor; engines are chosen with its backend/device
parameters (see renewable_huber.backends). NumPy is the only hard dependency.
"""

from importlib import metadata as _metadata

from .diagnostics import Diagnostics
from .estimator import RenewableHuberRegressor
from .exceptions import (
    BackendContractError,
    BackendUnavailableError,
    EngineError,
    NotFittedError,
    RenewableHuberError,
    ValidationError,
)
from .state import RenewableState

try:
    __version__ = _metadata.version("renewable-huber")
except _metadata.PackageNotFoundError:
    # Running from a source tree (PYTHONPATH=python) without an installed distribution.
    __version__ = "0+unknown"

__all__ = [
    "BackendContractError",
    "BackendUnavailableError",
    "Diagnostics",
    "EngineError",
    "NotFittedError",
    "RenewableHuberError",
    "RenewableHuberRegressor",
    "RenewableState",
    "ValidationError",
    "__version__",
]
