"""The device timeline of cold native_cuda streams of standard- and large-profile shapes: how
much of a stream's wall time the GPU is busy, where it sits idle and between which kernels, and
each kernel's own time, from the CUDA activity records (CUPTI) of an unserialised run.

    RH_CUDA_LIBRARY=build/.../librh_cuda.so PYTHONPATH=python \
        python3 benchmarks/micro/cuda_stream_timeline.py run OUT wide:float64:none
    python3 benchmarks/micro/cuda_stream_timeline.py summarize \
        OUT/timeline-wide-float64-none.json.gz
    python3 benchmarks/micro/cuda_stream_timeline.py compare BASE_OUT CANDIDATE_OUT LABEL

`run` folds every batch of each shape into a new estimator (device input, CuPy; with a fourth
field `host`, as in wide:float64:none:host, host input: NumPy rows the engine stages), three streams
to warm up, nine timed without the profiler (their median wall time), then one under PyTorch's
profiler, whose CUDA activity is CUPTI's record of every kernel, copy and runtime call of the
process (librh_cuda's included); each partial_fit call of that stream is a profiler range
(`partial_fit`), so the summary can split the host's time per batch: before the call's first
CUDA call (the package's checks, the engine's own before its first launch), in its CUDA calls,
waiting in its synchronisations, between its CUDA calls, after its last one (the state's
export, the package's bookkeeping) and from its end to the next call (the stream's loop). It
writes that record as OUT/timeline-SHAPE-DTYPE-PENALTY[-host].json.gz and prints its summary. Unlike
Nsight Compute (cuda_stream_kernels.py), kernels run as they do unprofiled, overlapped launches
included, so a kernel's time here may include the wait at its start for the one before it; the
idle gaps are the GPU's real idle time. `compare` sets the records of two runs of the same
cases (a baseline's and a candidate's OUT) side by side, case by case: GPU busy time, the
unprofiled wall medians, and the kernels that took the most time on either side with the
ratio of their totals. `run` needs CuPy and PyTorch
(its profiler is the CUPTI client) on the GPU host. A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import statistics
import sys
import time
from pathlib import Path

# Run as a script from anywhere: the repository root holds the benchmarks package.
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.profiles import shapes_of  # noqa: E402

_DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
_HOST_CALLS = ("cuda_runtime", "cuda_driver")
_WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
BATCH_MARK = "partial_fit"  # the profiler range around each batch's call (run)
_BATCH_PARTS = (
    ("before", "to its first CUDA call"),
    ("calls", "in its CUDA calls, waits excluded"),
    ("waiting", "waiting in synchronisations"),
    ("between", "between its CUDA calls"),
    ("after", "after its last CUDA call"),
    ("next", "from its end to the next call"),
)


def batch_host_times(events: list[dict]) -> list[dict[str, float]]:
    """Per BATCH_MARK range (a batch's partial_fit call), in call order, the host's time in us
    split into _BATCH_PARTS; "next" is absent for the last call. Empty without such ranges."""
    marks = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and e.get("name") == BATCH_MARK), key=lambda e: e["ts"])
    calls = sorted((e for e in events if e.get("cat") in _HOST_CALLS), key=lambda e: e["ts"])
    rows = []
    for index, mark in enumerate(marks):
        start, stop = mark["ts"], mark["ts"] + mark["dur"]
        inside = [c for c in calls if start <= c["ts"] and c["ts"] + c["dur"] <= stop]
        row = dict.fromkeys(name for name, _ in _BATCH_PARTS[:-1])
        if inside:
            waiting = sum(c["dur"] for c in inside if c["name"] in _WAITS)
            in_calls = sum(c["dur"] for c in inside)
            first, last = inside[0]["ts"], max(c["ts"] + c["dur"] for c in inside)
            row.update(before=first - start, calls=in_calls - waiting, waiting=waiting,
                       between=(last - first) - in_calls, after=stop - last)
        else:
            row.update(before=mark["dur"], calls=0.0, waiting=0.0, between=0.0, after=0.0)
        if index + 1 < len(marks):
            row["next"] = marks[index + 1]["ts"] - stop
        rows.append(row)
    return rows


def _batch_lines(rows: list[dict[str, float]]) -> list[str]:
    """The summary's lines for batch_host_times: the first batch, and the median of the others
    (a stream's first batch also makes the engine's buffers and graphs)."""
    later = rows[1:]
    lines = [f"host time per {BATCH_MARK} call, us: first batch | median of the other "
             f"{len(later)}"]
    for name, text in _BATCH_PARTS:
        first = rows[0].get(name)
        values = [row[name] for row in later if name in row]
        lines.append(f"  {'-' if first is None else f'{first:.1f}':>9} "
                     f"{f'{statistics.median(values):.1f}' if values else '-':>9}  {text}")
    return lines


def _short(name: str, width: int) -> str:
    """A kernel's name without its return type, namespace and parameters, cut to `width`."""
    name = re.sub(r"^std::enable_if<.*?>::type ", "", name)  # cuBLAS's gemv kernels
    for prefix in ("void ", "rh::(anonymous namespace)::", "rh::"):
        name = name.replace(prefix, "")
    return name.split("(")[0].strip()[:width]


def device_work(events: list[dict]) -> list[dict]:
    """The trace's kernels, copies and memsets, by start time."""
    return sorted((e for e in events if e.get("cat") in _DEVICE_WORK), key=lambda e: e["ts"])


def kernel_durations(work: list[dict]) -> dict[str, list[float]]:
    """Each launch's us of each kernel (or copy) of device_work, by its short name, in order."""
    durations: dict[str, list[float]] = collections.defaultdict(list)
    for event in work:
        durations[_short(event["name"], 60)].append(event["dur"])
    return durations


def kernel_times(work: list[dict]) -> dict[str, list[float]]:
    """[launches, total us] of each kernel (or copy) of device_work, by its short name."""
    return {name: [len(times), sum(times)] for name, times in kernel_durations(work).items()}


def busy_added(work: list[dict]) -> list[float]:
    """The us of busy time each item of device_work adds beyond the work that started before
    it: its end past the latest end so far, its whole duration after an idle gap. A kernel
    launched early (programmatic dependent launch) shows its blocks waiting for the kernel
    ahead as its own duration; here that wait counts for the kernel ahead, so the added times
    partition the busy time by kernel."""
    added, end = [], float("-inf")
    for event in work:
        start, stop = event["ts"], event["ts"] + event["dur"]
        added.append(max(0.0, stop - max(start, end)))
        end = max(end, stop)
    return added


def busy_time(work: list[dict]) -> float:
    """The us in which some device work of device_work runs (overlaps counted once)."""
    return sum(busy_added(work))


def summary(events: list[dict], title: str) -> str:
    """GPU busy and idle time, the largest idle gaps by the kernels around them, each kernel's
    launches and time, and the host's CUDA calls, from one stream's trace events."""
    work = device_work(events)
    if not work:
        return f"## {title}\nno device activity in the trace\n"
    end, previous = float("-inf"), None
    gaps: collections.Counter = collections.Counter()
    gap_counts: collections.Counter = collections.Counter()
    for event in work:
        start, stop = event["ts"], event["ts"] + event["dur"]
        if start > end and previous is not None:
            key = (_short(previous["name"], 36), _short(event["name"], 36))
            gaps[key] += start - end
            gap_counts[key] += 1
        if stop >= end:
            end, previous = stop, event
    span = end - work[0]["ts"]
    kernels = kernel_durations(work)
    added: dict[str, list[float]] = collections.defaultdict(list)
    work_added = busy_added(work)
    busy = sum(work_added)
    for event, us in zip(work, work_added, strict=True):
        added[_short(event["name"], 60)].append(us)
    calls: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for event in events:
        if event.get("cat") in _HOST_CALLS:
            calls[event["name"]][0] += 1
            calls[event["name"]][1] += event["dur"]
    lines = [f"## {title}",
             f"device work {len(work)} items; first start to last end {span:.1f} us: busy "
             f"{busy:.1f} us, idle {span - busy:.1f} us",
             "per kernel (or copy): launches, total us, mean us, median us, least us; busy us "
             "it adds, total and median"]
    # The median and the least tell launches that return at once (a solver's kernels queued
    # past the accepted attempt or the end) from those that work, which the mean mixes. The
    # busy time added leaves out the wait of an early launch for the kernel ahead.
    for name, times in sorted(kernels.items(), key=lambda item: -sum(item[1])):
        total = sum(times)
        lines.append(f"  {len(times):5d} {total:9.1f} {total / len(times):8.2f} "
                     f"{statistics.median(times):8.2f} {min(times):8.2f} "
                     f"{sum(added[name]):9.1f} {statistics.median(added[name]):8.2f}  {name}")
    lines.append("largest idle gaps, by the work before and after: total us, count")
    for key, total in gaps.most_common(10):
        lines.append(f"  {total:9.1f} {gap_counts[key]:5d}  {key[0]} -> {key[1]}")
    lines.append("host CUDA calls: count, total us")
    for name, (count, total) in sorted(calls.items(), key=lambda item: -item[1][1])[:10]:
        lines.append(f"  {count:5d} {total:9.1f}  {name}")
    rows = batch_host_times(events)
    if rows:
        lines.extend(_batch_lines(rows))
    return "\n".join(lines) + "\n"


def _wall(title: str) -> str:
    """The unprofiled wall median a run's title gives, or '-'."""
    found = re.search(r"unprofiled wall median ([0-9.]+ ms)", title)
    return found.group(1) if found else "-"


def comparison(base: dict, candidate: dict, label: str, top: int = 15) -> str:
    """One case's saved records (title and traceEvents), the base's against `label`'s: GPU busy
    time, the unprofiled wall medians of the titles, and the `top` kernels (or copies) by the
    larger of their two totals, each side's launches, mean and total us, and the ratio of the
    totals (base / label); the other kernels' totals on one line."""
    sides = []
    for record in (base, candidate):
        work = device_work(record["traceEvents"])
        sides.append((busy_time(work), kernel_times(work)))
    (base_busy, base_kernels), (busy, kernels) = sides

    def ratio(before: float, after: float) -> str:
        return f"{before / after:.3f}x" if before > 0 and after > 0 else "-"

    def side(entry) -> str:
        if entry is None:
            return f"{'-':>6} {'-':>9} {'-':>10}"
        count, total = entry
        return f"{count:6d} {total / count:9.2f} {total:10.1f}"

    def total(times: dict[str, list[float]], name: str) -> float:
        return times[name][1] if name in times else 0.0

    lines = [f"## {base['title']}",
             f"   {label}: {candidate['title']}",
             f"GPU busy us: base {base_busy:.1f}, {label} {busy:.1f} ({ratio(base_busy, busy)}); "
             f"unprofiled wall median: base {_wall(base['title'])}, {label} "
             f"{_wall(candidate['title'])}",
             f"  {'kernel (or copy)':44s} {'base: n':>6} {'mean us':>9} {'total us':>10} "
             f"{label[:6] + ': n':>6} {'mean us':>9} {'total us':>10}  base / {label}"]
    names = sorted(set(base_kernels) | set(kernels),
                   key=lambda n: -max(total(base_kernels, n), total(kernels, n)))
    for name in names[:top]:
        lines.append(f"  {name[:44]:44s} {side(base_kernels.get(name))} {side(kernels.get(name))}"
                     f"  {ratio(total(base_kernels, name), total(kernels, name))}")
    rest = names[top:]
    if rest:
        before = sum(total(base_kernels, n) for n in rest)
        after = sum(total(kernels, n) for n in rest)
        lines.append(f"  {len(rest)} other kernels: base {before:.1f} us, {label} {after:.1f} us")
    return "\n".join(lines) + "\n"


def load_record(path) -> dict:
    """A record run saved (timeline-*.json.gz): its title and traceEvents."""
    with gzip.open(path, "rt") as f:
        return json.load(f)


def compare(base_dir: str, candidate_dir: str, label: str) -> int:
    """comparison() of every saved record of base_dir (run's timeline-*.json.gz) with the record
    of the same case in candidate_dir, printed; a case missing on either side is named. Returns
    1 when base_dir holds no record, else 0."""
    base_files = sorted(Path(base_dir).glob("timeline-*.json.gz"))
    if not base_files:
        print(f"no timeline-*.json.gz in {base_dir}")
        return 1
    candidate = Path(candidate_dir)
    names = {path.name for path in base_files}
    for path in base_files:
        other = candidate / path.name
        if other.exists():
            print(comparison(load_record(path), load_record(other), label), flush=True)
        else:
            print(f"## {path.name}: no timeline of {label} in {candidate_dir}")
    for other in sorted(candidate.glob("timeline-*.json.gz")):
        if other.name not in names:
            print(f"## {other.name}: no timeline of the base in {base_dir}")
    return 0


def parse_cases(cases: list[str]) -> list[tuple]:
    """(shape, dtype, penalty, transport) for each SHAPE:DTYPE:PENALTY[:host] argument, a
    standard- or large-profile shape; transport "device" unless the fourth field says "host".
    ValueError naming the argument that is not one."""
    shapes = {s.name: s for profile in ("standard", "large") for s in shapes_of(profile)}
    parsed = []
    for case in cases:
        parts = case.split(":")
        if (len(parts) not in (3, 4) or parts[0] not in shapes
                or parts[1] not in ("float32", "float64") or parts[2] not in ("none", "l1")
                or parts[3:] not in ([], ["host"])):
            raise ValueError(f"case {case!r}: expected SHAPE:DTYPE:PENALTY[:host] with SHAPE one "
                             f"of {sorted(shapes)}, DTYPE float32 or float64, PENALTY none or l1")
        parsed.append((shapes[parts[0]], parts[1], parts[2], "host" if parts[3:] else "device"))
    return parsed


def run(out_dir: str, cases: list[tuple]) -> None:
    """Each (shape, dtype, penalty, transport) of parse_cases: timed, then traced, then
    summarised."""
    import cupy as cp
    import torch
    from benchmarks.micro.cuda_cold_streams import shape_data, stream, timed_streams
    from torch.profiler import ProfilerActivity, profile, record_function

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.zeros(1, device="cuda")  # the profiler's CUDA context is the one librh_cuda uses
    for shape, dtype, penalty, transport in cases:
        name = f"{shape.name}-{dtype}-{penalty}" + ("-host" if transport == "host" else "")
        X, y = shape_data(shape)
        Xd, yd = X.astype(dtype), y.astype(dtype)
        if transport == "device":
            Xd, yd = cp.asarray(Xd), cp.asarray(yd)
        walls, _, _ = timed_streams(cp, shape, Xd, yd, dtype, penalty, warmups=3, repetitions=9)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            cp.cuda.Device().synchronize()
            began = time.perf_counter()
            _, iterations = stream(cp, shape, Xd, yd, dtype, penalty,
                                   mark=lambda: record_function(BATCH_MARK))
            profiled = time.perf_counter() - began
        raw = out / f"timeline-{name}.json"
        profiler.export_chrome_trace(str(raw))
        events = json.loads(raw.read_text())["traceEvents"]
        raw.unlink()
        title = (f"{shape.name} {dtype} {penalty}"
                 + (" host input" if transport == "host" else "")
                 + f": {iterations} iterations; unprofiled wall "
                 f"median {1e3 * statistics.median(walls):.3f} ms (lowest {1e3 * min(walls):.3f})"
                 f", profiled {1e3 * profiled:.3f} ms")
        with gzip.open(f"{raw}.gz", "wt") as f:
            json.dump({"title": title, "traceEvents": events}, f)
        print(summary(events, title), flush=True)


def summarize(path: str) -> None:
    record = load_record(path)
    print(summary(record["traceEvents"], record["title"]), end="")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("out_dir")
    run_parser.add_argument("cases", nargs="+",
                            help="SHAPE:DTYPE:PENALTY[:host], e.g. wide:float64:none")
    summary_parser = commands.add_parser("summarize")
    summary_parser.add_argument("trace")
    compare_parser = commands.add_parser("compare")
    compare_parser.add_argument("base_dir", help="run's OUT folder of the baseline")
    compare_parser.add_argument("candidate_dir", help="run's OUT folder of the candidate")
    compare_parser.add_argument("label", help="the candidate's name in the table")
    args = parser.parse_args()
    if args.command == "run":
        try:
            cases = parse_cases(args.cases)
        except ValueError as error:
            parser.error(str(error))
        run(args.out_dir, cases)
    elif args.command == "compare":
        sys.exit(compare(args.base_dir, args.candidate_dir, args.label))
    else:
        summarize(args.trace)


if __name__ == "__main__":
    main()
