"""The grammar of refused data values (docs/abi.md, "Refused data values"): the one parser
(renewable_huber._engine_messages) on hand-written texts, and on every such refusal librh_cpu
writes (through rh_refuse_value, the writer librh_cuda shares)."""

from __future__ import annotations

import numpy as np
import pytest

from renewable_huber._engine_messages import KINDS, RefusedValue, parse_refused_value
from renewable_huber.backends.native import NativeBackend
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import ValidationError
from renewable_huber.state import RenewableState


@pytest.mark.parametrize(("text", "expected"), [
    ("RhCudaHostBatch.x_design[3, 1] is nan: values must be finite",
     RefusedValue("RhCudaHostBatch", "x_design", (3, 1), "nan")),
    ("RhCudaDeviceBatch.y[5] is -inf: values must be finite",
     RefusedValue("RhCudaDeviceBatch", "y", (5,), "-inf")),
    ("RhCudaHostBatch.sample_weight[0] is negative: values must be >= 0 (this one is -1)",
     RefusedValue("RhCudaHostBatch", "sample_weight", (0,), "negative")),
    ("RhCudaHostStateView.meat[10, 2] is inf: whatever prose, even with x[1] is nan: in it",
     RefusedValue("RhCudaHostStateView", "meat", (10, 2), "inf")),
    ("RhCudaPrediction.x_design[9223372036854775807, 0] is inf: ",
     RefusedValue("RhCudaPrediction", "x_design", (9223372036854775807, 0), "inf")),
])
def test_the_prefix_is_read_and_the_prose_ignored(text, expected):
    assert parse_refused_value(text) == expected
    assert expected.kind in KINDS
    assert expected.non_finite == (expected.kind != "negative")


@pytest.mark.parametrize("text", [
    None,
    "",
    "RhCudaUpdateConfig.tau is -1: must be finite and > 0",
    "RhCudaHostBatch.batch_weight is 3 but sample_weight sums to 4",
    # librh_cuda's wording before the shared grammar: prose, not a refusal any more
    "RhCudaDeviceBatch.x_design has a non-finite value at row 3, column 1",
    # the value instead of a kind, as librh_cpu wrote negative weights and signed NaNs
    "RhCudaHostBatch.sample_weight[5] is -0.5: weights must be >= 0",
    "RhCudaHostBatch.y[5] is -nan: values must be finite",
    "RhCudaPrediction.x_design[2, 1] is not finite",
    # the prefix must open the text, with its exact spacing and decimal indices
    "batch 3: RhCudaHostBatch.y[5] is nan: values must be finite",
    "RhCudaHostBatch.y[05] is nan: values must be finite",
    "RhCudaHostBatch.y[-1] is nan: values must be finite",
    "RhCudaHostBatch.x_design[3,1] is nan: values must be finite",
    "RhCudaHostBatch.y[5] is nan values must be finite",
    "RhCudaHostBatch.y[5] is NaN: values must be finite",
    "RhCudaHostBatch.y[1, 2, 3] is nan: values must be finite",
])
def test_anything_else_is_prose(text):
    assert parse_refused_value(text) is None


def test_where_reads_as_the_package_messages():
    assert RefusedValue("RhCudaHostBatch", "x_design", (3, 1), "nan").where() == "row 3, column 1"
    assert RefusedValue("RhCudaHostBatch", "y", (7,), "inf").where() == "index 7"


# ------------------------------------------------------------- what librh_cpu actually writes
P = 3


def _config() -> UpdateConfig:
    return UpdateConfig(n_features_in=P, fit_intercept=True, tau=1.345, bandwidth_scale=1.0,
                        tol=1e-6, ridge=1e-8, max_iter=100, penalty="none", lambda_scale=1.0)


def _batch(n=30, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, P))
    return X, X @ np.array([1.0, -0.5, 0.25]) + rng.normal(size=n)


@pytest.fixture
def fitted(cpu_library):
    backend = NativeBackend("native_cpu", dtype=np.float64, n_parameters=P + 1)
    backend.update(*_batch(60, 1), None, _config())
    yield backend
    backend.close()


def _engine_refusal(call) -> RefusedValue:
    with pytest.raises(ValidationError) as caught:
        call()
    refused = parse_refused_value(caught.value.engine_message)
    assert refused is not None, caught.value.engine_message
    return refused


@pytest.mark.parametrize("value", [np.nan, -np.nan, np.inf, -np.inf])
def test_librh_cpu_batch_refusals_follow_the_grammar(fitted, value):
    kind = "nan" if np.isnan(value) else str(value)
    X, y = _batch()
    X[4, 2] = value
    assert _engine_refusal(lambda: fitted.update(X, y, None, _config())) == RefusedValue(
        "RhCudaHostBatch", "x_design", (4, 2), kind)
    X, y = _batch()
    y[9] = value
    assert _engine_refusal(lambda: fitted.update(X, y, None, _config())) == RefusedValue(
        "RhCudaHostBatch", "y", (9,), kind)
    X, y = _batch()
    with pytest.raises(ValidationError) as caught:
        fitted.predict(np.where(np.arange(3 * P).reshape(3, P) == 5, value, 1.0))
    assert parse_refused_value(caught.value.engine_message) == RefusedValue(
        "RhCudaPrediction", "x_design", (1, 2), kind)


def test_librh_cpu_negative_weight_and_state_refusals_follow_the_grammar(fitted):
    X, y = _batch()
    weights = np.ones(len(y))
    weights[6] = -0.25
    refused = _engine_refusal(lambda: fitted.update(X, y, weights, _config()))
    assert refused == RefusedValue("RhCudaHostBatch", "sample_weight", (6,), "negative")
    state = fitted.state()
    fields = {name: getattr(state, name) for name in (
        "coefficients", "information", "n_samples_seen", "batch_count", "previous_lambda",
        "weight_sum", "meat")}
    meat = np.array(state.meat, copy=True)
    meat[1, 1] = -2.0
    refused = _engine_refusal(lambda: fitted.restore(RenewableState(**{**fields, "meat": meat})))
    assert refused == RefusedValue("RhCudaHostStateView", "meat", (1, 1), "negative")
    meat[1, 1] = np.inf
    meat[0, 3] = np.nan
    refused = _engine_refusal(lambda: fitted.restore(RenewableState(**{**fields, "meat": meat})))
    assert refused == RefusedValue("RhCudaHostStateView", "meat", (0, 3), "nan")
