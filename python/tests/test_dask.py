"""partial_fit on Dask collections: the state transition equals the in-process one on the
golden streams and on tables, bad input is refused naming the partition and row without
changing the state, and a task that fails on the cluster commits nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dask_support import local_cluster, requires_dask

from renewable_huber import RenewableHuberRegressor
from renewable_huber.exceptions import BackendUnavailableError, EngineError, ValidationError

try:
    import dask.array as da
    import dask.dataframe as dd
except ImportError:  # every test skips (requires_dask)
    da = dd = None

pytestmark = requires_dask

GOLDEN = Path(__file__).resolve().parents[2] / "conformance" / "corpora"
CORPORA = ("native_core_v1.json", "native_core_v2.json", "native_core_v3.json")
# Streams whose batches end at max_iter by design are replayed for their first 25 iterations
# of each batch: the same solver path, a fraction of the cluster round trips.
REPLAYED_ITERATIONS = 25
# Unpenalised cases ill-conditioned by construction, where any change of summation order (here:
# per-partition sums) may move the coefficients by more than 1e-10, within the tolerance the
# corpus records for reordered rows: 5 rows for 8 parameters, held only by ridge 1e-8 (the first
# batch's information has condition number 6.9e17), and features in raw units from 1e3 to 1e6
# (1.4e14: 8.0e-9 apart on an AMD EPYC host whose CPU engine runs its AVX2 kernels, within the
# corpus's 1e-6).
ILL_CONDITIONED = ("none-fewer-rows-than-parameters", "none-features-1e3-to-1e6")


@pytest.fixture(scope="module")
def client(cpu_library):
    # Workers in this process: the arithmetic is the same as in worker processes (those run
    # in test_dask_faults.py and test_cli_dask.py), and a round trip costs a tenth. The
    # workers must use librh_cpu's row-statistics extension (the default engine where it
    # loads): "native_cpu" makes a worker fail instead of falling back to NumPy.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RH_DASK_PARTITION_ENGINE", "native_cpu")
        with local_cluster(2, processes=False) as client:
            yield client


def _golden_cases():
    # Every case with the workers on librh_cpu (the default engine), compared with librh_cpu
    # in process; the first corpus also with the workers on the NumPy reference, compared with
    # the NumPy backend in process. Each pair shares its arithmetic per row; only the order of
    # the sums over rows differs (per partition, then added in partition order).
    for name in CORPORA:
        for case in json.loads((GOLDEN / name).read_text())["cases"]:
            yield pytest.param(case, "native_cpu", id=case["id"])
            if name == CORPORA[0]:
                yield pytest.param(case, "numpy", id=f"{case['id']}-numpy-workers")


def _partitioned(array, parts: int):
    rows = -(-array.shape[0] // parts)
    return da.from_array(array, chunks=(rows,) + array.shape[1:])


def _batch(batch):
    X = np.asarray(batch["X"], dtype=np.float64)
    y = np.asarray(batch["y"], dtype=np.float64)
    w = None if batch["sample_weight"] is None else np.asarray(batch["sample_weight"])
    return X, y, w


def _relative(actual, expected) -> float:
    return float(np.max(np.abs(actual - expected)) / max(np.max(np.abs(expected)), 1e-300))


def _assert_same_state(cluster, local, rtol):
    a, b = cluster.state_, local.state_
    assert _relative(a.coefficients, b.coefficients) <= rtol
    assert _relative(a.information, b.information) <= rtol
    assert a.n_samples_seen == b.n_samples_seen and a.batch_count == b.batch_count
    assert a.weight_sum == pytest.approx(b.weight_sum, rel=1e-14)


@pytest.mark.filterwarnings("ignore::renewable_huber.ConvergenceWarning")
@pytest.mark.parametrize(("case", "engine"), list(_golden_cases()))
def test_golden_streams_transition_as_in_process(client, case, engine, monkeypatch):
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", engine)
    config = dict(case["config"])
    ends_at_max_iter = any(state["diagnostics"]["iterations"] == config["max_iter"]
                           for state in case["expected"]["states"])
    if ends_at_max_iter:
        config["max_iter"] = min(config["max_iter"], REPLAYED_ITERATIONS)
    float64 = config["dtype"] == "float64"
    rtol = 1e-10 if float64 and case["id"] not in ILL_CONDITIONED else case["rtol"]
    local = RenewableHuberRegressor(**{**config, "backend": engine})
    cluster = RenewableHuberRegressor(**config)
    for batch in case["batches"]:
        X, y, w = _batch(batch)
        local.partial_fit(X, y, sample_weight=w)
        cluster.partial_fit(
            _partitioned(X, 3), _partitioned(y, 3),
            sample_weight=None if w is None else _partitioned(w, 3),
        )
        tolerance = rtol
        if float64:
            assert cluster.diagnostics_["converged"] == local.diagnostics_["converged"]
            if cluster.n_iter_ != local.n_iter_:
                # A last Newton step decided by rounding (docs/dask.md, "Equal to the in-process
                # fit"): which side takes it depends on the order of the sums, so on the BLAS
                # kernel (OPENBLAS_CORETYPE=Nehalem: 3 against 4 iterations on the
                # weighted-none-intercept case). One iteration apart, and states within the
                # tolerance the corpus records for reordered sums on any kernel.
                assert abs(cluster.n_iter_ - local.n_iter_) == 1
                tolerance = max(rtol, case["rtol"])
        _assert_same_state(cluster, local, tolerance)


def test_the_curvature_bound_attempts_sum_over_partitions(client, monkeypatch):
    # 1e7-scale features: 40 doublings of phi cannot majorise, so LAMM needs the curvature
    # bound, whose sum_i w_i ||x_i||^2 is one more map over the partitions.
    from renewable_huber.core import lamm_solver

    bounds = []
    original = lamm_solver.curvature_bound

    def recording(problem):
        bounds.append(original(problem))
        return bounds[-1]

    monkeypatch.setattr(lamm_solver, "curvature_bound", recording)
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 3)) * 1e7
    y = X @ [1e-7, 0.0, -2e-7] + rng.normal(size=200)
    params = dict(penalty="l1", max_iter=50, backend="numpy")
    local = RenewableHuberRegressor(**params).fit(X, y)
    local_bounds, bounds[:] = list(bounds), []
    cluster = RenewableHuberRegressor(**params).fit(_partitioned(X, 4), _partitioned(y, 4))
    # the bound itself, from independent arithmetic: (sum ||x_i||^2 with the intercept) / n
    expected = (np.sum(X * X) + len(y)) / len(y)
    assert local_bounds and bounds
    assert bounds[0] == pytest.approx(expected, rel=1e-13)
    assert local_bounds[0] == pytest.approx(expected, rel=1e-13)
    assert cluster.n_iter_ == local.n_iter_
    _assert_same_state(cluster, local, 1e-10)


def _table(rng, n=900, p=4):
    X = rng.normal(size=(n, p))
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(p)])
    frame["target"] = X @ np.arange(1.0, p + 1) + rng.standard_t(2, size=n)
    frame["weight"] = rng.uniform(0.0, 2.0, size=n)
    return frame


def test_a_dataframe_with_the_target_as_a_column_name(client):
    rng = np.random.default_rng(1)
    frame = _table(rng)
    features = ["x0", "x1", "x2", "x3"]
    local = RenewableHuberRegressor(backend="numpy").fit(frame[features], frame["target"])
    table = dd.from_pandas(frame[features + ["target"]], npartitions=3)
    cluster = RenewableHuberRegressor(backend="numpy").fit(table, "target")
    assert list(cluster.feature_names_in_) == features
    assert cluster.n_iter_ == local.n_iter_
    _assert_same_state(cluster, local, 1e-10)
    np.testing.assert_allclose(cluster.predict(frame[features]), local.predict(frame[features]),
                               rtol=1e-10)


def test_a_dataframe_with_target_and_weights_as_column_names(client):
    rng = np.random.default_rng(8)
    frame = _table(rng)
    features = ["x0", "x1", "x2", "x3"]
    local = RenewableHuberRegressor(backend="numpy").fit(
        frame[features], frame["target"], sample_weight=frame["weight"]
    )
    cluster = RenewableHuberRegressor(backend="numpy").fit(
        dd.from_pandas(frame, npartitions=3), "target", sample_weight="weight"
    )
    assert list(cluster.feature_names_in_) == features
    assert cluster.n_iter_ == local.n_iter_
    _assert_same_state(cluster, local, 1e-10)


def test_a_dataframe_with_series_target_and_weights_continues_a_stream(client):
    rng = np.random.default_rng(2)
    first, second = _table(rng), _table(rng)
    features = ["x0", "x1", "x2", "x3"]
    local = RenewableHuberRegressor(backend="numpy", penalty="l1")
    cluster = RenewableHuberRegressor(backend="numpy", penalty="l1")
    for frame in (first, second):
        local.partial_fit(frame[features], frame["target"], sample_weight=frame["weight"])
        table = dd.from_pandas(frame, npartitions=4)
        cluster.partial_fit(table[features], table["target"], sample_weight=table["weight"])
        assert cluster.n_iter_ == local.n_iter_
        _assert_same_state(cluster, local, 1e-10)


@pytest.mark.parametrize("standardize", [False, True])
def test_cluster_and_local_batches_mix_in_one_stream(client, standardize):
    """Standardised: the columns in raw units, an L1 stream; the first (cluster) batch fixes
    the scaling that the local batch and the last cluster batch use."""
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(1500, 3))
    y = Z @ [1.0, -1.0, 0.5] + rng.standard_t(3, size=1500)
    X, params = Z, {"backend": "numpy"}
    if standardize:
        X = Z * [1.0, 1e3, 1e-2] + [0.0, 1e4, 1.0]
        params.update(penalty="l1", tau="auto", standardize=True)
    local = RenewableHuberRegressor(**params)
    mixed = RenewableHuberRegressor(**params)
    for index, rows in enumerate((slice(0, 500), slice(500, 1000), slice(1000, 1500))):
        local.partial_fit(X[rows], y[rows])
        if index == 1:
            mixed.partial_fit(X[rows], y[rows])
        else:
            mixed.partial_fit(_partitioned(X[rows], 2), _partitioned(y[rows], 2))
        assert mixed.n_iter_ == local.n_iter_
    _assert_same_state(mixed, local, 1e-10)
    assert mixed.state_.batch_count == 3
    if standardize:
        scaling = mixed.state_dict()["feature_scaling"]
        np.testing.assert_allclose(scaling["center"], X[:500].mean(axis=0), rtol=1e-13)
        np.testing.assert_allclose(scaling["scale"], X[:500].std(axis=0), rtol=1e-12)


def test_standard_errors_from_a_cluster_stream_equal_the_in_process_ones(client):
    """K, the meat of the sandwich, is one more sum over partitions (the 'meat' statistic):
    a weighted stream with inference gives the in-process K and standard errors."""
    rng = np.random.default_rng(9)
    features = ["x0", "x1", "x2", "x3"]
    local = RenewableHuberRegressor(backend="numpy", inference=True)
    cluster = RenewableHuberRegressor(backend="numpy", inference=True)
    for frame in (_table(rng), _table(rng)):
        local.partial_fit(frame[features], frame["target"], sample_weight=frame["weight"])
        cluster.partial_fit(dd.from_pandas(frame, npartitions=3), "target",
                            sample_weight="weight")
    _assert_same_state(cluster, local, 1e-10)
    assert _relative(cluster.state_.meat, local.state_.meat) <= 1e-10
    assert _relative(cluster.bse_, local.bse_) <= 1e-10


def test_tau_auto_reads_the_same_pilot_rows_as_in_process(client, monkeypatch):
    # More rows than the pilot's 5,000, so the evenly spaced pilot rows cross partitions.
    # The workers use the NumPy reference here: this fit's last Newton step (~1e-8) changes f
    # (~1.2e3) by less than its rounding, so the line search halves it or not on rounding
    # noise and the optimum is resolved to ~5e-9 only; a 1e-10 comparison then needs the
    # in-process arithmetic per row (with librh_cpu workers the two fits differ by 5.1e-9,
    # as two sums of the same terms in another order may).
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "numpy")
    rng = np.random.default_rng(4)
    X = rng.normal(size=(12_007, 3)) * [1.0, 10.0, 100.0]
    y = X @ [1.0, 0.1, 0.01] + 30.0 * rng.standard_t(2, size=12_007)
    local = RenewableHuberRegressor(backend="numpy", tau="auto").fit(X, y)
    cluster = RenewableHuberRegressor(backend="numpy", tau="auto").fit(
        _partitioned(X, 5), _partitioned(y, 5)
    )
    assert cluster.tau_ == local.tau_
    _assert_same_state(cluster, local, 1e-10)


def _raw_table(rng, n=900):
    """_table's columns moved to raw units: scales 1 to 1e4 and offsets up to 5e4."""
    frame = _table(rng, n)
    for j, (scale, offset) in enumerate(((1.0, 0.0), (1e2, 3e3), (1e-1, -2.0), (1e4, 5e4))):
        frame[f"x{j}"] = offset + scale * frame[f"x{j}"]
    return frame


def _same_scaling(cluster, local):
    a, b = (model.state_dict()["feature_scaling"] for model in (cluster, local))
    np.testing.assert_allclose(a["center"], b["center"], rtol=1e-13)
    np.testing.assert_allclose(a["scale"], b["scale"], rtol=1e-12)


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_standardize_on_a_cluster_stream_equals_the_in_process_one(client, penalty):
    """The first batch's column moments are summed per partition and combined (pairwise
    updates, partition order): the scaling is the in-process one to rounding, weighted, with an
    empty partition, the target and weights as columns; the stream then continues with it."""
    rng = np.random.default_rng(11)
    features = ["x0", "x1", "x2", "x3"]
    params = dict(backend="numpy", penalty=penalty, tau="auto", standardize=True)
    local, cluster = (RenewableHuberRegressor(**params) for _ in range(2))
    frames = (_raw_table(rng), _raw_table(rng))
    for frame in frames:
        local.partial_fit(frame[features], frame["target"], sample_weight=frame["weight"])
        table = dd.concat([dd.from_pandas(frame, npartitions=3),
                           dd.from_pandas(frame.iloc[:0], npartitions=1)])
        cluster.partial_fit(table, "target", sample_weight="weight")
        assert local.diagnostics_["converged"]
        assert cluster.tau_ == pytest.approx(local.tau_, rel=1e-12)
        _same_scaling(cluster, local)
        _assert_same_state(cluster, local, 1e-9)
    np.testing.assert_allclose(cluster.coef_, local.coef_, rtol=1e-8)
    X, w = frames[0][features].to_numpy(), frames[0]["weight"].to_numpy()
    center = np.average(X, axis=0, weights=w)
    np.testing.assert_allclose(cluster.state_dict()["feature_scaling"]["center"], center,
                               rtol=1e-13)
    np.testing.assert_allclose(cluster.state_dict()["feature_scaling"]["scale"],
                               np.sqrt(np.average((X - center) ** 2, axis=0, weights=w)),
                               rtol=1e-12)


def test_a_standardised_cluster_batch_is_validated_before_its_moments(client):
    X = np.random.default_rng(13).normal(size=(400, 3))
    y = X.sum(axis=1)
    X[250, 1] = np.nan
    model = RenewableHuberRegressor(backend="numpy", standardize=True)
    with pytest.raises(ValidationError, match=r"partition 1 .*NaN.*row 50, column 1"):
        model.fit(_partitioned(X, 2), _partitioned(y, 2))
    assert not hasattr(model, "coef_")


def test_a_cluster_batch_that_overflows_once_standardised_is_refused(client):
    rng = np.random.default_rng(14)
    X = rng.normal(size=(200, 2)) * [1.0, 1e-30]
    model = RenewableHuberRegressor(backend="numpy", dtype="float32", standardize=True)
    model.fit(_partitioned(X, 2), _partitioned(X[:, 0], 2))
    late = rng.normal(size=(200, 2))
    late[150, 1] = 1e10
    _refused(model, ValidationError, r"partition 1 .*X\[50, 1\] = .* overflows float32",
             _partitioned(late, 2), _partitioned(late[:, 0], 2))


def test_empty_partitions_are_skipped(client):
    rng = np.random.default_rng(5)
    frame = _table(rng, n=300)
    table = dd.from_pandas(frame, npartitions=3)
    table = table[table["x0"] < 10.0]  # keeps every row; partitions of unknown length
    table = dd.concat([table, dd.from_pandas(frame.iloc[:0], npartitions=1)])
    features = ["x0", "x1", "x2", "x3"]
    local = RenewableHuberRegressor(backend="numpy").fit(frame[features], frame["target"])
    cluster = RenewableHuberRegressor(backend="numpy").fit(table[features + ["target"]],
                                                           "target")
    _assert_same_state(cluster, local, 1e-10)


def test_tau_auto_with_weights_skips_an_empty_partitions_pilot_rows(client):
    # An empty partition carries no weights even in a weighted batch; its (empty) share of
    # the pilot rows once broke the concatenation of the others'.
    rng = np.random.default_rng(15)
    frame = _table(rng, n=300)
    features = ["x0", "x1", "x2", "x3"]
    local = RenewableHuberRegressor(backend="numpy", tau="auto").fit(
        frame[features], frame["target"], sample_weight=frame["weight"])
    table = dd.concat([dd.from_pandas(frame, npartitions=2),
                       dd.from_pandas(frame.iloc[:0], npartitions=1)])
    cluster = RenewableHuberRegressor(backend="numpy", tau="auto").fit(
        table, "target", sample_weight="weight")
    assert cluster.tau_ == local.tau_
    _assert_same_state(cluster, local, 1e-10)


# -- refusals: each names what was wrong, and the committed state is unchanged ---------------


@pytest.fixture()
def fitted(client):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 3))
    y = X @ [1.0, 2.0, 3.0] + rng.normal(size=400)
    estimator = RenewableHuberRegressor(backend="numpy").fit(_partitioned(X, 2),
                                                             _partitioned(y, 2))
    return estimator, X, y


def _refused(estimator, error, match, X, y, **kwargs):
    before = estimator.state_
    with pytest.raises(error, match=match):
        estimator.partial_fit(X, y, **kwargs)
    after = estimator.state_
    np.testing.assert_array_equal(after.coefficients, before.coefficients)
    np.testing.assert_array_equal(after.information, before.information)
    assert after.batch_count == before.batch_count


def test_nan_is_refused_naming_the_partition_and_row(fitted):
    estimator, X, y = fitted
    X = X.copy()
    X[250, 1] = np.nan  # partition 1 holds rows 200..399
    _refused(estimator, ValidationError, r"partition 1 .*NaN.*row 50, column 1",
             _partitioned(X, 2), _partitioned(y, 2))


def test_bad_weights_are_refused(fitted):
    estimator, X, y = fitted
    w = np.ones(400)
    w[10] = -1.0
    _refused(estimator, ValidationError, r"partition 0 .*>= 0.*row 10",
             _partitioned(X, 2), _partitioned(y, 2), sample_weight=_partitioned(w, 2))
    _refused(estimator, ValidationError, "all zero", _partitioned(X, 2), _partitioned(y, 2),
             sample_weight=_partitioned(np.zeros(400), 2))


def test_shape_and_type_errors_are_refused(fitted):
    estimator, X, y = fitted
    _refused(estimator, ValidationError, "3 features",
             _partitioned(X[:, :2], 2), _partitioned(y, 2))
    _refused(estimator, ValidationError, "never a local array", _partitioned(X, 2), y)
    _refused(estimator, ValidationError, "same length",
             _partitioned(X, 2), _partitioned(y[:300], 2))
    table = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=2)
    _refused(estimator, ValidationError, "not a column", table, "missing")


def test_the_range_rule_covers_the_whole_batch(fitted):
    estimator, X, y = fitted
    huge = X * 1e152  # each row's ||x||^2 is finite, the batch's sum is beyond the limit
    _refused(estimator, ValidationError, r"X is too large.*partition",
             _partitioned(huge, 2), _partitioned(y, 2))


def test_a_failing_task_commits_nothing(fitted):
    estimator, X, y = fitted

    def broken(block):
        raise OSError("disk gone")

    X_failing = _partitioned(X, 2).map_blocks(broken, dtype=float)
    _refused(estimator, EngineError, "OSError: disk gone.*nothing was committed",
             X_failing, _partitioned(y, 2))


def test_without_a_client_the_error_says_how_to_connect(monkeypatch):
    import distributed

    def no_client():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "get_client", no_client)
    X = _partitioned(np.ones((4, 1)), 2)
    with pytest.raises(BackendUnavailableError, match="no Client is connected.*Client\\("):
        RenewableHuberRegressor().fit(X, X[:, 0])


def test_many_partitions_are_reduced_on_the_workers_in_a_fixed_order(client, monkeypatch):
    # 40 partitions: groups of 16, 16 and 8 are added on workers, their 3 sums on the client.
    from renewable_huber.dask import batch as dask_batch

    received = []
    original = dask_batch.add_in_order

    def recording(*parts):
        received.append(len(parts))
        return original(*parts)

    monkeypatch.setattr(dask_batch, "add_in_order", recording)
    rng = np.random.default_rng(9)
    X = rng.normal(size=(4000, 5))
    y = X @ np.arange(5.0) + rng.standard_t(2, size=4000)
    local = RenewableHuberRegressor(backend="numpy").fit(X, y)
    first = RenewableHuberRegressor(backend="numpy").fit(_partitioned(X, 40), _partitioned(y, 40))
    assert received and set(received) == {3}  # the client only ever adds three partial sums
    second = RenewableHuberRegressor(backend="numpy").fit(_partitioned(X, 40),
                                                          _partitioned(y, 40))
    assert first.n_iter_ == local.n_iter_
    _assert_same_state(first, local, 1e-10)
    np.testing.assert_array_equal(first.state_.coefficients, second.state_.coefficients)
    np.testing.assert_array_equal(first.state_.information, second.state_.information)
