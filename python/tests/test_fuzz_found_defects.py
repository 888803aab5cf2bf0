"""Rules the fuzzers found missing, on every engine (issue: reliability evidence).

K2, bandwidth underflow: h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau) must be a
positive normal double at the batch's cumulative weight N. A bandwidth_scale like 1e-300 against
a large N gave h = 0 (or subnormal) and an update on an infinite curvature slope; every engine
now refuses such a batch with ValidationError before any work, the fitted state untouched.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor, backends
from renewable_huber.core import rules
from renewable_huber.exceptions import ValidationError

ENGINES = ["numpy", "native_cpu", "native_cuda"]


def _available(engine: str, request) -> None:
    if engine == "native_cpu":
        request.getfixturevalue("cpu_library")  # skips with the reason when there is none
    reason = backends.unavailable_reason(engine)
    if reason is not None:
        pytest.skip(f"{engine} unavailable here: {reason}")


def _data(n=40, p=3, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X @ np.array([0.5, -1.0, 2.0]) + 0.25 + 0.3 * rng.standard_normal(n)
    return X, y


def test_the_least_bandwidth_is_the_least_positive_normal_double():
    assert rules.MIN_BANDWIDTH == sys.float_info.min == 2.2250738585072014e-308


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bandwidth_below_the_normal_range_is_refused_and_the_fit_kept(engine, request):
    _available(engine, request)
    X, y = _data()
    model = RenewableHuberRegressor(backend=engine, bandwidth_scale=1e-300)
    # N = 40, p = 3: h = 1e-300 / (sqrt(40) ln 3) = 1.44e-301, a normal number: accepted
    model.partial_fit(X, y)
    assert model.diagnostics_["bandwidth"] == pytest.approx(1e-300 / (np.sqrt(40) * np.log(3)))
    coef, intercept, seen = model.coef_.copy(), model.intercept_, model.n_samples_seen_
    # N = 40 + 40e15: h = 1e-300 / (2.0e8 * 1.0986) = 4.5e-309, subnormal: refused
    with pytest.raises(ValidationError, match=r"bandwidth h = min\(.*must be a positive normal"):
        model.partial_fit(X, y, sample_weight=np.full(40, 1e15))
    assert np.array_equal(model.coef_, coef) and model.intercept_ == intercept
    assert model.n_samples_seen_ == seen
    # the stream goes on with a usable batch
    model.partial_fit(X, y)
    assert model.n_samples_seen_ == 80


@pytest.mark.parametrize("engine", ENGINES)
def test_a_zero_bandwidth_is_refused_on_the_first_batch(engine, request):
    _available(engine, request)
    X, y = _data()
    # h = 5e-324 / (sqrt(40) ln 3) rounds to 0
    model = RenewableHuberRegressor(backend=engine, bandwidth_scale=5e-324)
    with pytest.raises(ValidationError, match="bandwidth h = min"):
        model.partial_fit(X, y)
    assert not hasattr(model, "coef_")
