"""standardize=True: the features centred and scaled by the stream's first batch.

Expected values come from NumPy (the first batch's mean and standard deviation), from the
invariance of an unpenalised Huber fit under a change of feature units (the same fit with and
without standardisation), from the L1 problem's own optimality conditions in raw units, and
from the same stream resumed from a checkpoint or a pickle.
"""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renewable_huber import (
    ConvergenceWarning,
    FeatureScaleWarning,
    RenewableHuberRegressor,
    RenewableHuberWarning,
    ValidationError,
    suggest_tau,
)
from renewable_huber import checkpoint as checkpoint_module
from renewable_huber._feature_scaling import (
    FeatureScaling,
    column_moments,
    combine_moments,
)

# Columns in very different units and far from zero: scales 1, 1e3, 1e-2, 1e5.
SCALES = np.array([1.0, 1e3, 1e-2, 1e5])
OFFSETS = np.array([0.0, 5e3, -1.0, 1e6])
BETA = np.array([2.0, -3e-3, 40.0, 1e-5])


def raw_batches(n_batches=4, n=300, seed=0):
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(n_batches):
        X = OFFSETS + SCALES * rng.normal(size=(n, SCALES.size))
        y = X @ BETA + 50.0 + 2.0 * rng.standard_t(3, size=n)
        batches.append((X, y))
    return batches


def stream(model, batches):
    for X, y in batches:
        model.partial_fit(X, y)
    return model


def parameters(model):
    return np.append(model.coef_, model.intercept_)


def relative_error(a, b):
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


# -- the scaling a stream fixes ---------------------------------------------------------------


def test_the_first_batch_fixes_the_mean_and_standard_deviation_for_the_stream():
    batches = raw_batches()
    model = RenewableHuberRegressor(backend="numpy", standardize=True, tau="auto")
    model.partial_fit(*batches[0])
    first = model.state_dict()["feature_scaling"]
    np.testing.assert_allclose(first["center"], batches[0][0].mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(first["scale"], batches[0][0].std(axis=0), rtol=1e-12)
    stream(model, batches[1:])
    assert model.state_dict()["feature_scaling"] == first


def test_tau_auto_is_chosen_from_the_rows_as_given():
    X, y = raw_batches(1)[0]
    plain = RenewableHuberRegressor(backend="numpy", tau="auto").fit(X, y)
    scaled = RenewableHuberRegressor(backend="numpy", tau="auto", standardize=True).fit(X, y)
    assert scaled.tau_ == plain.tau_ == suggest_tau(X, y)


def test_weights_count_as_replicated_rows_in_the_scaling_and_the_fit():
    X, y = raw_batches(1, n=200, seed=3)[0]
    counts = np.random.default_rng(4).integers(0, 4, size=len(y))
    params = dict(backend="numpy", standardize=True, tau=5.0, tol=1e-10)
    weighted = RenewableHuberRegressor(**params).fit(X, y, sample_weight=counts.astype(float))
    replicated = RenewableHuberRegressor(**params).fit(np.repeat(X, counts, axis=0),
                                                       np.repeat(y, counts))
    a, b = (m.state_dict()["feature_scaling"] for m in (weighted, replicated))
    np.testing.assert_allclose(a["center"], b["center"], rtol=1e-13)
    np.testing.assert_allclose(a["scale"], b["scale"], rtol=1e-12)
    # The same problem summed in another order; the raw-unit map amplifies its rounding.
    assert relative_error(parameters(weighted), parameters(replicated)) <= 1e-8


def test_a_constant_column_keeps_scale_one_and_no_intercept_means_no_centring():
    X, y = raw_batches(1, n=100)[0]
    X[:, 2] = 7.25  # constant in the first batch
    model = RenewableHuberRegressor(backend="numpy", standardize=True, tau="auto").fit(X, y)
    scaling = model.state_dict()["feature_scaling"]
    assert scaling["scale"][2] == 1.0 and scaling["center"][2] == 7.25
    no_intercept = RenewableHuberRegressor(backend="numpy", standardize=True, tau="auto",
                                           fit_intercept=False).fit(X, y)
    scaling = no_intercept.state_dict()["feature_scaling"]
    assert scaling["center"] == [0.0] * 4
    np.testing.assert_allclose(scaling["scale"], np.sqrt(np.mean(X * X, axis=0)), rtol=1e-12)


# -- raw units out ------------------------------------------------------------------------------


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_coefficients_are_in_raw_units_and_predict_with_raw_rows(engine, penalty):
    batches = raw_batches()
    model = stream(RenewableHuberRegressor(standardize=True, tau="auto", penalty=penalty,
                                           **engine), batches)
    X, y = raw_batches(1, seed=9)[0]
    expected = X @ model.coef_ + model.intercept_
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-10,
                               atol=1e-12 * np.abs(expected).max())
    residual = y - expected
    assert model.score(X, y) == pytest.approx(
        1 - residual @ residual / np.sum((y - y.mean()) ** 2), rel=1e-9)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_without_a_penalty_standardising_is_a_reparametrisation(engine, fit_intercept):
    """An unpenalised Huber fit does not depend on the features' units: the stream with and
    without standardisation is the same fit, its covariance too (tight tol on both)."""
    batches = raw_batches()
    params = dict(tau=5.0, tol=1e-10, inference=True, fit_intercept=fit_intercept, **engine)
    plain = stream(RenewableHuberRegressor(**params), batches)
    scaled = stream(RenewableHuberRegressor(standardize=True, **params), batches)
    # Rounding in the raw-unit solves (offsets 1e6, scales 1e-2..1e5) bounds the agreement.
    assert relative_error(parameters(scaled), parameters(plain)) <= 1e-7
    np.testing.assert_allclose(scaled.bse_, plain.bse_, rtol=1e-6)
    np.testing.assert_allclose(scaled.cov_params(), plain.cov_params(), rtol=1e-5,
                               atol=1e-8 * np.abs(plain.cov_params()).max())
    np.testing.assert_allclose(scaled.conf_int(), plain.conf_int(), rtol=1e-6)
    rows = scaled.summary(as_dict=True)
    np.testing.assert_allclose([row["coef"] for row in rows], parameters(scaled)[
        :len(rows)], rtol=1e-15)
    np.testing.assert_allclose([row["std_err"] for row in rows], scaled.bse_, rtol=1e-15)


def test_the_l1_penalty_is_the_scaled_penalty_in_raw_units(engine):
    """The raw-unit coefficients satisfy the optimality conditions of
    (1/n) sum rho_tau(y - X c - b) + lambda sum_j scale_j |c_j|."""
    X, y = raw_batches(1, n=2_000, seed=5)[0]
    model = RenewableHuberRegressor(penalty="l1", tau=5.0, standardize=True, lambda_scale=8.0,
                                    **engine).fit(X, y)
    assert model.diagnostics_["converged"]
    tau, lam = model.tau_, model.diagnostics_["lambda_value"]
    scale = np.asarray(model.state_dict()["feature_scaling"]["scale"])
    psi = np.clip(y - X @ model.coef_ - model.intercept_, -tau, tau)
    gradient = -(X.T @ psi) / len(y)
    assert abs(psi.mean()) <= 1e-5 * tau  # the unpenalised intercept
    nonzero = model.coef_ != 0
    assert 0 < nonzero.sum() < X.shape[1]  # the test needs both kinds
    bound = lam * scale
    np.testing.assert_allclose(gradient[nonzero], -bound[nonzero] * np.sign(model.coef_[nonzero]),
                               rtol=1e-4)
    assert (np.abs(gradient[~nonzero]) <= bound[~nonzero] * (1 + 1e-6)).all()


def test_l1_on_raw_units_is_right_only_when_standardised_and_says_so_otherwise(engine):
    """On these raw columns LAMM without standardisation reports convergence next to its
    starting zeros; the first batch's FeatureScaleWarning says why. Standardised, every batch
    converges with no warning, to coefficients far from zero."""
    batches = raw_batches()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenewableHuberWarning)
        scaled = stream(RenewableHuberRegressor(penalty="l1", tau="auto", standardize=True,
                                                **engine), batches)
    with pytest.warns(FeatureScaleWarning, match=r"mean squares of its columns span .* to "
                                                 r".*\(column 3\).*standardize=True"):
        raw = RenewableHuberRegressor(penalty="l1", tau="auto", **engine).fit(*batches[0])
    assert np.abs(raw.coef_[:3]).max() < 1e-3 * np.abs(scaled.coef_[:3]).min()


@pytest.mark.parametrize("edit, expected", [
    (lambda X: X, "span"),
    (lambda X: (X - OFFSETS) / SCALES + [0, 0, 0, 50], "column 3 is nearly parallel"),
    (lambda X: (X - OFFSETS) / SCALES, None),
    (lambda X: (X - OFFSETS) / SCALES * [1, 1, 1, 9], None),  # a spread of 81
])
def test_the_feature_scale_warning_fires_on_the_first_l1_batch_far_from_standardised(
        edit, expected):
    batches = [(edit(X), y) for X, y in raw_batches()]
    model = RenewableHuberRegressor(backend="numpy", penalty="l1", tau="auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream(model, batches)
        RenewableHuberRegressor(backend="numpy", tau="auto").fit(*batches[0])
        RenewableHuberRegressor(backend="numpy", tau="auto", penalty="l1",
                                standardize=True).fit(*batches[0])
    messages = [str(w.message) for w in caught if w.category is FeatureScaleWarning]
    if expected is None:
        assert messages == []
    else:
        assert len(messages) == 1 and expected in messages[0], messages  # first batch, L1 only


def test_an_unconverged_standardised_l1_batch_gets_advice_for_standardised_features():
    X, y = raw_batches(1)[0]
    with pytest.warns(ConvergenceWarning, match="the features are standardised") as caught:
        RenewableHuberRegressor(backend="numpy", penalty="l1", tau="auto", standardize=True,
                                max_iter=1).fit(X, y)
    assert "standardize=True" not in str(caught[0].message)


# -- the stream keeps it: checkpoints, pickles, the stream layout --------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_checkpoint_then_resume_equals_the_uninterrupted_stream(tmp_path, dtype, penalty):
    batches = raw_batches()
    params = dict(backend="numpy", dtype=dtype, penalty=penalty, tau="auto", standardize=True)
    uninterrupted = stream(RenewableHuberRegressor(**params), batches)
    half = stream(RenewableHuberRegressor(**params), batches[:2])
    half.save(tmp_path / "half.npz")
    loaded = RenewableHuberRegressor.load(tmp_path / "half.npz")
    assert loaded.standardize is True
    np.testing.assert_array_equal(loaded.coef_, half.coef_)
    np.testing.assert_array_equal(loaded.predict(batches[3][0]), half.predict(batches[3][0]))
    resumed = stream(loaded, batches[2:])
    np.testing.assert_array_equal(resumed.state_.coefficients, uninterrupted.state_.coefficients)
    np.testing.assert_array_equal(resumed.state_.information, uninterrupted.state_.information)
    np.testing.assert_array_equal(resumed.coef_, uninterrupted.coef_)
    assert resumed.intercept_ == uninterrupted.intercept_


def test_pickle_keeps_the_scaling(engine):
    batches = raw_batches()
    model = stream(RenewableHuberRegressor(standardize=True, tau="auto", **engine), batches[:2])
    twin = pickle.loads(pickle.dumps(model))
    assert twin.state_dict()["feature_scaling"] == model.state_dict()["feature_scaling"]
    np.testing.assert_array_equal(twin.predict(batches[3][0]), model.predict(batches[3][0]))
    stream(twin, batches[2:])
    stream(model, batches[2:])
    np.testing.assert_array_equal(twin.coef_, model.coef_)


def test_changing_standardize_mid_stream_is_refused_and_set_params_starts_a_new_stream():
    batches = raw_batches()
    model = stream(RenewableHuberRegressor(backend="numpy", tau="auto"), batches[:2])
    before = model.state_.coefficients
    model.standardize = True
    with pytest.raises(ValidationError, match="standardize changed since this stream started"):
        model.partial_fit(*batches[2])
    np.testing.assert_array_equal(model.state_.coefficients, before)
    model.set_params(standardize=True).partial_fit(*batches[2])
    assert model.state_.batch_count == 1 and model.state_dict()["feature_scaling"] is not None


# -- refusals change nothing ----------------------------------------------------------------


def test_a_batch_that_overflows_once_standardised_is_refused_naming_the_entry():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(50, 2))
    X[:, 1] *= 1e-30  # a tiny spread in the first batch
    y = X[:, 0] + rng.normal(size=50)
    model = RenewableHuberRegressor(backend="numpy", dtype="float32", standardize=True).fit(X, y)
    before = model.state_dict()
    late = rng.normal(size=(20, 2))
    late[7, 1] = 1e10  # finite in float32, but 1e40 once divided by the first batch's scale
    with pytest.raises(ValidationError, match=r"X\[7, 1\] = .* overflows float32 once "
                                              r"standardised"):
        model.partial_fit(late, late[:, 0])
    after = model.state_dict()
    np.testing.assert_array_equal(after["coefficients"], before["coefficients"])
    assert after["n_samples_seen"] == before["n_samples_seen"] == 50
    with pytest.raises(ValidationError, match=r"X\[7, 1\]"):
        model.predict(late)


@pytest.mark.cuda
def test_device_arrays_are_refused_with_standardize(cuda_engine):
    cp = pytest.importorskip("cupy")
    X, y = raw_batches(1)[0]
    model = RenewableHuberRegressor(backend="native_cuda", device="cuda", standardize=True,
                                    tau="auto")
    model.fit(X, y)
    before = model.state_dict()
    with pytest.raises(ValidationError, match="fit got a device array"):
        model.partial_fit(cp.asarray(X), cp.asarray(y))
    with pytest.raises(ValidationError, match="predict got a device array"):
        model.predict(cp.asarray(X))
    with pytest.raises(ValidationError, match="score got a device array"):
        model.score(cp.asarray(X), cp.asarray(y))
    np.testing.assert_array_equal(model.state_dict()["coefficients"], before["coefficients"])


# -- checkpoint records are checked ---------------------------------------------------------


def _saved(tmp_path, **params):
    X, y = raw_batches(1)[0]
    path = tmp_path / "m.npz"
    RenewableHuberRegressor(backend="numpy", tau="auto", **params).fit(X, y).save(path)
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    return arrays, json.loads(str(arrays.pop("metadata")[()]))


def _write(path, metadata, arrays):
    metadata["payload_sha256"] = checkpoint_module.payload_digest(
        arrays["coefficients"], arrays["information"], metadata, arrays.get("meat"))
    np.savez(path, metadata=np.array(json.dumps(metadata)), **arrays)


def _set(key, value):
    return lambda metadata: metadata["feature_scaling"].__setitem__(key, value)


@pytest.mark.parametrize("edit, reason", [
    (lambda m: m.__setitem__("feature_scaling", None),
     "the config says standardize=True but feature_scaling is null"),
    (lambda m: m["config"].__setitem__("standardize", False),
     "the config says standardize=False but feature_scaling is present"),
    (_set("scale", [1.0, 0.0, 1.0, 1.0]), r"feature_scaling.scale\[1\] is 0.0"),
    (_set("scale", [1.0, -2.0, 1.0, 1.0]), r"feature_scaling.scale\[1\] is -2.0"),
    (_set("scale", [1.0, 5e-324, 1.0, 1.0]), r"feature_scaling.scale\[1\] is 5e-324"),
    (_set("center", [1.0, 2.0, 3.0]), "feature_scaling.center must be a list of 4 numbers"),
    (_set("center", [1.0, 2.0, "3", 4.0]), "feature_scaling.center must be a list of 4"),
    (_set("scale", [1.0, True, 1.0, 1.0]), "feature_scaling.scale must be a list of 4"),
    (_set("extra", [0.0]), "feature_scaling must be an object with exactly the keys"),
    (lambda m: m.__setitem__("feature_scaling", [1.0]), "must be an object with exactly"),
    (lambda m: m["config"].pop("standardize"), "config must hold exactly the parameters"),
])
def test_a_damaged_scaling_record_is_refused_with_its_reason(tmp_path, edit, reason):
    arrays, metadata = _saved(tmp_path, standardize=True)
    edit(metadata)
    _write(tmp_path / "bad.npz", metadata, arrays)
    with pytest.raises(ValidationError, match="invalid or corrupted checkpoint") as error:
        RenewableHuberRegressor.load(tmp_path / "bad.npz")
    assert error.match(reason)


def test_an_infinite_scaling_entry_is_refused(tmp_path):
    arrays, metadata = _saved(tmp_path, standardize=True)
    metadata["feature_scaling"]["center"][2] = 12345.5
    _write(tmp_path / "bad.npz", metadata, arrays)
    with np.load(tmp_path / "bad.npz") as archive:  # JSON can only say infinity as a literal
        text = str(archive["metadata"][()]).replace("12345.5", "1e400")
    np.savez(tmp_path / "bad.npz", metadata=np.array(text), **arrays)
    with pytest.raises(ValidationError, match="feature_scaling.center must be finite"):
        RenewableHuberRegressor.load(tmp_path / "bad.npz")


def test_a_scaling_whose_numbers_or_raw_coefficients_overflow_the_dtype_is_refused(tmp_path):
    arrays, metadata = _saved(tmp_path, standardize=True)
    metadata["feature_scaling"]["scale"][1] = 1e-39  # a float64 number below float32's range
    _write(tmp_path / "tiny.npz", metadata, arrays)
    loaded = RenewableHuberRegressor.load(tmp_path / "tiny.npz")
    assert np.isfinite(loaded.coef_).all()
    with pytest.raises(ValidationError, match="do not fit float32; load it with dtype='float64'"):
        RenewableHuberRegressor.load(tmp_path / "tiny.npz", dtype="float32")
    metadata["feature_scaling"]["scale"][1] = 1e-300
    arrays["coefficients"] = arrays["coefficients"].copy()
    arrays["coefficients"][1] = 1e10  # 1e310 in raw units
    _write(tmp_path / "huge.npz", metadata, arrays)
    with pytest.raises(ValidationError, match="coefficients it gives in raw units, do not fit "
                                              "float64$"):
        RenewableHuberRegressor.load(tmp_path / "huge.npz")


def test_a_centred_record_without_an_intercept_is_refused(tmp_path):
    arrays, metadata = _saved(tmp_path, standardize=True, fit_intercept=False)
    metadata["feature_scaling"]["center"][0] = 1.0
    _write(tmp_path / "bad.npz", metadata, arrays)
    with pytest.raises(ValidationError, match="center must be all zeros without an intercept"):
        RenewableHuberRegressor.load(tmp_path / "bad.npz")


def test_format_5_reads_as_not_standardised_and_may_not_carry_a_scaling(tmp_path):
    arrays, metadata = _saved(tmp_path)
    metadata["format_version"] = 5
    del metadata["config"]["standardize"], metadata["feature_scaling"]
    _write(tmp_path / "v5.npz", metadata, arrays)
    loaded = RenewableHuberRegressor.load(tmp_path / "v5.npz")
    assert loaded.standardize is False and loaded.state_dict()["feature_scaling"] is None
    metadata["feature_scaling"] = None
    _write(tmp_path / "bad5.npz", metadata, arrays)
    with pytest.raises(ValidationError, match=r"unexpected keys \['feature_scaling'\]"):
        RenewableHuberRegressor.load(tmp_path / "bad5.npz")


# -- properties -----------------------------------------------------------------------------


@st.composite
def partitioned_columns(draw):
    """A batch in raw units (scales 1e-3..1e5, offsets up to 1e6 of them), optionally
    weighted (zeros included), cut into partitions, some empty."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n, p = draw(st.integers(1, 400)), draw(st.integers(1, 6))
    scale = 10.0 ** rng.uniform(-3, 5, size=p)
    X = scale * (rng.uniform(-1e6, 1e6, size=p) * draw(st.sampled_from([0.0, 1.0]))
                 + rng.standard_t(3, size=(n, p)))
    w = None
    if draw(st.booleans()):
        w = rng.uniform(0, 3, size=n) * (rng.uniform(size=n) > 0.2)
        w[rng.integers(n)] = 1.0  # never all zero
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    return X, w, cuts, draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(partitioned_columns())
def test_moments_combined_over_partitions_equal_the_whole_batchs(case):
    """The Dask path's pairwise combination equals the in-process moments: the same scaling
    to rounding, whatever the partitions (empty ones included), weights and offsets."""
    X, w, cuts, fit_intercept = case
    bounds = [0, *cuts, X.shape[0]]
    combined = None
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        part = column_moments(X[start:stop], None if w is None else w[start:stop],
                              fit_intercept=fit_intercept)
        combined = part if combined is None else combine_moments(combined, part)
    whole = FeatureScaling.from_batch(X, w, fit_intercept=fit_intercept)
    pieces = FeatureScaling.from_moments(combined, X.dtype)
    np.testing.assert_allclose(pieces.center, whole.center, rtol=1e-12,
                               atol=1e-12 * np.abs(X).max())
    np.testing.assert_allclose(pieces.scale, whole.scale, rtol=1e-9)
    weights = np.ones(X.shape[0]) if w is None else w
    center = np.average(X, axis=0, weights=weights) if fit_intercept else 0.0
    spread = np.sqrt(np.average((X - center) ** 2, axis=0, weights=weights))
    expected = np.where(spread > 10 * np.finfo(float).eps * np.abs(center), spread, 1.0)
    np.testing.assert_allclose(whole.scale, expected, rtol=1e-9)
    # The checkpoint record reads back exactly (JSON keeps every double).
    read = FeatureScaling.from_record(json.loads(json.dumps(whole.as_record())), X.shape[1],
                                      fit_intercept)
    np.testing.assert_array_equal(read.center, whole.center)
    np.testing.assert_array_equal(read.scale, whole.scale)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 5), n=st.integers(40, 300),
       fit_intercept=st.booleans())
def test_without_a_penalty_standardising_reaches_the_same_optimum(engine, seed, p, n,
                                                                   fit_intercept):
    """Random designs in raw units (scales 1e-3..1e5, offsets up to 100 of them or none): the
    fit with and without standardisation reaches the same Huber objective and predicts the
    same, through the raw-unit coef_ and intercept_ (and predict agrees with them). The step
    test counts in each fit's own coordinates (a slope of 1e-8 is within an absolute 1e-10
    step either way), so the coefficients are compared through what they do: over 3,000
    random cases the objectives agreed within 4.2e-11 (relative) and the predictions within
    8.3e-6 of the target's standard deviation."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-3, 5, size=p)
    offset = scale * rng.uniform(-100, 100, size=p) * rng.integers(0, 2)
    Z = rng.normal(size=(n, p))
    X = offset + scale * Z
    y = Z @ rng.normal(size=p) + (3.0 if fit_intercept else 0.0) + rng.standard_t(3, size=n)
    fits = [RenewableHuberRegressor(tau=1.345, tol=1e-10, fit_intercept=fit_intercept,
                                    standardize=standardize, **engine).fit(X, y)
            for standardize in (False, True)]
    assert all(fit.diagnostics_["converged"] for fit in fits)

    predictions = [X @ fit.coef_ + fit.intercept_ for fit in fits]
    for fit, raw in zip(fits, predictions, strict=True):
        np.testing.assert_allclose(fit.predict(X), raw, rtol=1e-9, atol=1e-9 * np.abs(y).max())

    def huber_loss(predicted):
        r = np.abs(y - predicted)
        return float(np.mean(np.where(r <= 1.345, 0.5 * r * r, 1.345 * r - 0.5 * 1.345**2)))

    plain, scaled = (huber_loss(predicted) for predicted in predictions)
    assert abs(scaled - plain) <= 1e-9 * plain
    assert np.abs(predictions[1] - predictions[0]).max() <= 1e-4 * y.std()


@pytest.mark.parametrize("scales, means, expected", [
    ([1, 1, 1, 9], [0, 0, 0, 0], None),             # mean squares spread 81: standardised enough
    ([1, 1, 1, 12], [0, 0, 0, 0], "span"),          # 144
    ([1, 1, 0.05, 1], [0, 0, 0, 0], "span"),        # 400, through the small column
    ([1, 1, 1, 1], [0, 0, 0, 12], "nearly parallel"),  # |mean| 12 sd
    ([1, 1, 1, 1], [0, 0, 0, 8], None),             # 8 sd: squared cosine 64/65
])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_feature_scale_check_of_a_large_batch_reads_a_sample_and_decides_as_the_whole(
        scales, means, expected, weighted):
    """A 200,000-row first batch: the check reads at most CHECK_ROWS evenly spaced rows, and
    its verdict is the one the whole batch's exact weighted moments give (the limits are two
    orders of magnitude from a standardised design, far beyond the sample's error)."""
    from renewable_huber._feature_scaling import (
        CHECK_ROWS,
        PARALLEL_LIMIT,
        SPREAD_LIMIT,
        unstandardised_design,
    )

    rng = np.random.default_rng(3)
    n = 200_000
    assert n > 100 * CHECK_ROWS
    X = np.asarray(means) + np.asarray(scales) * rng.normal(size=(n, 4))
    w = rng.uniform(0.0, 2.0, size=n) if weighted else np.ones(n)
    square = np.append(w @ (X * X) / w.sum(), 1.0)
    mean = w @ X / w.sum()
    whole = (square.max() > SPREAD_LIMIT * square.min()
             or (mean * mean / square[:-1]).max() > PARALLEL_LIMIT)
    reason = unstandardised_design(X, w if weighted else None, fit_intercept=True)
    assert (reason is not None) == whole == (expected is not None)
    if expected is not None:
        assert expected in reason


def test_the_feature_scale_check_judges_the_sampled_rows_when_their_weights_are_all_zero():
    from renewable_huber._feature_scaling import CHECK_ROWS, unstandardised_design
    from renewable_huber.tau import row_stride

    rng = np.random.default_rng(4)
    n = 50 * CHECK_ROWS
    w = np.ones(n)
    w[::row_stride(n, CHECK_ROWS)] = 0.0  # every sampled row weighs nothing
    standard = rng.normal(size=(n, 4))
    assert unstandardised_design(standard, w, fit_intercept=True) is None
    reason = unstandardised_design(standard * [1, 1, 1, 12], w, fit_intercept=True)
    assert reason is not None and "column 3" in reason


def test_the_feature_scale_check_names_the_columns_at_both_ends_of_the_spread():
    """The message names the columns whose mean squares bound the spread, the intercept's
    column of ones (mean square 1) by name."""
    from renewable_huber._feature_scaling import unstandardised_design

    rng = np.random.default_rng(5)
    X = rng.normal(size=(5_000, 3)) * [30.0, 40.0, 50.0]  # mean squares ~900 to ~2,500
    reason = unstandardised_design(X, None, fit_intercept=True)
    assert reason is not None
    assert "(the intercept column) to" in reason and reason.endswith("(column 2)")
    # without the intercept the spread is ~2.8: standardised enough
    assert unstandardised_design(X, None, fit_intercept=False) is None
    X[:, 0] *= 1e-3  # column 0's mean square ~1e-3 against column 2's ~2,500
    reason = unstandardised_design(X, None, fit_intercept=False)
    assert "(column 0) to" in reason and reason.endswith("(column 2)")
