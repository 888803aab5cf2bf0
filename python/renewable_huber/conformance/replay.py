"""Replay: stream a case's batches through a fresh engine and compare after every batch.

A freshly created engine holds the empty state by contract (ABI: engine_create), so the first
batch runs without a restore; the kit checks that empty state through copy_state instead of
assuming it.
"""

from __future__ import annotations

import numpy as np

from ..diagnostics import Diagnostics
from ..state import RenewableState
from .case_config import update_config
from .corpus import NOT_RECORDED, ExpectedState, GoldenCase
from .report import CheckResult
from .session import EngineCallFailed, EngineSession, EngineUnderTest
from .tolerances import Comparison, Tolerance, meat_scales, prediction_scales


def compare_state(
    comparison: Comparison,
    where: str,
    state: RenewableState,
    diagnostics: Diagnostics,
    expected: ExpectedState,
) -> int:
    """Record every difference of one batch; returns the iteration difference (engine minus
    corpus), which is reported but never fails a check on its own."""
    comparison.close(f"{where} coefficients", state.coefficients, expected.coefficients)
    comparison.close(f"{where} information", state.information, expected.information)
    comparison.close(f"{where} previous_lambda", state.previous_lambda, expected.previous_lambda)
    comparison.close(f"{where} weight_sum", state.weight_sum, expected.weight_sum)
    comparison.close(f"{where} objective", diagnostics.objective, expected.objective)
    comparison.close(f"{where} lambda_value", diagnostics.lambda_value, expected.lambda_value)
    comparison.close(f"{where} bandwidth", diagnostics.bandwidth, expected.bandwidth)
    comparison.exact(f"{where} n_samples_seen", state.n_samples_seen, expected.n_samples_seen)
    comparison.exact(f"{where} batch_count", state.batch_count, expected.batch_count)
    comparison.exact(f"{where} converged", diagnostics.converged, expected.converged)
    compare_meat(comparison, where, state.meat, expected.meat)
    return diagnostics.iterations - expected.iterations


def compare_meat(comparison: Comparison, where: str, meat, expected) -> None:
    """K within the kit's matrix rule (tolerances.meat_scales)."""
    if isinstance(expected, str) and expected == NOT_RECORDED:
        return
    if expected is None or meat is None:
        comparison.exact(f"{where} meat available", meat is not None, expected is not None)
        return
    comparison.close(f"{where} meat", meat, expected, meat_scales(expected))


def check_empty(comparison: Comparison, session: EngineSession, n_parameters: int) -> None:
    state = session.copy_state()
    comparison.exact("fresh engine coefficients", state.coefficients.tolist(), [0.0] * n_parameters)
    comparison.exact(
        "fresh engine information",
        state.information.tolist(),
        [[0.0] * n_parameters] * n_parameters,
    )
    comparison.exact(
        "fresh engine counters",
        (state.n_samples_seen, state.batch_count, state.previous_lambda, state.weight_sum),
        (0, 0, 0.0, 0.0),
    )


def stream(
    session: EngineSession,
    case: GoldenCase,
    comparison: Comparison,
    first_batch: int,
    append_intercept: bool,
) -> list[int]:
    """Run batches first_batch.. of the case on the session, comparing each state, then the
    probe predictions. Returns the iteration differences."""
    config = update_config(case)
    differences = []
    for index in range(first_batch, len(case.batches)):
        batch = case.batches[index]
        state, diagnostics = session.update(
            batch.X, batch.y, batch.sample_weight, config, append_intercept
        )
        differences.append(
            compare_state(comparison, f"batch {index + 1}", state, diagnostics, case.states[index])
        )
    predictions = session.predict(case.probe_X, config, append_intercept)
    probe = np.asarray(case.probe_X, dtype=np.float64)
    if case.fit_intercept:
        probe = np.column_stack([probe, np.ones(len(probe))])
    comparison.close(
        "predictions",
        predictions,
        case.predictions,
        prediction_scales(probe, case.states[-1].coefficients),
    )
    return differences


def result_from(
    kind: str,
    name: str,
    comparison: Comparison,
    differences,
    error: EngineCallFailed | None,
    session,
):
    if error is not None:
        return CheckResult(
            kind, name, "FAIL", comparison.worst, tuple(differences), str(error), error.message
        )
    if comparison.passed:
        return CheckResult(kind, name, "PASS", comparison.worst, tuple(differences))
    last_error = session.last_error()
    return CheckResult(
        kind,
        name,
        "FAIL",
        comparison.worst,
        tuple(differences),
        comparison.failure_summary(),
        last_error,
    )


def replay_case(engine: EngineUnderTest, case: GoldenCase, profile: str) -> CheckResult:
    tolerance = Tolerance.for_case(case.rtol, case.atol, profile, case.config["dtype"])
    comparison = Comparison(tolerance)
    try:
        session = engine.open(np.dtype(case.dtype), case.n_parameters)
    except EngineCallFailed as failure:
        return CheckResult(
            "replay", case.qualified_id, "FAIL", detail=str(failure), last_error=failure.message
        )
    differences: list[int] = []
    error = None
    try:
        try:
            check_empty(comparison, session, case.n_parameters)
            # Replay hands the engine p columns (it appends the intercept); migration hands it
            # the expanded design, so both halves of the column contract are exercised.
            differences = stream(session, case, comparison, 0, append_intercept=True)
        except EngineCallFailed as failure:
            error = failure
        return result_from("replay", case.qualified_id, comparison, differences, error, session)
    finally:
        session.close()
