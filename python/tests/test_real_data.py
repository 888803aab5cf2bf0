"""Real tables in their raw units, against an independent oracle.

Tables shipped inside statsmodels and scikit-learn (no downloads), unscaled: features in the
thousands next to the intercept's 1, targets in the hundreds to thousands. With the default
tau = 1.345 every residual at beta = 0 lies far beyond tau + h, where the plain damped Newton
method has no curvature to work with; the majoriser fallback of docs/algorithm.md must still
reach the optimum. The oracle is written here from scratch: iteratively reweighted least
squares through NumPy's least-squares solver (QR/SVD of the weighted design, never the normal
equations), then an exact active-set polish, and its own first-order condition is checked, so
a wrong oracle fails loudly instead of passing silently.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor
from renewable_huber.simulation import simulate_raw_units
from renewable_huber.state import RenewableState

statsmodels_datasets = pytest.importorskip("statsmodels.datasets")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

DEFAULT_TAU = 1.345


def _statsmodels_columns(dataset: str, features: list[str], target: str):
    """X from the named feature columns of a statsmodels dataset, y from its target column."""
    data = getattr(statsmodels_datasets, dataset).load_pandas().data
    return data[features].to_numpy(float), data[target].to_numpy(float)


def _engel():
    return _statsmodels_columns("engel", ["income"], "foodexp")


def _grunfeld():
    return _statsmodels_columns("grunfeld", ["value", "capital"], "invest")


def _macrodata():
    columns = ["realcons", "realinv", "realgovt", "realdpi", "cpi", "m1", "tbilrate", "unemp"]
    return _statsmodels_columns("macrodata", columns, "realgdp")


def _diabetes():
    X, y = sklearn_datasets.load_diabetes(return_X_y=True, scaled=False)
    return X.astype(float), y.astype(float)


TABLES = {"engel": _engel, "grunfeld": _grunfeld, "macrodata": _macrodata, "diabetes": _diabetes}


def _star98():
    data = statsmodels_datasets.star98.load_pandas()
    return data.exog.to_numpy(float), data.endog["NABOVE"].to_numpy(float)


def _ccard():
    return _statsmodels_columns("ccard", ["AGE", "INCOME", "INCOMESQ", "OWNRENT"], "AVGEXP")


def _copper():
    columns = ["COPPERPRICE", "INCOMEINDEX", "ALUMPRICE", "INVENTORYINDEX", "TIME"]
    return _statsmodels_columns("copper", columns, "WORLDCONSUMPTION")


def _linnerud():
    bunch = sklearn_datasets.load_linnerud()
    return bunch.data.astype(float), bunch.target[:, 0].astype(float)


# One-batch float32 fits of these tables reported convergence 2.5% to 150% from the optimum
# (relative, in norm) while the Newton system's thresholds were float32's at every batch: a
# Newton matrix with few rows inside tau + h is ridge-sized in most directions, below float32's
# rank cutoff, so the truncated step ignored most of the gradient and passed the step test. A
# stream's first batch is now judged at float64's (docs/decisions.md, "The Newton system's
# precision").
FIRST_BATCH_FLOAT32_TABLES = {"star98": _star98, "ccard": _ccard, "copper": _copper,
                              "linnerud": _linnerud}
RAW_TABLES = {**TABLES, **FIRST_BATCH_FLOAT32_TABLES}
# Float32 one-batch fits hold every table, macrodata's nearly collinear levels (~1e4) included.
FLOAT32_TABLES = sorted(RAW_TABLES)


def matched_tau(y: np.ndarray) -> float:
    """1.345 times the normalised MAD of y: a tau in the target's units."""
    return 1.345 * 1.4826 * float(np.median(np.abs(y - np.median(y))))


def huber_oracle(X: np.ndarray, y: np.ndarray, tau: float) -> np.ndarray:
    """argmin sum rho_tau(y - [X, 1] b), slopes then intercept."""
    A = np.column_stack([X, np.ones(len(y))])
    beta = np.linalg.lstsq(A, y, rcond=None)[0]
    for _ in range(20_000):
        magnitude = np.abs(y - A @ beta)
        root = np.sqrt(np.where(magnitude > tau, tau / np.maximum(magnitude, tau), 1.0))
        new = np.linalg.lstsq(A * root[:, None], y * root, rcond=None)[0]
        done = np.linalg.norm(new - beta) <= 1e-15 * (1.0 + np.linalg.norm(beta))
        beta = new
        if done:
            break
    # Huber's objective is quadratic on each partition of the rows into |r| <= tau and the
    # two tails; once IRLS has found the optimum's partition, one least-squares solve on it is
    # the exact minimiser.
    for _ in range(50):
        r = y - A @ beta
        inside = np.abs(r) <= tau
        if np.linalg.matrix_rank(A[inside]) < A.shape[1]:
            break
        tails = tau * np.sign(r[~inside]) @ A[~inside]
        rhs = np.linalg.lstsq(A[inside], y[inside], rcond=None)[0]
        polished = rhs + np.linalg.solve(A[inside].T @ A[inside], tails)
        if np.array_equal(polished, beta):
            break
        beta = polished
    r = y - A @ beta
    score = np.clip(r, -tau, tau)
    # First-order condition of the oracle itself, relative to the size of its terms.
    assert np.linalg.norm(A.T @ score) <= 1e-9 * (np.abs(A).T @ np.abs(score)).max()
    return beta


def _parameters(model) -> np.ndarray:
    return np.append(model.coef_, model.intercept_)


def _relative_error(beta, oracle) -> float:
    return float(np.linalg.norm(beta - oracle) / np.linalg.norm(oracle))


def _fit_without_convergence_warning(X, y, **params):
    from renewable_huber import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return RenewableHuberRegressor(**params).fit(X, y)


def _assert_every_batch_of_four_converges(X, y, **params):
    """Streams the rows shuffled (seed 0) in four batches: each converges, with no
    ConvergenceWarning."""
    from renewable_huber import ConvergenceWarning

    order = np.random.default_rng(0).permutation(len(y))
    model = RenewableHuberRegressor(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for number, rows in enumerate(np.array_split(order, 4), start=1):
            model.partial_fit(X[rows], y[rows])
            assert model.diagnostics_["converged"], (number, model.diagnostics_)


@pytest.mark.parametrize("tau_kind", ["default", "matched"])
@pytest.mark.parametrize("table", sorted(TABLES))
def test_one_batch_fit_on_a_raw_table_matches_the_oracle_float64(engine, table, tau_kind):
    X, y = TABLES[table]()
    tau = DEFAULT_TAU if tau_kind == "default" else matched_tau(y)
    model = _fit_without_convergence_warning(X, y, tau=tau, **engine)
    assert model.diagnostics_["converged"]
    assert _relative_error(_parameters(model), huber_oracle(X, y, tau)) <= 1e-7


@pytest.mark.parametrize("tau_kind", ["default", "matched"])
@pytest.mark.parametrize("table", sorted(TABLES))
def test_standardize_true_on_a_raw_table_matches_the_raw_unit_oracle(engine, table, tau_kind):
    """Without a penalty, standardize=True only reparametrises the problem: its raw-unit
    coefficients are the raw-unit Huber fit (the oracle never standardises). The step test
    then measures steps in standardised coordinates, so tol = 1e-8 asks for the accuracy the
    raw-unit comparison needs (at the default tol grunfeld ends 1.2e-7 away)."""
    X, y = TABLES[table]()
    tau = DEFAULT_TAU if tau_kind == "default" else matched_tau(y)
    model = _fit_without_convergence_warning(X, y, tau=tau, standardize=True, tol=1e-8,
                                             **engine)
    assert _relative_error(_parameters(model), huber_oracle(X, y, tau)) <= 1e-7


@pytest.mark.parametrize("tau_kind", ["default", "matched"])
@pytest.mark.parametrize("table", FLOAT32_TABLES)
def test_one_batch_fit_on_a_raw_table_matches_the_oracle_float32(engine, table, tau_kind):
    X, y = RAW_TABLES[table]()
    tau = DEFAULT_TAU if tau_kind == "default" else matched_tau(y)
    model = _fit_without_convergence_warning(X, y, tau=tau, dtype="float32", **engine)
    assert model.diagnostics_["converged"]
    # The oracle sees the data as the float32 engine does.
    X32, y32 = (a.astype(np.float32).astype(np.float64) for a in (X, y))
    assert _relative_error(_parameters(model), huber_oracle(X32, y32, tau)) <= 1e-3


@pytest.mark.parametrize("restored", ["negative zeros", "identity prior"])
def test_what_makes_a_batch_a_streams_first_is_zero_information_by_value(engine, restored):
    """A state restored with batch count 0 starts a stream when its information is zero by
    value (-0.0 included, whose bytes are not zero): ccard in float32 then reaches the optimum.
    A nonzero prior makes the batch a later one, judged at float32's resolution: the stop is
    then wherever that resolution allows, only required to be finite."""
    from renewable_huber.backends import create_backend
    from renewable_huber.config import UpdateConfig

    X, y = FIRST_BATCH_FLOAT32_TABLES["ccard"]()
    X32, y32 = np.ascontiguousarray(X, np.float32), np.ascontiguousarray(y, np.float32)
    P = X.shape[1] + 1
    information = (-np.zeros((P, P)) if restored == "negative zeros"
                   else np.eye(P)).astype(np.float32)
    backend = create_backend(engine["backend"], dtype=np.float32, n_parameters=P, n_jobs=None,
                             cuda_graphs=False, cuda_fast_math=False)
    backend.restore(RenewableState(np.zeros(P, np.float32), information, 0, 0, 0.0, 0.0))
    config = UpdateConfig(n_features_in=X.shape[1], fit_intercept=True, tau=DEFAULT_TAU,
                          bandwidth_scale=1.0, tol=1e-6, ridge=1e-8, max_iter=100,
                          penalty="none", lambda_scale=1.0)
    state, diagnostics = backend.update(X32, y32, None, config)
    beta = np.asarray(state.coefficients, dtype=np.float64)
    assert np.all(np.isfinite(beta))
    if restored == "negative zeros":
        assert diagnostics.converged
        oracle = huber_oracle(X32.astype(np.float64), y32.astype(np.float64), DEFAULT_TAU)
        assert _relative_error(beta, oracle) <= 1e-3


def _scotland():
    data = statsmodels_datasets.scotland.load_pandas().data
    return data.drop(columns="YES").to_numpy(float), data["YES"].to_numpy(float)


def _shuffled_stream_warnings(X, y, **params) -> list:
    order = np.random.default_rng(0).permutation(len(y))
    model = RenewableHuberRegressor(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in np.array_split(order, 4):
            model.partial_fit(X[rows], y[rows])
    return caught


def test_a_float32_stream_beyond_float32s_resolution_warns(engine):
    """statsmodels' scotland (32 rows, 7 raw columns) in four float32 batches: after the first,
    every Newton system is singular at float32 resolution (the SVD rung runs) and the stream
    ends 19 (relative, in norm) from the float64 stream of the same data, each batch reporting
    convergence. Batches 2-4 say so with PrecisionWarning; the float64 stream, and a float32
    stream of a table float32 resolves (engel), do not warn."""
    from renewable_huber import PrecisionWarning

    X, y = _scotland()
    caught = _shuffled_stream_warnings(X, y, dtype="float32", **engine)
    flagged = [w.message for w in caught if issubclass(w.category, PrecisionWarning)]
    assert [message.batch for message in flagged] == [2, 3, 4]
    assert "standardize=True" in str(flagged[0]) and "float64" in str(flagged[0])
    caught = _shuffled_stream_warnings(X, y, dtype="float64", **engine)
    assert not [w for w in caught if issubclass(w.category, PrecisionWarning)]
    X, y = TABLES["engel"]()
    caught = _shuffled_stream_warnings(X, y, dtype="float32", **engine)
    assert not [w for w in caught if issubclass(w.category, PrecisionWarning)]


@pytest.mark.parametrize("tau_kind", ["default", "matched"])
@pytest.mark.parametrize("table", sorted(FIRST_BATCH_FLOAT32_TABLES))
def test_one_batch_fit_on_more_raw_tables_matches_the_oracle_float64(engine, table, tau_kind):
    """The same tables in float64 (tol 1e-8: linnerud at the default tol ends 2.8e-7 away).
    Within 1e-5: star98's design has condition 3.4e6, so its Newton matrices about 1e13, and
    the reference's float64 solve ends 1.5e-6 away under the Sandybridge BLAS kernels (1.6e-10
    under the default ones)."""
    X, y = FIRST_BATCH_FLOAT32_TABLES[table]()
    tau = DEFAULT_TAU if tau_kind == "default" else matched_tau(y)
    model = _fit_without_convergence_warning(X, y, tau=tau, tol=1e-8, **engine)
    assert model.diagnostics_["converged"]
    assert _relative_error(_parameters(model), huber_oracle(X, y, tau)) <= 1e-5


def _smoothed_curvature(r: np.ndarray, tau: float, h: float) -> np.ndarray:
    """c(r) of docs/algorithm.md: 1 inside tau - h, 0 beyond tau + h, linear between."""
    return np.clip(0.5 + (tau - np.abs(r)) / (2.0 * h), 0.0, 1.0)


@pytest.mark.parametrize("tau_kind", ["default", "matched"])
@pytest.mark.parametrize("table", sorted(RAW_TABLES))
def test_standard_errors_of_a_raw_table_are_the_sandwich_at_the_oracle(engine, table, tau_kind):
    """inference=True on one batch in raw units: the covariance is n / (n - P) J^-1 K J^-1 with
    J = A' diag(c(r)) A and K = A' diag(psi(r)^2) A, written here from docs/algorithm.md at the
    oracle's residuals (h from the documented bandwidth rule, checked against the diagnostics).
    At the default tau some tables have a residual within h of tau (ccard, grunfeld, linnerud),
    where c is not psi'; the indicator's sandwich then differs by 6-16% and this one does not.
    The tolerance is 1e-6, not tighter: star98's J has condition 1e13 (its coefficients are
    held to 1e-5 above)."""
    X, y = RAW_TABLES[table]()
    tau = DEFAULT_TAU if tau_kind == "default" else matched_tau(y)
    model = _fit_without_convergence_warning(X, y, tau=tau, tol=1e-8, inference=True, **engine)
    n, p = X.shape
    h = min(1.0 / (np.sqrt(n) * np.log(max(p, 2))), tau)
    assert model.diagnostics_["bandwidth"] == pytest.approx(h, rel=1e-12)
    A = np.column_stack([X, np.ones(n)])
    r = y - A @ huber_oracle(X, y, tau)
    J = A.T @ (A * _smoothed_curvature(r, tau, h)[:, None])
    K = A.T @ (A * (np.clip(r, -tau, tau) ** 2)[:, None])
    J_inv = np.linalg.inv(J)
    covariance = n / (n - A.shape[1]) * J_inv @ K @ J_inv
    np.testing.assert_allclose(model.bse_, np.sqrt(np.diag(covariance)), rtol=1e-6)


@pytest.mark.parametrize("tau_kind", ["default", "matched"])
@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_batch_of_a_shuffled_four_batch_stream_converges(engine, table, tau_kind):
    X, y = TABLES[table]()
    tau = DEFAULT_TAU if tau_kind == "default" else matched_tau(y)
    _assert_every_batch_of_four_converges(X, y, tau=tau, **engine)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [DEFAULT_TAU, 67.0])
def test_unscaled_generator_matches_the_oracle(engine, seed, tau):
    """Feature scales 1e0..1e5, target offset 1e5, t(3) errors of scale 50, 5% outliers.
    The stopping rule measures steps against 1 + ||beta|| (here ~1e5, the intercept), so the
    default tol = 1e-6 leaves the slopes of the large-scale features a few 1e-7 from the
    optimum in norm; tol = 1e-8 asks for the accuracy the comparison needs."""
    data = simulate_raw_units(2_000, 6, seed=seed)
    model = _fit_without_convergence_warning(data.X, data.y, tau=tau, tol=1e-8, **engine)
    assert model.diagnostics_["converged"]
    assert _relative_error(_parameters(model), huber_oracle(data.X, data.y, tau)) <= 1e-7


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [DEFAULT_TAU, 67.0])
def test_unscaled_generator_matches_the_oracle_float32(engine, seed, tau):
    """The same design in float32 at the default tol: its Newton matrices have equilibrated
    conditions beyond float32's pivot floor, so the step comes from the ladder's SVD on the
    equilibrated system (docs/decisions.md), never from one truncated across raw columns."""
    data = simulate_raw_units(2_000, 6, seed=seed)
    model = _fit_without_convergence_warning(data.X, data.y, tau=tau, dtype="float32", **engine)
    assert model.diagnostics_["converged"]
    X32, y32 = (a.astype(np.float32).astype(np.float64) for a in (data.X, data.y))
    assert _relative_error(_parameters(model), huber_oracle(X32, y32, tau)) <= 1e-3


def test_unscaled_generator_has_the_advertised_scales():
    data = simulate_raw_units(5_000, 6, seed=0)
    column_sd = data.X.std(axis=0)
    assert column_sd.min() == pytest.approx(1.0, rel=0.1)
    assert column_sd.max() == pytest.approx(1e5, rel=0.1)
    assert np.median(data.y) == pytest.approx(1e5, rel=1e-3)
    assert 0.03 < data.is_outlier.mean() < 0.07


def test_ridge_zero_first_batch_in_raw_units_matches_the_oracle(engine):
    """ridge = 0 and every residual beyond tau + h at beta0: H is exactly zero, the Newton
    direction is zero, and only the majoriser step moves (docs/algorithm.md, Solvers)."""
    data = simulate_raw_units(1_000, 4, seed=7)
    model = _fit_without_convergence_warning(data.X, data.y, ridge=0.0, tol=1e-8, **engine)
    assert model.diagnostics_["converged"] and model.n_iter_ > 1
    assert _relative_error(_parameters(model), huber_oracle(data.X, data.y, 1.345)) <= 1e-7


@pytest.mark.parametrize("table", ["engel", "grunfeld", "diabetes"])
def test_cli_fit_of_a_raw_table_converges_and_matches_the_oracle(table, tmp_path, cpu_library):
    """renewable-huber fit on the table written as CSV (raw units, default tau, shuffled rows,
    4 batches): exit 0, no convergence warning; one batch matches the oracle."""
    import json
    import os
    import subprocess
    import sys

    X, y = TABLES[table]()
    order = np.random.default_rng(1).permutation(len(y))
    X, y = X[order], y[order]
    path = tmp_path / "table.csv"
    names = [f"x{j}" for j in range(X.shape[1])]
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header=",".join([*names, "y"]),
               comments="", fmt="%.17g")
    env = dict(os.environ, RH_CPU_LIBRARY=str(cpu_library))

    def fit(batch_size):
        done = subprocess.run(
            [sys.executable, "-m", "renewable_huber", "fit", str(path), "--target", "y",
             "--batch-size", str(batch_size), "--backend", "native_cpu", "--json",
             "--no-progress"],
            capture_output=True, text=True, env=env, timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "did not converge" not in done.stderr
        return json.loads(done.stdout)

    streamed = fit(-(-len(y) // 4))
    assert streamed["run"]["batches"] == 4 and streamed["not_converged"] == 0
    whole = fit(len(y))
    beta = np.append([whole["coefficients"][name] for name in names], whole["intercept"])
    assert _relative_error(beta, huber_oracle(X, y, DEFAULT_TAU)) <= 1e-7


def test_cli_float32_stream_beyond_float32s_resolution_warns_with_its_options(tmp_path,
                                                                             cpu_library):
    """The CLI's line for PrecisionWarning names its own options (--dtype, --standardize)."""
    import os
    import subprocess
    import sys

    X, y = _scotland()
    order = np.random.default_rng(0).permutation(len(y))
    path = tmp_path / "scotland.csv"
    names = [f"x{j}" for j in range(X.shape[1])]
    np.savetxt(path, np.column_stack([X[order], y[order]]), delimiter=",",
               header=",".join([*names, "y"]), comments="", fmt="%.17g")
    done = subprocess.run(
        [sys.executable, "-m", "renewable_huber", "fit", str(path), "--target", "y",
         "--batch-size", "8", "--backend", "native_cpu", "--dtype", "float32", "--no-progress"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, RH_CPU_LIBRARY=str(cpu_library)),
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "singular at float32 resolution" in line]
    assert lines and all("--dtype float64 or --standardize" in line for line in lines)


# ------------------------------------------------------------- L1 on standardised real tables
# LAMM, the L1 solver, is first-order: in raw units these tables do not converge (docs/python.md,
# "L1 fits need standardised features"), so the L1 tests standardise features and target.


def l1_huber_oracle(X: np.ndarray, y: np.ndarray, tau: float, lam: float) -> np.ndarray:
    """argmin (1/n) sum rho_tau(y - [X, 1] b) + lam sum_j |b_j| (slopes only), slopes then
    intercept: scipy's L-BFGS-B on the split b = u - v, u, v >= 0, then an exact polish on the
    partition it finds (rows inside tau or in a tail, nonzero slopes and their signs), where the
    first-order condition is a linear system. Its own KKT conditions are checked."""
    from scipy.optimize import minimize

    n = len(y)
    A = np.column_stack([X, np.ones(n)])
    P = A.shape[1]
    penalised = np.r_[np.ones(P - 1), 0.0]

    def split_objective(z):
        r = y - A @ (z[:P] - z[P:])
        loss = np.where(np.abs(r) <= tau, 0.5 * r * r, tau * np.abs(r) - 0.5 * tau * tau)
        g = -(A.T @ np.clip(r, -tau, tau)) / n
        return (loss.sum() / n + lam * penalised @ (z[:P] + z[P:]),
                np.r_[g + lam * penalised, -g + lam * penalised])

    bounds = [(0, None)] * (2 * P - 1) + [(0, 0)]  # the intercept's v is pinned at 0
    z = np.zeros(2 * P)
    for _ in range(5):
        z = minimize(split_objective, z, jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxiter": 100_000, "maxfun": 200_000, "ftol": 0.0,
                              "gtol": 1e-14}).x
    beta = z[:P] - z[P:]
    for _ in range(50):
        r = y - A @ beta
        inside = np.abs(r) <= tau
        support = (np.abs(beta) > 1e-9 * np.abs(beta).max()) | (penalised == 0)
        signs = np.sign(beta) * penalised
        AI, AT = A[inside][:, support], A[~inside][:, support]
        rhs = AI.T @ y[inside] + tau * AT.T @ np.sign(r[~inside]) - n * lam * signs[support]
        polished = np.zeros(P)
        polished[support] = np.linalg.solve(AI.T @ AI, rhs)
        if np.array_equal(polished, beta):
            break
        beta = polished
    psi = np.clip(y - A @ beta, -tau, tau)
    gradient = -(A.T @ psi) / n
    violation = np.where(beta != 0, np.abs(gradient + lam * np.sign(beta) * penalised),
                         np.maximum(np.abs(gradient) - lam, 0.0))
    assert violation.max() <= 1e-12 * (np.abs(A).T @ np.abs(psi)).max() / n
    return beta


# The standardised tables LAMM solves at the default tol (conditions below 25 with the
# intercept); macrodata's nearly collinear columns stop short of the optimum
# (docs/python.md).
L1_TABLES = ["diabetes", "engel", "grunfeld"]


def _standardised(table: str) -> tuple[np.ndarray, np.ndarray]:
    X, y = TABLES[table]()
    return (X - X.mean(axis=0)) / X.std(axis=0), (y - y.mean()) / y.std()


@pytest.mark.parametrize("table", L1_TABLES)
def test_l1_fit_of_a_standardised_table_matches_the_oracle(engine, table):
    X, y = _standardised(table)
    model = _fit_without_convergence_warning(X, y, penalty="l1", **engine)
    n, p = X.shape
    lam = DEFAULT_TAU * np.sqrt(np.log(max(p, 2)) / n)  # lambda_scale 1 (docs/algorithm.md)
    assert model.diagnostics_["lambda_value"] == pytest.approx(lam, rel=1e-12)
    oracle = l1_huber_oracle(X, y, DEFAULT_TAU, lam)
    # LAMM stops on a step of at most tol (1 + ||beta||) = 1e-6 (1 + ||beta||); on these
    # well-conditioned designs that leaves the coefficients about 1e-6 from the optimum.
    assert _relative_error(_parameters(model), oracle) <= 1e-5
    # The same zero pattern: a penalised slope is exactly zero where the oracle's is.
    np.testing.assert_array_equal(_parameters(model) == 0, oracle == 0)


@pytest.mark.parametrize("table", L1_TABLES)
def test_every_l1_batch_of_a_standardised_four_batch_stream_converges(engine, table):
    X, y = _standardised(table)
    _assert_every_batch_of_four_converges(X, y, penalty="l1", **engine)


@pytest.mark.parametrize("table", L1_TABLES)
def test_standardize_true_l1_fit_of_a_raw_table_matches_the_oracle(engine, table):
    """The table in raw units, target too, tau="auto": the estimator standardises the
    features; the oracle solves the same problem on features standardised here with NumPy,
    and its solution maps to raw units as coef = g / scale, intercept = b - mean @ coef."""
    X, y = TABLES[table]()
    model = _fit_without_convergence_warning(X, y, penalty="l1", tau="auto", standardize=True,
                                             **engine)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    n, p = X.shape
    lam = model.tau_ * np.sqrt(np.log(max(p, 2)) / n)
    assert model.diagnostics_["lambda_value"] == pytest.approx(lam, rel=1e-12)
    oracle = l1_huber_oracle((X - mean) / scale, y, model.tau_, lam)
    # In the coordinates the solver works in, as for the standardised tables above.
    assert _relative_error(model.state_.coefficients, oracle) <= 1e-5
    np.testing.assert_array_equal(model.state_.coefficients == 0, oracle == 0)
    coef = oracle[:p] / scale
    raw = np.append(coef, oracle[p] - mean @ coef)
    np.testing.assert_array_equal(model.coef_ == 0, coef == 0)
    np.testing.assert_allclose(model.coef_, coef, rtol=1e-4, atol=1e-5 * np.abs(coef).max())
    assert _relative_error(_parameters(model), raw) <= 1e-5


@pytest.mark.parametrize("table", L1_TABLES)
def test_every_l1_batch_of_a_raw_table_streamed_with_standardize_true_converges(engine, table):
    X, y = TABLES[table]()
    _assert_every_batch_of_four_converges(X, y, penalty="l1", tau="auto", standardize=True,
                                          **engine)


def test_the_documented_l1_standardisation_recipe_runs_and_its_raw_coefficients_predict():
    """docs/python.md's recipe, run as written: every batch converges (the warning would raise),
    its raw-unit coefficients give the model's predictions, and they are the coefficients of
    the same stream fitted on features standardised by scikit-learn's StandardScaler (fixed on
    the first batch), mapped to raw units by hand."""
    from pathlib import Path

    from renewable_huber import ConvergenceWarning

    text = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    block = text.split("<!-- l1-standardise-recipe -->\n```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exec(compile(block, "docs/python.md (l1-standardise-recipe)", "exec"), scope)
    from sklearn.preprocessing import StandardScaler

    model, X, y, batches = scope["model"], scope["X"], scope["y"], scope["batches"]
    assert model.diagnostics_["converged"] and model.state_.batch_count == 4
    expected = model.predict(X)
    raw = X @ model.coef_ + model.intercept_
    np.testing.assert_allclose(raw, expected, rtol=1e-12, atol=1e-9 * np.abs(expected).max())
    scaler = StandardScaler().fit(X[batches[0]])
    by_hand = RenewableHuberRegressor(penalty="l1", tau="auto")
    for rows in batches:
        by_hand.partial_fit(scaler.transform(X[rows]), y[rows])
    coef = by_hand.coef_ / scaler.scale_
    np.testing.assert_allclose(model.coef_, coef, rtol=1e-9, atol=1e-12 * np.abs(coef).max())
    assert model.intercept_ == pytest.approx(by_hand.intercept_ - scaler.mean_ @ coef, rel=1e-9)
    assert np.count_nonzero(coef) == np.count_nonzero(model.coef_) < X.shape[1]


def _committee():
    columns = ["SIZE", "SUBS", "STAFF", "PRESTIGE", "BILLS103"]
    return _statsmodels_columns("committee", columns, "BILLS104")


def _heart():
    return _statsmodels_columns("heart", ["age"], "survival")


def _longley():
    columns = ["GNPDEFL", "GNP", "UNEMP", "ARMED", "POP", "YEAR"]
    return _statsmodels_columns("longley", columns, "TOTEMP")


# Tables whose ridge-0 float64 fits at tau = 1.345 reported convergence 1% to 217% from the
# optimum (relative, in norm; every engine alike) while a step along a Newton direction the SVD
# had truncated passed the step test: with fewer rows inside tau + h than parameters H is
# singular, and its minimum-norm step ignores g's part in the dropped directions.
RIDGE_ZERO_TABLES = {"ccard": _ccard, "committee": _committee, "copper": _copper,
                     "heart": _heart, "longley": _longley, "star98": _star98}


@pytest.mark.parametrize("table", sorted(RIDGE_ZERO_TABLES))
def test_ridge_zero_never_reports_convergence_away_from_the_optimum(engine, table):
    """ridge = 0 at tau = 1.345 in float64, at the default max_iter: a fit that reports
    convergence is at the optimum; one that is not warns (ConvergenceWarning)."""
    from renewable_huber import ConvergenceWarning

    X, y = RIDGE_ZERO_TABLES[table]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = RenewableHuberRegressor(tau=DEFAULT_TAU, ridge=0.0, **engine).fit(X, y)
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    assert warned != model.diagnostics_["converged"]
    if model.diagnostics_["converged"]:
        assert _relative_error(_parameters(model), huber_oracle(X, y, DEFAULT_TAU)) <= 1e-6


@pytest.mark.parametrize("table", sorted(RIDGE_ZERO_TABLES))
def test_ridge_zero_fits_reach_the_optimum_given_the_iterations(engine, table):
    """The same fits with max_iter = 1000 converge, to the oracle: the majoriser's direction,
    whose matrix weights every row, confirms or continues each step the truncated Newton
    direction would have ended the solve on (docs/algorithm.md, "Unpenalised", rule 5)."""
    X, y = RIDGE_ZERO_TABLES[table]()
    model = _fit_without_convergence_warning(X, y, tau=DEFAULT_TAU, ridge=0.0, max_iter=1000,
                                             **engine)
    assert model.diagnostics_["converged"]
    assert _relative_error(_parameters(model), huber_oracle(X, y, DEFAULT_TAU)) <= 1e-6
