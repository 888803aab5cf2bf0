"""The one interface the replay and migration checks drive: an engine session.

Two implementations exist: AbiEngine (any shared library behind the 17 ABI functions, through
ctypes) and ReferenceEngine (the NumPy reference, so the corpus itself can be replayed).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..config import UpdateConfig
from ..diagnostics import Diagnostics
from ..state import RenewableState


class EngineCallFailed(Exception):
    """An engine refused or failed a call the kit expected to succeed."""

    def __init__(self, call: str, status: str, message: str):
        super().__init__(f"{call} returned {status}: {message or '(no last-error text)'}")
        self.call = call
        self.status = status
        self.message = message


class EngineSession(Protocol):
    def restore(self, state: RenewableState) -> None: ...

    def copy_state(self) -> RenewableState: ...

    def update(
        self,
        X: np.ndarray,
        y: np.ndarray,
        sample_weight,
        config: UpdateConfig,
        append_intercept: bool,
    ) -> tuple[RenewableState, Diagnostics]:
        """X is (n, p). append_intercept=True hands the engine p columns and lets it append the
        intercept column itself; False hands it the expanded (n, P) design."""

    def predict(
        self, X: np.ndarray, config: UpdateConfig, append_intercept: bool
    ) -> np.ndarray: ...

    def last_error(self) -> str: ...

    def close(self) -> None: ...


class EngineUnderTest(Protocol):
    #: shown in the report header
    description: str
    #: True when the raw ABI can be driven (negative cases need it)
    speaks_abi: bool

    def open(self, dtype: np.dtype, n_parameters: int) -> EngineSession: ...

    def default_profile(self) -> str: ...
