"""What the command-line tests share: main() run in-process, the one-line error rule, and a
CSV writer for the simulated batches."""

from __future__ import annotations

import csv

from renewable_huber.cli import main


def run(argv, capsys):
    """(exit status, stdout, stderr) of `renewable-huber ARGV`, run in-process."""
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_error_line(err):
    """The single `renewable-huber: error: ...` line bad input must produce, no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("renewable-huber: error: ") and "Traceback" not in err
    return lines[0]


def write_csv(path, X, y, *, features=("a", "b", "c"), extra_text_column=False):
    """X's columns named `features`, then y; with extra_text_column a text column `label`."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*features, "y"] + (["label"] if extra_text_column else []))
        for i, (row, target) in enumerate(zip(X.tolist(), y.tolist(), strict=True)):
            writer.writerow([repr(v) for v in row] + [repr(target)]
                            + ([f"row{i}"] if extra_text_column else []))
    return path
