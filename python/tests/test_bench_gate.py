"""Gate arithmetic on synthetic interleaved records with known ratios."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import gate, record, synthetic  # noqa: E402

BASE = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 1.03, 0.97, 1.00]


def scaled(factor, samples=BASE):
    return [factor * s for s in samples]


def noisy_pair(factor, sigma, n=9, seed=7):
    """Baseline and candidate samples of n rounds whose paired ratios are `factor` times
    independent log-normal noise of log-sd `sigma` (drift common to both sides per round)."""
    rng = np.random.default_rng(seed)
    drift = np.exp(rng.normal(0.0, 0.2, n))
    base = drift * np.exp(rng.normal(0.0, sigma / 2, n))
    cand = factor * drift * np.exp(rng.normal(0.0, sigma / 2, n))
    return base.tolist(), cand.tolist()


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
    # every paired ratio is 0.25, so every resample's median is too
    assert case["interval"] == pytest.approx([0.25, 0.25])
    assert set(checks_of(result)) == {"aligned_pairs", "converged", "iterations", "slowdown",
                                      "competitor_parity"}


def test_paired_ratios_are_taken_round_by_round():
    # The baseline drifts 2x slower over the run and the candidate drifts with it: every
    # paired ratio is exactly 0.5 even though the medians alone would say ~0.5 only by luck.
    drift = [1.0 + 0.125 * i for i in range(9)]
    result = run_gate("numpy", "native_cpu", drift, scaled(0.5, drift))
    assert result["cases"][0]["ratios"] == pytest.approx([0.5] * 9)


def test_a_failing_gate_names_every_violated_criterion():
    slow = [1.30, 1.35, 1.40, 1.30, 1.30, 1.35, 1.40, 1.30]
    result = run_gate(
        "numpy", "native_cpu", BASE[:8], [r * b for r, b in zip(slow, BASE[:8], strict=True)],
        base_kw={"iterations": [5]}, cand_kw={"iterations": [8], "converged": False})
    assert result["passed"] is False
    checks = checks_of(result)
    assert not any(c["passed"] for c in checks.values())
    assert checks["aligned_pairs"]["value"] == 8
    assert checks["iterations"]["value"] == 3
    # every resample's median lies between the smallest and largest ratio
    low, high = checks["slowdown"]["value"]
    assert 1.30 - 1e-12 <= low <= high <= 1.40 + 1e-12
    assert result["cases"][0]["verdict"] == "candidate slower"
    reasons = "\n".join(result["reasons"])
    for phrase in ("only 8 aligned pairs", "not every batch converged: candidate",
                   "median iteration difference 3", "lies above 1.1",
                   "native engine slower than its competitor"):
        assert phrase in reasons


def test_relative_mads_are_reported_not_gated():
    # ratios 1.3 x4 and 1.6 / 1.0 x2 each: deviations from the median 1.3 are four 0s and
    # four 0.3s -> MAD 0.15; both sides' own spreads are reported beside it
    ratios = [1.3, 1.3, 1.3, 1.6, 1.0, 1.3, 1.6, 1.0]
    result = run_gate("native_cpu", "native_cpu", BASE[:8],
                      [r * b for r, b in zip(ratios, BASE[:8], strict=True)], rounds=8)
    mads = result["cases"][0]["rel_mad"]
    assert mads["ratios"] == pytest.approx(0.15 / 1.3)
    # BASE[:8]: median 1.00, deviations 0, 0, .01, .01, .02, .02, .03, .03 -> MAD .015
    assert mads["baseline"] == pytest.approx(0.015)
    assert "rel_mad" not in checks_of(result)


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


# --- the confidence interval and the verdicts -------------------------------------------


def test_the_interval_of_three_ratios_is_their_range():
    # Resampling 3 values, the median is the smallest with probability 7/27 (at least two
    # draws of it), likewise the largest: both far beyond the 2.5% tails.
    assert gate.median_interval([1.3, 0.8, 1.0]) == (0.8, 1.3)


def test_the_interval_is_reproducible_and_depends_on_the_seed():
    ratios = noisy_pair(1.0, 0.4, n=15)
    ratios = [c / b for b, c in zip(*ratios, strict=True)]
    first = gate.median_interval(ratios)
    assert gate.median_interval(list(ratios)) == first
    assert gate.median_interval(ratios, seed=gate.BOOTSTRAP["seed"] + 1) != first
    assert min(ratios) <= first[0] <= float(np.median(ratios)) <= first[1] <= max(ratios)
    base, cand = noisy_pair(1.0, 0.4)
    runs = [run_gate("native_cpu", "native_cpu", base, cand)["cases"][0] for _ in range(2)]
    assert runs[0]["interval"] == runs[1]["interval"]


def test_a_noisy_but_clearly_faster_candidate_passes():
    base, cand = noisy_pair(0.3, 0.3)
    result = run_gate("numpy", "native_cpu", base, cand)
    case = result["cases"][0]
    assert case["rel_mad"]["ratios"] > 0.05  # the relative-MAD rule would have failed it
    assert case["interval"][1] < 1 / 1.10
    assert case["verdict"] == "candidate faster" and result["passed"] is True


def test_a_noisy_indistinguishable_candidate_is_too_noisy_not_failed():
    # paired ratios spread from 0.6 to 1.6 around 1 on a drifting machine: a resample's
    # median falls below the second-smallest ratio (0.7) only when 5 of its 9 draws are the
    # smallest (P ~ 0.0014), likewise above 1.4, so the interval covers about [0.7, 1.4]
    ratios = [1.0, 1.4, 0.7, 1.1, 0.6, 1.25, 0.9, 1.6, 0.8]
    drift = [1.0 + 0.1 * i for i in range(9)]
    cand = [r * d for r, d in zip(ratios, drift, strict=True)]
    result = run_gate("numpy", "native_cpu", drift, cand)
    case = result["cases"][0]
    low, high = case["interval"]
    assert 0.6 <= low <= 0.7 < 1 / 1.10 and 1.10 < 1.4 <= high <= 1.6
    assert case["verdict"] == "too noisy to judge"
    assert result["passed"] is True and result["summary"]["verdicts"]["too noisy to judge"] == 1


def test_a_clearly_slower_candidate_fails_even_when_noisy():
    base, cand = noisy_pair(1.8, 0.3)
    result = run_gate("native_cpu", "native_cpu", base, cand)
    case = result["cases"][0]
    assert case["interval"][0] > 1.10
    assert case["verdict"] == "candidate slower"
    assert result["passed"] is False and checks_of(result)["slowdown"]["passed"] is False


@pytest.mark.parametrize(("interval", "expected"), [
    ((1.11, 1.5), "candidate slower"),
    ((0.5, 0.90), "candidate faster"),
    ((0.95, 1.05), "no measurable difference"),
    ((1 / 1.1, 1.1), "no measurable difference"),
    ((0.8, 1.2), "too noisy to judge"),
    ((1.05, 1.2), "too noisy to judge"),
    ((0.8, 0.95), "too noisy to judge"),
])
def test_verdict_places_the_interval_against_the_noise_band(interval, expected):
    assert gate.verdict(interval, 0.10) == expected


def test_the_bootstrap_refuses_what_is_no_set_of_ratios():
    for bad in ([], [1.0, float("nan")], [1.0, -0.5], [1.0, 0.0]):
        with pytest.raises(ValueError, match="ratio"):
            gate.median_interval(bad)
    with pytest.raises(ValueError, match="confidence"):
        gate.median_interval([1.0], confidence=1.0)


# --- float32 iterations ------------------------------------------------------------------


def float32_gate(base32, cand32, base64=None):
    shape = "reference"
    cases = [synthetic.case(label="baseline", engine="cupy", samples=BASE, shape=shape,
                            dtype="float32", penalty="l1", transport="device",
                            iterations=base32),
             synthetic.case(label="candidate", engine="native_cuda", samples=scaled(0.1),
                            shape=shape, dtype="float32", penalty="l1", transport="device",
                            iterations=cand32)]
    if base64 is not None:
        cases += [synthetic.case(label=side, engine=engine, samples=samples, shape=shape,
                                 dtype="float64", penalty="l1", transport="device",
                                 iterations=base64)
                  for side, engine, samples in (("baseline", "cupy", BASE),
                                                ("candidate", "native_cuda", scaled(0.1)))]
    data = synthetic.build([("baseline", "cupy"), ("candidate", "native_cuda")], cases)
    result = gate.evaluate(data, "baseline", "candidate")
    [case] = [c for c in result["cases"] if c["case"]["dtype"] == "float32"]
    return result, {c["name"]: c for c in case["checks"]}["iterations"]


def test_float32_counts_may_differ_by_two_from_the_baseline():
    # librh_cuda against CuPy on the standard wide float32 L1 stream: diffs [2, 3, 1, 0]
    result, check = float32_gate([24, 14, 8, 7], [26, 11, 9, 7])
    assert check["value"] == {"baseline_float32": 1.5, "baseline_float64": None}
    assert check["threshold"] == 2 and check["passed"] and result["passed"]


def test_float32_counts_may_follow_the_float64_path_instead():
    # an engine deciding in double: [6, 4, 1, 1] from the float32 counts (median 2.5), but
    # [0, 1, 0, 0] from the baseline's float64 counts of the same stream
    result, check = float32_gate([20, 9, 8, 6], [26, 13, 9, 7], base64=[26, 14, 9, 7])
    assert check["value"] == {"baseline_float32": 2.5, "baseline_float64": 0.0}
    assert check["passed"] and result["passed"]


def test_float32_counts_far_from_both_references_fail():
    result, check = float32_gate([20, 9, 8, 6], [40, 20, 15, 12], base64=[26, 14, 9, 7])
    # |[40, 20, 15, 12] - [20, 9, 8, 6]| = [20, 11, 7, 6]; against [26, 14, 9, 7]: [14, 6, 6, 5]
    assert check["value"] == {"baseline_float32": 9.0, "baseline_float64": 6.0}
    assert not check["passed"] and not result["passed"]
    assert "9 > 2 against the baseline's float32 counts" in check["reason"]
    assert "6 > 2 against its float64 counts" in check["reason"]


def test_float64_counts_keep_the_one_iteration_limit():
    result = run_gate("numpy", "native_cpu", BASE, scaled(0.5),
                      base_kw={"shape": "reference", "iterations": [6, 4, 4, 3]},
                      cand_kw={"shape": "reference", "iterations": [8, 6, 4, 3]})
    assert checks_of(result)["iterations"]["value"] == 1.0
    result = run_gate("numpy", "native_cpu", BASE, scaled(0.5),
                      base_kw={"shape": "reference", "iterations": [6, 4, 4, 3]},
                      cand_kw={"shape": "reference", "iterations": [8, 6, 6, 3]})
    assert checks_of(result)["iterations"]["value"] == 2.0
    assert result["passed"] is False
