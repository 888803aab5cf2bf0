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
    EngineError,
    NotFittedError,
    RenewableHuberError,
    RenewableHuberWarning,
    TauScaleWarning,
    ValidationError,
)
from .state import RenewableState
from .tau import suggest_tau

try:
    __version__ = _metadata.version("renewable-huber")
except _metadata.PackageNotFoundError:
    # Running from a source tree (PYTHONPATH=python) without an installed distribution.
    __version__ = "0+unknown"


def __getattr__(name: str):
    # ConvergenceWarning is created on first use, so that importing the package never imports
    # scikit-learn (see the class's docstring).
    if name == "ConvergenceWarning":
        from .exceptions import convergence_warning_class

        return convergence_warning_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "ConvergenceWarning"])

__all__ = [
    "BackendContractError",
    "BackendUnavailableError",
    "BatchDiagnostics",
    "ConvergenceWarning",
    "Diagnostics",
    "EngineError",
    "NotFittedError",
    "RenewableHuberError",
    "RenewableHuberRegressor",
    "RenewableHuberWarning",
    "RenewableState",
    "TauScaleWarning",
    "ValidationError",
    "__version__",
    "suggest_tau",
]
