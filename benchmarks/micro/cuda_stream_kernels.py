"""One cold stream of a standard- or large-profile shape on native_cuda inside an NVTX range named
"measure", for Nsight Compute's per-kernel view of where the stream's device time goes; and a
summary of that view.

    RH_CUDA_LIBRARY=build/.../librh_cuda.so PYTHONPATH=python \
        ncu --nvtx --nvtx-include "measure/" --metrics gpu__time_duration.sum \
            --print-summary per-kernel \
        python3 benchmarks/micro/cuda_stream_kernels.py run wide float64 none > ncu.log
    python3 benchmarks/micro/cuda_stream_kernels.py summarize ncu.log
    python3 benchmarks/micro/cuda_stream_kernels.py compare base-ncu.log candidate-ncu.log

`run` folds every batch of the shape into a new estimator (device input, CuPy), twice before
the range to warm up, once inside it, and prints the stream's wall time (under Nsight Compute
each kernel runs alone at locked clocks, so that time is not the unprofiled one). `summarize`
prints each kernel's launches, mean and total time from the per-kernel summary, largest total
first. `compare` sets two such outputs (two builds, the same stream) side by side, with the
ratio of their kernel totals: a comparison of builds that the host's other work does not move.
A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

# Run as a script from anywhere: the repository root holds the benchmarks package.
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.cli_common import stream_case_commands  # noqa: E402

_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def run(shape_name: str, dtype: str, penalty: str) -> None:
    import cupy as cp
    from benchmarks.micro.cuda_cold_streams import device_rows, stream
    from cupy.cuda import nvtx

    shape, Xd, yd = device_rows(cp, shape_name, dtype)
    stream(cp, shape, Xd, yd, dtype, penalty)
    stream(cp, shape, Xd, yd, dtype, penalty)
    nvtx.RangePush("measure")
    began = time.perf_counter()
    _, iterations = stream(cp, shape, Xd, yd, dtype, penalty)
    wall = time.perf_counter() - began
    nvtx.RangePop()
    print(f"{shape_name} {dtype} {penalty}: {1e3 * wall:.3f} ms, {iterations} iterations")


def kernel_times(text: str) -> list[tuple[float, int, float, str]]:
    """(total us, launches, mean us, kernel) per kernel of ncu's per-kernel summary, largest
    total first. Each kernel's header line holds its signature, grid, block, device and
    invocations; the gpu__time_duration.sum row of the metric table that follows holds the
    unit, then the minimum, maximum and average."""
    header = re.compile(r"^  (.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), .*Invocations (\d+)$")
    duration = re.compile(r"^\s+gpu__time_duration\.sum\s+(\S+)\s+\S+\s+\S+\s+(\S+)$")
    rows = []
    kernel = None
    for line in text.splitlines():
        found = header.match(line)
        if found:
            name = re.sub(r"\(.*", "", found.group(1)).split("::")[-1]
            kernel = (name, int(found.group(2)))
            continue
        found = duration.match(line)
        if found and kernel is not None:
            unit = _UNITS_US.get(found.group(1))
            if unit is None:
                raise ValueError(f"unknown time unit {found.group(1)!r} for {kernel[0]}")
            mean = float(found.group(2).replace(",", "")) * unit
            rows.append((kernel[1] * mean, kernel[1], mean, kernel[0]))
            kernel = None
    return sorted(rows, reverse=True)


def summarize(path: str) -> None:
    rows = kernel_times(Path(path).read_text())
    for kernel_total, launches, mean, name in rows:
        print(f"{kernel_total:10.1f} us = {launches:4d} x {mean:8.2f}  {name}")
    print(f"kernel total {sum(row[0] for row in rows):.1f} us")


def compare(base_path: str, candidate_path: str) -> None:
    """Two summaries of the same stream (two builds) side by side: each kernel's total in
    either, and the ratio of the stream's kernel totals. Nsight Compute runs each kernel alone,
    so these totals do not drift with the host's other work as wall times do."""
    def by_kernel(path: str) -> dict[str, tuple[float, int]]:
        # A kernel launched with several grids has a summary entry per grid: add them.
        totals: dict[str, tuple[float, int]] = {}
        for total, launches, _, name in kernel_times(Path(path).read_text()):
            known = totals.get(name, (0.0, 0))
            totals[name] = (known[0] + total, known[1] + launches)
        return totals

    base = by_kernel(base_path)
    candidate = by_kernel(candidate_path)
    names = sorted(set(base) | set(candidate),
                   key=lambda name: -max(base.get(name, (0.0,))[0],
                                         candidate.get(name, (0.0,))[0]))
    for name in names:
        b = base.get(name, (0.0, 0))
        c = candidate.get(name, (0.0, 0))
        print(f"{b[0]:10.1f} us ({b[1]:4d}) {c[0]:10.1f} us ({c[1]:4d})  {name}")
    base_total = sum(row[0] for row in base.values())
    candidate_total = sum(row[0] for row in candidate.values())
    print(f"kernel total {base_total:.1f} us -> {candidate_total:.1f} us "
          f"(base / candidate {base_total / candidate_total:.3f})")


def main() -> None:
    parser, commands = stream_case_commands(__doc__, "run")
    summary_parser = commands.add_parser("summarize")
    summary_parser.add_argument("log")
    compare_parser = commands.add_parser("compare")
    compare_parser.add_argument("base_log")
    compare_parser.add_argument("candidate_log")
    args = parser.parse_args()
    if args.command == "run":
        run(args.shape, args.dtype, args.penalty)
    elif args.command == "summarize":
        summarize(args.log)
    else:
        compare(args.base_log, args.candidate_log)


if __name__ == "__main__":
    main()
