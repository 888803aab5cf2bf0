"""`fit --lambda-scale/--no-intercept/--weight-column/--n-jobs/--json`, `inspect`,
`info --include-dir/--cmake-dir`, engine problems reported as such, and the progress bar's
total. Expected models come from the estimator run in-process on the same batches."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from cli_support import one_error_line, run

import renewable_huber.cli as cli
from renewable_huber import RenewableHuberRegressor
from renewable_huber import checkpoint as checkpoint_module
from renewable_huber.exceptions import BackendUnavailableError
from renewable_huber.simulation import simulate

FEATURES = ["a", "b", "c"]
N_ROWS = 4_000
BATCH = 1_000
COMMON = ["--target", "y", "--batch-size", BATCH, "--no-progress"]






@pytest.fixture(scope="module")
def dataset():
    data = simulate(N_ROWS, len(FEATURES), seed=11)
    weights = np.random.default_rng(11).uniform(0.2, 3.0, N_ROWS)
    return data.X, data.y, weights


@pytest.fixture()
def data_csv(tmp_path, dataset):
    """Columns a, b, c, y, w (weights) and a text column."""
    X, y, w = dataset
    path = tmp_path / "data.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*FEATURES, "y", "w", "label"])
        for i in range(N_ROWS):
            writer.writerow([*map(repr, X[i].tolist()), repr(float(y[i])), repr(float(w[i])),
                             f"r{i}"])
    return path


def in_process(X, y, w=None, **params):
    model = RenewableHuberRegressor(**params)
    for start in range(0, N_ROWS, BATCH):
        rows = slice(start, start + BATCH)
        model.partial_fit(X[rows], y[rows], None if w is None else w[rows])
    return model


def saved(path):
    return RenewableHuberRegressor.load(path)


# ------------------------------------------------------------------------- fit options


def test_lambda_scale_reaches_the_l1_penalty(tmp_path, data_csv, dataset, capsys):
    X, y, _ = dataset
    features = ["--features", "a,b,c"]
    checkpoint = tmp_path / "m.npz"
    status, _, err = run(["fit", data_csv, *COMMON, *features, "--backend", "numpy",
                          "--penalty", "l1", "--lambda-scale", "3", "--checkpoint", checkpoint],
                         capsys)
    assert status == 0, err
    expected = in_process(X, y, backend="numpy", penalty="l1", lambda_scale=3.0)
    default = in_process(X, y, backend="numpy", penalty="l1")
    assert saved(checkpoint).get_params()["lambda_scale"] == 3.0
    np.testing.assert_allclose(saved(checkpoint).coef_, expected.coef_, rtol=1e-12)
    # the option changed the fit: scale 3 is not scale 1
    assert not np.allclose(expected.coef_, default.coef_, rtol=1e-9, atol=0)


def test_no_intercept(tmp_path, data_csv, dataset, capsys):
    X, y, _ = dataset
    checkpoint = tmp_path / "m.npz"
    status, out, err = run(["fit", data_csv, *COMMON, "--features", "a,b,c", "--backend",
                            "numpy", "--no-intercept", "--checkpoint", checkpoint], capsys)
    assert status == 0, err
    expected = in_process(X, y, backend="numpy", fit_intercept=False)
    model = saved(checkpoint)
    assert model.get_params()["fit_intercept"] is False and model.intercept_ == 0
    np.testing.assert_allclose(model.coef_, expected.coef_, rtol=1e-12)
    assert "(intercept)" not in out


def test_weight_column_weights_each_row_and_is_not_a_feature(tmp_path, data_csv, dataset,
                                                              capsys):
    X, y, w = dataset
    checkpoint = tmp_path / "m.npz"
    status, out, err = run(["fit", data_csv, *COMMON, "--backend", "numpy", "--weight-column",
                            "w", "--checkpoint", checkpoint], capsys)
    assert status == 0, err
    expected = in_process(X, y, w, backend="numpy")
    unweighted = in_process(X, y, backend="numpy")
    model = saved(checkpoint)
    assert list(model.feature_names_in_) == FEATURES
    np.testing.assert_allclose(model.coef_, expected.coef_, rtol=1e-12)
    assert model.state_.weight_sum == pytest.approx(w.sum(), rel=1e-12)
    assert not np.allclose(expected.coef_, unweighted.coef_, rtol=1e-9, atol=0)
    assert "weights: w" in out


def test_a_negative_weight_is_refused_naming_the_batch_lines(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("a,y,w\n" + "".join(f"{i},{2 * i},{-1 if i == 5 else 1}\n"
                                        for i in range(8)))
    status, _, err = run(["fit", path, "--target", "y", "--weight-column", "w",
                          "--batch-size", 4, "--backend", "numpy", "--no-progress"], capsys)
    assert status == 1
    line = one_error_line(err)
    assert f"{path} lines 6-9 (batch 2 of this run)" in line and "sample_weight" in line


def test_n_jobs_sets_the_engine_threads_and_may_change_on_resume(tmp_path, data_csv, dataset,
                                                                  capsys, cpu_library):
    from renewable_huber._loader import load_engine_library

    if not hasattr(load_engine_library("native_cpu"), "omp_set_num_threads"):
        pytest.skip("librh_cpu was built without OpenMP (RH_OPENMP=OFF): one thread only")
    X, y, _ = dataset
    first, checkpoint = tmp_path / "first.csv", tmp_path / "m.npz"
    lines = data_csv.read_bytes().splitlines(keepends=True)
    first.write_bytes(b"".join(lines[:1 + 2 * BATCH]))
    options = [*COMMON, "--features", "a,b,c", "--backend", "native_cpu", "--json"]
    status, out, err = run(["fit", first, *options, "--n-jobs", 2, "--checkpoint",
                            checkpoint], capsys)
    assert status == 0, err
    assert json.loads(out)["n_jobs"] == 2
    # data.csv starts with first.csv's bytes: the resumed run continues after row 2,000
    status, out, err = run(["fit", data_csv, *options, "--n-jobs", 1, "--resume", checkpoint,
                            "--checkpoint", checkpoint], capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["n_jobs"] == 1 and document["run"]["started_after_row"] == 2 * BATCH
    expected = in_process(X, y, backend="native_cpu")
    np.testing.assert_allclose(saved(checkpoint).coef_, expected.coef_, rtol=1e-10)
    assert saved(checkpoint).n_samples_seen_ == N_ROWS


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_bad_n_jobs_is_a_usage_error(data_csv, capsys, value):
    status, _, err = run(["fit", data_csv, *COMMON, "--n-jobs", value], capsys)
    assert status == 2
    assert "--n-jobs" in one_error_line(err)


def test_fit_json_is_one_document_with_the_model_and_the_run(tmp_path, data_csv, dataset,
                                                             capsys):
    X, y, _ = dataset
    checkpoint = tmp_path / "m.npz"
    force = ["--max-iter", 1, "--tol", 1e-12]
    status, out, err = run(["fit", data_csv, *COMMON, "--backend", "numpy", *force,
                            "--checkpoint", checkpoint, "--json"], capsys)
    assert status == 0, err
    document = json.loads(out)
    model = saved(checkpoint)
    names = [*FEATURES, "w"]  # without --weight-column, w is a numeric feature; label is text
    assert document["features"] == names
    assert document["coefficients"] == dict(zip(names, model.coef_.tolist(), strict=True))
    assert document["intercept"] == float(model.intercept_)
    assert document["n_samples_seen"] == N_ROWS and document["batch_count"] == 4
    assert document["run"]["rows"] == N_ROWS and document["run"]["batches"] == 4
    assert document["run"]["checkpoint"] == str(checkpoint)
    assert document["backend"] == "numpy" and document["dtype"] == "float64"
    warned = [line for line in err.splitlines() if "did not converge after" in line]
    assert len(document["unconverged_batches"]) == document["not_converged"] == len(warned) > 0
    first = document["unconverged_batches"][0]
    assert set(first) == {"batch", "first", "last", "iterations", "reason"}
    assert first["iterations"] == 1 and first["reason"] == "max_iter"
    assert first["first"] == 2 + (first["batch"] - 1) * BATCH
    assert document["last_batch"]["iterations"] == 1


# ---------------------------------------------------------------------------- inspect


@pytest.fixture()
def fitted(tmp_path, data_csv, capsys):
    checkpoint = tmp_path / "m.npz"
    assert run(["fit", data_csv, *COMMON, "--backend", "numpy", "--dtype", "float32",
                "--checkpoint", checkpoint], capsys)[0] == 0
    return checkpoint


def test_inspect_prints_names_coefficients_counters_dtype_backend_and_source(fitted, data_csv,
                                                                             capsys):
    status, out, err = run(["inspect", fitted], capsys)
    assert status == 0, err
    payload = checkpoint_module.load_checkpoint(fitted)
    assert "backend: numpy" in out and "dtype: float32" in out
    assert f"rows seen: {N_ROWS:,} in 4 batches" in out
    assert f"source: {data_csv}: holds its first {N_ROWS:,} data rows" in out
    for name, value in zip([*FEATURES, "w", "(intercept)"], payload["coefficients"].tolist(),
                           strict=True):
        line = next(x for x in out.splitlines() if x.startswith(name + " "))
        assert float(line.split()[-1]) == pytest.approx(value, rel=1e-5)


def test_inspect_json_matches_the_checkpoint(fitted, capsys):
    status, out, _ = run(["inspect", fitted, "--json"], capsys)
    assert status == 0
    document = json.loads(out)
    payload = checkpoint_module.load_checkpoint(fitted)
    names = [*FEATURES, "w"]
    assert document["coefficients"] == dict(zip(names, payload["coefficients"][:4].tolist(),
                                                strict=True))
    assert document["intercept"] == payload["coefficients"][4].item()
    for key in ("n_samples_seen", "batch_count", "weight_sum", "previous_lambda", "source",
                "config"):
        assert document[key] == payload[key], key
    assert document["backend"] == "numpy" and document["dtype"] == "float32"


def test_inspect_needs_no_engine_and_names_unnamed_features(tmp_path, dataset, capsys):
    X, y, _ = dataset
    model = in_process(X, y, backend="numpy")
    payload = model.state_dict()
    payload["config"]["backend"] = "native_cuda"  # not loadable here: inspect must not care
    checkpoint_module.save_checkpoint(tmp_path / "gpu.npz", payload)
    status, out, err = run(["inspect", tmp_path / "gpu.npz", "--json"], capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["backend"] == "native_cuda"
    assert list(document["coefficients"]) == ["x0", "x1", "x2"]
    assert document["feature_names"] is None and document["source"] is None


def test_inspect_of_a_bad_file_is_one_line(tmp_path, data_csv, capsys):
    for path, needle in ((tmp_path / "absent.npz", "No such file"),
                         (data_csv, "invalid or corrupted checkpoint")):
        status, _, err = run(["inspect", path], capsys)
        assert status == 1
        assert needle in one_error_line(err)


# -------------------------------------------------------------------------------- info


def test_info_dirs_print_the_installed_folders_or_fail_in_one_line(capsys):
    """From an installed package (make test) the folders exist and hold the header and the
    CMake package; from a source checkout the flags fail in one line."""
    import renewable_huber

    installed = (Path(renewable_huber.__file__).parent / "include" / "rh_cuda.h").is_file()
    for flag, member in (("--include-dir", "rh_cuda.h"),
                         ("--cmake-dir", "renewable_huber/renewable_huberConfig.cmake")):
        status, out, err = run(["info", flag], capsys)
        if installed:
            assert status == 0 and (Path(out.strip()) / member).is_file(), err
        else:
            assert status == 1 and out == ""
            assert "was not installed from a wheel" in one_error_line(err)
    status, _, err = run(["info", "--include-dir", "--cmake-dir"], capsys)
    assert status == 2 and "not allowed with" in one_error_line(err)


def test_info_dirs_print_the_installed_folders(tmp_path, monkeypatch, capsys):
    from renewable_huber import paths

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "rh_cuda.h").write_text("")
    config = tmp_path / "cmake" / "renewable_huber"
    config.mkdir(parents=True)
    (config / "renewable_huberConfig.cmake").write_text("")
    monkeypatch.setattr(paths, "_PACKAGE", tmp_path)
    assert run(["info", "--include-dir"], capsys)[1] == f"{tmp_path / 'include'}\n"
    assert run(["info", "--cmake-dir"], capsys)[1] == f"{tmp_path / 'cmake'}\n"


# ------------------------------------------------------------------------ engine problems


def test_a_missing_engine_is_an_engine_error_not_a_data_error(tmp_path, data_csv, capsys,
                                                               monkeypatch):
    monkeypatch.setenv("RH_CUDA_LIBRARY", str(tmp_path / "absent" / "librh_cuda.so"))
    status, out, err = run(["fit", data_csv, *COMMON, "--backend", "native_cuda"], capsys)
    assert status == 1 and out == ""
    line = one_error_line(err)
    assert "engine unavailable: backend 'native_cuda'" in line and "renewable-huber info" in line
    assert "lines" not in line and str(data_csv) not in line


def test_an_engine_that_vanishes_mid_stream_is_an_engine_error(data_csv, capsys, monkeypatch):
    def partial_fit(self, X, y, sample_weight=None):
        raise BackendUnavailableError("backend 'native_cpu' is unavailable: library unloaded")

    monkeypatch.setattr(RenewableHuberRegressor, "partial_fit", partial_fit)
    status, _, err = run(["fit", data_csv, *COMMON], capsys)
    assert status == 1
    line = one_error_line(err)
    assert line.startswith("renewable-huber: error: engine unavailable: backend 'native_cpu'")
    assert "lines" not in line


def test_resuming_a_checkpoint_of_a_missing_engine_suggests_backend(tmp_path, dataset, capsys,
                                                                     data_csv, monkeypatch):
    X, y, _ = dataset
    payload = in_process(X, y, backend="numpy").state_dict()
    payload["config"]["backend"] = "native_cuda"
    checkpoint_module.save_checkpoint(tmp_path / "gpu.npz", payload)
    monkeypatch.setenv("RH_CUDA_LIBRARY", str(tmp_path / "absent" / "librh_cuda.so"))
    status, _, err = run(["fit", data_csv, *COMMON, "--features", "a,b,c", "--resume",
                          tmp_path / "gpu.npz"], capsys)
    assert status == 1
    line = one_error_line(err)
    assert f"cannot resume {tmp_path / 'gpu.npz'}" in line and "--backend" in line
    status, _, err = run(["predict", tmp_path / "gpu.npz", data_csv], capsys)
    assert status == 1 and "cannot load" in one_error_line(err)
    # with --backend the stream moves to an engine that loads
    status, _, err = run(["fit", data_csv, *COMMON, "--features", "a,b,c", "--resume",
                          tmp_path / "gpu.npz", "--backend", "numpy"], capsys)
    assert status == 0, err


def test_a_bad_tau_is_reported_before_any_row_is_read(data_csv, capsys):
    status, _, err = run(["fit", data_csv, *COMMON, "--tau", "-1"], capsys)
    assert status == 1
    line = one_error_line(err)
    assert "tau must be" in line and "lines" not in line


# ---------------------------------------------------------------------------- progress


class RecordingBar:
    def __init__(self, total, unit):
        self.total, self.unit, self.done, self.closed = total, unit, 0, False

    def update(self, n):
        self.done += n

    def close(self):
        self.closed = True


@pytest.fixture()
def bars(monkeypatch):
    made = []

    def progress(total, desc, no_progress, unit="rows"):
        made.append(RecordingBar(total, unit))
        return made[-1]

    monkeypatch.setattr(cli, "_progress", progress)
    return made


def test_the_progress_bar_counts_the_bytes_of_a_csv_file(tmp_path, data_csv, capsys, bars):
    size = data_csv.stat().st_size
    assert run(["fit", data_csv, *COMMON, "--backend", "numpy"], capsys)[0] == 0
    (bar,) = bars
    assert (bar.total, bar.unit, bar.done, bar.closed) == (size, "B", size, True)
    # a resumed run starts the bar where the checkpoint stopped
    checkpoint = tmp_path / "m.npz"
    first = tmp_path / "first.csv"
    first.write_bytes(b"".join(data_csv.read_bytes().splitlines(keepends=True)[:1001]))
    assert run(["fit", first, *COMMON, "--backend", "numpy", "--features", "a,b,c",
                "--checkpoint", checkpoint], capsys)[0] == 0
    assert run(["fit", data_csv, *COMMON, "--backend", "numpy", "--resume", checkpoint],
               capsys)[0] == 0
    assert (bars[-1].total, bars[-1].done) == (size, size)


def test_the_progress_bar_counts_the_rows_of_a_parquet_file(tmp_path, dataset, capsys, bars):
    pa = pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    import pyarrow.parquet as pq

    X, y, _ = dataset
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": X[:, 0], "y": y}), path, row_group_size=700)
    assert run(["fit", path, *COMMON, "--backend", "numpy"], capsys)[0] == 0
    (bar,) = bars
    assert (bar.total, bar.unit, bar.done) == (N_ROWS, "rows", N_ROWS)


def test_progress_bar_is_tqdm_with_a_total_on_a_terminal(monkeypatch):
    import io

    import tqdm

    from renewable_huber import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    monkeypatch.setattr(progress.sys, "stderr", stream)
    bar = progress.progress_bar(2048, desc="fit", unit="B", enabled=True)
    assert isinstance(bar, tqdm.tqdm) and bar.total == 2048
    bar.update(2048)
    bar.close()
    assert "/2.00k" in stream.getvalue() and "B/s" in stream.getvalue()  # bytes, of a total
    assert isinstance(progress.progress_bar(10, desc="fit", unit="B", enabled=False),
                      progress._SilentProgress)
