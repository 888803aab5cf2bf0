"""RenewableState and Diagnostics are frozen dataclasses whose __init__ is written by hand (one
dictionary update instead of one object.__setattr__ per field): it must stay the __init__ the
dataclass would generate, and the instances must stay frozen."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import numpy as np
import pytest

from renewable_huber.diagnostics import Diagnostics
from renewable_huber.state import RenewableState


@pytest.mark.parametrize("cls", [RenewableState, Diagnostics])
def test_init_takes_exactly_the_fields_in_order_with_their_defaults(cls):
    parameters = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, field in zip(parameters, fields, strict=True):
        assert parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        missing = field.default is dataclasses.MISSING
        expected = inspect.Parameter.empty if missing else field.default
        assert parameter.default == expected, field.name
    assert not hasattr(cls, "__post_init__")


def _state(**changes):
    values = dict(coefficients=np.arange(2.0), information=np.eye(2), n_samples_seen=5,
                  batch_count=2, previous_lambda=0.5, weight_sum=4.5)
    values.update(changes)
    return RenewableState(**values)


def test_state_fields_defaults_and_frozenness():
    state = _state()
    assert (state.n_samples_seen, state.batch_count, state.previous_lambda, state.weight_sum) == (
        5, 2, 0.5, 4.5)
    assert vars(state).keys() == {f.name for f in dataclasses.fields(RenewableState)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.batch_count = 3
    bare = RenewableState(np.zeros(1), np.zeros((1, 1)))
    assert (bare.n_samples_seen, bare.batch_count, bare.previous_lambda, bare.weight_sum) == (
        0, 0, 0.0, 0.0)
    with pytest.raises(TypeError, match="information"):
        RenewableState(coefficients=np.zeros(1))


def test_state_copy_replace_and_pickle_keep_every_field():
    state = _state()
    copied = state.copy()
    assert copied.coefficients is not state.coefficients
    np.testing.assert_array_equal(copied.information, state.information)
    assert copied.weight_sum == state.weight_sum and copied.batch_count == state.batch_count
    replaced = dataclasses.replace(state, batch_count=9)
    assert replaced.batch_count == 9 and replaced.weight_sum == 4.5
    restored = pickle.loads(pickle.dumps(state))
    np.testing.assert_array_equal(restored.coefficients, state.coefficients)
    assert restored.previous_lambda == 0.5
    assert "RenewableState(coefficients=array([0., 1.])" in repr(state)


def test_diagnostics_equality_repr_dict_and_frozenness():
    diagnostics = Diagnostics(3, True, 1.5, 0.0, 0.25)
    assert diagnostics == Diagnostics(iterations=3, converged=True, objective=1.5,
                                      lambda_value=0.0, bandwidth=0.25,
                                      used_regularized_fallback=False)
    assert hash(diagnostics) == hash(Diagnostics(3, True, 1.5, 0.0, 0.25, False))
    assert diagnostics.as_dict() == {
        "iterations": 3, "converged": True, "objective": 1.5, "lambda_value": 0.0,
        "bandwidth": 0.25, "used_regularized_fallback": False,
    }
    assert repr(diagnostics) == (
        "Diagnostics(iterations=3, converged=True, objective=1.5, lambda_value=0.0, "
        "bandwidth=0.25, used_regularized_fallback=False)"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        diagnostics.iterations = 4


def test_diagnostics_from_fields_gives_plain_values():
    class Source:
        iterations = np.int64(7)
        converged = np.int32(1)
        objective = np.float32(0.5)
        lambda_value = 0
        bandwidth = np.float64(0.125)
        used_regularized_fallback = 0

    diagnostics = Diagnostics.from_fields(Source)
    assert diagnostics == Diagnostics(7, True, 0.5, 0.0, 0.125, False)
    assert [type(v) for v in vars(diagnostics).values()] == [int, bool, float, float, float, bool]
