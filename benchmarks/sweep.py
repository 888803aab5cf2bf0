"""Shape sweep: every engine on every case of a profile, interleaved, into one v2 record.

    PYTHONPATH=python python benchmarks/sweep.py --profile smoke \
        --engines numpy,native_cpu --out benchmarks/records/smoke.json

Engines named peer_* run the external renewable-huber 0.7.1 under --peer-python.
"""

from __future__ import annotations

import argparse
import sys

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks import fingerprint, profiles, record, validate  # noqa: E402
from benchmarks.cli_common import add_matrix_arguments, positive_int  # noqa: E402
from benchmarks.engines import parse_engines  # noqa: E402
from benchmarks.runner import InterleavedRunner, Plan, Side  # noqa: E402


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_matrix_arguments(parser, default_lifecycles="cold,steady",
                         default_operations="fit,partial_fit")
    parser.add_argument("--engines", default="numpy,native_cpu")
    parser.add_argument("--samples", type=positive_int, default=5,
                        help="samples per case (= interleaved rounds)")
    parser.add_argument("--peer-python", default=None,
                        help="interpreter of the virtual environment holding the peer")
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def sides_for(engines, threads: int, peer_python: str | None) -> list[Side]:
    sides = []
    for engine in engines:
        if engine.is_peer and peer_python is None:
            raise SystemExit(f"error: engine {engine.name} needs --peer-python")
        sides.append(Side(label=engine.name, engine=engine,
                          python=peer_python if engine.is_peer else sys.executable,
                          n_jobs=threads if engine.threaded else None))
    return sides


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        engines = parse_engines(args.engines)
        shapes = profiles.shapes_of(args.profile, list(args.shapes) if args.shapes else None)
        plan = Plan(shapes, args.dtypes, args.penalties, args.lifecycles, args.operations,
                    args.transports)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sides = sides_for(engines, args.threads, args.peer_python)
    runner = InterleavedRunner(sides, rounds=args.samples, warmups=args.warmups,
                               min_sample_seconds=args.min_sample_seconds,
                               data_dir=args.data_dir, progress=not args.no_progress)
    if args.profile in profiles.GPU_ONLY_PROFILES:
        cpu_sides = [s for s in sides if s.engine.device == "cpu"]
        for side in cpu_sides:
            runner.skipped.append({"engine": side.engine.name, "label": side.label,
                                   "reason": f"profile {args.profile} is GPU only"})
        runner.sides = [s for s in sides if s.engine.device != "cpu"]
    runner.run(plan)
    result = record.build(tool="sweep", environment=fingerprint.environment(),
                          arguments=vars(args) | {"data_dir": str(args.data_dir)},
                          rounds=args.samples, sides=[s.describe() for s in sides],
                          workers=runner.worker_info, cases=runner.cases,
                          skipped=runner.skipped, unavailable=runner.unavailable)
    problems = validate.problems(result)
    record.write(result, args.out)
    for problem in problems:
        print(f"record problem: {problem}", file=sys.stderr)
    print(f"{len(result['cases'])} cases, {len(result['skipped'])} skipped, "
          f"{len(result['unavailable'])} unavailable -> {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
