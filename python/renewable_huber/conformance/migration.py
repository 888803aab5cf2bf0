"""Checkpoint migration: a state taken after batch k, restored into a fresh engine through
rh_cuda_engine_restore, must continue exactly like the uninterrupted stream.

Two sources of the state after batch k:
  corpus -- the oracle's expected state (engine A is the NumPy reference, engine B the one
            under test): proves cross-engine resume;
  engine -- copy_state of a first engine of the library under test after k batches: proves
            the export/restore round trip is lossless (bitwise) and resumable.
"""

from __future__ import annotations

import numpy as np

from ..state import RenewableState, counters_of
from .case_config import update_config
from .corpus import NOT_RECORDED, ExpectedState, GoldenCase
from .replay import result_from, stream
from .report import CheckResult
from .session import EngineCallFailed, EngineSession, EngineUnderTest
from .tolerances import Comparison, Tolerance


def _as_state(expected: ExpectedState) -> RenewableState:
    return RenewableState(
        expected.coefficients,
        expected.information,
        *counters_of(expected),
        # a corpus without K (v1 to v3) restores without it, as an older checkpoint would
        meat=None if isinstance(expected.meat, str) and expected.meat == NOT_RECORDED
        else expected.meat,
    )


def _state_after(engine: EngineUnderTest, case: GoldenCase, k: int) -> RenewableState:
    config = update_config(case)
    source = engine.open(np.dtype(case.dtype), case.n_parameters)
    try:
        for batch in case.batches[:k]:
            source.update(batch.X, batch.y, batch.sample_weight, config, True)
        return source.copy_state()
    finally:
        source.close()


def _check_round_trip(
    comparison: Comparison, session: EngineSession, restored: RenewableState
) -> None:
    copied = session.copy_state()
    comparison.exact(
        "restore/copy_state round trip coefficients (bitwise)",
        copied.coefficients.tobytes().hex(),
        np.asarray(restored.coefficients, dtype=copied.coefficients.dtype).tobytes().hex(),
    )
    comparison.exact(
        "restore/copy_state round trip information (bitwise)",
        copied.information.tobytes().hex(),
        np.asarray(restored.information, dtype=copied.information.dtype).tobytes().hex(),
    )
    comparison.exact(
        "restore/copy_state round trip counters",
        (copied.n_samples_seen, copied.batch_count, copied.previous_lambda, copied.weight_sum),
        (
            restored.n_samples_seen,
            restored.batch_count,
            restored.previous_lambda,
            restored.weight_sum,
        ),
    )


    comparison.exact(
        "restore/copy_state round trip meat (bitwise; None: no K)",
        None if copied.meat is None else copied.meat.tobytes().hex(),
        None if restored.meat is None
        else np.asarray(restored.meat, dtype=np.float64).tobytes().hex(),
    )


def _migrate(
    engine: EngineUnderTest, case: GoldenCase, k: int, source: str, profile: str
) -> CheckResult:
    name = f"{case.qualified_id}@{k}<-{source}"
    comparison = Comparison(Tolerance.for_case(case.rtol, case.atol, profile, case.config["dtype"]))
    try:
        state = (
            _as_state(case.states[k - 1]) if source == "corpus" else _state_after(engine, case, k)
        )
        target = engine.open(np.dtype(case.dtype), case.n_parameters)
    except EngineCallFailed as failure:
        return CheckResult(
            "migration", name, "FAIL", detail=str(failure), last_error=failure.message
        )
    differences: list[int] = []
    error = None
    try:
        try:
            target.restore(state)
            _check_round_trip(comparison, target, state)
            differences = stream(target, case, comparison, k, append_intercept=False)
        except EngineCallFailed as failure:
            error = failure
        return result_from("migration", name, comparison, differences, error, target)
    finally:
        target.close()


def migration_checks(engine: EngineUnderTest, case: GoldenCase, profile: str) -> list[CheckResult]:
    """Every cut point k (1 <= k < number of batches) from both sources."""
    return [
        _migrate(engine, case, k, source, profile)
        for k in range(1, len(case.batches))
        for source in ("corpus", "engine")
    ]
