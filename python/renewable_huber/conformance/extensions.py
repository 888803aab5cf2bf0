"""Checks of the ABI's optional extensions (today: row statistics, abi/rh_cuda_row_statistics.h).

An engine that does not export an extension is reported with one SKIP line saying it is absent
(absence is allowed: the extension is optional). One that exports it is checked on every
golden batch: the six sums at the batch's recorded coefficients, tau and bandwidth against the
NumPy reference's Huber pieces evaluated in float64 on the values the engine reads, within
ROW_STATISTICS_RTOL of the sums of the terms' absolute values (the scale a summation error is
bounded by) plus what the residuals' own rounding can move them by (reference_row_statistics);
and on a few refusals (INVALID_ARGUMENT, outputs untouched, committed state unchanged, on an
engine primed with one committed update).

The device call (version 2, rh_cuda_engine_row_statistics_device): an engine reporting version
1 gets one SKIP line; one reporting version >= 2 without the symbol FAILs. With device_input
false in the capabilities, the call on a primed engine with a valid request (host addresses,
which such an engine must refuse before reading) must return UNAVAILABLE with a message,
outputs untouched and state unchanged. With device_input true, and CuPy and the engine's CUDA
device usable in this process, every golden batch also goes through the device call on CuPy
copies of the same rows, held to the same reference and bound (not to the host call's bits),
plus two refusals: NaN in y (INVALID_ARGUMENT in the host call's words, RhCudaDeviceBatch in
place of RhCudaHostBatch) and a host address as x_design (INVALID_ARGUMENT); without CuPy or a
device, one SKIP line naming what is missing.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _abi, _row_statistics
from .._engine import batch_weight, host_address
from ..config import UpdateConfig
from ..core.huber import huber_loss, huber_score, smoothed_curvature
from ..core.rules import majoriser_weights
from .capabilities import Capabilities
from .corpus import GoldenCase
from .negative import _state_bytes
from .report import CheckResult
from .session import EngineCallFailed

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


def _preset(request, preset: float | None) -> None:
    """Preset the request's scalar outputs (a refusal must leave them as they were)."""
    if preset is not None:
        request.loss = preset
        request.weighted_norm = preset


def _call(lib, handle, design, y, w, beta, bits, tau, bandwidth, outputs, preset=None):
    """The raw host call (its status, not an exception: the kit reports it) and its request."""
    batch, request = _row_statistics.request(design, y, w, beta, bits, tau, bandwidth, outputs)
    _preset(request, preset)
    status = lib.rh_cuda_engine_row_statistics(handle, ctypes.byref(batch), ctypes.byref(request))
    return status, request


class _DeviceCall:
    """The raw device call over CuPy copies of host rows: C-contiguous, the rows' dtype (the
    engine's), on the engine's device, the copies complete (device synchronised) and then
    borrowed through DLPack on the engine's stream by the binding's borrowed_device_request
    (as compute_device borrows them). host_x_design passes the host design's address as
    x_design instead (a refusal)."""

    def __init__(self, cupy, lib, device_id: int):
        self.cupy = cupy
        self.lib = lib
        self.device_id = device_id

    def copy(self, values):
        cupy = self.cupy
        with cupy.cuda.Device(self.device_id):
            copy = cupy.array(values, dtype=values.dtype, order="C")
        return copy

    def __call__(self, session, design, y, w, beta, bits, tau, bandwidth, outputs, preset=None,
                 host_x_design=False):
        stream = session.engine.stream()
        n_rows = design.shape[0]
        on_device = [self.copy(design), self.copy(y), None if w is None else self.copy(w)]
        self.cupy.cuda.Device(self.device_id).synchronize()
        with self.cupy.cuda.Device(self.device_id), _row_statistics.borrowed_device_request(
            *on_device, batch_weight(w, n_rows), device_id=self.device_id, stream=stream,
            dtype=design.dtype, beta=beta, bits=bits, tau=tau, bandwidth=bandwidth,
            outputs=outputs,
        ) as (batch, request, _):
            if host_x_design:
                batch.x_design = host_address(design)
            _preset(request, preset)
            status = self.lib.rh_cuda_engine_row_statistics_device(
                session.handle, ctypes.byref(batch), ctypes.byref(request))
        return status, request


def _outputs(P: int) -> dict:
    return {"score": np.zeros(P), "curvature": np.zeros((P, P)), "majoriser": np.zeros((P, P)),
            "meat": np.zeros((P, P))}


def _design(case: GoldenCase, X) -> np.ndarray:
    X = np.asarray(X, dtype=case.dtype)
    if case.fit_intercept:
        X = np.concatenate([X, np.ones((X.shape[0], 1), dtype=case.dtype)], axis=1)
    return np.ascontiguousarray(X)


def _worst(got: dict, design, y, w, beta, tau: float, bandwidth: float) -> tuple[float, str]:
    """The largest error over its bound among the six sums, and the kind where it is."""
    expected, scales, allowances = reference_row_statistics(design, y, w, beta, tau, bandwidth)
    worst, where = 0.0, ""
    for kind in KINDS:
        error = np.abs(np.asarray(got[kind]) - expected[kind])
        bound = (ROW_STATISTICS_RTOL * np.asarray(scales[kind])
                 + np.asarray(allowances[kind]) + 1e-300)
        ratio = float(np.max(error / bound))
        if not ratio <= worst:
            worst, where = ratio, kind
    return worst, where


def _case_check(engine, case: GoldenCase, check_id: str, call) -> CheckResult:
    """Every batch of `case` through `call` (_call's signature after lib, with the session in
    place of the handle), each sum held to the reference within its bound."""
    P = case.n_parameters
    session = engine.open(case.dtype, P)
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
            status, request = call(session, design, y, w, beta,
                                   _row_statistics.RH_CUDA_STATISTIC_ALL, tau, state.bandwidth,
                                   outputs)
            if status != _abi.RH_CUDA_SUCCESS:
                return CheckResult("extension", check_id, "FAIL",
                                   detail=f"batch {k}: status {_abi.status_name(status)}",
                                   last_error=session.last_error())
            got = {"loss": request.loss, "norm": request.weighted_norm, **outputs}
            ratio, kind = _worst(got, design, y, w, beta, tau, state.bandwidth)
            if not ratio <= worst:
                worst, where = ratio, f"batch {k} {kind}"
        outcome = "PASS" if worst <= 1.0 else "FAIL"
        return CheckResult("extension", check_id, outcome, worst=worst,
                           detail="" if outcome == "PASS" else f"worst at {where}")
    finally:
        session.close()


def _host_call(lib):
    def call(session, *arguments, **options):
        return _call(lib, session.handle, *arguments, **options)
    return call


# The refusals' rows: P = 3 columns, no intercept; the engine is primed with one update of them
# first, so that a refusal that touched the committed state would show.
_REFUSAL_ROWS = 20
_REFUSAL_P = 3
_SENTINEL = 7.0


def _refusal_data(dtype):
    rng = np.random.default_rng(0)
    design = np.ascontiguousarray(rng.normal(size=(_REFUSAL_ROWS, _REFUSAL_P)), dtype=dtype)
    y = np.ascontiguousarray(rng.normal(size=_REFUSAL_ROWS), dtype=dtype)
    return design, y, np.zeros(_REFUSAL_P, dtype=dtype)


def _primed_session(engine, dtype, design, y):
    """An engine of P = design's columns with one committed update of (design, y)."""
    config = UpdateConfig(n_features_in=design.shape[1], fit_intercept=False, tau=1.345,
                          bandwidth_scale=1.0, tol=1e-8, ridge=1e-8, max_iter=100,
                          penalty="none", lambda_scale=1.0)
    session = engine.open(np.dtype(dtype), design.shape[1])
    try:
        session.update(design, y, None, config, append_intercept=False)
    except BaseException:
        session.close()
        raise
    return session


def _on_primed_engine(engine, dtype, design, y, check_id: str, check) -> CheckResult:
    """check(session, committed state before) on a _primed_session, closed afterwards whatever
    happens; the FAIL line when priming failed."""
    try:
        session = _primed_session(engine, dtype, design, y)
    except EngineCallFailed as failure:
        return CheckResult("extension", check_id, "FAIL", detail=str(failure),
                           last_error=failure.message)
    try:
        return check(session, session.copy_state())
    finally:
        session.close()


def _sentinel_outputs(P: int, bits: int) -> dict:
    if not bits & _row_statistics.RH_CUDA_STATISTIC_SCORE:
        return {}
    return {kind: np.full_like(value, _SENTINEL) for kind, value in _outputs(P).items()}


def _untouched(request, outputs: dict) -> bool:
    return (request.loss == _SENTINEL and request.weighted_norm == _SENTINEL
            and all(np.all(value == _SENTINEL) for value in outputs.values()))


def _refusal_problems(status, expected: int, message: str, written: bool, before,
                      after) -> list[str]:
    problems = []
    if status != expected:
        problems.append(f"status {_abi.status_name(status)}, expected "
                        f"{_abi.status_name(expected)}")
    if not message:
        problems.append("no last-error text")
    if written:
        problems.append("an output was written")
    if _state_bytes(before) != _state_bytes(after):
        problems.append("the committed state changed")
    return problems


def _refusal_checks(engine, lib) -> list[CheckResult]:
    """A few refusals through the host call on a primed engine: INVALID_ARGUMENT, outputs
    untouched, committed state unchanged (the C tests of each engine cover every refusal)."""
    design, y, beta = _refusal_data(np.float64)
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

    def refusal(check_id, X, yv, coefficients, bits):
        def check(session, before):
            outputs = _sentinel_outputs(_REFUSAL_P, bits)
            status, request = _call(lib, session.handle, X, yv, None, coefficients, bits, 1.345,
                                    0.5, outputs, preset=_SENTINEL)
            message = session.last_error()
            problems = _refusal_problems(status, _abi.RH_CUDA_INVALID_ARGUMENT, message,
                                         not _untouched(request, outputs), before,
                                         session.copy_state())
            return CheckResult("extension", check_id, "FAIL" if problems else "PASS",
                               detail="; ".join(problems), last_error=message)
        return _on_primed_engine(engine, np.float64, design, y, check_id, check)

    return [refusal(f"row_statistics/refuses {name}", X, yv, coefficients, bits)
            for name, X, yv, coefficients, bits in cases]


# ------------------------------------------------------------------ the device call (version 2)

_DEVICE = "row_statistics/device"


def _unavailable_check(engine, lib, dtype_name: str) -> CheckResult:
    """An engine without device input must refuse the device call with UNAVAILABLE before it
    reads anything: a valid request whose batch holds host addresses (which such an engine
    must never dereference) on a primed engine; outputs untouched, committed state unchanged."""
    check_id = f"{_DEVICE} unavailable[{dtype_name}]"
    design, y, beta = _refusal_data(np.dtype(dtype_name))

    def check(session, before):
        bits = _row_statistics.RH_CUDA_STATISTIC_ALL
        outputs = _sentinel_outputs(_REFUSAL_P, bits)
        batch, request = _row_statistics.device_request(
            host_address(design), host_address(y), None, _REFUSAL_ROWS, _REFUSAL_P,
            float(_REFUSAL_ROWS), beta, bits, 1.345, 0.5, outputs)
        _preset(request, _SENTINEL)
        status = lib.rh_cuda_engine_row_statistics_device(session.handle, ctypes.byref(batch),
                                                          ctypes.byref(request))
        message = session.last_error()
        problems = _refusal_problems(status, _abi.RH_CUDA_UNAVAILABLE, message,
                                     not _untouched(request, outputs), before,
                                     session.copy_state())
        if problems:
            return CheckResult("extension", check_id, "FAIL", detail="; ".join(problems),
                               last_error=message)
        return CheckResult("extension", check_id, "PASS",
                           detail=f"{_abi.status_name(status)}: {message}")

    return _on_primed_engine(engine, np.dtype(dtype_name), design, y, check_id, check)


def device_requirements(device_id: int):
    """(cupy, None) when CuPy imports and the engine's device is one of its CUDA devices, else
    (None, what is missing)."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a CuPy that cannot load its CUDA libraries
        missing = [f"CuPy (import cupy: {type(error).__name__}: {error})"]
        if device_id < 0:
            missing.append(f"a CUDA device (the engine runs on device_id {device_id}, the host)")
        return None, "; ".join(missing)
    if device_id < 0:
        return None, f"a CUDA device (the engine runs on device_id {device_id}, the host)"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as error:
        return None, f"a CUDA device CuPy can use ({type(error).__name__}: {error})"
    if device_id >= count:
        return None, (f"CUDA device {device_id} (the engine's) in CuPy, which sees {count} "
                      "device(s)")
    return cupy, None


def _owner_swapped(host_message: str) -> str:
    """The device call's expected text: the host call's with the batch struct's name swapped."""
    return host_message.replace("RhCudaHostBatch", "RhCudaDeviceBatch")


def _device_refusal_checks(engine, lib, device_call: _DeviceCall) -> list[CheckResult]:
    """The device call's refusals on a primed float64 engine: NaN in y in device memory is
    INVALID_ARGUMENT in the host call's words (the struct's name aside), a host address as
    x_design is INVALID_ARGUMENT; outputs untouched and the committed state unchanged."""
    design, y, beta = _refusal_data(np.float64)
    bad_y = y.copy()
    bad_y[4] = np.nan
    bits = _row_statistics.RH_CUDA_STATISTIC_ALL

    def refusal(name, rows, host_x):
        check_id = f"{_DEVICE} refuses {name}"

        def check(session, before):
            problems = []
            if name == "NaN in y":
                host_outputs = _sentinel_outputs(_REFUSAL_P, bits)
                host_status, _ = _call(lib, session.handle, design, rows, None, beta, bits,
                                       1.345, 0.5, host_outputs, preset=_SENTINEL)
                host_message = session.last_error()
                if host_status != _abi.RH_CUDA_INVALID_ARGUMENT:
                    problems.append(f"the host call returned {_abi.status_name(host_status)}, "
                                    "expected INVALID_ARGUMENT")
            outputs = _sentinel_outputs(_REFUSAL_P, bits)
            try:
                status, request = device_call(session, design, rows, None, beta, bits, 1.345,
                                              0.5, outputs, preset=_SENTINEL,
                                              host_x_design=host_x)
            except Exception as error:  # the kit's own transport (CuPy, DLPack): report it
                return CheckResult("extension", check_id, "FAIL",
                                   detail=f"{type(error).__name__}: {error}")
            message = session.last_error()
            problems += _refusal_problems(status, _abi.RH_CUDA_INVALID_ARGUMENT, message,
                                          not _untouched(request, outputs), before,
                                          session.copy_state())
            if name == "NaN in y" and message != _owner_swapped(host_message):
                problems.append(
                    "the device call's last error is not the host call's with RhCudaHostBatch "
                    f'read RhCudaDeviceBatch (host call: "{host_message}")')
            return CheckResult("extension", check_id, "FAIL" if problems else "PASS",
                               detail="; ".join(problems), last_error=message)

        return _on_primed_engine(engine, np.float64, design, y, check_id, check)

    return [refusal(name, rows, host_x)
            for name, rows, host_x in (("NaN in y", bad_y, False), ("host x_design", y, True))]


def _device_case_check(engine, case: GoldenCase, device_call: _DeviceCall) -> CheckResult:
    check_id = f"{_DEVICE}/{case.qualified_id}"
    try:
        return _case_check(engine, case, check_id, device_call)
    except EngineCallFailed as failure:
        return CheckResult("extension", check_id, "FAIL", detail=str(failure),
                           last_error=failure.message)
    except Exception as error:  # the kit's own transport (CuPy, DLPack): report it, go on
        return CheckResult("extension", check_id, "FAIL",
                           detail=f"{type(error).__name__}: {error}")


def device_call_checks(engine, lib, cases: list[GoldenCase],
                       capabilities: Capabilities) -> list[CheckResult]:
    """The checks of rh_cuda_engine_row_statistics_device (version 2) of an engine that has
    the extension: see the module docstring."""
    version = _row_statistics.extension_version(lib)
    if version < _row_statistics.DEVICE_CALL_VERSION:
        return [CheckResult("extension", _DEVICE, "SKIP",
                            detail=f"device call: extension version {version} "
                                   f"({_row_statistics.DEVICE_CALL} came with version "
                                   f"{_row_statistics.DEVICE_CALL_VERSION})")]
    if not _row_statistics.has_device_call(lib):
        return [CheckResult("extension", _DEVICE, "FAIL",
                            detail=f"the engine reports extension version {version} but does "
                                   f"not export {_row_statistics.DEVICE_CALL} (version "
                                   f"{_row_statistics.DEVICE_CALL_VERSION} added it)")]
    if not capabilities.device_input:
        return [_unavailable_check(engine, lib, dtype_name)
                for dtype_name in ("float64", "float32")
                if capabilities.missing_for(dtype_name) is None]
    device_id = int(getattr(engine, "device_id", -1))
    cupy, missing = device_requirements(device_id)
    if cupy is None:
        return [CheckResult("extension", _DEVICE, "SKIP",
                            detail=f"device_input is declared, but this process lacks {missing}: "
                                   f"{_row_statistics.DEVICE_CALL} not run")]
    device_call = _DeviceCall(cupy, lib, device_id)
    results = []
    for case in cases:
        reason = capabilities.missing_for(case.config["dtype"])
        if reason:
            results.append(CheckResult("extension", f"{_DEVICE}/{case.qualified_id}", "SKIP",
                                       detail=reason))
        else:
            results.append(_device_case_check(engine, case, device_call))
    if capabilities.missing_for("float64") is None:
        results.extend(_device_refusal_checks(engine, lib, device_call))
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
    host_call = _host_call(lib)
    for case in cases:
        reason = capabilities.missing_for(case.config["dtype"])
        if reason:
            results.append(CheckResult("extension", f"row_statistics/{case.qualified_id}",
                                       "SKIP", detail=reason))
        else:
            results.append(_case_check(engine, case, f"row_statistics/{case.qualified_id}",
                                       host_call))
    if capabilities.missing_for("float64") is None:
        results.extend(_refusal_checks(engine, lib))
    results.extend(device_call_checks(engine, lib, cases, capabilities))
    return results
