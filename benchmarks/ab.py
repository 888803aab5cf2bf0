"""Interleaved A/B: a baseline and a candidate, each in its own worker process, sampled in
alternating order every round, then gated (see gate.py for the criteria).

Two builds of one engine (two checkouts or interpreters):
    python benchmarks/ab.py --engine native_cpu \
        --baseline-python /tmp/base-venv/bin/python --baseline-pythonpath /tmp/base/python \
        --candidate-pythonpath python --profile standard --out-dir out/ab
An engine against its competitor in one installation:
    PYTHONPATH=python python benchmarks/ab.py --baseline-engine numpy \
        --candidate-engine native_cpu --profile standard --out-dir out/ab

Writes baseline.json, candidate.json, merged.json (v2 records) and gate.json into --out-dir;
exits 0 only when the gate passes (1: gate failed, 2: bad arguments or invalid record).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks import fingerprint, profiles, record, validate  # noqa: E402
from benchmarks.cli_common import add_matrix_arguments, positive_int  # noqa: E402
from benchmarks.engines import Engine  # noqa: E402
from benchmarks.gate import MIN_PAIRS, evaluate, print_summary  # noqa: E402
from benchmarks.runner import InterleavedRunner, Plan, Side  # noqa: E402

LABELS = ("baseline", "candidate")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_matrix_arguments(parser, default_lifecycles="cold,steady",
                         default_operations="partial_fit")
    parser.add_argument("--engine", default=None, help="engine of both sides (two builds)")
    parser.add_argument("--peer-python", default=None,
                        help="interpreter of the peer's virtual environment (peer_* engines)")
    for label in LABELS:
        parser.add_argument(f"--{label}-engine", default=None)
        parser.add_argument(f"--{label}-python", default=None)
        parser.add_argument(f"--{label}-pythonpath", default=None,
                            help="the checkout's python/ folder (default: inherited)")
    parser.add_argument("--rounds", type=positive_int, default=MIN_PAIRS)
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.rounds < MIN_PAIRS:
        parser.error(f"--rounds must be >= {MIN_PAIRS}: the gate needs {MIN_PAIRS} aligned pairs")
    for label in LABELS:
        if getattr(args, f"{label}_engine") is None:
            if args.engine is None:
                parser.error(f"name --engine or --{label}-engine")
            setattr(args, f"{label}_engine", args.engine)
    return args


def side_for(args: argparse.Namespace, label: str) -> Side:
    engine = Engine(getattr(args, f"{label}_engine"))
    python = getattr(args, f"{label}_python")
    if python is None:
        python = args.peer_python if engine.is_peer else sys.executable
    if python is None:
        raise ValueError(f"{label} engine {engine.name} needs --peer-python or --{label}-python")
    pythonpath = getattr(args, f"{label}_pythonpath")
    if pythonpath is not None:
        pythonpath = str(Path(pythonpath).resolve())
    return Side(label=label, engine=engine, python=python, pythonpath=pythonpath,
                n_jobs=args.threads if engine.threaded else None)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        sides = [side_for(args, label) for label in LABELS]
        shapes = profiles.shapes_of(args.profile, list(args.shapes) if args.shapes else None)
        plan = Plan(shapes, args.dtypes, args.penalties, args.lifecycles, args.operations,
                    args.transports)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    runner = InterleavedRunner(sides, rounds=args.rounds, warmups=args.warmups,
                               min_sample_seconds=args.min_sample_seconds,
                               data_dir=args.data_dir, progress=not args.no_progress)
    busy = fingerprint.cpu_busy_sample()
    if (busy["busy_cpus"] or 0.0) > fingerprint.BUSY_CPUS_LIMIT:
        print(f"warning: {busy['busy_cpus']:g} CPUs were busy with other work before the run "
              f"(over {busy['window_s']:g} s): timings that use the CPU, host input above all, "
              "may not be this host's", file=sys.stderr)
    runner.run(plan)
    arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    merged = record.build(tool="ab", environment=fingerprint.environment(busy),
                          arguments=arguments, rounds=args.rounds,
                          sides=[s.describe() for s in sides], workers=runner.worker_info,
                          cases=runner.cases, skipped=runner.skipped,
                          unavailable=runner.unavailable)
    out = args.out_dir
    record.write(merged, out / "merged.json")
    for label in LABELS:
        record.write(record.select(merged, {label}), out / f"{label}.json")
    problems = validate.problems(merged)
    if problems:
        print("error: the merged record is invalid:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 2
    result = evaluate(merged, "baseline", "candidate")
    record.write(result, out / "gate.json")
    print_summary(result)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
