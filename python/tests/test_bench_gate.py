"""Gate arithmetic on synthetic interleaved records with known ratios."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import gate, record, synthetic  # noqa: E402

BASE = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 1.03, 0.97, 1.00]


def scaled(factor, samples=BASE):
    return [factor * s for s in samples]


def run_gate(base_engine, cand_engine, base_samples, cand_samples, *, base_kw=None,
             cand_kw=None, rounds=None):
    cases = [synthetic.case(label="baseline", engine=base_engine, samples=base_samples,
                            **(base_kw or {})),
             synthetic.case(label="candidate", engine=cand_engine, samples=cand_samples,
                            **(cand_kw or {}))]
    data = synthetic.build([("baseline", base_engine), ("candidate", cand_engine)], cases,
                           rounds=rounds)
    return gate.evaluate(data, "baseline", "candidate")


def checks_of(result):
    return {c["name"]: c for c in result["cases"][0]["checks"]}


def test_a_clearly_faster_native_engine_passes_every_check():
    result = run_gate("numpy", "native_cpu", BASE, scaled(0.25))
    case = result["cases"][0]
    assert result["passed"] and case["passed"] and result["reasons"] == []
    assert case["median_ratio"] == pytest.approx(0.25)
    assert case["speedup"] == pytest.approx(4.0)
    assert case["verdict"] == "candidate faster"
    assert set(checks_of(result)) == {"aligned_pairs", "converged", "iterations", "rel_mad",
                                      "slowdown", "competitor_parity"}


def test_paired_ratios_are_taken_round_by_round():
    # The baseline drifts 2x slower over the run and the candidate drifts with it: every
    # paired ratio is exactly 0.5 even though the medians alone would say ~0.5 only by luck.
    drift = [1.0 + 0.125 * i for i in range(9)]
    result = run_gate("numpy", "native_cpu", drift, scaled(0.5, drift))
    assert result["cases"][0]["ratios"] == pytest.approx([0.5] * 9)


def test_a_failing_gate_names_every_violated_criterion():
    noisy_slow = [1.3, 1.3, 1.3, 1.6, 1.0, 1.3, 1.6, 1.0]
    result = run_gate(
        "numpy", "native_cpu", BASE[:8], noisy_slow,
        base_kw={"iterations": [5]}, cand_kw={"iterations": [8], "converged": False})
    assert result["passed"] is False
    checks = checks_of(result)
    assert not any(c["passed"] for c in checks.values())
    assert checks["aligned_pairs"]["value"] == 8
    assert checks["iterations"]["value"] == 3
    assert checks["slowdown"]["value"] == pytest.approx(1.3, rel=0.02)
    # deviations from the median 1.3: four 0s and four 0.3s -> MAD 0.15
    assert checks["rel_mad"]["value"] == pytest.approx(0.15 / 1.3)
    reasons = "\n".join(result["reasons"])
    for phrase in ("only 8 aligned pairs", "not every batch converged: candidate",
                   "median iteration difference 3", "too noisy", "> 1.1",
                   "native engine slower than its competitor"):
        assert phrase in reasons


def test_inside_the_noise_band_is_no_measurable_difference_but_parity_still_fails():
    result = run_gate("numpy", "native_cpu", BASE, scaled(1.05))
    checks = checks_of(result)
    assert result["cases"][0]["verdict"] == "no measurable difference"
    assert checks["slowdown"]["passed"] is True
    assert checks["competitor_parity"]["passed"] is False
    assert result["passed"] is False


def test_two_builds_of_one_engine_have_no_parity_check_and_tolerate_ten_percent():
    result = run_gate("native_cpu", "native_cpu", BASE, scaled(1.08))
    assert "competitor_parity" not in checks_of(result)
    assert result["passed"] is True
    assert run_gate("native_cpu", "native_cpu", BASE, scaled(1.12))["passed"] is False


def test_gpu_cases_use_the_gpu_thresholds():
    result = run_gate("cupy", "native_cuda", BASE, scaled(1.12),
                      base_kw={"transport": "device"}, cand_kw={"transport": "device"})
    checks = checks_of(result)
    assert result["cases"][0]["device"] == "cuda"
    assert checks["slowdown"]["threshold"] == 1.15 and checks["slowdown"]["passed"] is True
    assert checks["rel_mad"]["threshold"] == 0.10
    assert checks["competitor_parity"]["passed"] is False


def test_one_batch_iteration_difference_is_tolerated():
    result = run_gate("numpy", "native_cpu", BASE, scaled(0.5),
                      base_kw={"shape": "reference", "iterations": [6, 4, 4, 3]},
                      cand_kw={"shape": "reference", "iterations": [7, 4, 5, 3]})
    assert checks_of(result)["iterations"]["value"] == 0.5
    assert result["passed"] is True


def test_iterations_against_a_peer_are_reported_not_gated():
    # Another implementation may stop an iteration sooner or later: the batch counts must
    # match, the difference is reported; against our own engines it still fails.
    kw = ({"shape": "reference", "iterations": [11, 4, 4, 3]},
          {"shape": "reference", "iterations": [9, 4, 7, 6]})
    peer = run_gate("peer_cupy", "native_cuda", BASE, scaled(0.1), base_kw=kw[0], cand_kw=kw[1])
    assert checks_of(peer)["iterations"]["value"] == 2.5
    assert checks_of(peer)["iterations"]["passed"] and peer["passed"] is True
    own = run_gate("cupy", "native_cuda", BASE, scaled(0.1), base_kw=kw[0], cand_kw=kw[1])
    assert checks_of(own)["iterations"]["passed"] is False and own["passed"] is False
    counts = run_gate("peer_cupy", "native_cuda", BASE, scaled(0.1),
                      base_kw={"shape": "reference", "iterations": [11, 4, 4]},
                      cand_kw={"shape": "reference", "iterations": [9, 4, 7, 6]})
    assert checks_of(counts)["iterations"]["passed"] is False
    assert any("batch counts differ" in r for r in counts["reasons"])


def test_a_case_measured_on_one_side_only_fails_the_gate():
    cases = [synthetic.case(label="baseline", engine="numpy", samples=BASE),
             synthetic.case(label="candidate", engine="native_cpu", samples=scaled(0.2)),
             synthetic.case(label="baseline", engine="numpy", samples=BASE, dtype="float32")]
    data = synthetic.build([("baseline", "numpy"), ("candidate", "native_cpu")], cases)
    result = gate.evaluate(data, "baseline", "candidate")
    assert result["passed"] is False
    assert any("float32" in r and "not measured on candidate" in r for r in result["reasons"])


def test_records_of_separate_runs_cannot_pass():
    data = synthetic.build([("baseline", "numpy"), ("candidate", "native_cpu")],
                           [synthetic.case(label="baseline", engine="numpy", samples=BASE),
                            synthetic.case(label="candidate", engine="native_cpu",
                                           samples=scaled(0.2))])
    data["interleaved"] = False
    result = gate.evaluate(data, "baseline", "candidate")
    assert result["passed"] is False and "not measured interleaved" in result["reasons"][0]


def test_unknown_side_label_is_a_clear_error():
    data = synthetic.build([("numpy", "numpy")],
                           [synthetic.case(label="numpy", engine="numpy", samples=BASE)])
    with pytest.raises(ValueError, match="candidate 'native_cpu' is no side"):
        gate.evaluate(data, "numpy", "native_cpu")


def test_gate_command_line_exit_code_follows_the_verdict(tmp_path):
    for factor, expected in ((0.3, 0), (1.5, 1)):
        data = synthetic.build(
            [("numpy", "numpy"), ("native_cpu", "native_cpu")],
            [synthetic.case(label="numpy", engine="numpy", samples=BASE),
             synthetic.case(label="native_cpu", engine="native_cpu", samples=scaled(factor))])
        path = tmp_path / f"record-{factor}.json"
        record.write(data, path)
        out = tmp_path / f"gate-{factor}.json"
        code = gate.main([str(path), "--baseline", "numpy", "--candidate", "native_cpu",
                          "--out", str(out)])
        assert code == expected
        assert record.load(out)["passed"] is (expected == 0)
