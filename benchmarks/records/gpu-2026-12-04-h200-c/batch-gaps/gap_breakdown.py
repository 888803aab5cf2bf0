"""Per-batch host time of gap.py's traces: for each engine update call inside a partial_fit,
the Python before it, the engine's own time before its first CUDA call and after its last
synchronisation, the Python after it, and the GPU span of its work (medians, microseconds).

    python3 gap_breakdown.py gap-wide.json.gz gap-streaming.json.gz
"""

import gzip
import json
import statistics
import sys


def breakdown(path: str) -> None:
    events = json.load(gzip.open(path, "rt"))["traceEvents"]

    def spans(name):
        return sorted((e for e in events if e.get("name") == name and e.get("ph") == "X"),
                      key=lambda e: e["ts"])

    fits, updates = spans("partial_fit"), spans("engine-update")
    calls = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")),
                   key=lambda e: e["ts"])
    work = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                  key=lambda e: e["ts"])
    rows = []
    for u in updates:
        u_end = u["ts"] + u["dur"]
        outer = [p for p in fits if p["ts"] <= u["ts"] and u_end <= p["ts"] + p["dur"]]
        inside = [c for c in calls if u["ts"] <= c["ts"] <= u_end]
        syncs = [c for c in inside if "Synchronize" in c["name"]]
        if not outer or not syncs:
            continue
        p = outer[0]
        mine = [w for w in work if u["ts"] <= w["ts"] <= u_end]
        rows.append({
            "python before the engine call": u["ts"] - p["ts"],
            "engine before its first CUDA call": inside[0]["ts"] - u["ts"],
            "engine after its last synchronisation": u_end - (syncs[-1]["ts"] + syncs[-1]["dur"]),
            "python after the engine call": p["ts"] + p["dur"] - u_end,
            "partial_fit": p["dur"],
            "GPU span": max(w["ts"] + w["dur"] for w in mine) - mine[0]["ts"] if mine else 0.0,
            "synchronisations": len(syncs),
        })
    print(f"{path}: {len(rows)} batches")
    for key in rows[0]:
        values = [r[key] for r in rows]
        print(f"  {key:40s} median {statistics.median(values):8.1f}  "
              f"min {min(values):8.1f}  max {max(values):8.1f}")


for argument in sys.argv[1:]:
    breakdown(argument)
