"""The `renewable-huber` command line, run in-process through main(argv) (and once as a real
subprocess). Expected numbers come from the estimator fitted here on the same batches, from
numpy.linalg.lstsq, or from the simulation design itself, never from the CLI's own output."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import run
from cli_support import write_csv as write_plain_csv

import renewable_huber
from renewable_huber import RenewableHuberRegressor
from renewable_huber.cli import main
from renewable_huber.progress import _PlainProgress
from renewable_huber.simulation import simulate

FEATURES = ["a", "b", "c"]
N_ROWS = 6_000
BATCH = 1_000


def write_csv(path, X, y, *, extra_text_column=True):
    """This module's files carry a text column by default, which fit must leave out."""
    return write_plain_csv(path, X, y, extra_text_column=extra_text_column)





@pytest.fixture(scope="module")
def dataset():
    return simulate(N_ROWS, len(FEATURES), seed=3)


@pytest.fixture()
def data_csv(tmp_path, dataset):
    path = tmp_path / "data.csv"
    write_csv(path, dataset.X, dataset.y)
    return path


def in_process_model(X, y, batch=BATCH, model=None):
    """The same batches through the estimator; backend "auto" resolves as in the CLI, so
    both sides run the same engine and agree to rounding."""
    model = model or RenewableHuberRegressor()
    for start in range(0, X.shape[0], batch):
        model.partial_fit(X[start:start + batch], y[start:start + batch])
    return model


def checkpoint_arrays(path):
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def assert_same_checkpoint(path_a, path_b):
    """The same model; the source records (which file, how far) and so the digests may
    differ."""
    a, b = checkpoint_arrays(path_a), checkpoint_arrays(path_b)
    assert a.keys() == b.keys()
    for name in a:
        if name == "metadata":
            meta_a, meta_b = (json.loads(str(m[()])) for m in (a[name], b[name]))
            for meta in (meta_a, meta_b):
                meta.pop("source", None)
                meta.pop("payload_sha256")
            assert meta_a == meta_b
        elif a[name].dtype.kind == "f":
            np.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=0, err_msg=name)
        else:
            assert a[name].tolist() == b[name].tolist(), name


def assert_one_error_line(err, *needles):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("renewable-huber: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


# ---------------------------------------------------------------------------------- demo

DEMO_ARGS = ["demo", "--rows", 20_000, "--features", 4, "--batch-size", 2_000, "--seed", 5,
             "--backend", "numpy", "--no-progress"]


def parse_demo_table(out):
    rows = {}
    for line in out.splitlines():
        match = re.match(r"^(renewable|oracle|OLS)\b.*?\s+([\d.]+)\s+([+-][\d.]+)\s+([\d.]+)$",
                         line)
        if match:
            rows[match.group(1)] = tuple(float(match.group(i)) for i in (2, 3, 4))
    distance = float(re.search(r"renewable vs oracle L2 distance.*: (\S+)", out).group(1))
    return rows, distance


def test_demo_prints_the_comparison_table_with_renewable_close_to_oracle(capsys):
    status, out, err = run(DEMO_ARGS, capsys)
    assert status == 0, err
    rows, distance = parse_demo_table(out)
    assert set(rows) == {"renewable", "oracle", "OLS"}
    renewable, oracle, ols = rows["renewable"], rows["oracle"], rows["OLS"]
    assert distance < 1e-3
    assert abs(renewable[0] - oracle[0]) < 1e-3
    assert abs(renewable[1] - oracle[1]) < 1e-3
    # Least squares is less efficient under t(3) errors and absorbs the mean outlier shift
    # (5% x 20 = 1.0) into its intercept; Huber bounds each outlier's pull.
    assert ols[0] > oracle[0]
    assert abs(ols[1]) > 3 * abs(oracle[1])


def test_demo_ols_row_matches_lstsq_on_the_same_simulation(capsys):
    status, out, _ = run(DEMO_ARGS, capsys)
    assert status == 0
    data = simulate(20_000, 4, seed=5)
    beta = np.linalg.lstsq(np.column_stack([data.X, np.ones(20_000)]), data.y, rcond=None)[0]
    rows, _ = parse_demo_table(out)
    assert rows["OLS"][0] == pytest.approx(np.linalg.norm(beta[:-1] - data.true_coef), abs=1e-4)
    assert rows["OLS"][1] == pytest.approx(beta[-1] - data.true_intercept, abs=1e-4)
    assert 0.7 < rows["OLS"][1] < 1.3


def test_no_command_runs_the_demo(capsys):
    status, out, _ = run(["--rows", 3_000, "--features", 2, "--batch-size", 1_000,
                          "--no-progress"], capsys)
    assert status == 0
    assert "renewable Huber (3 batches)" in out


def test_demo_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    target = tmp_path / "trajectory.png"
    status, out, err = run([*DEMO_ARGS, "--plot", target], capsys)
    assert status == 0, err
    content = target.read_bytes()
    assert content.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(content) > 5_000
    assert str(target) in out


def test_demo_plot_without_matplotlib_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, _, err = run([*DEMO_ARGS, "--plot", tmp_path / "x.png"], capsys)
    assert status != 0
    assert_one_error_line(err, "matplotlib", "renewable-huber[plot]")
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------------ fit / predict


def test_fit_matches_the_estimator_fitted_in_process_on_the_same_batches(
        tmp_path, data_csv, dataset, capsys):
    checkpoint = tmp_path / "model.npz"
    status, out, err = run(["fit", data_csv, "--target", "y", "--batch-size", BATCH,
                            "--checkpoint", checkpoint, "--no-progress"], capsys)
    assert status == 0, err
    expected = in_process_model(dataset.X, dataset.y)
    fitted = RenewableHuberRegressor.load(checkpoint)
    np.testing.assert_allclose(fitted.coef_, expected.coef_, rtol=1e-12)
    assert fitted.intercept_ == pytest.approx(expected.intercept_, rel=1e-12)
    assert fitted.n_samples_seen_ == N_ROWS
    assert list(fitted.feature_names_in_) == FEATURES
    # the summary names every coefficient; the text column 'label' was left out
    for name, value in zip(FEATURES, expected.coef_, strict=True):
        printed = re.search(rf"^{name}\s+(\S+)$", out, re.MULTILINE).group(1)
        assert float(printed) == pytest.approx(value, rel=1e-5)
    assert "label" not in out
    assert f"{N_ROWS:,} rows in {N_ROWS // BATCH} batches" in out


def test_backend_option_selects_the_engine(tmp_path, data_csv, dataset, capsys):
    checkpoint = tmp_path / "model.npz"
    status, out, err = run(["fit", data_csv, "--target", "y", "--backend", "numpy",
                            "--checkpoint", checkpoint, "--no-progress"], capsys)
    assert status == 0, err
    assert "backend: numpy" in out
    expected = in_process_model(dataset.X, dataset.y, batch=10_000,
                                model=RenewableHuberRegressor(backend="numpy"))
    fitted = RenewableHuberRegressor.load(checkpoint)
    assert fitted.get_params()["backend"] == "numpy"
    np.testing.assert_allclose(fitted.coef_, expected.coef_, rtol=1e-12)


def test_fit_recovers_the_true_coefficients(tmp_path, data_csv, dataset, capsys):
    checkpoint = tmp_path / "model.npz"
    status, _, _ = run(["fit", data_csv, "--target", "y", "--checkpoint", checkpoint,
                        "--no-progress"], capsys)
    assert status == 0
    fitted = RenewableHuberRegressor.load(checkpoint)
    np.testing.assert_allclose(fitted.coef_, dataset.true_coef, atol=0.1)


def test_predict_writes_the_estimators_predictions(tmp_path, data_csv, dataset, capsys):
    checkpoint, output = tmp_path / "model.npz", tmp_path / "pred.csv"
    assert run(["fit", data_csv, "--target", "y", "--checkpoint", checkpoint,
                "--no-progress"], capsys)[0] == 0
    status, _, err = run(["predict", checkpoint, data_csv, "--output", output,
                          "--batch-size", 700, "--no-progress"], capsys)
    assert status == 0, err
    lines = output.read_text().splitlines()
    assert lines[0] == "prediction"
    expected = RenewableHuberRegressor.load(checkpoint).predict(dataset.X)
    np.testing.assert_allclose(np.array(lines[1:], dtype=float), expected, rtol=1e-12,
                               atol=1e-14)

    status, out, _ = run(["predict", checkpoint, data_csv, "--no-progress"], capsys)
    assert status == 0
    assert out.splitlines() == lines


def test_resume_on_the_rest_of_the_stream_equals_one_uninterrupted_run(
        tmp_path, dataset, capsys):
    half = N_ROWS // 2
    full, first, second = (tmp_path / name for name in ("full.csv", "first.csv", "second.csv"))
    write_csv(full, dataset.X, dataset.y)
    write_csv(first, dataset.X[:half], dataset.y[:half])
    write_csv(second, dataset.X[half:], dataset.y[half:])
    common = ["--target", "y", "--batch-size", BATCH, "--no-progress"]

    assert run(["fit", full, *common, "--checkpoint", tmp_path / "full.npz"], capsys)[0] == 0
    assert run(["fit", first, *common, "--checkpoint", tmp_path / "half.npz"], capsys)[0] == 0
    # second.csv is another file: the user says its rows are new.
    status, out, err = run(["fit", second, *common, "--resume", tmp_path / "half.npz",
                            "--new-data", "--checkpoint", tmp_path / "resumed.npz"], capsys)
    assert status == 0, err
    assert f"resumed from {half:,} rows" in out
    assert_same_checkpoint(tmp_path / "full.npz", tmp_path / "resumed.npz")

    # full.csv starts with first.csv's bytes (first.csv grown by appending): the checkpoint
    # recognises its rows and continues after them, with or without an equal --skip-rows.
    for name, extra in (("appended.npz", []), ("skipped.npz", ["--skip-rows", half])):
        status, out, err = run(["fit", full, *common, "--resume", tmp_path / "half.npz",
                                *extra, "--checkpoint", tmp_path / name], capsys)
        assert status == 0, err
        assert f"started after data row {half:,}" in out
        assert_same_checkpoint(tmp_path / "full.npz", tmp_path / name)


def test_skip_rows_inside_a_chunk_feeds_exactly_the_remaining_rows(
        tmp_path, data_csv, dataset, capsys):
    skip = 2_500  # the third chunk is cut in half: its last 500 rows form the first batch
    checkpoint = tmp_path / "m.npz"
    status, out, err = run(["fit", data_csv, "--target", "y", "--batch-size", BATCH,
                            "--skip-rows", skip, "--checkpoint", checkpoint, "--no-progress"],
                           capsys)
    assert status == 0, err
    expected = RenewableHuberRegressor()
    expected.partial_fit(dataset.X[skip:3_000], dataset.y[skip:3_000])
    in_process_model(dataset.X[3_000:], dataset.y[3_000:], model=expected)
    fitted = RenewableHuberRegressor.load(checkpoint)
    assert fitted.n_samples_seen_ == N_ROWS - skip
    np.testing.assert_allclose(fitted.coef_, expected.coef_, rtol=1e-12)
    assert f"{N_ROWS - skip:,} rows in 4 batches" in out


def test_checkpoint_after_each_batch_survives_a_bad_batch(tmp_path, dataset, capsys):
    X, y = dataset.X.copy(), dataset.y.copy()
    X[2 * BATCH + 10, 1] = np.nan  # third batch
    path, checkpoint = tmp_path / "bad.csv", tmp_path / "model.npz"
    write_csv(path, X, y)
    status, _, err = run(["fit", path, "--target", "y", "--batch-size", BATCH,
                          "--checkpoint", checkpoint, "--checkpoint-every", 1, "--no-progress"],
                         capsys)
    assert status != 0
    # the header is line 1, so row 2011 of the data is line 2012
    assert_one_error_line(err, f"line {2 * BATCH + 12}", "column 'b'", "'nan'",
                          "not a finite number", f"holds the first {2 * BATCH:,} data rows")
    expected = in_process_model(X[:2 * BATCH], y[:2 * BATCH])
    saved = RenewableHuberRegressor.load(checkpoint)
    assert saved.n_samples_seen_ == 2 * BATCH
    np.testing.assert_allclose(saved.coef_, expected.coef_, rtol=1e-12)


def test_l1_penalty_and_float32_reach_the_estimator(tmp_path, data_csv, dataset, capsys):
    checkpoint = tmp_path / "l1.npz"
    status, _, err = run(["fit", data_csv, "--target", "y", "--penalty", "l1", "--dtype",
                          "float32", "--tau", "2.0", "--checkpoint", checkpoint,
                          "--no-progress"], capsys)
    assert status == 0, err
    expected = in_process_model(
        dataset.X, dataset.y, batch=10_000,
        model=RenewableHuberRegressor(penalty="l1", dtype="float32", tau=2.0))
    fitted = RenewableHuberRegressor.load(checkpoint)
    assert fitted.get_params()["penalty"] == "l1"
    assert fitted.coef_.dtype == np.float32
    np.testing.assert_allclose(fitted.coef_, expected.coef_, rtol=1e-5)


def test_parquet_round_trip_matches_csv(tmp_path, data_csv, dataset, capsys):
    pa = pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    import pyarrow.parquet as pq

    path = tmp_path / "data.parquet"
    columns = {name: dataset.X[:, j] for j, name in enumerate(FEATURES)}
    columns["y"] = dataset.y
    columns["label"] = [f"row{i}" for i in range(N_ROWS)]
    pq.write_table(pa.table(columns), path, row_group_size=1_500)
    common = ["--target", "y", "--batch-size", BATCH, "--no-progress"]
    assert run(["fit", data_csv, *common, "--checkpoint", tmp_path / "csv.npz"], capsys)[0] == 0
    status, _, err = run(["fit", path, *common, "--checkpoint", tmp_path / "pq.npz"], capsys)
    assert status == 0, err
    assert_same_checkpoint(tmp_path / "csv.npz", tmp_path / "pq.npz")

    output = tmp_path / "pred.csv"
    assert run(["predict", tmp_path / "pq.npz", path, "--output", output,
                "--no-progress"], capsys)[0] == 0
    expected = RenewableHuberRegressor.load(tmp_path / "pq.npz").predict(dataset.X)
    np.testing.assert_allclose(np.loadtxt(output, skiprows=1), expected, rtol=1e-12,
                               atol=1e-14)


# ------------------------------------------------------------------------------- errors


@pytest.fixture()
def text_in_later_chunk(tmp_path, dataset):
    path = tmp_path / "late_text.csv"
    write_csv(path, dataset.X[:50], dataset.y[:50], extra_text_column=False)
    lines = path.read_text().splitlines()
    lines[40] = "1.0,abc,2.0,3.0"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["fit", "{tmp}/missing.csv", "--target", "y"], ["missing.csv", "No such file"]),
        (["fit", "{data}", "--target", "nope"], ["no column 'nope'", "a, b, c, y, label"]),
        (["fit", "{data}", "--target", "label"], ["line 2", "'label'", "'row0'", "not a number"]),
        (["fit", "{data}", "--target", "y", "--features", "a,label"], ["'label'"]),
        (["fit", "{data}", "--target", "y", "--features", "a,y"], ["target"]),
        (["fit", "{late}", "--target", "y", "--batch-size", "10"],
         ["line 41", "'abc'", "not a number"]),
        (["fit", "{data}", "--target", "y", "--batch-size", "0"], ["--batch-size", "'0'"]),
        (["fit", "{data}", "--target", "y", "--penalty", "l2"], ["--penalty", "'l2'"]),
        (["fit", "{data}", "--target", "y", "--tau", "-1"], ["tau", "-1"]),
        (["fit", "{data}", "--target", "y", "--tau", "abc"], ["--tau", "'abc'"]),
        (["fit", "{data}"], ["--target"]),
        (["fit", "{tmp}/data.txt", "--target", "y"], ["unsupported file type", ".txt"]),
        (["predict", "{data}", "{data}"], ["invalid or corrupted checkpoint"]),
        (["demo", "--rows", "-5"], ["--rows", "'-5'"]),
        (["demo", "--backend", "gpu"], ["--backend", "'gpu'"]),
        (["frobnicate"], ["'frobnicate'"]),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_a_nonzero_exit(
        argv, needles, tmp_path, data_csv, text_in_later_chunk, capsys):
    (tmp_path / "data.txt").write_text("y\n1\n")
    argv = [a.format(tmp=tmp_path, data=data_csv, late=text_in_later_chunk) for a in argv]
    status, out, err = run(argv, capsys)
    assert status != 0
    assert_one_error_line(err, *needles)


def test_resume_refuses_options_the_checkpoint_fixes(tmp_path, data_csv, capsys):
    checkpoint = tmp_path / "m.npz"
    assert run(["fit", data_csv, "--target", "y", "--checkpoint", checkpoint,
                "--no-progress"], capsys)[0] == 0
    before = checkpoint.read_bytes()
    status, _, err = run(["fit", data_csv, "--target", "y", "--resume", checkpoint, "--tau",
                          "2", "--checkpoint", checkpoint], capsys)
    assert status == 2
    assert_one_error_line(err, "--tau", "--resume")
    assert checkpoint.read_bytes() == before


def test_unexpected_errors_point_to_rh_debug(monkeypatch, capsys):
    import renewable_huber.cli as cli

    def broken(args):
        raise RuntimeError("engine exploded\nsecond line")

    monkeypatch.setattr(cli, "command_info", broken)
    status, _, err = run(["info"], capsys)
    assert status == 1
    assert_one_error_line(err, "unexpected RuntimeError", "engine exploded second line",
                          "RH_DEBUG=1")
    monkeypatch.setenv("RH_DEBUG", "1")
    with pytest.raises(RuntimeError, match="engine exploded"):
        main(["info"])


def test_module_entry_point_prints_no_traceback(tmp_path):
    package_parent = str(Path(renewable_huber.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("RH_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "-m", "renewable_huber", "fit", str(tmp_path / "absent.csv"),
         "--target", "y"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    assert_one_error_line(result.stderr, "absent.csv")


# ------------------------------------------------------------------- info, version, rest


def test_version(capsys):
    assert run(["--version"], capsys)[1].strip() == f"renewable-huber {renewable_huber.__version__}"


def test_info_lists_every_engine_and_the_abi_version(capsys):
    from renewable_huber import _abi

    status, out, _ = run(["info"], capsys)
    assert status == 0
    assert f"ABI version (binding): {_abi.ABI_VERSION}" in out
    assert re.search(r"^\s+numpy\s+available$", out, re.MULTILINE)
    for engine in ("cupy", "native_cpu", "native_cuda"):
        assert re.search(rf"^\s+{engine}\s+(available|unavailable: .+)$", out, re.MULTILINE)
    assert re.search(r"^CUDA: ", out, re.MULTILINE)


def test_conformance_delegates_its_arguments(monkeypatch, capsys):
    import renewable_huber.conformance as conformance

    seen = []

    def fake_main(argv):
        seen.append(argv)
        return 3

    monkeypatch.setattr(conformance, "main", fake_main, raising=False)
    status, _, _ = run(["conformance", "--library", "/x/librh_cpu.so", "--corpus", "v2"], capsys)
    assert status == 3
    assert seen == [["--library", "/x/librh_cpu.so", "--corpus", "v2"]]


def test_plain_progress_fallback_reports_the_count():
    import io

    stream = io.StringIO()
    bar = _PlainProgress(total=10, desc="fit", unit="rows", stream=stream)
    bar.update(4)
    bar.update(6)
    bar.close()
    assert "fit: 100% 10/10 rows" in stream.getvalue()
    assert stream.getvalue().endswith("\n")
