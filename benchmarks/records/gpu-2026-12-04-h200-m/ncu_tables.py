"""Summaries of Nsight Compute exports, for this record's logs:

    python3 ncu_tables.py durations RAW.csv  # ncu --csv --metrics gpu__time_duration.sum
    python3 ncu_tables.py details DETAILS.csv  # ncu --import R --page details --csv
    python3 ncu_tables.py sass SOURCE.csv  # ncu --import R --page source --csv --print-source sass

durations: launches, total and mean us per kernel; details: a few headline metrics per profiled
launch; sass: the first profiled launch's warp instructions and stall samples per opcode, and
its stall reasons.
"""

import collections
import csv
import sys

_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
_DETAILS = ("Duration", "SM Frequency", "DRAM Throughput", "Memory Throughput",
            "Compute (SM) Throughput", "Executed Ipc Active", "Issued Warp Per Scheduler",
            "Warp Cycles Per Issued Instruction", "Registers Per Thread", "Achieved Occupancy",
            "Local Memory Spilling Requests", "L1/TEX Hit Rate", "L2 Hit Rate")


def _number(text: str) -> float:
    return float(text.replace(",", "") or 0)


def durations(path: str) -> None:
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        print("  no launch of the kernels asked for")
        return
    header = rows[0]
    kernel, metric = header.index("Kernel Name"), header.index("Metric Name")
    value, unit = header.index("Metric Value"), header.index("Metric Unit")
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for row in rows[1:]:
        if row[metric] == "gpu__time_duration.sum":
            name = row[kernel].split("(")[0].replace("void ", "")[:60]
            totals[name][0] += 1
            totals[name][1] += _number(row[value]) * _UNITS_US[row[unit]]
    for name, (count, total) in sorted(totals.items(), key=lambda item: -item[1][1]):
        print(f"{count:5d} {total:10.1f} {total / count:8.2f}  {name}")


def details(path: str) -> None:
    rows = list(csv.DictReader(open(path)))
    for launch in sorted({r["ID"] for r in rows}, key=int):
        mine = [r for r in rows if r["ID"] == launch]
        print(f"launch {launch}: {mine[0]['Kernel Name'].split('(')[0]}")
        for r in mine:
            if r["Metric Name"] in _DETAILS:
                print(f"  {r['Metric Name']}: {r['Metric Value']} {r['Metric Unit']}")


def sass(path: str) -> None:
    lines = open(path).read().split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith('"Kernel Name"')]
    end = starts[1] if len(starts) > 1 else len(lines)
    print(lines[starts[0]].split(",")[1][:100])
    rows = list(csv.DictReader(line for line in lines[starts[0] + 1:end] if line.strip()))
    executed: collections.Counter = collections.Counter()
    stalls: collections.Counter = collections.Counter()
    for r in rows:
        words = r["Source"].split()
        op = (words[1] if words and words[0].startswith("@") else (words or ["?"])[0])
        op = op.split(".")[0]
        executed[op] += int(_number(r["Instructions Executed"]))
        stalls[op] += int(_number(r["Warp Stall Sampling (All Samples)"]))
    total, sampled = sum(executed.values()), sum(stalls.values())
    print(f"warp instructions {total}, stall samples {sampled}")
    for op, count in executed.most_common(20):
        share, stalled = 100 * count / total, 100 * stalls[op] / sampled
        print(f"  {op:10s} {count:10d} {share:5.1f}% {stalled:5.1f}%")
    reasons: collections.Counter = collections.Counter()
    for r in rows:
        for key, text in r.items():
            if key.startswith("stall_") and "Not Issued" not in key:
                reasons[key] += int(_number(text))
    print("stall reasons:", ", ".join(f"{k[6:]} {v}" for k, v in reasons.most_common(8)))


if __name__ == "__main__":
    {"durations": durations, "details": details, "sass": sass}[sys.argv[1]](sys.argv[2])
