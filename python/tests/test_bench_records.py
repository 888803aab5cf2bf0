"""The benchmark record tooling: statistics, validator, merge and select."""

import copy
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import record, synthetic, validate  # noqa: E402
from benchmarks.measurement import relative_mad, repetitions_for, summarize  # noqa: E402

pytest.importorskip("jsonschema")


def good_record():
    return synthetic.build(
        [("numpy", "numpy"), ("native_cpu", "native_cpu")],
        [synthetic.case(label="numpy", engine="numpy", samples=[1.0, 1.1, 0.9]),
         synthetic.case(label="native_cpu", engine="native_cpu", samples=[0.3, 0.31, 0.29]),
         synthetic.case(label="native_cpu", engine="native_cpu", samples=[0.5, 0.5, 0.5],
                        shape="reference", dtype="float32")])


def test_summary_statistics_match_hand_computation():
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats["median"] == 3.0 and stats["min"] == 1.0 and stats["max"] == 100.0
    # |x - 3| = 2, 1, 0, 1, 97 -> median 1 -> relative 1/3
    assert stats["rel_mad"] == pytest.approx(1 / 3)
    assert relative_mad([2.0, 2.0, 2.0]) == 0.0


def test_repetitions_make_a_sample_last_the_minimum():
    assert repetitions_for(0.3) == 1
    assert repetitions_for(0.001) == 100
    assert repetitions_for(0.03) == 4  # 3 runs last 0.09 s: one more is needed
    with pytest.raises(ValueError):
        repetitions_for(float("nan"))


def test_validator_accepts_a_good_record():
    assert validate.problems(good_record()) == []


def _mutated(mutate):
    data = good_record()
    mutate(data)
    return validate.problems(data)


@pytest.mark.parametrize("mutate, expected", [
    (lambda r: r.update(version=1), "version"),
    (lambda r: r.pop("environment"), "'environment' is a required property"),
    (lambda r: r["cases"][0].pop("dataset_sha256"), "dataset_sha256"),
    (lambda r: r["cases"][0].update(dtype="float16"), "float16"),
    (lambda r: r["cases"].append(copy.deepcopy(r["cases"][0])), "duplicate measurement key"),
    (lambda r: r["cases"][0].update(median=math.nan), "median = nan is not a positive finite"),
    (lambda r: r["cases"][0].update(min=0.0), "min = 0.0 is not a positive finite"),
    (lambda r: r["cases"][0]["samples"].__setitem__(1, -0.5), "non-positive or non-finite"),
    (lambda r: r["cases"][0]["samples"].__setitem__(1, math.inf), "non-positive or non-finite"),
    (lambda r: r["cases"][0].update(median=0.95), "disagrees with its samples"),
    (lambda r: r["cases"][1].update(transport="device", host_input=False),
     "device transport on CPU engine native_cpu"),
    (lambda r: r["cases"][1].update(includes_transfer=True), "includes_transfer"),
    (lambda r: r["cases"][0].update(device="cuda"), "but numpy runs on cpu"),
    (lambda r: r["cases"][0].update(lifecycle="steady", operation="fit", iterations=[5],
                                    iterations_total=5), "steady lifecycle"),
    (lambda r: r["cases"][0].update(label="candidate"), "names no side"),
    (lambda r: r["cases"][0].update(engine="native_cpu"), "belongs to engine 'numpy'"),
    (lambda r: r["cases"][0].update(seed=7), "is not 42 + shape index"),
    (lambda r: r["cases"][1].update(dataset_sha256="cd" * 32), "saw different data"),
    (lambda r: r["cases"][0].update(rounds=[0, 1]), "3 samples but 2 round indices"),
    (lambda r: r["cases"][0].update(rounds=[0, 0, 1]), "not distinct"),
    (lambda r: r["cases"][0].update(iterations_total=99), "iterations_total"),
    (lambda r: r["skipped"].append({"engine": "cupy", "reason": ""}), "skipped"),
    (lambda r: r["unavailable"].append({"engine": "cupy"}), "'reason' is a required"),
])
def test_validator_rejects_each_malformed_variant(mutate, expected):
    found = _mutated(mutate)
    assert found, "the malformed record was accepted"
    assert any(expected in problem for problem in found), found


def test_validator_command_line_reports_problems(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    record.write(good_record(), good)
    broken = good_record()
    broken["cases"][0]["median"] = -1.0
    bad.write_text(__import__("json").dumps(broken))
    assert validate.main([str(good)]) == 0
    assert validate.main([str(good), str(bad)]) == 1
    assert "median = -1.0" in capsys.readouterr().out


def test_select_then_merge_restores_the_record():
    whole = good_record()
    parts = [record.select(whole, {"numpy"}), record.select(whole, {"native_cpu"})]
    assert [len(p["cases"]) for p in parts] == [1, 2]
    for part in parts:
        assert validate.problems(part) == []
    merged = record.merge(parts)
    assert validate.problems(merged) == []
    assert merged["interleaved"] is True
    assert sorted(map(record.case_key, merged["cases"])) == sorted(
        map(record.case_key, whole["cases"]))


def test_merging_separate_runs_is_not_interleaved():
    first, second = good_record(), good_record()
    merged = record.merge([record.select(first, {"numpy"}), record.select(second, {"native_cpu"})])
    assert merged["interleaved"] is False


def test_merge_refuses_colliding_labels():
    with pytest.raises(ValueError, match="native_cpu"):
        record.merge([good_record(), good_record()])


def test_write_refuses_non_finite_numbers(tmp_path):
    data = good_record()
    data["cases"][0]["median"] = math.nan
    with pytest.raises(ValueError):
        record.write(data, tmp_path / "r.json")
