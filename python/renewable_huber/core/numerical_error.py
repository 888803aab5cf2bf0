"""The one error the reference raises for overflow during a transition, worded like the
engines' NUMERICAL_ERROR status so every backend reports it the same way."""

from __future__ import annotations

from ..exceptions import EngineError


def numerical_error(detail: str) -> EngineError:
    return EngineError(f"NUMERICAL_ERROR: {detail}; the committed state is unchanged")
