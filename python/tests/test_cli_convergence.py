"""`renewable-huber fit`: --max-iter, --tol, --tau auto, one warning line per unconverged batch,
the summary line, and --strict (exit status 3, the checkpoint never holding an unconverged
batch). Non-convergence is forced with --max-iter 1 and a tight --tol; expected states come from
the estimator run in-process on the same batches."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import run, write_csv

import renewable_huber
from renewable_huber import RenewableHuberRegressor, suggest_tau
from renewable_huber import checkpoint as checkpoint_module
from renewable_huber.cli import EXIT_NOT_CONVERGED
from renewable_huber.simulation import simulate, simulate_raw_units

FEATURES = ["a", "b", "c"]
N_ROWS = 3_000
BATCH = 1_000
FORCE = ["--max-iter", "1", "--tol", "1e-12"]






@pytest.fixture(scope="module")
def dataset():
    return simulate(N_ROWS, len(FEATURES), seed=4)


@pytest.fixture()
def data_csv(tmp_path, dataset):
    path = tmp_path / "data.csv"
    write_csv(path, dataset.X, dataset.y)
    return path


def common(*extra):
    return ["--target", "y", "--batch-size", BATCH, "--backend", "numpy", "--no-progress",
            *extra]


def warning_lines(err):
    return [line for line in err.splitlines() if line.startswith("renewable-huber: warning: ")]


def test_every_unconverged_batch_gets_a_warning_line_and_a_summary(tmp_path, data_csv, capsys):
    checkpoint = tmp_path / "m.npz"
    status, out, err = run(["fit", data_csv, *common(*FORCE), "--checkpoint", checkpoint],
                           capsys)
    assert status == 0, err
    lines = warning_lines(err)
    assert lines[:3] == [
        f"renewable-huber: warning: batch {k} did not converge after 1 iterations (max_iter)"
        for k in (1, 2, 3)
    ]
    assert lines[3].startswith("renewable-huber: warning: 3 of 3 batches did not converge "
                               "(first: batch 1); ")
    assert "--max-iter" in lines[3] and "--tol" in lines[3]
    assert len(lines) == 4 and err.strip().splitlines() == lines  # nothing else on stderr
    assert "batches not converged: 3" in out
    assert "stop_reason='max_iter'" in out
    # The options reached the estimator and the stream has every batch.
    saved = RenewableHuberRegressor.load(checkpoint)
    assert saved.get_params()["max_iter"] == 1 and saved.get_params()["tol"] == 1e-12
    assert saved.state_.batch_count == 3


def test_an_unconverged_l1_run_points_at_the_features_scale(data_csv, capsys):
    """LAMM's iterations grow with the design's conditioning (docs/python.md), so the summary
    of an L1 run asks for standardised features before more iterations."""
    status, _, err = run(["fit", data_csv, *common(*FORCE, "--penalty", "l1")], capsys)
    assert status == 0, err
    summary = warning_lines(err)[-1]
    assert summary.startswith("renewable-huber: warning: 3 of 3 batches did not converge ")
    assert summary.endswith("the L1 solver is first-order and needs standardised features: "
                            "fit again with --standardize, then raise --max-iter if it still "
                            "stops")


def test_a_converging_run_prints_no_warning(data_csv, capsys):
    status, out, err = run(["fit", data_csv, *common("--strict")], capsys)
    assert status == 0, err
    assert err == ""
    assert "batches not converged: 0" in out


def test_strict_stops_at_the_first_batch_with_status_3_and_writes_no_checkpoint(
        tmp_path, data_csv, capsys):
    checkpoint = tmp_path / "m.npz"
    status, out, err = run(["fit", data_csv, *common(*FORCE, "--strict"), "--checkpoint",
                            checkpoint], capsys)
    assert status == EXIT_NOT_CONVERGED == 3
    assert out == ""
    [line] = err.strip().splitlines()
    assert line == (
        f"renewable-huber: error: batch 1 ({data_csv} lines 2-1001) did not converge after 1 "
        f"iterations (max_iter); stopped by --strict; {checkpoint} not written: no batch of "
        "this stream converged before it"
    )
    assert not checkpoint.exists()


def test_strict_keeps_the_checkpoint_of_the_last_converged_batch(tmp_path, dataset, capsys):
    """Batches 1-2 converge (first run); the resumed run forces batch 3 not to: --strict must
    save the state of batch 2, never one including batch 3, although --checkpoint-every 0
    would otherwise save only at the end."""
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    write_csv(first, dataset.X[:2 * BATCH], dataset.y[:2 * BATCH])
    write_csv(second, dataset.X[2 * BATCH:], dataset.y[2 * BATCH:])
    half, out_path = tmp_path / "half.npz", tmp_path / "out.npz"
    assert run(["fit", first, *common(), "--checkpoint", half], capsys)[0] == 0
    status, out, err = run(["fit", second, *common(*FORCE, "--strict"), "--resume", half,
                            "--new-data", "--checkpoint", out_path, "--checkpoint-every", "0"],
                           capsys)
    assert status == 3
    assert out == ""
    [line] = err.strip().splitlines()
    assert line == (
        f"renewable-huber: error: batch 3 ({second} lines 2-1001) did not converge after 1 "
        f"iterations (max_iter); stopped by --strict; {out_path} holds the stream through "
        f"batch 2 (2,000 rows), without this batch; continue with --resume {out_path} (it "
        f"records the rows of {second} it holds)"
    )
    # ... and it records second.csv with none of its rows read, so a plain --resume on
    # second.csv (no --new-data now) starts at its first row.
    assert checkpoint_module.load_checkpoint(out_path)["source"]["rows"] == 0
    saved = RenewableHuberRegressor.load(out_path)
    expected = RenewableHuberRegressor.load(half)
    assert saved.state_.batch_count == 2
    assert saved.n_samples_seen_ == 2 * BATCH
    np.testing.assert_array_equal(saved.state_.coefficients, expected.state_.coefficients)
    np.testing.assert_array_equal(saved.state_.information, expected.state_.information)
    # --max-iter given with --resume reached the resumed model (the solver limits may change).
    assert saved.get_params()["max_iter"] == 1


def test_strict_mid_file_checkpoint_resumes_after_the_converged_rows(tmp_path, dataset, capsys,
                                                                    monkeypatch):
    """The third batch of one file fails (the estimator is made to stop early on it): the
    checkpoint holds batches 1-2 even though it is saved after every batch, and records
    that it holds 2,000 rows of the file, so `--resume` alone continues at row 2,001."""
    import dataclasses

    from renewable_huber.backends.numpy_backend import NumpyBackend

    real_update = NumpyBackend.update

    def third_batch_stops_early(self, X, y, sample_weight, config):
        state, diagnostics = real_update(self, X, y, sample_weight, config)
        if state.batch_count == 3:
            diagnostics = dataclasses.replace(diagnostics, converged=False, iterations=2)
        return state, diagnostics

    monkeypatch.setattr(NumpyBackend, "update", third_batch_stops_early)
    path, checkpoint = tmp_path / "data.csv", tmp_path / "m.npz"
    write_csv(path, dataset.X, dataset.y)
    status, _, err = run(["fit", path, *common("--strict"), "--checkpoint", checkpoint,
                          "--checkpoint-every", "1"], capsys)
    assert status == 3
    [line] = err.strip().splitlines()
    assert line.endswith(
        "did not converge after 2 iterations (line search exhausted); stopped by --strict; "
        f"{checkpoint} holds the stream through batch 2 (2,000 rows), without this batch; "
        f"continue with --resume {checkpoint} (it records the rows of {path} it holds)"
    )
    assert checkpoint_module.load_checkpoint(checkpoint)["source"]["rows"] == 2 * BATCH
    saved = RenewableHuberRegressor.load(checkpoint)
    assert saved.state_.batch_count == 2
    monkeypatch.setattr(NumpyBackend, "update", real_update)
    expected = RenewableHuberRegressor(backend="numpy")
    for start in (0, BATCH):
        expected.partial_fit(dataset.X[start:start + BATCH], dataset.y[start:start + BATCH])
    np.testing.assert_array_equal(saved.coef_, expected.coef_)

    status, out, err = run(["fit", path, *common(), "--resume", checkpoint, "--checkpoint",
                            checkpoint], capsys)
    assert status == 0, err
    assert "started after data row 2,000" in out
    for start in range(2 * BATCH, N_ROWS, BATCH):
        expected.partial_fit(dataset.X[start:start + BATCH], dataset.y[start:start + BATCH])
    np.testing.assert_array_equal(RenewableHuberRegressor.load(checkpoint).coef_,
                                  expected.coef_)


def test_strict_without_checkpoint_says_so(data_csv, capsys):
    status, _, err = run(["fit", data_csv, *common(*FORCE, "--strict")], capsys)
    assert status == 3
    assert err.strip().endswith("stopped by --strict; no checkpoint requested")


def test_tau_auto_and_the_tau_scale_warning_line(tmp_path, capsys):
    raw = simulate_raw_units(N_ROWS, len(FEATURES), seed=6)
    path = tmp_path / "raw.csv"
    write_csv(path, raw.X, raw.y)
    status, out, err = run(["fit", path, *common(), "--checkpoint", tmp_path / "d.npz"],
                           capsys)
    assert status == 0, err
    tau_lines = [line for line in warning_lines(err) if "tau=1.345 is far below" in line]
    assert len(tau_lines) == 1
    assert "in the target's units" in tau_lines[0]

    status, out, err = run(["fit", path, *common("--tau", "auto", "--tol", "1e-8"),
                            "--checkpoint", tmp_path / "a.npz"], capsys)
    assert status == 0, err
    assert not [line for line in warning_lines(err) if "far below" in line]
    chosen = suggest_tau(raw.X[:BATCH], raw.y[:BATCH])
    assert f"tau: {chosen:.6g} (auto, from the first batch)" in out
    saved = RenewableHuberRegressor.load(tmp_path / "a.npz")
    assert saved.get_params()["tau"] == pytest.approx(chosen, rel=1e-12)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--max-iter", "0"), ("--max-iter", "1.5"), ("--tol", "0"), ("--tol", "-1e-6"),
     ("--tol", "nan"), ("--tau", "Auto")],
)
def test_bad_solver_options_are_usage_errors(data_csv, capsys, option, value):
    # OPTION=VALUE: argparse would read a separate "-1e-6" as an option of its own.
    status, _, err = run(["fit", data_csv, *common(f"{option}={value}")], capsys)
    assert status == 2
    [line] = err.strip().splitlines()
    assert line.startswith("renewable-huber: error: ") and option in line and repr(value) in line


def test_strict_exit_status_from_a_real_process(tmp_path, data_csv):
    package_parent = str(Path(renewable_huber.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("RH_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "-m", "renewable_huber", "fit", str(data_csv), *map(str, common()),
         *FORCE, "--strict"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 3
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("renewable-huber: error: batch 1 ")
