"""Gate arithmetic of docs/benchmarks.md on interleaved, round-aligned samples.

A ratio is candidate time / baseline time of the same round (below 1: the candidate is
faster). Criteria per case:
  aligned_pairs      >= 9 rounds sampled on both sides
  converged          every batch converged on both sides
  iterations         median |candidate - baseline| iterations per batch <= 1; against a peer
                     engine (another implementation, whose solver may stop an iteration
                     sooner or later) only the batch counts must match and the difference is
                     reported
  rel_mad            the candidate's relative MAD <= 5% (CPU) / 10% (GPU)
  slowdown           median paired ratio <= 1.10 (CPU) / 1.15 (GPU)
  competitor_parity  only when the candidate is a native engine and the baseline its
                     competitor on the same transport: median paired ratio <= 1 (no slower)
A median ratio inside [1 / (1 + band), 1 + band] is reported as "no measurable difference",
band = 0.10 (CPU) / 0.15 (GPU).

    python benchmarks/gate.py RECORD.json --baseline numpy --candidate native_cpu --out gate.json
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks import record as records  # noqa: E402
from benchmarks.engines import Engine, is_competitor_pair  # noqa: E402

GATE_SCHEMA = "renewable-huber-gate"
GATE_VERSION = 1
MIN_PAIRS = 9
MAX_ITERATION_DIFFERENCE = 1
THRESHOLDS = {
    "cpu": {"rel_mad": 0.05, "slowdown": 1.10, "noise_band": 0.10},
    "cuda": {"rel_mad": 0.10, "slowdown": 1.15, "noise_band": 0.15},
}


def _check(name: str, passed: bool, value, threshold, reason: str) -> dict:
    return {"name": name, "passed": bool(passed), "value": value, "threshold": threshold,
            "reason": None if passed else reason}


def verdict(median_ratio: float, band: float) -> str:
    if median_ratio > 1 + band:
        return "candidate slower"
    if median_ratio < 1 / (1 + band):
        return "candidate faster"
    return "no measurable difference"


def _iteration_difference(base: dict, cand: dict) -> float | None:
    a, b = base["iterations"], cand["iterations"]
    if len(a) != len(b) or not a:
        return None
    return float(np.median(np.abs(np.asarray(a) - np.asarray(b))))


def compare_case(base: dict, cand: dict) -> dict:
    """The gate verdict of one case measured on both sides."""
    device = "cuda" if "cuda" in (base["device"], cand["device"]) else "cpu"
    limits = THRESHOLDS[device]
    base_by_round = dict(zip(base["rounds"], base["samples"], strict=True))
    pairs = [(base_by_round[r], s) for r, s in zip(cand["rounds"], cand["samples"], strict=True)
             if r in base_by_round]
    ratios = [c / b for b, c in pairs]
    median_ratio = float(np.median(ratios)) if ratios else None
    iteration_difference = _iteration_difference(base, cand)
    where = f"{cand['engine']} vs {base['engine']}"
    against_peer = Engine(base["engine"]).is_peer and not Engine(cand["engine"]).is_peer
    checks = [
        _check("aligned_pairs", len(pairs) >= MIN_PAIRS, len(pairs), MIN_PAIRS,
               f"only {len(pairs)} aligned pairs, need {MIN_PAIRS}"),
        _check("converged", base["converged"] and cand["converged"],
               {"baseline": base["converged"], "candidate": cand["converged"]}, True,
               "not every batch converged: "
               + ", ".join(side for side, case in (("baseline", base), ("candidate", cand))
                           if not case["converged"])),
        _check("iterations", iteration_difference is not None
               and (iteration_difference <= MAX_ITERATION_DIFFERENCE or against_peer),
               iteration_difference,
               MAX_ITERATION_DIFFERENCE,
               "batch counts differ between the sides" if iteration_difference is None else
               f"median iteration difference {iteration_difference:g} > "
               f"{MAX_ITERATION_DIFFERENCE} (baseline {base['iterations']}, candidate "
               f"{cand['iterations']})"),
        _check("rel_mad", cand["rel_mad"] <= limits["rel_mad"], cand["rel_mad"],
               limits["rel_mad"], f"candidate relative MAD {cand['rel_mad']:.1%} > "
               f"{limits['rel_mad']:.0%}: too noisy to judge"),
        _check("slowdown", median_ratio is not None and median_ratio <= limits["slowdown"],
               median_ratio, limits["slowdown"],
               "no paired ratio" if median_ratio is None else
               f"{where}: median paired ratio {median_ratio:.3f} > {limits['slowdown']}"),
    ]
    same_transport = base["transport"] == cand["transport"]
    if is_competitor_pair(cand["engine"], base["engine"]) and same_transport:
        checks.append(_check(
            "competitor_parity", median_ratio is not None and median_ratio <= 1.0, median_ratio,
            1.0, "no paired ratio" if median_ratio is None else
            f"{where}: native engine slower than its competitor on {cand['transport']} "
            f"transport (median paired ratio {median_ratio:.3f} > 1)"))
    reasons = [c["reason"] for c in checks if not c["passed"]]
    return {
        "case": {"shape": cand["shape"]["name"], "dtype": cand["dtype"],
                 "penalty": cand["penalty"], "lifecycle": cand["lifecycle"],
                 "operation": cand["operation"], "transport": cand["transport"]},
        "device": device,
        "baseline_median": base["median"],
        "candidate_median": cand["median"],
        "median_ratio": median_ratio,
        "speedup": None if not median_ratio else 1.0 / median_ratio,
        "ratios": ratios,
        "verdict": None if median_ratio is None else verdict(median_ratio, limits["noise_band"]),
        "checks": checks,
        "passed": not reasons,
        "reasons": reasons,
    }


def evaluate(record: dict, baseline: str, candidate: str) -> dict:
    """The gate of `candidate` against `baseline` (side labels) over every case of `record`."""
    labels = {s["label"]: s for s in record["sides"]}
    for role, label in (("baseline", baseline), ("candidate", candidate)):
        if label not in labels:
            raise ValueError(f"{role} {label!r} is no side of the record; it has "
                             f"{sorted(labels)}")
    reasons = []
    if not record["interleaved"]:
        reasons.append("the record's sides were not measured interleaved in one run: "
                       "rounds are not aligned pairs")
    by_side: dict[str, dict] = {baseline: {}, candidate: {}}
    for case in record["cases"]:
        if case["label"] in by_side:
            by_side[case["label"]][records.comparison_key(case)] = case
    results = []
    for key in sorted(set(by_side[baseline]) | set(by_side[candidate])):
        base, cand = by_side[baseline].get(key), by_side[candidate].get(key)
        if base is None or cand is None:
            missing = baseline if base is None else candidate
            reasons.append(f"case {' '.join(map(str, key[:1] + key[2:]))} was not measured "
                           f"on {missing}")
            continue
        results.append(compare_case(base, cand))
    for entry in record["unavailable"]:
        if entry["label"] in (baseline, candidate):
            reasons.append(f"{entry['label']} unavailable: {entry['reason']}")
    for entry in record["skipped"]:
        if entry.get("label") in (baseline, candidate) and "case" in entry:
            reasons.append(f"{entry['label']} skipped {entry['case']}: {entry['reason']}")
    if not results:
        reasons.append("no case was measured on both sides")
    reasons.extend(f"{' '.join(r['case'].values())}: {reason}" for r in results
                   for reason in r["reasons"])
    speedups = [r["speedup"] for r in results if r["speedup"]]
    return {
        "schema": GATE_SCHEMA,
        "version": GATE_VERSION,
        "run_id": record["run_id"],
        "created": record["environment"]["created"],
        "host": record["environment"]["host"],
        "git": record["environment"]["git"],
        "baseline": {"label": baseline, "engine": labels[baseline]["engine"]},
        "candidate": {"label": candidate, "engine": labels[candidate]["engine"]},
        "thresholds": {"min_pairs": MIN_PAIRS, "max_iteration_difference":
                       MAX_ITERATION_DIFFERENCE, **THRESHOLDS},
        "passed": not reasons,
        "reasons": reasons,
        "summary": {
            "cases": len(results),
            "cases_passed": sum(r["passed"] for r in results),
            "median_speedup": float(np.median(speedups)) if speedups else None,
            "min_speedup": min(speedups) if speedups else None,
            "verdicts": {v: sum(r["verdict"] == v for r in results) for v in
                         ("candidate faster", "no measurable difference", "candidate slower")},
        },
        "cases": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record")
    parser.add_argument("--baseline", required=True, help="side label of the baseline")
    parser.add_argument("--candidate", required=True, help="side label of the candidate")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from benchmarks import validate

    data = records.load(args.record)
    problems = validate.problems(data)
    if problems:
        print(f"error: {args.record} is not a valid record:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 2
    try:
        result = evaluate(data, args.baseline, args.candidate)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    records.write(result, args.out)
    print_summary(result)
    return 0 if result["passed"] else 1


def print_summary(result: dict) -> None:
    print(f"gate {result['candidate']['label']} vs {result['baseline']['label']}: "
          f"{'PASSED' if result['passed'] else 'FAILED'}")
    for case in result["cases"]:
        ratio = case["median_ratio"]
        print(f"  {' '.join(case['case'].values()):55s} ratio "
              f"{'n/a' if ratio is None else f'{ratio:7.3f}'}  {case['verdict']}"
              f"{'' if case['passed'] else '  FAIL'}")
    for reason in result["reasons"]:
        print(f"  reason: {reason}")


if __name__ == "__main__":
    sys.exit(main())
