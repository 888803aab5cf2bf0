"""Crash consistency of `renewable-huber fit --checkpoint`: SIGKILL at random moments.

For each trial the command line fits a small CSV in batches, saving after every batch, and is
killed with SIGKILL after a random delay (before the first save, in the middle of the stream,
during a save, or after it finished). Then:
  * the checkpoint, when there is one, loads, and is bit for bit the state an uninterrupted
    in-process stream over the same batches has after k complete batches, for some k;
  * resuming (`--resume model.npz --skip-rows k*N`) ends bit for bit where the uninterrupted
    stream ends;
  * after that next save no temporary file of the checkpoint is left in the folder.

The expected states come from an in-process stream over the same numbers (the CSV holds them
with repr(), so parsing reproduces them exactly), not from the command line itself.
RH_FUZZ_LONG=1 runs five times as many trials.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor
from renewable_huber.checkpoint import load_checkpoint

LONG = bool(os.environ.get("RH_FUZZ_LONG"))
N_BATCHES = 40
BATCH_ROWS = 20
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the folder holding renewable_huber/


def _write_csv(path: Path, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_BATCHES * BATCH_ROWS, 3))
    y = X @ np.array([1.5, -2.0, 0.25]) + 0.7 + rng.standard_t(2, size=X.shape[0])
    table = np.column_stack([X, y])
    with open(path, "w") as handle:
        handle.write("a,b,c,y\n")
        for row in table:
            handle.write(",".join(repr(float(v)) for v in row) + "\n")
    return table


def _state_key(coefficients, information, n_samples_seen, batch_count, previous_lambda,
               weight_sum):
    """Everything a checkpoint's state says, as bytes, for exact comparison."""
    return (np.asarray(coefficients).tobytes(), np.asarray(information).tobytes(),
            int(n_samples_seen), int(batch_count), np.float64(previous_lambda).tobytes(),
            np.float64(weight_sum).tobytes())


def _reference_states(table: np.ndarray, backend: str) -> list[tuple]:
    """States after 0..N_BATCHES complete batches of an uninterrupted in-process stream."""
    model = RenewableHuberRegressor(backend=backend)
    states = [None]  # no checkpoint exists before the first batch
    for k in range(N_BATCHES):
        block = table[k * BATCH_ROWS:(k + 1) * BATCH_ROWS]
        model.partial_fit(block[:, :-1], block[:, -1])
        s = model.state_
        states.append(_state_key(s.coefficients, s.information, s.n_samples_seen,
                                 s.batch_count, s.previous_lambda, s.weight_sum))
    return states


def _checkpoint_key(path: Path) -> tuple:
    p = load_checkpoint(path)
    return _state_key(p["coefficients"], p["information"], p["n_samples_seen"],
                      p["batch_count"], p["previous_lambda"], p["weight_sum"])


def _command(data: Path, backend: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "renewable_huber", "fit", str(data), "--target", "y",
            "--batch-size", str(BATCH_ROWS), "--backend", backend, "--no-progress",
            "--checkpoint-every", "1", *extra]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _temporaries(folder: Path, name: str) -> list[str]:
    # save_checkpoint's temporary files are ".<name>.<random>.tmp" in the same folder
    return sorted(p.name for p in folder.iterdir()
                  if p.name.startswith(f".{name}.") and p.name.endswith(".tmp"))


def _run_trials(tmp_path: Path, backend: str, trials: int, seed: int) -> dict[str, int]:
    data = tmp_path / "data.csv"
    table = _write_csv(data)
    expected = _reference_states(table, backend)
    env = _environment()

    # Calibration: uninterrupted runs, timed (when the first checkpoint appears, when the last
    # one does), which must end on the reference's last state. The first run also warms the
    # bytecode cache, so only the second is timed.
    for attempt in range(2):
        folder = tmp_path / f"calibration{attempt}"
        folder.mkdir()
        started = time.monotonic()
        process = subprocess.Popen(
            _command(data, backend, "--checkpoint", str(folder / "model.npz")),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first_save = last_save = seen = None
        while process.poll() is None:
            try:
                stamp = os.stat(folder / "model.npz").st_mtime_ns
            except FileNotFoundError:
                stamp = None
            if stamp is not None and stamp != seen:
                seen, last_save = stamp, time.monotonic() - started
                first_save = last_save if first_save is None else first_save
            time.sleep(0.002)
        assert process.returncode == 0
        assert _checkpoint_key(folder / "model.npz") == expected[N_BATCHES]
    full_run = time.monotonic() - started
    first_save = full_run if first_save is None else first_save
    last_save = full_run if last_save is None else last_save

    rng = random.Random(seed)
    outcome = {"no checkpoint yet": 0, "mid-stream": 0, "finished": 0, "temporary left": 0}
    for trial in range(trials):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        checkpoint = folder / "model.npz"
        # Most kills land while batches are being fitted and saved: after the j-th save seen
        # (a changed modification time; a save the polling misses only makes k larger than j)
        # and a random fraction of a batch's time, so a slower or faster machine does not move
        # them out of the window. Some land during start-up (no checkpoint yet), some after
        # the end.
        window = rng.random()
        process = subprocess.Popen(_command(data, backend, "--checkpoint", str(checkpoint)),
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        started = time.monotonic()
        if window < 0.15:
            time.sleep(rng.uniform(0.0, first_save))
        elif window < 0.9:
            target, saves, seen = rng.randint(1, N_BATCHES - 1), 0, None
            while saves < target and process.poll() is None:
                try:
                    stamp = os.stat(checkpoint).st_mtime_ns
                except FileNotFoundError:
                    stamp = None
                if stamp is not None and stamp != seen:
                    seen, saves = stamp, saves + 1
                time.sleep(0.0005)
            time.sleep(rng.uniform(0.0, (last_save - first_save) / N_BATCHES))
        else:
            process.wait(timeout=120)
        delay = time.monotonic() - started
        process.send_signal(signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
        context = f"{backend} trial {trial} (killed after {delay:.3f} s of about {full_run:.3f} s)"
        if process.returncode not in (0, -signal.SIGKILL):
            pytest.fail(f"{context}: exit status {process.returncode}: {stderr.decode()}")
        if _temporaries(folder, checkpoint.name):
            outcome["temporary left"] += 1  # a kill inside save: allowed until the next save

        if checkpoint.exists():
            found = _checkpoint_key(checkpoint)  # a ValidationError here fails the test
            k = found[3]
            assert 1 <= k <= N_BATCHES, context
            assert found == expected[k], f"{context}: checkpoint is not the state after {k} batches"
            outcome["finished" if k == N_BATCHES else "mid-stream"] += 1
            if k == N_BATCHES:
                continue
            resume = ["--resume", str(checkpoint), "--skip-rows", str(k * BATCH_ROWS)]
        else:
            outcome["no checkpoint yet"] += 1
            resume = []
        subprocess.run(_command(data, backend, *resume, "--checkpoint", str(checkpoint)),
                       env=env, check=True, capture_output=True, timeout=120)
        assert _checkpoint_key(checkpoint) == expected[N_BATCHES], (
            f"{context}: resuming did not end on the uninterrupted result")
        assert _temporaries(folder, checkpoint.name) == [], (
            f"{context}: temporary files left after the next save")
    return outcome


def test_sigkill_numpy(tmp_path):
    trials = 100 if LONG else 20
    outcome = _run_trials(tmp_path, "numpy", trials, seed=1)
    print(outcome)
    # The delays must have exercised the interesting case, or the test proved little (about
    # 70% of the kills are expected mid-stream).
    assert outcome["mid-stream"] >= trials // 5, outcome


def test_sigkill_native_cpu(tmp_path, cpu_library):
    trials = 50 if LONG else 8
    outcome = _run_trials(tmp_path, "native_cpu", trials, seed=2)
    print(outcome)
    assert outcome["mid-stream"] >= trials // 5, outcome
