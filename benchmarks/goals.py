"""native_cuda's performance goals against the peer's CuPy backend, judged from A/B runs.

    python benchmarks/goals.py RUN [RUN ...] [--device device.json] [--json goals.json]

A RUN is an `ab.py` output folder (its gate.json beside its merged.json), or a folder searched
for such folders. Only runs of native_cuda (candidate) against peer_cupy (baseline, the peer
renewable-huber 0.7.1's CuPy backend) count, and only their cold partial_fit cases; other gates
are listed as ignored. Runs may split a profile (one per shape, say); a case measured in more
than one run is taken from the newest. Runs from different GPU models are refused: speed-ups
are ratios within one run, and a goal over cases of two kinds of GPU would mean neither.

The goals (docs/benchmarks.md, "Performance goals"; a speed-up is the gate's, the inverse of
the median of the paired per-round ratios):

  standard profile  device input: median speed-up >= 20x, every case >= 10x
                    host input:   median >= 12x, every case >= 7x
                    the streaming stream (float64, no penalty, device input): <= 2 ms
                    (native_cuda's median)
  large profile     device input: median >= 4x; host input: median >= 5x
                    every device-input case within 2.5x of the roofline's ideal floor
  both profiles     what host input adds to each case (native_cuda's host median minus its
                    device median) within 1.5x of the pinned-copy floor of the batch bytes
  (the last two need --device, the GPU constants of `roofline.py --measure-device`)

Host-input cases of a run whose CPUs were busy with other work before it (ab.py's sample
above fingerprint.BUSY_CPUS_LIMIT) are left out and listed: the host's copies into pinned
memory share those CPUs, so their times are not the host's. An older run's measurement of the
case counts instead, if there is one; otherwise the case is missing.

A goal over a profile's cases reads "incomplete" while any of its cases (every shape of the
profile, float32 and float64, penalties none and l1) is missing, unless the cases present
already miss it ("no"). The command prints a Markdown table and exits 0; with --check it
exits 1 unless every goal is met. Exit 2: unreadable or inconsistent runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks import fingerprint, roofline  # noqa: E402
from benchmarks import record as records  # noqa: E402
from benchmarks.profiles import PROFILES, profile_of  # noqa: E402

CANDIDATE = "native_cuda"
BASELINE = "peer_cupy"
DTYPES = ("float32", "float64")
PENALTIES = ("none", "l1")
STREAM_CASE = ("streaming", "float64", "none", "device")
STREAM_LIMIT_S = 2e-3
FLOOR_LIMIT = 2.5
TRANSFER_LIMIT = 1.5


@dataclass(frozen=True)
class SpeedupGoal:
    profile: str
    transport: str
    statistic: str  # "median" or "lowest"
    target: float

    @property
    def name(self) -> str:
        what = "median" if self.statistic == "median" else "every case"
        return f"{self.profile}, {self.transport} input: {what} >= {self.target:g}x"


SPEEDUP_GOALS = (
    SpeedupGoal("standard", "device", "median", 20.0),
    SpeedupGoal("standard", "device", "lowest", 10.0),
    SpeedupGoal("standard", "host", "median", 12.0),
    SpeedupGoal("standard", "host", "lowest", 7.0),
    SpeedupGoal("large", "device", "median", 4.0),
    SpeedupGoal("large", "host", "median", 5.0),
)


@dataclass
class Run:
    folder: Path
    gate: dict
    merged: dict | None

    @property
    def created(self) -> str:
        return self.gate["created"]

    @property
    def gpu(self) -> str | None:
        if self.merged is None:
            return None
        return (self.merged["environment"].get("gpu") or {}).get("name")

    @property
    def busy_cpus(self) -> float | None:
        """The CPUs other work kept busy before the run (ab.py's sample), None where the record
        has no sample (older records, or /proc/stat unreadable)."""
        if self.merged is None:
            return None
        sample = self.merged["environment"].get("cpu_busy_before_run") or {}
        return sample.get("busy_cpus")

    @property
    def host_busy(self) -> bool:
        """Whether its host-input times are not this host's (fingerprint.BUSY_CPUS_LIMIT)."""
        busy = self.busy_cpus
        return busy is not None and busy > fingerprint.BUSY_CPUS_LIMIT


@dataclass
class Case:
    key: tuple  # (shape, dtype, penalty, transport)
    speedup: float
    passed: bool
    run: Run


def expected_keys(profile: str, transport: str) -> list[tuple]:
    return [(s.name, d, p, transport) for s in PROFILES[profile] for d in DTYPES
            for p in PENALTIES]


def label(key: tuple) -> str:
    return " ".join(key)


def find_runs(paths: list[Path]) -> tuple[list[Run], list[str]]:
    """The peer A/B runs under `paths`, and a line for every gate ignored."""
    folders: list[Path] = []
    for path in paths:
        if path.is_file() and path.name == "gate.json":
            folders.append(path.parent)
        elif path.is_dir():
            folders.extend(sorted(p.parent for p in path.rglob("gate.json")))
        else:
            raise ValueError(f"{path}: neither an ab.py output folder nor its gate.json")
    runs, ignored = [], []
    for folder in dict.fromkeys(folders):
        gate = records.load(folder / "gate.json")
        if gate.get("schema") != "renewable-huber-gate":
            raise ValueError(f"{folder / 'gate.json'} is not a gate result")
        engines = (gate["baseline"]["engine"], gate["candidate"]["engine"])
        if engines != (BASELINE, CANDIDATE):
            ignored.append(f"{folder}: {engines[1]} against {engines[0]}")
            continue
        merged_path = folder / "merged.json"
        merged = records.load(merged_path) if merged_path.is_file() else None
        if merged is not None and merged.get("run_id") != gate.get("run_id"):
            raise ValueError(f"{folder}: gate.json and merged.json come from different runs")
        runs.append(Run(folder, gate, merged))
    if not runs:
        raise ValueError("no A/B run of native_cuda against peer_cupy (gate.json) under "
                         + ", ".join(map(str, paths)))
    gpus = {run.gpu for run in runs if run.gpu is not None}
    if len(gpus) > 1:
        raise ValueError(f"the runs come from different GPUs ({', '.join(sorted(gpus))}); "
                         "judge each GPU's runs separately")
    return runs, ignored


def collect_cases(runs: list[Run]) -> tuple[dict[tuple, Case], dict[tuple, Run]]:
    """Every cold partial_fit case of the runs by (shape, dtype, penalty, transport), the
    newest run's where several measured it; and the host-input cases left out because their
    run's CPUs were busy with other work before it (Run.host_busy), by key, with the newest
    such run, for the keys no other run measured."""
    cases: dict[tuple, Case] = {}
    busy: dict[tuple, Run] = {}
    for run in sorted(runs, key=lambda r: r.created):
        for result in run.gate["cases"]:
            c = result["case"]
            if (c["lifecycle"], c["operation"]) != ("cold", "partial_fit"):
                continue
            if result.get("speedup") is None:
                continue
            key = (c["shape"], c["dtype"], c["penalty"], c["transport"])
            if c["transport"] == "host" and run.host_busy:
                busy[key] = run
                continue
            cases[key] = Case(key, float(result["speedup"]), bool(result["passed"]), run)
    return cases, {k: r for k, r in busy.items() if k not in cases}


def candidate_case(run: Run, key: tuple) -> dict | None:
    """native_cuda's record case of `key` in the run's merged.json."""
    if run.merged is None:
        return None
    side = run.gate["candidate"]["label"]
    shape, dtype, penalty, transport = key
    for case in run.merged["cases"]:
        if (case["label"] == side and case["shape"]["name"] == shape
                and (case["dtype"], case["penalty"], case["transport"]) == (dtype, penalty,
                                                                            transport)
                and (case["lifecycle"], case["operation"]) == ("cold", "partial_fit")):
            return case
    return None


def judge_speedup(goal: SpeedupGoal, cases: dict[tuple, Case]) -> dict:
    wanted = expected_keys(goal.profile, goal.transport)
    present = [cases[k] for k in wanted if k in cases]
    missing = [label(k) for k in wanted if k not in cases]
    if not present:
        return {"goal": goal.name, "measured": "no case measured", "met": "incomplete",
                "missing": missing}
    speedups = [c.speedup for c in present]
    lowest = min(present, key=lambda c: c.speedup)
    if goal.statistic == "median":
        value = statistics.median(speedups)
        measured = (f"median {value:.3g}x over {len(present)} cases "
                    f"(lowest {lowest.speedup:.3g}x, {label(lowest.key)})")
        met = "incomplete" if missing else ("yes" if value >= goal.target else "no")
    else:
        value = lowest.speedup
        measured = f"lowest {value:.3g}x ({label(lowest.key)}) over {len(present)} cases"
        met = "no" if value < goal.target else ("incomplete" if missing else "yes")
    return {"goal": goal.name, "measured": measured, "value": value, "target": goal.target,
            "met": met, "missing": missing, "cases": len(present)}


def judge_stream(cases: dict[tuple, Case]) -> dict:
    name = (f"standard streaming stream ({label(STREAM_CASE[1:])} input) "
            f"<= {STREAM_LIMIT_S * 1e3:g} ms")
    found = cases.get(STREAM_CASE)
    case = candidate_case(found.run, STREAM_CASE) if found is not None else None
    if case is None:
        return {"goal": name, "measured": "not measured", "met": "incomplete",
                "missing": [label(STREAM_CASE)]}
    value = float(case["median"])
    return {"goal": name, "measured": f"{value * 1e3:.3f} ms (native_cuda median)",
            "value": value, "target": STREAM_LIMIT_S,
            "met": "yes" if value <= STREAM_LIMIT_S else "no", "missing": []}


def ratio_goal(name: str, ratios: dict[tuple, float], missing: list[str], limit: float,
               nothing: str) -> dict:
    """A goal that every case's ratio stays at or below `limit`."""
    if not ratios:
        return {"goal": name, "measured": nothing, "met": "incomplete", "missing": missing}
    worst = max(ratios, key=ratios.get)
    within = sum(r <= limit for r in ratios.values())
    met = "no" if ratios[worst] > limit else "incomplete" if missing else "yes"
    return {"goal": name,
            "measured": (f"{within} of {len(ratios)} cases within; worst "
                         f"{ratios[worst]:.3g}x ({label(worst)})"),
            "value": ratios[worst], "target": limit, "met": met, "missing": missing,
            "ratios": {label(k): v for k, v in ratios.items()}}


def not_judged(name: str) -> dict:
    return {"goal": name, "measured": "not judged (no --device constants)",
            "met": "incomplete", "missing": []}


def judge_floors(cases: dict[tuple, Case], device: roofline.DeviceConstants | None) -> dict:
    name = f"large, device input: every case within {FLOOR_LIMIT:g}x of its ideal floor"
    if device is None:
        return not_judged(name)
    ratios, missing = {}, []
    for key in expected_keys("large", "device"):
        case = candidate_case(cases[key].run, key) if key in cases else None
        if case is None:
            missing.append(label(key))
            continue
        ideal = roofline.case_floors(case, device)["ideal"]["total"]
        ratios[key] = float(case["median"]) / ideal
    return ratio_goal(name, ratios, missing, FLOOR_LIMIT, "no case measured")


def judge_transfer(cases: dict[tuple, Case], device: roofline.DeviceConstants | None) -> dict:
    """What host input adds to a case (host median - device median, native_cuda) against the
    pinned-copy floor of its batches' bytes, over every standard and large case."""
    name = (f"host input adds at most {TRANSFER_LIMIT:g}x the pinned-copy floor "
            "(every standard and large case)")
    if device is None:
        return not_judged(name)
    ratios, missing = {}, []
    for profile in ("standard", "large"):
        for shape, dtype, penalty, _ in expected_keys(profile, "host"):
            pair = []
            for transport in ("host", "device"):
                key = (shape, dtype, penalty, transport)
                pair.append(candidate_case(cases[key].run, key) if key in cases else None)
            if None in pair:
                missing.append(label((shape, dtype, penalty)))
                continue
            host, on_device = pair
            floor = roofline.case_floors(host, device)["engine"]["transfer"]
            ratios[(shape, dtype, penalty)] = (float(host["median"])
                                               - float(on_device["median"])) / floor
    return ratio_goal(name, ratios, missing, TRANSFER_LIMIT, "no case with both transports")


def judge(runs: list[Run], device: roofline.DeviceConstants | None) -> dict:
    cases, busy = collect_cases(runs)
    unknown = sorted({k[0] for k in cases if profile_of(k[0]) not in ("standard", "large")})
    if unknown:
        raise ValueError(f"shapes of no goal's profile: {', '.join(unknown)}")
    goals = [judge_speedup(g, cases) for g in SPEEDUP_GOALS[:4]]
    goals.append(judge_stream(cases))
    goals += [judge_speedup(g, cases) for g in SPEEDUP_GOALS[4:]]
    goals.append(judge_floors(cases, device))
    goals.append(judge_transfer(cases, device))
    used = {id(c.run) for c in cases.values()}
    sources = [{"folder": str(r.folder), "created": r.created,
                "git": r.gate["git"]["revision"][:12] + (" (dirty)" if r.gate["git"]["dirty"]
                                                         else ""),
                "gpu": r.gpu, "gate_passed": bool(r.gate["passed"]),
                "cases": sum(c.run is r for c in cases.values())}
               for r in sorted(runs, key=lambda r: r.created) if id(r) in used]
    failed = sorted(label(k) for k, c in cases.items() if not c.passed)
    left_out = [{"case": label(k), "folder": str(r.folder), "busy_cpus": r.busy_cpus}
                for k, r in sorted(busy.items())]
    return {"schema": "renewable-huber-goals", "version": 1, "goals": goals,
            "sources": sources, "failed_gate_cases": failed, "busy_host_cases": left_out,
            "all_met": all(g["met"] == "yes" for g in goals)}


def render(result: dict, ignored: list[str]) -> str:
    lines = ["| goal | measured | met |", "|---|---|---|"]
    for g in result["goals"]:
        met = g["met"]
        if g["missing"] and met != "yes":
            shown = ", ".join(g["missing"][:4])
            more = len(g["missing"]) - 4
            met += f" (missing: {shown}{f' and {more} more' if more > 0 else ''})"
        lines.append(f"| {g['goal']} | {g['measured']} | {met} |")
    lines += ["", "Runs (a case measured twice is taken from the newest):"]
    for s in result["sources"]:
        lines.append(f"- {s['folder']}: {s['created']}, git {s['git']}, {s['gpu'] or 'GPU ?'}, "
                     f"gate {'passed' if s['gate_passed'] else 'FAILED'}, {s['cases']} cases")
    left_out: dict[tuple, list[str]] = {}
    for entry in result["busy_host_cases"]:
        left_out.setdefault((entry["folder"], entry["busy_cpus"]), []).append(entry["case"])
    for (folder, busy), names in left_out.items():
        lines.append(f"Host-input cases left out, {busy:g} CPUs busy with other work before "
                     f"their run ({folder}; over {fingerprint.BUSY_CPUS_LIMIT:g} their times "
                     f"are not this host's): {', '.join(names)}")
    if result["failed_gate_cases"]:
        lines.append("Cases whose gate check failed: " + ", ".join(result["failed_gate_cases"]))
    for line in ignored:
        lines.append(f"Ignored (not native_cuda against peer_cupy): {line}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="ab.py output folders (or above)")
    parser.add_argument("--device", type=Path, default=None,
                        help="GPU constants (roofline.py --measure-device) for the floor goal")
    parser.add_argument("--json", type=Path, default=None, help="write the verdicts as JSON")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every goal is met")
    args = parser.parse_args(argv)
    try:
        device = None
        if args.device is not None:
            device = roofline.DeviceConstants.from_json(
                json.loads(args.device.read_text(encoding="utf-8")))
        runs, ignored = find_runs(args.runs)
        result = judge(runs, device)
    except (OSError, ValueError, KeyError) as exc:
        print(f"goals: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(result, ignored))
    if args.json is not None:
        records.write(result, args.json)
    return 1 if args.check and not result["all_met"] else 0


if __name__ == "__main__":
    sys.exit(main())
