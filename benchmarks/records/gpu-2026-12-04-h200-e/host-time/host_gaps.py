"""Per-batch breakdown of a cold stream's wall time: Python before the engine call, the engine's
host work before its first launch, GPU span, wake after the last kernel, engine/Python after."""

import json
import statistics
import sys

import cupy as cp
import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data, stream, timed_streams
from benchmarks.profiles import shapes_of

from renewable_huber import _engine, estimator

orig_update = _engine.EngineHandle.update


def update(self, *a, **k):
    with record_function("engine-update"):
        return orig_update(self, *a, **k)


_engine.EngineHandle.update = update
orig_pf = estimator.RenewableHuberRegressor.partial_fit


def pf(self, *a, **k):
    with record_function("partial_fit"):
        return orig_pf(self, *a, **k)


estimator.RenewableHuberRegressor.partial_fit = pf
torch.zeros(1, device="cuda")
out = sys.argv[1]
cases = sys.argv[2:] or ["streaming:float64:none", "reference:float64:none", "wide:float64:none"]
for case in cases:
    name, dtype, pen = case.split(":")
    shape = shapes_of("large" if name.startswith("large-") else "standard", [name])[0]
    X, y = shape_data(shape)
    Xd, yd = cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))
    walls, _, _ = timed_streams(cp, shape, Xd, yd, dtype, pen, warmups=3, repetitions=7)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            stream(cp, shape, Xd, yd, dtype, pen)
    path = f"/tmp/hg-{name}-{dtype}.json"
    p.export_chrome_trace(path)
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    pfs = sorted(
        (e for e in ev if e["name"] == "partial_fit" and e.get("cat") == "user_annotation"),
        key=lambda e: e["ts"],
    )
    ups = sorted(
        (e for e in ev if e["name"] == "engine-update" and e.get("cat") == "user_annotation"),
        key=lambda e: e["ts"],
    )
    rt = sorted((e for e in ev if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    gpu = sorted(
        (e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
        key=lambda e: e["ts"],
    )
    rows = []
    for i, (a, u) in enumerate(zip(pfs, ups, strict=False)):
        a0, a1 = a["ts"], a["ts"] + a["dur"]
        u0, u1 = u["ts"], u["ts"] + u["dur"]
        launches = [r for r in rt if u0 <= r["ts"] <= u1 and "Launch" in r["name"]]
        syncs = [r for r in rt if u0 <= r["ts"] <= u1 and "Synchronize" in r["name"]]
        pre_calls = [r for r in rt if u0 <= r["ts"] and launches and r["ts"] < launches[0]["ts"]]
        k = [g for g in gpu if u0 <= g["ts"] <= u1]
        if not launches or not syncs or not k:
            continue
        prev_end = pfs[i - 1]["ts"] + pfs[i - 1]["dur"] if i else None
        rows.append(
            dict(
                loop=(a0 - prev_end)
                if prev_end is not None and a0 - prev_end < 500
                else float("nan"),
                py_pre=u0 - a0,
                eng_pre=launches[0]["ts"] - u0,
                launch_lat=k[0]["ts"] - launches[0]["ts"],
                gpu_span=k[-1]["ts"] + k[-1]["dur"] - k[0]["ts"],
                gpu_busy=sum(g["dur"] for g in k),
                wake=syncs[-1]["ts"] + syncs[-1]["dur"] - (k[-1]["ts"] + k[-1]["dur"]),
                eng_post=u1 - (syncs[-1]["ts"] + syncs[-1]["dur"]),
                py_post=a1 - u1,
                n_launch=len(launches),
                n_sync=len(syncs),
                pre_calls=";".join(r["name"] for r in pre_calls),
            )
        )
    per = len(rows) // 3
    later = [r for j, r in enumerate(rows) if j % per != 0]
    print(
        f"## {case}: unprofiled wall median {statistics.median(walls) * 1e3:.3f} ms; "
        f"{len(rows)} batches profiled; medians over later batches (us):"
    )
    for key in (
        "loop",
        "py_pre",
        "eng_pre",
        "launch_lat",
        "gpu_span",
        "gpu_busy",
        "wake",
        "eng_post",
        "py_post",
        "n_launch",
        "n_sync",
    ):
        vals = [r[key] for r in later if r[key] == r[key]]
        print(f"  {key:10s} {statistics.median(vals):9.1f}   (first batch {rows[0][key]:.1f})")
    print("  host calls before the first launch:", later[0]["pre_calls"])
