"""Where the cluster Cholesky's time goes, phase by phase: one cold native_cuda stream of a
standard shape whose systems the cluster kernel solves (wide: P = 257), on a librh_cuda built
with its phase stamps, and a table of those stamps.

    cmake -S . -B build/phases -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=OFF \
        -DRH_CUDA_CLUSTER_PHASES=ON && cmake --build build/phases --target rh_cuda
    RH_CUDA_LIBRARY=build/phases/engines/cuda/librh_cuda.so PYTHONPATH=python \
        python3 benchmarks/micro/cluster_cholesky_phases.py stream wide float32 none > phases.log
    python3 benchmarks/micro/cluster_cholesky_phases.py table phases.log [--launch N]

With RH_CUDA_CLUSTER_PHASES=ON, thread 0 of every block of the kernel takes clock64() at each
phase boundary and prints the stamps when the kernel ends, as cycles since its block began, one
`RH_CLUSTER_PHASES launch L P p blocks C rank r first f: ...` line per eight stamps (-1: not
reached). Such a build is a diagnostic, never a release: it prints from every launch. `stream`
folds the shape's batches into a new estimator (device input), so its output holds one launch
per Newton iteration that reached the factor's end. `table` prints one launch (by default the
middle one): the stamps by block, then the phases' lengths on block 0 (the assembly up to the
first step, each step, the back substitution) and, per step, the longest copy of panel tiles over
the blocks. A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

# Run as a script from anywhere: the repository root holds the benchmarks package.
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.cli_common import stream_case_commands  # noqa: E402

# The stamps' order (engines/cuda/src/cluster_cholesky.cu, kPhase*): the start, the end of the
# assembly, the first diagonal factor, five per step for up to MAX_TILES - 1 steps, the end of
# the steps, the verdict, one per tile row of the back substitution, the end.
MAX_TILES = 16
STEP_PHASES = ("top", "panels", "mid", "copied", "updated")
FIRST_STEP = 3
LOOP_END = FIRST_STEP + len(STEP_PHASES) * (MAX_TILES - 1)
VERDICT = LOOP_END + 1
FIRST_BACK = VERDICT + 1
END = FIRST_BACK + MAX_TILES

_LINE = re.compile(r"RH_CLUSTER_PHASES launch (\d+) P (\d+) blocks (\d+) rank (\d+) "
                   r"first (\d+):((?: -?\d+)+)\s*$")


def phase_name(index: int) -> str:
    if index == 0:
        return "start"
    if index == 1:
        return "assembled"
    if index == 2:
        return "first factor"
    if FIRST_STEP <= index < LOOP_END:
        step, part = divmod(index - FIRST_STEP, len(STEP_PHASES))
        return f"step {step} {STEP_PHASES[part]}"
    if index == LOOP_END:
        return "steps end"
    if index == VERDICT:
        return "verdict"
    if FIRST_BACK <= index < END:
        return f"back step {index - FIRST_BACK}"
    if index == END:
        return "end"
    raise ValueError(f"no phase {index}")


def read_stamps(text: str) -> dict[int, dict]:
    """launch -> {"P": P, "blocks": C, "ranks": {rank: {phase: cycles}}} from the kernel's lines
    (other output is skipped; stamps of -1, phases not reached, are left out)."""
    launches: dict[int, dict] = {}
    for line in text.splitlines():
        found = _LINE.search(line)
        if found is None:
            continue
        launch, P, blocks, rank, first = (int(found.group(k)) for k in range(1, 6))
        values = [int(v) for v in found.group(6).split()]
        entry = launches.setdefault(launch, {"P": P, "blocks": blocks,
                                             "ranks": collections.defaultdict(dict)})
        if (entry["P"], entry["blocks"]) != (P, blocks):
            raise ValueError(f"launch {launch} printed two shapes: P {entry['P']} on "
                             f"{entry['blocks']} blocks and P {P} on {blocks}")
        for offset, cycles in enumerate(values):
            if cycles >= 0:
                entry["ranks"][rank][first + offset] = cycles
    if not launches:
        raise ValueError("no RH_CLUSTER_PHASES lines: was librh_cuda built with "
                         "RH_CUDA_CLUSTER_PHASES=ON, and did the stream reach the cluster kernel?")
    return launches


def steps_of(ranks: dict[int, dict[int, int]]) -> int:
    """How many steps the launch stamped (every block stamps each step's top)."""
    tops = {(phase - FIRST_STEP) // len(STEP_PHASES)
            for stamps in ranks.values() for phase in stamps
            if FIRST_STEP <= phase < LOOP_END and (phase - FIRST_STEP) % len(STEP_PHASES) == 0}
    return len(tops)


def summary(entry: dict) -> list[tuple[str, int]]:
    """The phases' lengths in cycles on block 0, and per step the longest copy of panel tiles
    over the blocks (from the barrier after the panel solves to the copies' end)."""
    ranks = entry["ranks"]
    if 0 not in ranks:
        raise ValueError("block 0 printed no stamps for this launch")
    zero = ranks[0]
    steps = steps_of(ranks)
    mid, copied = STEP_PHASES.index("mid"), STEP_PHASES.index("copied")
    rows = [("assembly and first factor (to step 0's top)", zero[FIRST_STEP])]
    for step in range(steps):
        top = FIRST_STEP + len(STEP_PHASES) * step
        following = top + len(STEP_PHASES) if step + 1 < steps else LOOP_END
        rows.append((f"step {step}", zero[following] - zero[top]))
        longest = max(stamps[top + copied] - stamps[top + mid] for stamps in ranks.values()
                      if top + copied in stamps and top + mid in stamps)
        rows.append((f"step {step}: longest copy of panel tiles", longest))
    rows.append(("steps", zero[LOOP_END] - zero[FIRST_STEP]))
    rows.append(("back substitution (verdict to end)", zero[END] - zero[VERDICT]))
    rows.append(("whole kernel", zero[END]))
    return rows


def table(text: str, launch: int | None = None) -> list[str]:
    launches = read_stamps(text)
    if launch is None:
        ordered = sorted(launches)
        launch = ordered[len(ordered) // 2]
    if launch not in launches:
        raise ValueError(f"no launch {launch}: the log has launches {sorted(launches)}")
    entry = launches[launch]
    ranks = sorted(entry["ranks"])
    out = [f"launch {launch} of {len(launches)}: P = {entry['P']} on {entry['blocks']} blocks; "
           "clock64() cycles since each block began"]
    out.append(f"{'phase':>34} " + " ".join(f"{'rank ' + str(r):>9}" for r in ranks))
    phases = sorted({phase for stamps in entry["ranks"].values() for phase in stamps})
    for phase in phases:
        cells = [entry["ranks"][r].get(phase) for r in ranks]
        out.append(f"{phase_name(phase):>34} "
                   + " ".join(f"{'-' if c is None else c:>9}" for c in cells))
    out.append("")
    out.extend(f"{name:>44} {cycles:>9}" for name, cycles in summary(entry))
    return out


def stream_shape(shape_name: str, dtype: str, penalty: str) -> None:
    import cupy as cp
    from benchmarks.micro.cuda_cold_streams import device_rows, stream

    shape, X, y = device_rows(cp, shape_name, dtype)
    _, iterations = stream(cp, shape, X, y, dtype, penalty)
    print(f"{shape_name} {dtype} {penalty}: {iterations} iterations", flush=True)


def main() -> None:
    parser, commands = stream_case_commands(__doc__, "stream")
    table_parser = commands.add_parser("table")
    table_parser.add_argument("log")
    table_parser.add_argument("--launch", type=int, default=None)
    args = parser.parse_args()
    if args.command == "stream":
        stream_shape(args.shape, args.dtype, args.penalty)
    else:
        try:
            print("\n".join(table(Path(args.log).read_text(), args.launch)))
        except ValueError as error:
            parser.error(f"{args.log}: {error}")


if __name__ == "__main__":
    main()
