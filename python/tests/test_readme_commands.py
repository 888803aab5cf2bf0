"""The README's command-line examples, run as written: a new user copies them, so each must work
on files of the shapes it names (data.csv and more.csv with a target column y, new.csv with the
same features). demo and conformance have tests of their own (test_cli.py, the kit's tests);
this file runs the stream-fit-resume-predict-info sequence exactly as the README prints it, and
the README's Python example."""

from __future__ import annotations

import csv
import shlex
from pathlib import Path

import numpy as np
from cli_support import run, write_csv

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_blocks() -> list[list[str]]:
    """The lines of each fenced code block of the README."""
    blocks, current = [], None
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def readme_cli_lines() -> list[list[str]]:
    """The argument lists of the README's renewable-huber command block."""
    block = next(b for b in readme_blocks() if b and b[0].startswith("renewable-huber demo"))
    return [shlex.split(line)[1:] for line in block if line.startswith("renewable-huber ")]


def test_the_readme_names_the_sequence_this_test_runs():
    commands = [args[0] for args in readme_cli_lines()]
    assert commands == ["demo", "fit", "fit", "predict", "info", "conformance"]


def test_the_readme_fit_resume_predict_and_info_commands_work_as_printed(
        tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(5)
    beta = np.array([1.0, -2.0, 0.5])
    X = rng.standard_normal((3_000, 3))
    y = X @ beta + 0.7 + rng.standard_t(3, 3_000)
    write_csv(tmp_path / "data.csv", X[:2_000], y[:2_000])
    write_csv(tmp_path / "more.csv", X[2_000:], y[2_000:])
    with open(tmp_path / "new.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b", "c"])
        writer.writerows(X[:5].tolist())
    monkeypatch.chdir(tmp_path)
    lines = {i: args for i, args in enumerate(readme_cli_lines())}
    for index in (1, 2, 3, 4):  # fit, fit --resume, predict, info
        status, out, err = run(lines[index], capsys)
        assert status == 0, (lines[index], err)
    with open(tmp_path / "predictions.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["prediction"] and len(rows) == 6
    # The resumed model saw both files: its prediction is close to the generating line.
    predicted = np.array([float(r[0]) for r in rows[1:]])
    assert np.allclose(predicted, X[:5] @ beta + 0.7, atol=0.3)


def test_the_readme_python_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    block = next(b for b in readme_blocks() if any("RenewableHuberRegressor(" in line
                                                      for line in b))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile("\n".join(block), str(README), "exec"), namespace)
    assert (tmp_path / "model.npz").exists()
    model, on_numpy = namespace["model"], namespace["on_numpy"]
    # summary() printed its table, and the checkpoint went on on the NumPy reference.
    assert "std err" in capsys.readouterr().out
    assert on_numpy.n_features_in_ == model.n_features_in_
    assert on_numpy.backend_ == "numpy"
