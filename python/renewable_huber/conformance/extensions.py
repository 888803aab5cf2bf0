"""Checks of the ABI's optional extensions (today: row statistics, abi/rh_cuda_row_statistics.h).

An engine that does not export an extension is reported with one SKIP line saying it is absent
(absence is allowed: the extension is optional). One that exports it is checked on every
golden batch: the six sums at the batch's recorded coefficients, tau and bandwidth against the
NumPy reference's Huber pieces evaluated in float64 on the values the engine reads, within
ROW_STATISTICS_RTOL of the sums of the terms' absolute values (the scale a summation error is
bounded by) plus what the residuals' own rounding can move them by (reference_row_statistics);
and on a few refusals (INVALID_ARGUMENT, outputs untouched, committed state
unchanged).
"""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _abi, _row_statistics
from ..core.huber import huber_loss, huber_score, smoothed_curvature
from ..core.rules import majoriser_weights
from .capabilities import Capabilities
from .corpus import GoldenCase
from .report import CheckResult

ROW_STATISTICS_RTOL = 1e-10
KINDS = ("loss", "score", "curvature", "majoriser", "meat", "norm")
_ABSENT = (
    "absent: the engine does not export the optional row-statistics extension version >= "
    f"{_row_statistics.HOST_CALL_VERSION} ({', '.join(_row_statistics.HOST_SYMBOLS)})"
)


def reference_row_statistics(X, y, w, beta, tau: float, bandwidth: float):
    """(sums, scales, allowances): the six sums in float64 by the reference's Huber pieces;
    for each, the same sum over the terms' absolute values (a summation in any order is within
    ROW_STATISTICS_RTOL of it); and what the residuals' own rounding may move it by. r = y -
    X beta is known to e_r = 64 eps (|y| + |X| |beta|) only, so psi may move by e_r, psi^2 by
    2 |psi| e_r + e_r^2, c by e_r / 2h and the majoriser's weight by e_r (1 / 2h + 1 / tau)
    (at most 1 each): near an exact fit (residuals at rounding level) the score and the meat
    are then all rounding, and the allowance says so."""
    X, y, beta = (np.asarray(a, dtype=np.float64) for a in (X, y, beta))
    w = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64)
    r = y - X @ beta
    psi = huber_score(np, r, tau)
    c = smoothed_curvature(np, r, tau, bandwidth)
    with np.errstate(divide="ignore"):
        m = majoriser_weights(np, r, tau, c)
    A = np.abs(X)
    e_r = 64 * np.finfo(np.float64).eps * (np.abs(y) + A @ np.abs(beta))
    a_psi = np.abs(psi)

    def gram(v, M):
        return M.T @ (v[:, None] * M)

    sums = {
        "loss": float(np.sum(w * huber_loss(np, r, tau))),
        "score": X.T @ (w * psi),
        "curvature": gram(w * c, X),
        "majoriser": gram(w * m, X),
        "meat": gram(w * psi * psi, X),
        "norm": float(w @ np.sum(X * X, axis=1)),
    }
    scales = {
        "loss": sums["loss"],
        "score": A.T @ (w * a_psi),
        "curvature": gram(w * c, A),
        "majoriser": gram(w * m, A),
        "meat": gram(w * psi * psi, A),
        "norm": sums["norm"],
    }
    allowances = {
        "loss": float(np.sum(w * (a_psi + e_r) * e_r)),
        "score": A.T @ (w * e_r),
        "curvature": gram(w * np.minimum(1.0, e_r / (2.0 * bandwidth)), A),
        "majoriser": gram(w * np.minimum(1.0, e_r * (0.5 / bandwidth + 1.0 / tau)), A),
        "meat": gram(w * (2.0 * a_psi * e_r + e_r * e_r), A),
        "norm": 0.0,
    }
    return sums, scales, allowances


def _session_handle(engine, dtype, n_parameters: int):
    session = engine.open(dtype, n_parameters)
    return session, session.handle


def _call(lib, handle, design, y, w, beta, bits, tau, bandwidth, outputs):
    """The raw call (its status, not an exception: the kit reports it) and its request."""
    batch, request = _row_statistics.request(design, y, w, beta, bits, tau, bandwidth, outputs)
    status = lib.rh_cuda_engine_row_statistics(handle, ctypes.byref(batch), ctypes.byref(request))
    return status, request


def _outputs(P: int) -> dict:
    return {"score": np.zeros(P), "curvature": np.zeros((P, P)), "majoriser": np.zeros((P, P)),
            "meat": np.zeros((P, P))}


def _design(case: GoldenCase, X) -> np.ndarray:
    X = np.asarray(X, dtype=case.dtype)
    if case.fit_intercept:
        X = np.concatenate([X, np.ones((X.shape[0], 1), dtype=case.dtype)], axis=1)
    return np.ascontiguousarray(X)


def _case_check(engine, lib, case: GoldenCase) -> CheckResult:
    check_id = f"row_statistics/{case.qualified_id}"
    P = case.n_parameters
    session, handle = _session_handle(engine, case.dtype, P)
    try:
        worst = 0.0
        where = ""
        for k, (batch, state) in enumerate(zip(case.batches, case.states, strict=True)):
            design = _design(case, batch.X)
            y = np.ascontiguousarray(batch.y, dtype=case.dtype)
            w = None if batch.sample_weight is None else np.ascontiguousarray(
                batch.sample_weight, dtype=case.dtype)
            beta = np.ascontiguousarray(state.coefficients, dtype=case.dtype)
            tau = float(case.config["tau"])
            outputs = _outputs(P)
            status, request = _call(lib, handle, design, y, w, beta,
                                    _row_statistics.RH_CUDA_STATISTIC_ALL, tau, state.bandwidth,
                                    outputs)
            if status != _abi.RH_CUDA_SUCCESS:
                return CheckResult("extension", check_id, "FAIL",
                                   detail=f"batch {k}: status {_abi.status_name(status)}",
                                   last_error=session.last_error())
            got = {"loss": request.loss, "norm": request.weighted_norm, **outputs}
            expected, scales, allowances = reference_row_statistics(design, y, w, beta, tau,
                                                                    state.bandwidth)
            for kind in KINDS:
                error = np.abs(np.asarray(got[kind]) - expected[kind])
                bound = (ROW_STATISTICS_RTOL * np.asarray(scales[kind])
                         + np.asarray(allowances[kind]) + 1e-300)
                ratio = float(np.max(error / bound))
                if not ratio <= worst:
                    worst, where = ratio, f"batch {k} {kind}"
        outcome = "PASS" if worst <= 1.0 else "FAIL"
        return CheckResult("extension", check_id, outcome, worst=worst,
                           detail="" if outcome == "PASS" else f"worst at {where}")
    finally:
        session.close()


def _refusal_checks(engine, lib) -> list[CheckResult]:
    """A few refusals through the extension: INVALID_ARGUMENT, outputs untouched, committed
    state unchanged (the C tests of each engine cover every refusal)."""
    P = 3
    rng = np.random.default_rng(0)
    design = np.ascontiguousarray(rng.normal(size=(20, P)))
    y = np.ascontiguousarray(rng.normal(size=20))
    beta = np.zeros(P)
    bad_y = y.copy()
    bad_y[4] = np.nan
    all_bits = _row_statistics.RH_CUDA_STATISTIC_ALL
    cases = (
        ("statistics 0", design, y, beta, 0),
        ("unknown statistic bit", design, y, beta, all_bits | (1 << 40)),
        ("NULL coefficients", design, y, None, all_bits),
        ("NaN in y", design, bad_y, beta, all_bits),
        ("n_columns not P", np.ascontiguousarray(design[:, :2]), y, beta, all_bits),
    )
    results = []
    for name, X, yv, coefficients, bits in cases:
        session, handle = _session_handle(engine, np.dtype(np.float64), P)
        try:
            before = session.copy_state()
            outputs = {kind: np.full_like(value, 7.0) for kind, value in _outputs(P).items()}
            if not bits & _row_statistics.RH_CUDA_STATISTIC_SCORE:
                outputs = {}
            status, request = _call(lib, handle, X, yv, None, coefficients, bits, 1.345, 0.5,
                                    outputs)
            message = session.last_error()
            after = session.copy_state()
            problems = []
            if status != _abi.RH_CUDA_INVALID_ARGUMENT:
                problems.append(f"status {_abi.status_name(status)}, expected INVALID_ARGUMENT")
            if not message:
                problems.append("no last-error text")
            if any(np.any(value != 7.0) for value in outputs.values()):
                problems.append("an output was written")
            if not (np.array_equal(before.coefficients, after.coefficients)
                    and np.array_equal(before.information, after.information)
                    and before.n_samples_seen == after.n_samples_seen):
                problems.append("the committed state changed")
            results.append(CheckResult(
                "extension", f"row_statistics/refuses {name}", "FAIL" if problems else "PASS",
                detail="; ".join(problems), last_error=message))
        finally:
            session.close()
    return results


def extension_checks(engine, cases: list[GoldenCase], capabilities: Capabilities):
    """The extension checks of `engine` (see the module docstring)."""
    lib = getattr(engine, "lib", None)
    if not getattr(engine, "speaks_abi", False) or lib is None:
        return [CheckResult("extension", "row_statistics", "SKIP",
                            detail="not an ABI library: extensions are checked on engine "
                                   "libraries only")]
    if _row_statistics.lookup(lib) is None:
        return [CheckResult("extension", "row_statistics", "SKIP", detail=_ABSENT)]
    results = []
    for case in cases:
        reason = capabilities.missing_for(case.config["dtype"])
        if reason:
            results.append(CheckResult("extension", f"row_statistics/{case.qualified_id}",
                                       "SKIP", detail=reason))
        else:
            results.append(_case_check(engine, lib, case))
    if capabilities.missing_for("float64") is None:
        results.extend(_refusal_checks(engine, lib))
    return results
