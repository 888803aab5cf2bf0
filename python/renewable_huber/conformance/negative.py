"""Negative cases (conformance/negative_cases.json): calls every engine must refuse.

Each case starts from a primed engine (one valid update of the fixture batch committed), builds
a fully valid call, applies the case's mutations, and then requires: a status from the case's
list, a non-empty last-error text, and a committed state byte-for-byte unchanged (copy_state
before and after). engine_create cases instead require *out_engine to be reset to NULL.
"""

from __future__ import annotations

import ctypes
import json
import math
from pathlib import Path

import numpy as np

from .. import _abi
from .._engine import StateLanding, engine_options, host_address, state_view
from ..exceptions import ValidationError
from ..state import RenewableState, counters_of
from .abi_engine import AbiSession
from .capabilities import Capabilities
from .corpus import data_file
from .report import CheckResult
from .session import EngineCallFailed

SCHEMA_NAME = "renewable-huber-negative-cases"
CALLS = (
    "engine_create",
    "update_host_with_state",
    "update_host",
    "update_device_with_state",
    "restore",
    "predict",
    "copy_state",
)
_SPECIAL_VALUES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# Distinct from NULL and from any real handle, so an engine that forgets to reset *out_engine
# on failure is caught.
_SENTINEL_HANDLE = 0x1


def default_negative_cases_path() -> Path:
    return data_file("conformance/negative_cases.json")


def load_negative_cases(path: str | Path) -> dict:
    path = Path(path)
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if document.get("schema") != SCHEMA_NAME or document.get("schema_version") != 1:
        raise ValidationError(f"negative cases {path}: schema must be {SCHEMA_NAME!r} version 1")
    for case in document["cases"]:
        if case["call"] not in CALLS:
            raise ValidationError(
                f"negative case {case['id']!r}: call {case['call']!r} is not one of {CALLS}"
            )
        for status in case["expect_status"]:
            if not isinstance(getattr(_abi, status, None), int) or not status.startswith(
                "RH_CUDA_"
            ):
                raise ValidationError(f"negative case {case['id']!r}: unknown status {status!r}")
    return document


def _value(raw):
    return _SPECIAL_VALUES.get(raw, raw) if isinstance(raw, str) else raw


class _Call:
    """A valid call of one ABI function against a primed engine, open to mutation."""

    def __init__(self, session: AbiSession, fixture: dict, dtype: np.dtype):
        self.session = session
        lib_dtype = np.dtype(dtype)
        X = np.asarray(fixture["X"], dtype=lib_dtype)
        probe = np.asarray(fixture["probe_X"], dtype=lib_dtype)
        if fixture["fit_intercept"]:
            X = np.column_stack([X, np.ones(X.shape[0], dtype=lib_dtype)])
            probe = np.column_stack([probe, np.ones(probe.shape[0], dtype=lib_dtype)])
        state = session.copy_state()
        self.arrays = {
            "X": np.ascontiguousarray(X),
            "y": np.ascontiguousarray(np.asarray(fixture["y"], dtype=lib_dtype)),
            "sample_weight": np.ascontiguousarray(
                np.asarray(fixture["sample_weight"], dtype=lib_dtype)
            ),
            "probe_X": np.ascontiguousarray(probe),
            "prediction": np.zeros(probe.shape[0], dtype=lib_dtype),
            "coefficients": np.ascontiguousarray(state.coefficients),
            "information": np.ascontiguousarray(state.information),
        }
        a = self.arrays
        n_features_in = len(fixture["X"][0])
        config = dict(fixture["config"])
        config["penalty"] = getattr(_abi, config["penalty"])
        self.out_state = StateLanding(session.n_parameters, lib_dtype)
        # The view points at self.arrays' coefficients and information (data mutations reach
        # it); no K, as a caller restoring an older checkpoint would.
        view, _ = state_view(
            RenewableState(a["coefficients"], a["information"], *counters_of(state)),
            lib_dtype,
            session.n_parameters,
        )
        batch_fields = dict(
            x_design=host_address(a["X"]),
            y=host_address(a["y"]),
            sample_weight=host_address(a["sample_weight"]),
            n_rows=a["X"].shape[0],
            n_columns=a["X"].shape[1],
            batch_weight=float(np.sum(a["sample_weight"], dtype=np.float64)),
        )
        self.structs = {
            "options": engine_options(lib_dtype, session.n_parameters, session.device_id),
            "config": _abi.make(
                _abi.RhCudaUpdateConfig, n_features_in=n_features_in, reserved0=0, **config
            ),
            "batch": _abi.make(_abi.RhCudaHostBatch, **batch_fields),
            "device_batch": _abi.make(_abi.RhCudaDeviceBatch, **batch_fields),
            "diagnostics": _abi.make(_abi.RhCudaDiagnostics),
            "state": self.out_state.struct,
            "view": view,
            "prediction": _abi.make(
                _abi.RhCudaPrediction,
                x_design=host_address(a["probe_X"]),
                prediction=host_address(a["prediction"]),
                n_rows=a["probe_X"].shape[0],
                n_columns=a["probe_X"].shape[1],
                n_features_in=n_features_in,
                input_location=_abi.RH_CUDA_MEMORY_HOST,
                reserved0=0,
            ),
        }
        self.null_arguments: set[str] = set()
        self.out_engine = ctypes.c_void_p(_SENTINEL_HANDLE)

    def mutate(self, call: str, mutation: dict) -> None:
        kind, _, name = mutation["target"].partition(".")
        value = _value(mutation.get("set"))
        if kind == "argument":
            if value is not None:
                raise ValidationError(f"argument mutations can only set NULL, got {mutation}")
            self.null_arguments.add(name)
        elif kind == "data":
            self.arrays[name][tuple(mutation["index"])] = value
        else:
            if kind == "batch" and call == "update_device_with_state":
                kind = "device_batch"
            struct = self.structs[kind]
            if "add" in mutation:
                value = getattr(struct, name) + mutation["add"]
            setattr(struct, name, value)

    def _ref(self, name: str, struct_name: str | None = None):
        if name in self.null_arguments:
            return None
        return ctypes.byref(self.structs[struct_name or name])

    def invoke(self, call: str) -> int:
        lib, handle = self.session.lib, self.session.handle
        if call == "engine_create":
            return lib.rh_cuda_engine_create(self._ref("options"), ctypes.byref(self.out_engine))
        if call == "restore":
            return lib.rh_cuda_engine_restore(handle, self._ref("view"))
        if call == "copy_state":
            return lib.rh_cuda_engine_copy_state(handle, self._ref("state"))
        if call == "predict":
            return lib.rh_cuda_engine_predict(handle, self._ref("prediction"))
        if call == "update_host":
            return lib.rh_cuda_engine_update_host(
                handle, self._ref("batch"), self._ref("config"), self._ref("diagnostics")
            )
        batch = self._ref(
            "batch", "device_batch" if call == "update_device_with_state" else "batch"
        )
        function = (
            lib.rh_cuda_engine_update_device_with_state
            if call == "update_device_with_state"
            else lib.rh_cuda_engine_update_host_with_state
        )
        return function(
            handle, batch, self._ref("config"), self._ref("diagnostics"), self._ref("state")
        )


def _state_bytes(state: RenewableState) -> tuple:
    return (
        state.coefficients.tobytes(),
        state.information.tobytes(),
        state.n_samples_seen,
        state.batch_count,
        float(state.previous_lambda).hex(),
        float(state.weight_sum).hex(),
    )


def _prime(session: AbiSession, fixture: dict, dtype: np.dtype) -> None:
    call = _Call(session, fixture, dtype)
    status = call.invoke("update_host_with_state")
    if status != _abi.RH_CUDA_SUCCESS:
        raise EngineCallFailed(
            "rh_cuda_engine_update_host_with_state (negative-case fixture)",
            _abi.status_name(status),
            session.last_error(),
        )


def _run_one(engine, case: dict, fixture: dict, dtype: np.dtype) -> CheckResult:
    name = f"{case['id']}[{dtype.name}]"
    try:
        session = engine.open(dtype, len(fixture["X"][0]) + int(fixture["fit_intercept"]))
    except EngineCallFailed as failure:
        return CheckResult(
            "negative", name, "FAIL", detail=str(failure), last_error=failure.message
        )
    try:
        _prime(session, fixture, dtype)
        call = _Call(session, fixture, dtype)
        for mutation in case["mutations"]:
            call.mutate(case["call"], mutation)
        before = _state_bytes(session.copy_state())
        status = call.invoke(case["call"])
        text = (
            _abi.last_error(session.lib)
            if case["call"] == "engine_create"
            else session.last_error()
        )
        if case["call"] == "engine_create" and status == _abi.RH_CUDA_SUCCESS:
            session.lib.rh_cuda_engine_destroy(call.out_engine)
        after = _state_bytes(session.copy_state())
    except EngineCallFailed as failure:
        return CheckResult(
            "negative", name, "FAIL", detail=str(failure), last_error=failure.message
        )
    finally:
        session.close()
    problems = []
    expected = [getattr(_abi, s) for s in case["expect_status"]]
    if status not in expected:
        wanted = " or ".join(_abi.status_name(s) for s in expected)
        problems.append(f"returned {_abi.status_name(status)}, expected {wanted}")
    if not text:
        problems.append("no last-error text after the failure")
    if before != after:
        problems.append("the committed state changed")
    if case["call"] == "engine_create" and call.out_engine.value is not None:
        problems.append("*out_engine was not reset to NULL")
    if problems:
        return CheckResult("negative", name, "FAIL", detail="; ".join(problems), last_error=text)
    return CheckResult("negative", name, "PASS", detail=f"{_abi.status_name(status)}: {text}")


def negative_checks(engine, document: dict, capabilities: Capabilities) -> list[CheckResult]:
    if not engine.speaks_abi:
        count = 2 * len(document["cases"])
        return [
            CheckResult(
                "negative",
                f"all {count} negative cases",
                "SKIP",
                detail="the engine is not driven through the ABI",
            )
        ]
    results = []
    for dtype_name in ("float64", "float32"):
        for case in document["cases"]:
            name = f"{case['id']}[{dtype_name}]"
            reason = capabilities.missing_for(dtype_name) or capabilities.unmet(
                case.get("requires", {})
            )
            if reason:
                results.append(CheckResult("negative", name, "SKIP", detail=reason))
            else:
                results.append(_run_one(engine, case, document["fixture"], np.dtype(dtype_name)))
    return results
