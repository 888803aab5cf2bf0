"""One result per check and its one-line rendering."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CheckResult:
    kind: str  # "replay", "migration", "negative" or "extension"
    id: str
    outcome: str  # "PASS", "FAIL" or "SKIP"
    worst: float | None = None  # worst error as a fraction of its tolerance
    iteration_differences: tuple[int, ...] = ()  # engine minus corpus, per batch
    detail: str = ""
    last_error: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome == "FAIL"

    def line(self) -> str:
        parts = [f"{self.outcome:<4}", f"{self.kind:<9}", self.id]
        if self.worst is not None:
            parts.append(f"worst={self.worst:.3g}x tol")
        if self.iteration_differences:
            diffs = ",".join(f"{d:+d}" for d in self.iteration_differences)
            parts.append(f"iterations engine-corpus=[{diffs}]")
        if self.detail:
            parts.append(f"-- {self.detail}")
        if self.last_error:
            parts.append(f'last_error="{self.last_error}"')
        return "  ".join(parts)
