"""Gate arithmetic of docs/benchmarks.md on interleaved, round-aligned samples.

A ratio is candidate time / baseline time of the same round (below 1: the candidate is
faster). The evidence about a case is the median of its paired ratios with a 95% percentile
bootstrap interval: 2,000 resamples (with replacement) of the paired ratios, the median of
each, the 2.5th and 97.5th percentiles of those medians; the generator is seeded with a fixed
number, so one record always gives the same interval. With lo, hi the interval's ends and
band = 0.10 (CPU) / 0.15 (GPU), the verdict of a case is
  "candidate slower"          lo > 1 + band
  "candidate faster"          hi < 1 / (1 + band)
  "no measurable difference"  1 / (1 + band) <= lo and hi <= 1 + band
  "too noisy to judge"        otherwise: the interval crosses an edge of the band, so the
                              samples cannot tell a difference beyond the band from none;
                              this is not a failure.
Checks per case (a gate passes when every check of every case passes):
  aligned_pairs      >= 9 rounds sampled on both sides
  converged          every batch converged on both sides
  iterations         median over batches of |candidate - baseline| iterations <= 1 (float64);
                     float32: <= 2 against the baseline's float32 counts, or <= 2 against the
                     baseline's float64 counts of the same configuration when the record has
                     them (float32 counts are a rounding outcome; an engine may decide float32
                     batches in double and follow the float64 path). Against a peer engine
                     (another implementation) only the batch counts must match and the
                     difference is reported.
  slowdown           fails only when lo > 1.10 (CPU) / 1.15 (GPU): the evidence says slower
                     beyond the noise band
  competitor_parity  only when the candidate is a native engine and the baseline its
                     competitor on the same transport: fails only when lo > 1
The relative MADs of both sides and of the paired ratios are reported, not gated.

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
from benchmarks.measurement import relative_mad  # noqa: E402

GATE_SCHEMA = "renewable-huber-gate"
GATE_VERSION = 2
MIN_PAIRS = 9
MAX_ITERATION_DIFFERENCE = 1
FLOAT32_ITERATION_ALLOWANCE = 2
THRESHOLDS = {
    "cpu": {"slowdown": 1.10, "noise_band": 0.10},
    "cuda": {"slowdown": 1.15, "noise_band": 0.15},
}
BOOTSTRAP = {"resamples": 2000, "confidence": 0.95, "seed": 20261201}
VERDICTS = ("candidate faster", "no measurable difference", "too noisy to judge",
            "candidate slower")


def _check(name: str, passed: bool, value, threshold, reason: str) -> dict:
    return {"name": name, "passed": bool(passed), "value": value, "threshold": threshold,
            "reason": None if passed else reason}


def median_interval(ratios, *, resamples: int = BOOTSTRAP["resamples"],
                    confidence: float = BOOTSTRAP["confidence"],
                    seed: int = BOOTSTRAP["seed"]) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of `ratios` (paired, one per round).

    Resamples the ratios with replacement `resamples` times from a generator seeded with
    `seed`, takes each resample's median and returns the (1 - confidence) / 2 and
    (1 + confidence) / 2 percentiles of those medians: the same ratios always give the same
    interval."""
    x = np.asarray(ratios, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("the bootstrap needs a non-empty list of paired ratios")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("paired ratios must be positive and finite")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"resamples must be >= 1 and confidence in (0, 1), got {resamples} "
                         f"and {confidence}")
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return float(low), float(high)


def verdict(interval: tuple[float, float], band: float) -> str:
    """The verdict of a confidence interval of the median paired ratio against the noise
    band [1 / (1 + band), 1 + band]."""
    low, high = interval
    if low > 1 + band:
        return "candidate slower"
    if high < 1 / (1 + band):
        return "candidate faster"
    if low >= 1 / (1 + band) and high <= 1 + band:
        return "no measurable difference"
    return "too noisy to judge"


def _iteration_difference(base_iterations: list, cand_iterations: list) -> float | None:
    a, b = base_iterations, cand_iterations
    if len(a) != len(b) or not a:
        return None
    return float(np.median(np.abs(np.asarray(a) - np.asarray(b))))


def _iteration_check(base: dict, cand: dict, base_float64: dict | None) -> dict:
    """The iterations check; `base_float64` is the baseline's float64 case of the same
    configuration when the case is float32 and the record has one."""
    against_peer = Engine(base["engine"]).is_peer and not Engine(cand["engine"]).is_peer
    difference = _iteration_difference(base["iterations"], cand["iterations"])
    if cand["dtype"] == "float32":
        allowance = FLOAT32_ITERATION_ALLOWANCE
        float64_difference = (None if base_float64 is None else
                              _iteration_difference(base_float64["iterations"],
                                                    cand["iterations"]))
        value = {"baseline_float32": difference, "baseline_float64": float64_difference}
        within = [d for d in (difference, float64_difference)
                  if d is not None and d <= allowance]
        passed = difference is not None and (bool(within) or against_peer)
        reason = ("batch counts differ between the sides" if difference is None else
                  f"median iteration difference {difference:g} > {allowance} against the "
                  f"baseline's float32 counts (baseline {base['iterations']}, candidate "
                  f"{cand['iterations']})"
                  + ("" if float64_difference is None else
                     f" and {float64_difference:g} > {allowance} against its float64 counts "
                     f"{base_float64['iterations']}"))
    else:
        allowance = MAX_ITERATION_DIFFERENCE
        value = difference
        passed = difference is not None and (difference <= allowance or against_peer)
        reason = ("batch counts differ between the sides" if difference is None else
                  f"median iteration difference {difference:g} > {allowance} (baseline "
                  f"{base['iterations']}, candidate {cand['iterations']})")
    return _check("iterations", passed, value, allowance, reason)


def compare_case(base: dict, cand: dict, base_float64: dict | None = None) -> dict:
    """The gate verdict of one case measured on both sides; `base_float64`: the baseline's
    float64 case of the same configuration, for the float32 iteration criterion."""
    device = "cuda" if "cuda" in (base["device"], cand["device"]) else "cpu"
    limits = THRESHOLDS[device]
    base_by_round = dict(zip(base["rounds"], base["samples"], strict=True))
    pairs = [(base_by_round[r], s) for r, s in zip(cand["rounds"], cand["samples"], strict=True)
             if r in base_by_round]
    ratios = [c / b for b, c in pairs]
    median_ratio = float(np.median(ratios)) if ratios else None
    interval = median_interval(ratios) if ratios else None
    low = None if interval is None else interval[0]
    where = f"{cand['engine']} vs {base['engine']}"

    def shown(i):
        return f"[{i[0]:.3f}, {i[1]:.3f}]"

    checks = [
        _check("aligned_pairs", len(pairs) >= MIN_PAIRS, len(pairs), MIN_PAIRS,
               f"only {len(pairs)} aligned pairs, need {MIN_PAIRS}"),
        _check("converged", base["converged"] and cand["converged"],
               {"baseline": base["converged"], "candidate": cand["converged"]}, True,
               "not every batch converged: "
               + ", ".join(side for side, case in (("baseline", base), ("candidate", cand))
                           if not case["converged"])),
        _iteration_check(base, cand, base_float64),
        _check("slowdown", low is not None and low <= limits["slowdown"], interval,
               limits["slowdown"],
               "no paired ratio" if low is None else
               f"{where}: slower, 95% interval of the median paired ratio {shown(interval)} "
               f"lies above {limits['slowdown']}"),
    ]
    same_transport = base["transport"] == cand["transport"]
    if is_competitor_pair(cand["engine"], base["engine"]) and same_transport:
        checks.append(_check(
            "competitor_parity", low is not None and low <= 1.0, interval, 1.0,
            "no paired ratio" if low is None else
            f"{where}: native engine slower than its competitor on {cand['transport']} "
            f"transport (95% interval of the median paired ratio {shown(interval)} lies "
            f"above 1)"))
    reasons = [c["reason"] for c in checks if not c["passed"]]
    return {
        "case": {"shape": cand["shape"]["name"], "dtype": cand["dtype"],
                 "penalty": cand["penalty"], "lifecycle": cand["lifecycle"],
                 "operation": cand["operation"], "transport": cand["transport"]},
        "device": device,
        "baseline_median": base["median"],
        "candidate_median": cand["median"],
        "median_ratio": median_ratio,
        "interval": None if interval is None else list(interval),
        "speedup": None if not median_ratio else 1.0 / median_ratio,
        "ratios": ratios,
        "rel_mad": {"baseline": base["rel_mad"], "candidate": cand["rel_mad"],
                    "ratios": relative_mad(ratios) if ratios else None},
        "verdict": None if interval is None else verdict(interval, limits["noise_band"]),
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
        base_float64 = None
        if cand["dtype"] == "float32":
            base_float64 = next((c for k, c in by_side[baseline].items()
                                 if k[2] == "float64" and k[:1] + k[3:] == key[:1] + key[3:]),
                                None)
        results.append(compare_case(base, cand, base_float64))
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
                       MAX_ITERATION_DIFFERENCE,
                       "float32_iteration_allowance": FLOAT32_ITERATION_ALLOWANCE,
                       "bootstrap": BOOTSTRAP, **THRESHOLDS},
        "passed": not reasons,
        "reasons": reasons,
        "summary": {
            "cases": len(results),
            "cases_passed": sum(r["passed"] for r in results),
            "median_speedup": float(np.median(speedups)) if speedups else None,
            "min_speedup": min(speedups) if speedups else None,
            "verdicts": {v: sum(r["verdict"] == v for r in results) for v in VERDICTS},
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
        ratio, interval = case["median_ratio"], case["interval"]
        shown = ("n/a" if ratio is None else
                 f"{ratio:7.3f} [{interval[0]:.3f}, {interval[1]:.3f}]")
        print(f"  {' '.join(case['case'].values()):55s} ratio {shown}  {case['verdict']}"
              f"{'' if case['passed'] else '  FAIL'}")
    for reason in result["reasons"]:
        print(f"  reason: {reason}")


if __name__ == "__main__":
    sys.exit(main())
