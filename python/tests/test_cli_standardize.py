"""`renewable-huber fit --standardize`: L1 on features in raw units converges with it (and
does not without it), the checkpoint keeps the stream standardised across --resume, predict
and inspect report the data's units, and --resume refuses it as every option the checkpoint
fixes (fit --dask --standardize: test_cli_dask.py). Expected numbers come from the estimator
run in-process on the same batches, from NumPy (the first batch's mean and standard
deviation, X @ coef + intercept), or from the same fit without standardisation (without a
penalty the two are one Huber fit)."""

import json

import numpy as np
import pytest
from cli_support import one_error_line, run, write_csv

import renewable_huber.cli as cli
from renewable_huber import RenewableHuberRegressor
from renewable_huber import checkpoint as checkpoint_module
from renewable_huber.simulation import simulate_raw_units

N_BATCHES = 4
L1 = ["--penalty", "l1", "--tau", "auto"]
# Without a penalty: a tau in the target's units (its errors have scale 5) and a tolerance
# tight enough that two parametrisations of one fit agree far below the comparison's 1e-6.
NO_PENALTY = ["--tau", "8", "--tol", "1e-10", "--inference"]


def raw_units_table():
    """Columns of scales 1, 316 and 1e5 with means three times their scale (simulation's
    raw-unit design), a target near 1e5: far from standardised."""
    data = simulate_raw_units(4_000, 3, seed=6, error_scale=5.0)
    return data.X, data.y, ["a", "b", "c"]


def diabetes_table():
    """scikit-learn's diabetes table in its raw units (ages, a 1/2 code, blood serum values
    in the hundreds), target in the tens to hundreds."""
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_diabetes(return_X_y=True, scaled=False)
    names = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
    return X.astype(np.float64), y.astype(np.float64), names


TABLES = {"raw_units": raw_units_table, "diabetes": diabetes_table}


@pytest.fixture(params=sorted(TABLES))
def table(request, tmp_path):
    """(X, y, feature names, the CSV holding them, rows per batch: four batches)."""
    X, y, names = TABLES[request.param]()
    path = write_csv(tmp_path / "data.csv", X, y, features=names)
    return X, y, names, path, -(-len(y) // N_BATCHES)


@pytest.fixture()
def raw_csv(tmp_path):
    X, y, names = raw_units_table()
    return X, y, names, write_csv(tmp_path / "raw.csv", X, y, features=names)


def fit_argv(path, batch, *extra, backend="numpy"):
    return ["fit", path, "--target", "y", "--batch-size", batch, "--backend", backend,
            "--no-progress", *extra]


def warning_lines(err):
    return [line for line in err.splitlines() if line.startswith("renewable-huber: warning: ")]


def streamed(X, y, batch, **params):
    """The estimator fitted in-process on the CLI's batches."""
    model = RenewableHuberRegressor(**params)
    for start in range(0, len(y), batch):
        model.partial_fit(X[start:start + batch], y[start:start + batch])
    return model


def parameters(model):
    return np.append(model.coef_, model.intercept_)


def first_batch_scaling(X, batch):
    """The centre and scale --standardize must fix: the first batch's mean and (population)
    standard deviation of each column."""
    return X[:batch].mean(axis=0), X[:batch].std(axis=0)


def fitted_checkpoint(tmp_path, path, batch, capsys, *extra, name="m.npz"):
    checkpoint = tmp_path / name
    status, _, err = run(fit_argv(path, batch, *extra, "--checkpoint", checkpoint), capsys)
    assert status == 0, err
    return checkpoint


# ------------------------------------------------------------------- L1 on raw-unit features


@pytest.fixture(params=["numpy", "native_cpu"])
def backend(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")  # skips with the reason when not built
    return request.param


def test_l1_with_standardize_converges_on_raw_units_and_equals_the_estimator(table, backend,
                                                                             tmp_path, capsys):
    X, y, names, path, batch = table
    checkpoint = tmp_path / "l1.npz"
    status, out, err = run(fit_argv(path, batch, *L1, "--standardize", "--json",
                                    "--checkpoint", checkpoint, backend=backend), capsys)
    assert status == 0, err
    assert warning_lines(err) == []  # no convergence (or scale) warning, no closing summary
    document = json.loads(out)
    assert document["run"]["batches"] == N_BATCHES and document["not_converged"] == 0
    assert document["last_batch"]["converged"] is True
    assert document["config"]["standardize"] is True

    expected = streamed(X, y, batch, penalty="l1", tau="auto", standardize=True,
                        backend=backend)
    assert expected.diagnostics_["converged"]
    saved = RenewableHuberRegressor.load(checkpoint)
    assert saved.get_params()["standardize"] is True
    np.testing.assert_allclose(parameters(saved), parameters(expected), rtol=1e-12, atol=0)
    np.testing.assert_allclose(saved.state_.coefficients, expected.state_.coefficients,
                               rtol=1e-12, atol=0)
    # What fit printed is the raw-unit model, not the standardised state.
    printed = np.append([document["coefficients"][name] for name in names],
                        document["intercept"])
    np.testing.assert_allclose(printed, parameters(expected), rtol=1e-12, atol=0)

    # The checkpoint's scaling is the first batch's mean and standard deviation, and its
    # standardised coefficients map to the raw ones as g_j / scale_j and b - sum centre_j coef_j.
    center, scale = first_batch_scaling(X, batch)
    stored = checkpoint_module.load_checkpoint(checkpoint)["feature_scaling"]
    np.testing.assert_allclose(stored["center"], center, rtol=1e-12)
    np.testing.assert_allclose(stored["scale"], scale, rtol=1e-12)
    g = saved.state_.coefficients
    np.testing.assert_allclose(saved.coef_, g[:-1] / scale, rtol=1e-12, atol=0)
    assert saved.intercept_ == pytest.approx(g[-1] - center @ (g[:-1] / scale), rel=1e-12)


def test_the_same_l1_fit_without_standardize_does_not_converge(table, capsys):
    """Why the flag exists: LAMM, first-order, crawls on columns of such different scales and
    ends batches at --max-iter; the first batch's warning names --standardize."""
    X, y, names, path, batch = table
    status, out, err = run(fit_argv(path, batch, *L1, "--json"), capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["config"]["standardize"] is False
    assert document["not_converged"] >= 1
    lines = warning_lines(err)
    scale_warning = [line for line in lines if "far from standardised" in line]
    assert len(scale_warning) == 1 and scale_warning[0].endswith(
        "; here: fit again with --standardize")
    assert lines[-1].startswith(f"renewable-huber: warning: {document['not_converged']} of "
                                f"{N_BATCHES} batches did not converge")


def test_an_unconverged_standardised_l1_run_does_not_blame_the_scale(raw_csv, capsys):
    _, _, _, path = raw_csv
    status, out, err = run(fit_argv(path, 1_000, *L1, "--standardize", "--max-iter", "1",
                                    "--tol", "1e-12"), capsys)
    assert status == 0, err
    summary = warning_lines(err)[-1]
    assert summary.startswith("renewable-huber: warning: 4 of 4 batches did not converge ")
    assert summary.endswith("the features are standardised (--standardize), so the design is "
                            "nearly collinear or the batches need more iterations: raise "
                            "--max-iter, or drop or combine nearly collinear columns")


# ----------------------------------------------------------------------------------- resume


def test_resume_of_a_standardised_checkpoint_equals_the_uninterrupted_run(raw_csv, tmp_path,
                                                                          capsys):
    """Two batches, then the file grows and --resume folds in the other two: the centre and
    scale stay those of the first batch, and the stream is the one of a single run."""
    X, y, names, full = raw_csv
    batch = 1_000
    half = write_csv(tmp_path / "growing.csv", X[:2 * batch], y[:2 * batch], features=names)
    checkpoint = fitted_checkpoint(tmp_path, half, batch, capsys, *L1, "--standardize")
    write_csv(half, X, y, features=names)  # rows appended: the same source, continued
    status, out, err = run(fit_argv(half, batch, "--resume", checkpoint, "--checkpoint",
                                    checkpoint), capsys)
    assert status == 0, err
    assert f"this run: {2 * batch:,} rows in 2 batches" in out
    assert cli.STANDARDIZED_NOTE in out.splitlines()

    once = fitted_checkpoint(tmp_path, full, batch, capsys, *L1, "--standardize",
                             name="once.npz")
    resumed, uninterrupted = (RenewableHuberRegressor.load(p) for p in (checkpoint, once))
    assert resumed.get_params()["standardize"] is True
    assert resumed.state_.batch_count == uninterrupted.state_.batch_count == 4
    np.testing.assert_array_equal(resumed.state_.coefficients,
                                  uninterrupted.state_.coefficients)
    np.testing.assert_array_equal(parameters(resumed), parameters(uninterrupted))
    payload = checkpoint_module.load_checkpoint(checkpoint)
    assert payload["config"]["standardize"] is True
    center, scale = first_batch_scaling(X, batch)
    np.testing.assert_allclose(payload["feature_scaling"]["center"], center, rtol=1e-12)
    np.testing.assert_allclose(payload["feature_scaling"]["scale"], scale, rtol=1e-12)


@pytest.mark.parametrize("standardised_checkpoint", [True, False])
def test_standardize_with_resume_is_refused_as_every_option_the_checkpoint_fixes(
        raw_csv, tmp_path, capsys, standardised_checkpoint):
    """As --inference: whether or not the checkpoint is standardised, the flag cannot be given
    with --resume (the resumed stream keeps the checkpoint's setting); nothing is written."""
    X, y, names, path = raw_csv
    extra = ["--standardize"] if standardised_checkpoint else []
    checkpoint = fitted_checkpoint(tmp_path, path, 1_000, capsys, *extra)
    before = checkpoint.read_bytes()
    status, out, err = run(fit_argv(path, 1_000, "--standardize", "--resume", checkpoint,
                                    "--new-data", "--checkpoint", checkpoint), capsys)
    assert status == 2 and out == ""
    assert one_error_line(err) == ("renewable-huber: error: --standardize cannot be combined "
                                   "with --resume: the checkpoint fixes the configuration")
    assert checkpoint.read_bytes() == before


def test_the_command_that_restarts_a_run_keeps_standardize_and_the_resume_leaves_it_out():
    args = cli.build_parser().parse_args(["fit", "data.csv", "--target", "y", "--standardize",
                                          "--checkpoint", "m.npz"])
    args.data, args.batch_size = args.data[0], 1_000
    assert "--standardize" in cli._fit_command(args).split()
    assert "--standardize" not in cli._fit_command(args, resume="m.npz").split()


# --------------------------------------------------------------------------------- predict


def test_predict_with_a_standardised_checkpoint_equals_the_estimator(raw_csv, tmp_path,
                                                                     capsys):
    X, y, _, path = raw_csv
    checkpoint = fitted_checkpoint(tmp_path, path, 1_000, capsys, *L1, "--standardize")
    output = tmp_path / "predictions.csv"
    status, _, err = run(["predict", checkpoint, path, "--output", output, "--batch-size", 700,
                          "--no-progress"], capsys)
    assert status == 0, err
    lines = output.read_text().splitlines()
    assert lines[0] == "prediction"
    predicted = np.array([float(line) for line in lines[1:]])
    model = RenewableHuberRegressor.load(checkpoint)
    np.testing.assert_allclose(predicted, model.predict(X), rtol=1e-12, atol=0)
    # ... which is the raw-unit linear model (the standardised columns never leave the engine).
    np.testing.assert_allclose(predicted, X @ model.coef_ + model.intercept_, rtol=1e-9)


# --------------------------------------------------------------------------------- inspect


@pytest.fixture()
def both_checkpoints(raw_csv, tmp_path, capsys):
    """The same penalty-none --inference fit with and without --standardize."""
    _, _, _, path = raw_csv
    return tuple(fitted_checkpoint(tmp_path, path, 1_000, capsys, *NO_PENALTY, *extra,
                                   name=name)
                 for extra, name in ((["--standardize"], "std.npz"), ([], "raw.npz")))


def inspect_json(checkpoint, capsys):
    status, out, err = run(["inspect", checkpoint, "--json"], capsys)
    assert status == 0, err
    return json.loads(out)


def test_inspect_json_of_a_standardised_checkpoint_is_in_the_data_units(raw_csv,
                                                                        both_checkpoints,
                                                                        capsys):
    X, _, names, _ = raw_csv
    standardised, plain = both_checkpoints
    document = inspect_json(standardised, capsys)
    model = RenewableHuberRegressor.load(standardised)
    assert document["config"]["standardize"] is True
    assert document["inference_unavailable"] is None
    coefficients = np.array([document["coefficients"][name] for name in names])
    np.testing.assert_allclose(coefficients, model.coef_, rtol=1e-12, atol=0)
    assert document["intercept"] == pytest.approx(model.intercept_, rel=1e-12)
    errors = np.array([document["standard_errors"][name] for name in [*names, "(intercept)"]])
    np.testing.assert_allclose(errors, model.bse_, rtol=1e-12, atol=0)
    center, scale = first_batch_scaling(X, 1_000)
    for key, values in (("center", center), ("scale", scale)):
        assert list(document["feature_scaling"][key]) == names
        np.testing.assert_allclose(list(document["feature_scaling"][key].values()), values,
                                   rtol=1e-12)

    # Without a penalty standardising only reparametrises the problem: the same Huber fit,
    # the same sandwich covariance, whichever coordinates the engine solved in.
    reference = inspect_json(plain, capsys)
    assert reference["config"]["standardize"] is False and reference["feature_scaling"] is None
    np.testing.assert_allclose(
        coefficients, [reference["coefficients"][name] for name in names], rtol=1e-6)
    assert document["intercept"] == pytest.approx(reference["intercept"], rel=1e-6)
    np.testing.assert_allclose(
        errors, [reference["standard_errors"][name] for name in [*names, "(intercept)"]],
        rtol=1e-6)


def table_rows(out, header):
    """{name: [numbers]} of the table under the line starting with `header`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 1
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        if line.startswith(("-", "feature")):
            continue
        name, *values = line.split()
        rows[name] = [float(value) for value in values]
    return rows


def test_inspect_text_of_a_standardised_checkpoint_is_in_the_data_units(raw_csv,
                                                                        both_checkpoints,
                                                                        capsys):
    _, _, names, _ = raw_csv
    standardised, plain = both_checkpoints
    status, out, err = run(["inspect", standardised], capsys)
    assert status == 0, err
    config_line = next(line for line in out.splitlines() if line.startswith("config: "))
    assert config_line.endswith(" inference=True standardize=True")
    assert cli.STANDARDIZED_NOTE in out.splitlines()
    model = RenewableHuberRegressor.load(standardised)
    coefficients = table_rows(out, "feature ")
    inference_rows = table_rows(out, "inference (")
    for j, name in enumerate([*names, "(intercept)"]):
        # Printed with 6 significant digits.
        assert coefficients[name][0] == pytest.approx(parameters(model)[j], rel=1e-5)
        assert inference_rows[name][0] == pytest.approx(model.bse_[j], rel=1e-5)

    # The stream without --standardize prints the same numbers, and no standardize line.
    status, plain_out, err = run(["inspect", plain], capsys)
    assert status == 0, err
    assert "standardize" not in plain_out and cli.STANDARDIZED_NOTE not in plain_out
    for header, rows in (("feature ", coefficients), ("inference (", inference_rows)):
        plain_rows = table_rows(plain_out, header)
        assert list(plain_rows) == list(rows)
        for name, values in rows.items():
            assert plain_rows[name] == pytest.approx(values, rel=1e-5, abs=1e-12), name


def test_fit_summary_and_json_of_a_standardised_stream_are_in_the_data_units(
        raw_csv, both_checkpoints, capsys):
    """fit's tables and document come from the estimator (coef_, intercept_, bse_), as
    inspect's do: the same run as both_checkpoints' standardised one."""
    _, _, names, path = raw_csv
    model = RenewableHuberRegressor.load(both_checkpoints[0])
    status, out, err = run(fit_argv(path, 1_000, *NO_PENALTY, "--standardize"), capsys)
    assert status == 0, err
    assert cli.STANDARDIZED_NOTE in out.splitlines()
    coefficients, inference_rows = table_rows(out, "feature "), table_rows(out, "inference (")
    for j, name in enumerate([*names, "(intercept)"]):
        assert coefficients[name][0] == pytest.approx(parameters(model)[j], rel=1e-5)
        assert inference_rows[name][0] == pytest.approx(model.bse_[j], rel=1e-5)
    status, inspected, _ = run(["inspect", both_checkpoints[0]], capsys)
    assert status == 0
    assert table_rows(inspected, "feature ") == coefficients
    assert table_rows(inspected, "inference (") == inference_rows

    status, out, err = run(fit_argv(path, 1_000, *NO_PENALTY, "--standardize", "--json"),
                           capsys)
    assert status == 0, err
    document = json.loads(out)
    np.testing.assert_allclose(
        [document["standard_errors"][name] for name in [*names, "(intercept)"]], model.bse_,
        rtol=1e-12, atol=0)
    np.testing.assert_allclose(
        np.append([document["coefficients"][name] for name in names], document["intercept"]),
        parameters(model), rtol=1e-12, atol=0)
