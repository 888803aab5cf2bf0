"""Plot rendering of gates and records."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

pytest.importorskip("matplotlib")

from benchmarks import gate, plot, record, synthetic  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BASE = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.0, 1.0]


def two_engine_record():
    cases = []
    for dtype, factor in (("float64", 0.2), ("float32", 1.3)):
        cases.append(synthetic.case(label="numpy", engine="numpy", samples=BASE, dtype=dtype))
        cases.append(synthetic.case(label="native_cpu", engine="native_cpu", dtype=dtype,
                                    samples=[factor * s for s in BASE]))
    return synthetic.build([("numpy", "numpy"), ("native_cpu", "native_cpu")], cases)


def assert_png(path: Path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 5_000


def test_gate_renders_a_png(tmp_path):
    path = tmp_path / "gate.json"
    record.write(gate.evaluate(two_engine_record(), "numpy", "native_cpu"), path)
    out = tmp_path / "gate.png"
    assert plot.main([str(path), "--out", str(out)]) == 0
    assert_png(out)


def test_record_ratios_are_against_the_reference_engine(tmp_path):
    labels, series, band, _ = plot.series_from_record(two_engine_record(), "numpy")
    assert band == 0.10
    ratios = dict(zip(labels, series["native_cpu / numpy"], strict=True))
    assert ratios["latency f64 none"] == pytest.approx(0.2)
    assert ratios["latency f32 none"] == pytest.approx(1.3)
    path = tmp_path / "record.json"
    record.write(two_engine_record(), path)
    out = tmp_path / "record.png"
    assert plot.main([str(path), "--reference", "numpy", "--out", str(out)]) == 0
    assert_png(out)


def test_unknown_input_and_reference_are_refused(tmp_path, capsys):
    path = tmp_path / "other.json"
    path.write_text('{"schema": "something-else"}')
    assert plot.main([str(path), "--out", str(tmp_path / "x.png")]) == 2
    record.write(two_engine_record(), tmp_path / "r.json")
    assert plot.main([str(tmp_path / "r.json"), "--reference", "cupy",
                      "--out", str(tmp_path / "y.png")]) == 2
    assert "reference 'cupy'" in capsys.readouterr().err


def test_gate_plots_carry_each_case_interval(tmp_path):
    result = gate.evaluate(two_engine_record(), "numpy", "native_cpu")
    [(name, spans)] = plot.intervals_from_gate(result).items()
    assert name == "native_cpu / numpy"
    assert spans == [c["interval"] for c in result["cases"]]
    # a gate written before intervals existed still plots, without error bars
    for case in result["cases"]:
        del case["interval"]
    assert plot.intervals_from_gate(result) == {name: [None] * len(result["cases"])}
    out = tmp_path / "old.png"
    labels, series, band, title = plot.series_from_gate(result)
    plot.render(labels, series, band, title, out, intervals=plot.intervals_from_gate(result))
    assert_png(out)
