"""Non-convergence is never silent, and a tau in the wrong units is explained.

ConvergenceWarning (one per unconverged batch, naming the batch, the iterations and the reason),
diagnostics_.stop_reason derived by one function, diagnostics_ as a dict with attribute access,
TauScaleWarning on the first batch of a raw-units stream, suggest_tau and tau="auto"."""

import copy
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import renewable_huber
from renewable_huber import (
    BatchDiagnostics,
    RenewableHuberRegressor,
    RenewableHuberWarning,
    TauScaleWarning,
    ValidationError,
    suggest_tau,
)
from renewable_huber.backends.numpy_backend import NumpyBackend
from renewable_huber.diagnostics import STOP_REASONS, stop_reason
from renewable_huber.simulation import simulate, simulate_raw_units

PACKAGE_PARENT = str(Path(renewable_huber.__file__).resolve().parent.parent)


@pytest.fixture(params=["numpy", "native_cpu"])
def backend(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
    return request.param


def well_scaled(n=600, p=3, seed=0):
    data = simulate(n, p, seed=seed)
    return data.X, data.y


def fit_recording(model, method, *args, **kwargs):
    """Call model.<method>(*args) and return the warnings it issued (all recorded)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(model, method)(*args, **kwargs)
    return list(caught)


def of_category(records, category):
    return [r for r in records if issubclass(r.category, category)]


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [PACKAGE_PARENT, *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)


# ----------------------------------------------------------------------------- the class


def test_convergence_warning_is_one_class_exported_from_package_and_exceptions():
    from renewable_huber.exceptions import ConvergenceWarning

    assert renewable_huber.ConvergenceWarning is ConvergenceWarning
    assert "ConvergenceWarning" in renewable_huber.__all__
    assert issubclass(ConvergenceWarning, RenewableHuberWarning)
    assert issubclass(ConvergenceWarning, UserWarning)
    assert not issubclass(TauScaleWarning, ConvergenceWarning)
    assert issubclass(TauScaleWarning, UserWarning)
    assert ConvergenceWarning.__module__ == "renewable_huber.exceptions"
    assert "scikit-learn" in ConvergenceWarning.__doc__  # the documented decision
    assert pickle.loads(pickle.dumps(ConvergenceWarning)) is ConvergenceWarning
    warning = ConvergenceWarning("text", batch=3, iterations=1, reason="max_iter")
    restored = pickle.loads(pickle.dumps(warning))
    assert (type(restored), str(restored), restored.batch, restored.iterations,
            restored.reason) == (ConvergenceWarning, "text", 3, 1, "max_iter")


def test_convergence_warning_is_also_sklearns_once_sklearn_is_imported():
    sklearn_exceptions = pytest.importorskip("sklearn.exceptions")
    from renewable_huber.exceptions import sklearn_compatible

    issued = sklearn_compatible(renewable_huber.ConvergenceWarning)
    assert issubclass(issued, renewable_huber.ConvergenceWarning)
    assert issubclass(issued, sklearn_exceptions.ConvergenceWarning)
    assert sklearn_compatible(renewable_huber.ConvergenceWarning) is issued
    # A user's filter on scikit-learn's class covers this package's warning.
    X, y = well_scaled()
    with warnings.catch_warnings():
        warnings.simplefilter("error", sklearn_exceptions.ConvergenceWarning)
        with pytest.raises(sklearn_exceptions.ConvergenceWarning, match="did not converge"):
            RenewableHuberRegressor(backend="numpy", max_iter=1).fit(X, y)


def test_importing_the_package_does_not_import_sklearn():
    result = run_python(
        "import sys, renewable_huber\n"
        "assert 'sklearn' not in sys.modules, 'imported sklearn'\n"
        "renewable_huber.RenewableHuberRegressor(backend='numpy').fit("
        "[[0.0], [1.0], [2.0], [3.0]], [0.0, 1.1, 1.9, 3.0])\n"
        "assert 'sklearn' not in sys.modules, 'a converged fit imported sklearn'\n"
    )
    assert result.returncode == 0, result.stderr


def test_without_sklearn_the_class_derives_from_the_package_warning_alone():
    result = run_python(
        "import sys\n"
        "sys.modules['sklearn'] = None  # as if scikit-learn were not installed\n"
        "import warnings, renewable_huber as rh\n"
        "assert rh.ConvergenceWarning.__bases__ == (rh.RenewableHuberWarning,)\n"
        "from renewable_huber.exceptions import sklearn_compatible\n"
        "assert sklearn_compatible(rh.ConvergenceWarning) is rh.ConvergenceWarning\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    rh.RenewableHuberRegressor(backend='numpy', max_iter=1).fit("
        "[[0.0], [1.0], [2.0], [3.0]], [0.0, 1.1, 1.9, 3.0])\n"
        "assert [w.category for w in caught] == [rh.ConvergenceWarning], caught\n"
    )
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------- the warning itself


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_each_unconverged_batch_warns_once_naming_batch_iterations_and_reason(
        backend, penalty):
    X, y = well_scaled(900)
    model = RenewableHuberRegressor(backend=backend, penalty=penalty, max_iter=1, tol=1e-12)
    for number, rows in enumerate((slice(0, 300), slice(300, 600), slice(600, 900)), start=1):
        records = fit_recording(model, "partial_fit", X[rows], y[rows])
        caught = of_category(records, renewable_huber.ConvergenceWarning)
        assert len(caught) == 1, records
        warning = caught[0].message
        # The advice fits the solver: Newton needs more iterations or a looser tol; LAMM's
        # iterations grow with the design's conditioning, so it points at the features' scale.
        advice = {"none": "raise max_iter or loosen tol",
                  "l1": "the L1 solver is first-order and needs standardised features"}[penalty]
        assert str(warning).startswith(
            f"batch {number} did not converge after 1 iterations (max_iter); it was folded "
            f"into the stream at the solver's last accepted step: {advice}"
        )
        assert (warning.batch, warning.iterations, warning.reason) == (number, 1, "max_iter")
        # The warning points at the caller's line, not into the package.
        assert caught[0].filename == __file__
        assert model.diagnostics_["stop_reason"] == "max_iter"
        assert model.diagnostics_.stop_reason == "max_iter"
        assert model.diagnostics_.converged is False
        assert model.n_samples_seen_ == 300 * number  # the batch was folded in
    # fit starts a new stream: batch 1 again.
    records = fit_recording(model, "fit", X[:300], y[:300])
    assert of_category(records, renewable_huber.ConvergenceWarning)[0].message.batch == 1


def test_batch_numbers_continue_across_save_and_load(tmp_path):
    X, y = well_scaled(900)
    model = RenewableHuberRegressor(backend="numpy").partial_fit(X[:300], y[:300])
    model.partial_fit(X[300:600], y[300:600])
    model.save(tmp_path / "m.npz")
    resumed = RenewableHuberRegressor.load(tmp_path / "m.npz")
    resumed.max_iter, resumed.tol = 1, 1e-12
    records = fit_recording(resumed, "partial_fit", X[600:], y[600:])
    [caught] = of_category(records, renewable_huber.ConvergenceWarning)
    assert caught.message.batch == 3


def test_an_early_stop_reports_the_solvers_reason(monkeypatch):
    """An early stop is hard to force with a sound solver: the engine's report is replaced by
    converged=False after 4 of 100 iterations, and the estimator must derive the reason."""
    real_update = NumpyBackend.update

    def stops_early(self, X, y, sample_weight, config):
        state, diagnostics = real_update(self, X, y, sample_weight, config)
        return state, dataclasses.replace(diagnostics, iterations=4, converged=False)

    monkeypatch.setattr(NumpyBackend, "update", stops_early)
    X, y = well_scaled()
    for penalty, reason in (("none", "line search exhausted"),
                            ("l1", "LAMM attempts exhausted")):
        model = RenewableHuberRegressor(backend="numpy", penalty=penalty)
        records = fit_recording(model, "fit", X, y)
        [caught] = of_category(records, renewable_huber.ConvergenceWarning)
        assert str(caught.message).startswith(
            f"batch 1 did not converge after 4 iterations ({reason})")
        assert str(caught.message).endswith(
            "rescale the data or choose tau in the target's units (renewable_huber.suggest_tau)")
        assert caught.message.reason == reason
        assert model.diagnostics_.stop_reason == reason


@pytest.mark.parametrize(
    ("converged", "iterations", "max_iter", "penalty", "expected"),
    [
        (True, 5, 100, "none", None),
        (True, 100, 100, "l1", None),  # converged on the last iteration
        (False, 100, 100, "none", "max_iter"),
        (False, 100, 100, "l1", "max_iter"),
        (False, 1, 1, "none", "max_iter"),
        (False, 7, 100, "none", "line search exhausted"),
        (False, 7, 100, "l1", "LAMM attempts exhausted"),
        (False, 1, 100, "l1", "LAMM attempts exhausted"),
    ],
)
def test_stop_reason_is_derived_from_converged_iterations_max_iter_and_penalty(
        converged, iterations, max_iter, penalty, expected):
    assert stop_reason(converged, iterations, max_iter, penalty) == expected
    assert expected is None or expected in STOP_REASONS


def test_a_well_scaled_converging_stream_issues_no_warning(backend):
    X, y = well_scaled(2_000)
    model = RenewableHuberRegressor(backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenewableHuberWarning)
        for start in range(0, 2_000, 500):
            model.partial_fit(X[start:start + 500], y[start:start + 500])
            assert model.diagnostics_.stop_reason is None
            assert model.diagnostics_["converged"] is True


def test_warning_as_error_leaves_the_batch_committed_as_documented():
    X, y = well_scaled()
    model = RenewableHuberRegressor(backend="numpy", max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", renewable_huber.ConvergenceWarning)
        with pytest.raises(renewable_huber.ConvergenceWarning):
            model.fit(X, y)
    assert model.n_samples_seen_ == X.shape[0]
    assert model.diagnostics_.stop_reason == "max_iter"


# ------------------------------------------------------------------------- diagnostics_


def test_diagnostics_are_a_dict_with_attribute_access_pickle_and_copy(backend):
    X, y = well_scaled()
    model = RenewableHuberRegressor(backend=backend).fit(X, y)
    diagnostics = model.diagnostics_
    assert isinstance(diagnostics, dict) and isinstance(diagnostics, BatchDiagnostics)
    assert list(diagnostics) == ["iterations", "converged", "objective", "lambda_value",
                                 "bandwidth", "used_regularized_fallback", "stop_reason"]
    for name, value in diagnostics.items():
        assert getattr(diagnostics, name) == value
    assert diagnostics == dict(diagnostics) and dict(diagnostics) == diagnostics
    assert diagnostics.lambda_value == 0.0 and diagnostics.converged is True
    assert json.loads(json.dumps(diagnostics)) == dict(diagnostics)
    for twin in (pickle.loads(pickle.dumps(diagnostics)), copy.deepcopy(diagnostics)):
        assert type(twin) is BatchDiagnostics and twin == diagnostics
        assert twin.iterations == diagnostics["iterations"]
    restored = pickle.loads(pickle.dumps(model))
    assert restored.diagnostics_ == diagnostics
    assert restored.diagnostics_.bandwidth == diagnostics["bandwidth"]
    with pytest.raises(AttributeError, match="no field 'missing'; fields: iterations"):
        diagnostics.missing  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError):
        diagnostics.converged = False
    assert diagnostics["converged"] is True


# -------------------------------------------------------------------- tau in the units


def engel():
    datasets = pytest.importorskip("statsmodels.datasets")
    data = datasets.engel.load_pandas().data
    return data[["income"]].to_numpy(float), data["foodexp"].to_numpy(float)


def raw_units_tables():
    raw = simulate_raw_units(2_000, 4, seed=1)
    return {"engel": engel, "simulated raw units": lambda: (raw.X, raw.y)}


@pytest.mark.parametrize("table", ["engel", "simulated raw units"])
def test_tau_scale_warning_on_a_raw_units_table(table):
    X, y = raw_units_tables()[table]()
    model = RenewableHuberRegressor(backend="numpy")
    records = fit_recording(model, "fit", X, y)
    [caught] = of_category(records, TauScaleWarning)
    assert not issubclass(caught.category, renewable_huber.ConvergenceWarning)
    assert caught.filename == __file__
    text = str(caught.message)
    assert text.startswith("tau=1.345 is far below the spread of the first batch's residuals")
    assert "tau is an absolute threshold in the target's units" in text
    assert "loses its equivalence with the full-data fit across batches" in text
    suggestion = float(text.split("suggest_tau on this batch gives tau=")[1].split(" ")[0])
    assert suggestion == pytest.approx(suggest_tau(X, y), rel=1e-3)
    # Only the first batch of a stream is checked.
    assert not of_category(fit_recording(model, "partial_fit", X, y), TauScaleWarning)


def test_no_tau_scale_warning_on_well_scaled_data_nor_with_a_matched_tau(backend):
    X, y = well_scaled(1_000)
    assert not of_category(fit_recording(RenewableHuberRegressor(backend=backend), "fit", X, y),
                           TauScaleWarning)
    raw = simulate_raw_units(2_000, 4, seed=1)
    for tau in (suggest_tau(raw.X, raw.y), "auto"):
        model = RenewableHuberRegressor(backend=backend, tau=tau, tol=1e-8)
        assert not of_category(fit_recording(model, "fit", raw.X, raw.y), TauScaleWarning)


@pytest.mark.parametrize("sigma", [0.5, 37.0, 2_500.0])
def test_suggest_tau_is_close_to_1_345_times_the_noise_scale(sigma):
    rng = np.random.default_rng(11)
    n = 4_000
    X = np.column_stack([rng.normal(3e4, 1e4, n), rng.normal(0.0, 1.0, n), rng.gamma(2.0, 50, n)])
    y = X @ np.array([0.02, -3.0, 1.5]) + 1e4 + sigma * rng.standard_normal(n)
    assert suggest_tau(X, y) == pytest.approx(1.345 * sigma, rel=0.1)
    # 10% one-sided gross outliers move a least-squares scale a lot, the pilot LAD's little.
    contaminated = y.copy()
    contaminated[rng.random(n) < 0.1] += 50 * sigma
    assert 1 / 1.5 < suggest_tau(X, contaminated) / (1.345 * sigma) < 1.5


def test_suggest_tau_ignores_zero_weight_rows_and_handles_no_intercept():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3_000, 2))
    y = X @ np.array([2.0, -1.0]) + 4.0 * rng.standard_normal(3_000)
    weights = np.ones(3_000)
    weights[::3] = 0.0
    garbage = y.copy()
    garbage[::3] = 1e9  # only in rows of zero weight
    assert suggest_tau(X, garbage, weights) == pytest.approx(1.345 * 4.0, rel=0.1)
    assert suggest_tau(X, y, fit_intercept=False) == pytest.approx(1.345 * 4.0, rel=0.1)


@pytest.mark.parametrize("share", [0.6, 0.75, 0.9])
def test_suggest_tau_on_a_binary_target_uses_the_exact_lad_fits_mean_residual(share):
    """A 0/1 target with most rows 0: the exact LAD fit (scipy's linear program) passes through
    more than half of the rows, so the robust scale is 1.2533 x its mean absolute residual (the
    MAD is zero). IRLS approximates those zeros by tiny residuals, whose median once gave a tau
    near 1e-6."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(17)
    n = 800
    X = rng.normal(size=(n, 3))
    y = (rng.uniform(size=n) > share).astype(float)
    A = np.column_stack([X, np.ones(n)])
    P = A.shape[1]
    # min sum(u + v) subject to A b + u - v = y, u, v >= 0
    lad = linprog(np.r_[np.zeros(P), np.ones(2 * n)],
                  A_eq=np.hstack([A, np.eye(n), -np.eye(n)]), b_eq=y,
                  bounds=[(None, None)] * P + [(0, None)] * (2 * n), method="highs")
    residuals = y - A @ lad.x[:P]
    assert np.mean(np.abs(residuals) <= 1e-9) > 0.5  # the MAD of the exact fit is zero
    expected = 1.345 * 1.2533 * np.abs(residuals).mean()
    assert suggest_tau(X, y) == pytest.approx(expected, rel=0.02)


def test_suggest_tau_refuses_bad_input_and_exact_fits():
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(ValidationError, match="cannot suggest a tau: the pilot fit reproduces"):
        suggest_tau(X, X @ np.array([1.0, 2.0]) + 3.0)
    with pytest.raises(ValidationError, match=r"y contains NaN or infinity \(first at index 1\)"):
        suggest_tau(X, [1.0, np.nan, 2.0, 3.0, 4.0])
    with pytest.raises(ValidationError, match="X has 5 rows but y has 4 entries"):
        suggest_tau(X, [1.0, 2.0, 3.0, 4.0])


# ----------------------------------------------------------------------------- tau="auto"


def test_tau_auto_is_fixed_from_the_first_batch_and_stored_as_a_number(backend, tmp_path):
    raw = simulate_raw_units(3_000, 3, seed=2)
    X, y = raw.X, raw.y
    model = RenewableHuberRegressor(backend=backend, tau="auto", tol=1e-8)
    model.partial_fit(X[:1_000], y[:1_000])
    chosen = model.tau_
    assert chosen == pytest.approx(suggest_tau(X[:1_000], y[:1_000]), rel=1e-12)
    assert model.get_params()["tau"] == "auto"
    assert "tau='auto'" in repr(model)
    # Later batches keep the stream's tau, even when their own scale differs.
    model.partial_fit(X[1_000:2_000], 10 * y[1_000:2_000])
    assert model.tau_ == chosen
    assert model.state_dict()["config"]["tau"] == chosen
    model.save(tmp_path / "auto.npz")
    loaded = RenewableHuberRegressor.load(tmp_path / "auto.npz")
    assert loaded.get_params()["tau"] == chosen and loaded.tau_ == chosen
    twin = pickle.loads(pickle.dumps(model))
    assert twin.get_params()["tau"] == "auto" and twin.tau_ == chosen
    twin.partial_fit(X[2_000:], y[2_000:])
    loaded.partial_fit(X[2_000:], y[2_000:])
    model.partial_fit(X[2_000:], y[2_000:])
    np.testing.assert_array_equal(twin.coef_, model.coef_)
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    # A new stream chooses again.
    model.fit(X[2_000:], 3 * y[2_000:])
    assert model.tau_ == pytest.approx(suggest_tau(X[2_000:], 3 * y[2_000:]), rel=1e-12)


def test_a_numeric_tau_is_reported_as_tau_(backend):
    X, y = well_scaled()
    model = RenewableHuberRegressor(backend=backend, tau=2.5).fit(X, y)
    assert model.tau_ == 2.5 and model.state_dict()["config"]["tau"] == 2.5


@pytest.mark.parametrize("bad", ["Auto", "automatic", "", 0.0, -1.0, float("nan"), None])
def test_tau_must_be_positive_or_auto(bad):
    X, y = well_scaled()
    model = RenewableHuberRegressor(backend="numpy", tau=bad)
    with pytest.raises(ValidationError, match=r"tau must be a finite real number > 0 .* or 'auto'"):
        model.fit(X, y)
    assert not hasattr(model, "coef_")


def test_tau_auto_on_a_batch_without_spread_is_refused_and_fits_nothing():
    model = RenewableHuberRegressor(backend="numpy", tau="auto")
    X = np.array([[0.0], [1.0]])
    with pytest.raises(ValidationError, match="cannot suggest a tau"):
        model.fit(X, np.array([1.0, 3.0]))
    assert not hasattr(model, "coef_") and not hasattr(model, "tau_")


def test_checkpoint_with_a_tau_string_is_refused(tmp_path, monkeypatch):
    from renewable_huber import checkpoint

    X, y = well_scaled()
    model = RenewableHuberRegressor(backend="numpy").fit(X, y)
    payload = model.state_dict()
    payload["config"]["tau"] = "auto"
    checkpoint.save_checkpoint(tmp_path / "odd.npz", payload)
    with pytest.raises(ValidationError, match="a checkpoint stores the number its stream uses"):
        RenewableHuberRegressor.load(tmp_path / "odd.npz")


def test_tau_auto_with_nan_in_an_unscanned_native_batch_is_refused(cpu_library):
    # native_cpu reads float64 C-contiguous arrays unchanged and scans them itself, after the
    # pilot: the pilot must refuse NaN rather than choose a tau from it.
    X, y = well_scaled()
    X = X.copy()
    X[0, 1] = np.nan
    model = RenewableHuberRegressor(backend="native_cpu", tau="auto")
    with pytest.raises(ValidationError, match="NaN or infinity"):
        model.fit(X, y)
    assert not hasattr(model, "coef_")


class FakeDeviceArray:
    """Stands in for a device array (CUDA array interface, slicing, the library's asnumpy
    found through its module, as CuPy's): records how many rows crossed to the host."""

    __cuda_array_interface__ = {}
    rows_copied = 0

    def __init__(self, values):
        self.values = np.asarray(values)
        self.shape = self.values.shape

    def __getitem__(self, index):
        return FakeDeviceArray(self.values[index])


def asnumpy(array):  # found by suggest_tau as this module's asnumpy, like cupy.asnumpy
    FakeDeviceArray.rows_copied += array.shape[0]
    return array.values.copy()


def test_suggest_tau_on_device_arrays_copies_only_the_pilot_rows():
    from renewable_huber.tau import PILOT_ROWS

    raw = simulate_raw_units(12_000, 3, seed=8)
    FakeDeviceArray.rows_copied = 0
    on_device = suggest_tau(FakeDeviceArray(raw.X), FakeDeviceArray(raw.y))
    assert on_device == suggest_tau(raw.X, raw.y)
    assert FakeDeviceArray.rows_copied <= 2 * PILOT_ROWS  # X's and y's pilot rows only
