"""benchmarks/micro/partial_fit_parts.py on native_cpu: every part it times is counted per
stream as the streams make the calls, and the package is left as it was."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.micro import partial_fit_parts  # noqa: E402


def _rows(output: str) -> dict[str, list[str]]:
    rows = {}
    for line in output.splitlines()[2:]:
        label, numbers = line[:34].strip(), line[34:].split()
        rows[label] = numbers
    return rows


def test_parts_are_counted_per_stream_and_the_package_is_restored(cpu_library, capsys):
    originals = [(owner, name, owner.__dict__[name])
                 for _, owner, name in partial_fit_parts.PACKAGE_PARTS]
    # 4 batches of 128 rows per stream: batch 0 creates the engine, batches 1-3 are "later".
    partial_fit_parts.main(["--backend", "native_cpu", "--rows", "512", "--features", "4",
                            "--batch-rows", "128", "--streams", "3", "--warmups", "1"])
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("native_cpu: 512 x 4 float64 in batches of 128 rows")
    rows = _rows(out)
    first, later, per_stream = (rows["partial_fit, whole"][0], rows["partial_fit, whole"][1],
                                rows["partial_fit, whole"][2])
    assert float(first) > 0 and float(later) > 0 and float(per_stream) == 4.0
    assert float(rows["engine: update (host input)"][2]) == 4.0
    assert float(rows["batch validation"][2]) == 4.0
    # One engine per stream: created, given the empty state, its batches, no later batch.
    for label in ("engine: create", "engine: restore", "new backend"):
        assert rows[label][1] == "-" and float(rows[label][2]) == 1.0
    assert "engine: update (device input)" not in rows
    assert "CuPy pointers and stream order" not in rows
    for owner, name, original in originals:
        assert owner.__dict__[name] is original


def test_a_part_that_raises_is_still_timed_and_the_error_passes(monkeypatch):
    times = partial_fit_parts.PartTimes()

    def refuses():
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        times.timed("part", refuses)()
    assert [batch for batch, _ in times.calls["part"]] == [0]
