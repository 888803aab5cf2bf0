"""Streaming inference: the sandwich covariance n/(n-P) J^-1 K J^-1 and what the estimator
builds on it. Expected values come from independent NumPy computations of the same formulas
from the data, the OLS limit (heteroscedasticity-consistent HC0/HC1 covariance), statsmodels'
RLM with the same fixed threshold and scale 1, and the standard library's NormalDist."""

import json
import math
import statistics

import numpy as np
import pytest

from renewable_huber import (
    InferenceUnavailableError,
    RenewableHuberRegressor,
    ValidationError,
)
from renewable_huber import inference as inference_module
from renewable_huber.core import batch_meat


def stream_data(n=4000, p=3, seed=0, hetero=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    noise = rng.standard_t(3, size=n)
    if hetero:
        noise = noise * (0.5 + np.abs(X[:, 0]))
    y = X @ np.arange(1.0, p + 1) + 0.5 + noise
    return X, y


def fit_stream(X, y, n_batches, weights=None, **params):
    model = RenewableHuberRegressor(inference=True, backend="numpy", tol=1e-10, **params)
    states = []
    for rows in np.array_split(np.arange(len(y)), n_batches):
        w = None if weights is None else weights[rows]
        model.partial_fit(X[rows], y[rows], sample_weight=w)
        states.append(model.state_)
    return model, states


def independent_sandwich(X, y, n_batches, states, tau, weights=None, bandwidth_scale=1.0):
    """J and K rebuilt from the data and each batch's committed coefficients, written out
    from docs/algorithm.md without the package's code."""
    n, p = X.shape
    design = np.column_stack([X, np.ones(n)])
    P = p + 1
    J = np.zeros((P, P))
    K = np.zeros((P, P))
    cumulative = 0.0
    for rows, state in zip(np.array_split(np.arange(n), n_batches), states, strict=True):
        w = np.ones(len(rows)) if weights is None else weights[rows]
        cumulative += w.sum()
        h = min(bandwidth_scale / (math.sqrt(cumulative) * math.log(max(p, 2))), tau)
        r = y[rows] - design[rows] @ state.coefficients
        c = np.clip(0.5 + (tau - np.abs(r)) / (2 * h), 0.0, 1.0)
        psi = np.clip(r, -tau, tau)
        J += design[rows].T @ (design[rows] * (w * c)[:, None])
        K += design[rows].T @ (design[rows] * (w * psi**2)[:, None])
    Jinv = np.linalg.inv(J)
    return n / (n - P) * Jinv @ K @ Jinv.T


@pytest.mark.parametrize("weighted", [False, True])
def test_covariance_is_the_sandwich_of_the_batches_committed_estimates(weighted):
    X, y = stream_data(n=3000, seed=1)
    weights = np.random.default_rng(5).uniform(0.0, 2.0, size=len(y)) if weighted else None
    model, states = fit_stream(X, y, 4, weights=weights, tau=1.5)
    expected = independent_sandwich(X, y, 4, states, 1.5, weights=weights)
    np.testing.assert_allclose(model.cov_params(), expected, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(model.bse_, np.sqrt(np.diag(expected)), rtol=1e-9)


def test_meat_of_one_batch_is_the_weighted_squared_score_gram():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4))
    r = rng.normal(scale=3.0, size=50)
    w = rng.uniform(0, 2, size=50)
    expected = sum(w[i] * min(max(r[i], -2.0), 2.0) ** 2 * np.outer(X[i], X[i]) for i in range(50))
    got = batch_meat(np, X.astype(np.float32), r.astype(np.float32), w.astype(np.float32), 2.0)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, got.T)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def ols_hc0(design, y):
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    r = y - design @ beta
    bread = np.linalg.inv(design.T @ design)
    return beta, bread @ (design.T @ (design * (r**2)[:, None])) @ bread


def test_ols_limit_one_batch_is_hc1_exactly():
    X, y = stream_data(n=2000, seed=2, hetero=True)
    model, _ = fit_stream(X, y, 1, tau=1e6, ridge=0.0)
    design = np.column_stack([X, np.ones(len(y))])
    beta, hc0 = ols_hc0(design, y)
    n, P = design.shape
    np.testing.assert_allclose(model.state_.coefficients, beta, rtol=1e-9)
    np.testing.assert_allclose(model.cov_params(), n / (n - P) * hc0, rtol=1e-8)


def test_ols_limit_four_batches_match_one_batch():
    # K of a stream uses each batch's own committed estimate; they converge to the full-data
    # fit, so the stream's covariance approaches the one-batch HC1 covariance.
    X, y = stream_data(n=20000, seed=4, hetero=True)
    streamed, _ = fit_stream(X, y, 4, tau=1e6, ridge=0.0)
    design = np.column_stack([X, np.ones(len(y))])
    _, hc0 = ols_hc0(design, y)
    n, P = design.shape
    np.testing.assert_allclose(streamed.bse_, np.sqrt(np.diag(n / (n - P) * hc0)), rtol=0.02)


def test_standard_errors_agree_with_statsmodels_rlm_with_fixed_scale():
    sm = pytest.importorskip("statsmodels.api")
    X, y = stream_data(n=20000, seed=6)
    tau = 1.345
    model, _ = fit_stream(X, y, 1, tau=tau, ridge=0.0)
    design = np.column_stack([X, np.ones(len(y))])
    rlm = sm.RLM(y, design, M=sm.robust.norms.HuberT(t=tau)).fit(
        scale_est="mad", start_scale=1.0, update_scale=False, cov="H2", tol=1e-12, maxiter=200
    )
    assert rlm.scale == 1.0
    np.testing.assert_allclose(model.state_.coefficients, rlm.params, rtol=1e-6, atol=1e-8)
    # The same sandwich from statsmodels' own psi and psi' of HuberT at its fit: ours differs
    # only by the smoothed curvature near +-tau (bandwidth ~0.006 here).
    r = rlm.resid
    n, P = design.shape
    W = design.T @ (design * rlm.model.M.psi_deriv(r)[:, None])
    K = design.T @ (design * (rlm.model.M.psi(r) ** 2)[:, None])
    sandwich = n / (n - P) * np.linalg.inv(W) @ K @ np.linalg.inv(W)
    np.testing.assert_allclose(model.cov_params(), sandwich, rtol=5e-3,
                               atol=1e-3 * np.diag(sandwich).max())
    # RLM's own H2 (Huber 1973) assumes errors independent of x; under that design it
    # estimates the same covariance up to sampling error.
    np.testing.assert_allclose(model.bse_, rlm.bse, rtol=0.03)


def test_conf_int_rows_follow_coef_then_intercept_and_use_the_normal_quantile():
    X, y = stream_data(n=1000, seed=7)
    model, _ = fit_stream(X, y, 2)
    se = model.bse_
    intervals = model.conf_int(alpha=0.1)
    z = statistics.NormalDist().inv_cdf(0.95)
    centre = np.append(model.coef_, model.intercept_)
    np.testing.assert_allclose(intervals[:, 0], centre - z * se, rtol=1e-12)
    np.testing.assert_allclose(intervals[:, 1], centre + z * se, rtol=1e-12)
    assert intervals.shape == (4, 2)


@pytest.mark.parametrize("probability", [1e-12, 0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 1 - 1e-10])
def test_normal_quantile_matches_the_standard_library(probability):
    expected = statistics.NormalDist().inv_cdf(probability)
    assert inference_module.normal_quantile(probability) == pytest.approx(expected, rel=1e-12,
                                                                           abs=1e-12)


def test_summary_names_columns_and_p_values():
    X, y = stream_data(n=1000, seed=8)
    model, _ = fit_stream(X, y, 2)
    rows = model.summary(as_dict=True)
    assert [row["name"] for row in rows] == ["x0", "x1", "x2", "intercept"]
    for row, se in zip(rows, model.bse_, strict=True):
        assert row["std_err"] == pytest.approx(se)
        assert row["z"] == pytest.approx(row["coef"] / se)
        expected_p = 2 * (1 - statistics.NormalDist().cdf(abs(row["z"])))
        assert row["p_value"] == pytest.approx(expected_p, rel=1e-9, abs=1e-15)
    text = model.summary()
    assert "std err" in text and "P>|z|" in text and "intercept" in text


def test_summary_uses_feature_names():
    pd = pytest.importorskip("pandas")
    X, y = stream_data(n=500, p=2, seed=9)
    frame = pd.DataFrame(X, columns=["a", "b"])
    model = RenewableHuberRegressor(inference=True, backend="numpy").fit(frame, y)
    assert [row["name"] for row in model.summary(as_dict=True)] == ["a", "b", "intercept"]


def test_without_intercept_rows_are_the_coefficients():
    X, y = stream_data(n=500, seed=10)
    model = RenewableHuberRegressor(inference=True, backend="numpy", fit_intercept=False).fit(X, y)
    assert model.bse_.shape == (3,) and model.conf_int().shape == (3, 2)


def test_float32_streams_keep_the_meat_in_float64():
    X, y = stream_data(n=1000, seed=11)
    model = RenewableHuberRegressor(inference=True, backend="numpy", dtype="float32")
    model.partial_fit(X[:500], y[:500]).partial_fit(X[500:], y[500:])
    assert model.state_.meat.dtype == np.float64
    reference, _ = fit_stream(X, y, 2)
    np.testing.assert_allclose(model.bse_, reference.bse_, rtol=1e-3)


def test_l1_streams_refuse_inference_with_a_reason():
    X, y = stream_data(n=500, seed=12)
    model = RenewableHuberRegressor(inference=True, backend="numpy", penalty="l1").fit(X, y)
    assert model.state_.meat is None
    for call in (lambda: model.bse_, model.cov_params, model.conf_int, model.summary):
        with pytest.raises(InferenceUnavailableError, match="penalty='none' only.*selection"):
            call()


def test_unfitted_and_bad_alpha_are_refused():
    model = RenewableHuberRegressor(inference=True, backend="numpy")
    with pytest.raises(AttributeError, match="not fitted"):
        model.cov_params()
    X, y = stream_data(n=300, seed=13)
    model.fit(X, y)
    for alpha in (0.0, 1.0, -0.1, float("nan"), "0.05", True):
        with pytest.raises(ValidationError, match="alpha must be"):
            model.conf_int(alpha=alpha)


def test_too_few_rows_and_a_singular_information_are_refused():
    X, y = stream_data(n=4, seed=14)
    model = RenewableHuberRegressor(inference=True, backend="numpy").fit(X, y)
    with pytest.raises(InferenceUnavailableError, match="more rows than parameters: .* 4 rows"):
        _ = model.bse_
    X, y = stream_data(n=200, seed=15)
    X[:, 2] = X[:, 1]
    model = RenewableHuberRegressor(inference=True, backend="numpy", ridge=0.0).fit(X, y)
    with pytest.raises(InferenceUnavailableError, match="singular"):
        model.cov_params()


def test_checkpoints_carry_k_and_older_formats_load_without_inference(tmp_path):
    X, y = stream_data(n=1000, seed=16)
    model, _ = fit_stream(X, y, 2)
    model.save(tmp_path / "m.npz")
    loaded = RenewableHuberRegressor.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.cov_params(), model.cov_params())
    # the same file as format 3 wrote it: no meat member, no has_meat, the format-3 digest
    from renewable_huber import checkpoint as checkpoint_module

    with np.load(tmp_path / "m.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    metadata = json.loads(str(arrays.pop("metadata")[()]))
    del arrays["meat"], metadata["has_meat"], metadata["config"]["inference"]
    del metadata["config"]["standardize"], metadata["feature_scaling"]
    metadata["format_version"] = 3
    metadata["payload_sha256"] = checkpoint_module.payload_digest(
        arrays["coefficients"], arrays["information"], metadata)
    np.savez(tmp_path / "v3.npz", metadata=np.array(json.dumps(metadata)), **arrays)
    old = RenewableHuberRegressor.load(tmp_path / "v3.npz")
    np.testing.assert_array_equal(old.coef_, model.coef_)
    assert old.inference is False  # formats before 5 read as inference=False without K
    with pytest.raises(InferenceUnavailableError, match=r"format 4 or older.*inference=True"):
        _ = old.bse_
    # the stream goes on, still without inference, and saves has_meat false
    old.partial_fit(X[:100], y[:100])
    old.save(tmp_path / "v5.npz")
    with np.load(tmp_path / "v5.npz") as archive:
        assert "meat" not in archive.files
    with pytest.raises(InferenceUnavailableError):
        RenewableHuberRegressor.load(tmp_path / "v5.npz").cov_params()
    # a fresh fit with inference=True starts a stream with K again
    old.set_params(inference=True).fit(X, y)
    assert old.bse_.shape == (4,)


def test_tampered_meat_is_refused(tmp_path):
    X, y = stream_data(n=500, seed=17)
    model, _ = fit_stream(X, y, 1)
    model.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    metadata = str(arrays.pop("metadata")[()])
    arrays["meat"][0, 0] = -1.0
    np.savez(tmp_path / "t.npz", metadata=np.array(metadata), **arrays)
    with pytest.raises(ValidationError, match=r"meat\[0, 0\] is .*-1.0.*no negative diagonal"):
        RenewableHuberRegressor.load(tmp_path / "t.npz")
    arrays["meat"][0, 0] = 1.0
    np.savez(tmp_path / "t.npz", metadata=np.array(metadata), **arrays)
    with pytest.raises(ValidationError, match="digest does not match"):
        RenewableHuberRegressor.load(tmp_path / "t.npz")
    del arrays["meat"]
    np.savez(tmp_path / "t.npz", metadata=np.array(metadata), **arrays)
    with pytest.raises(ValidationError, match="expected members"):
        RenewableHuberRegressor.load(tmp_path / "t.npz")


def test_cli_inspect_reports_the_standard_errors_of_the_checkpoint(tmp_path, capsys):
    from cli_support import run

    X, y = stream_data(n=1000, seed=18)
    model, _ = fit_stream(X, y, 2)
    model.save(tmp_path / "m.npz")
    status, out, err = run(["inspect", str(tmp_path / "m.npz"), "--json"], capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["inference_unavailable"] is None
    assert list(document["standard_errors"]) == ["x0", "x1", "x2", "(intercept)"]
    np.testing.assert_allclose(list(document["standard_errors"].values()), model.bse_,
                               rtol=1e-12)
    status, out, err = run(["inspect", str(tmp_path / "m.npz")], capsys)
    assert status == 0, err
    row = next(line for line in out.splitlines()[::-1] if line.startswith("x1 "))
    assert float(row.split()[1]) == pytest.approx(model.bse_[1], rel=1e-5)
    l1 = RenewableHuberRegressor(inference=True, backend="numpy", penalty="l1").fit(X, y)
    l1.save(tmp_path / "l1.npz")
    status, out, err = run(["inspect", str(tmp_path / "l1.npz"), "--json"], capsys)
    document = json.loads(out)
    assert document["standard_errors"] is None
    assert "penalty='none' only" in document["inference_unavailable"]
    status, out, err = run(["inspect", str(tmp_path / "l1.npz")], capsys)
    assert "standard errors: unavailable: offered for penalty='none' only" in out


def test_cli_fit_json_includes_standard_errors(tmp_path, capsys):
    from cli_support import run, write_csv

    X, y = stream_data(n=600, seed=19)
    path = tmp_path / "data.csv"
    write_csv(path, X, y)
    status, out, err = run(["fit", str(path), "--target", "y", "--batch-size", "200",
                            "--backend", "numpy", "--inference", "--json", "--no-progress"],
                           capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["config"]["inference"] is True
    expected, _ = fit_stream(X, y, 3)
    assert list(document["standard_errors"]) == ["a", "b", "c", "(intercept)"]
    np.testing.assert_allclose(list(document["standard_errors"].values()), expected.bse_,
                               rtol=1e-4)


def test_raw_unit_features_are_not_called_singular():
    X, y = stream_data(n=2000, seed=20)
    scales = np.array([1.0, 1e3, 1e6])
    model = RenewableHuberRegressor(inference=True, backend="numpy", tol=1e-10).fit(X * scales, y)
    reference = RenewableHuberRegressor(inference=True, backend="numpy", tol=1e-10).fit(X, y)
    # the same fit in other units: the standard errors scale with 1 / the column's unit
    np.testing.assert_allclose(model.bse_[:3] * scales, reference.bse_[:3], rtol=1e-5)


def test_pickle_keeps_the_standard_errors():
    import pickle

    X, y = stream_data(n=800, seed=21)
    model, _ = fit_stream(X, y, 2)
    twin = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(twin.cov_params(), model.cov_params())
