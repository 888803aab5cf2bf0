"""The conformance run: replay, migration, negative and optional-extension checks of one engine,
in that order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from .capabilities import Capabilities
from .corpus import GoldenCase, default_corpus_paths, load_corpus
from .extensions import extension_checks
from .migration import migration_checks
from .negative import default_negative_cases_path, load_negative_cases, negative_checks
from .replay import replay_case
from .report import CheckResult
from .session import EngineUnderTest


@dataclasses.dataclass(frozen=True)
class RunSummary:
    results: tuple[CheckResult, ...]

    def count(self, outcome: str) -> int:
        return sum(result.outcome == outcome for result in self.results)

    @property
    def passed(self) -> bool:
        """All non-skipped checks passed, and at least one ran (a run that checked nothing
        proves nothing)."""
        return self.count("FAIL") == 0 and self.count("PASS") > 0

    def line(self) -> str:
        return (
            f"{self.count('PASS')} passed, {self.count('FAIL')} failed, "
            f"{self.count('SKIP')} skipped"
        )


def _corpus_checks(engine, case: GoldenCase, capabilities: Capabilities, profile: str):
    reason = capabilities.missing_for(case.config["dtype"], case.config["penalty"])
    if reason:
        skipped = [CheckResult("replay", case.qualified_id, "SKIP", detail=reason)]
        skipped += [
            CheckResult("migration", f"{case.qualified_id}@{k}", "SKIP", detail=reason)
            for k in range(1, len(case.batches))
        ]
        return skipped
    return [replay_case(engine, case, profile), *migration_checks(engine, case, profile)]


def run_conformance(
    engine: EngineUnderTest,
    *,
    corpus_paths: list[str | Path] | None = None,
    capabilities: Capabilities | None = None,
    profile: str | None = None,
    negative_cases_path: str | Path | None = None,
    report: Callable[[CheckResult], None] | None = None,
) -> RunSummary:
    """Run every check against `engine`; `report` receives each result as it is produced."""
    capabilities = capabilities or Capabilities.everything_on_host()
    profile = profile or engine.default_profile()
    paths = corpus_paths or default_corpus_paths()
    cases = [case for path in paths for case in load_corpus(path)]
    negative = load_negative_cases(negative_cases_path or default_negative_cases_path())
    results: list[CheckResult] = []

    def emit(batch: list[CheckResult]) -> None:
        for result in batch:
            results.append(result)
            if report is not None:
                report(result)

    for case in cases:
        emit(_corpus_checks(engine, case, capabilities, profile))
    emit(negative_checks(engine, negative, capabilities))
    emit(extension_checks(engine, cases, capabilities))
    return RunSummary(tuple(results))
