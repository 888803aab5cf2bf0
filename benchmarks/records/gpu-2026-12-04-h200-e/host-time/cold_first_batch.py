"""Where a cold stream's first partial_fit goes: Python phases and the CUDA calls inside them."""

import collections
import json
import statistics
import sys
import time

import cupy as cp
import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, ".")
from benchmarks.micro.cuda_cold_streams import shape_data
from benchmarks.profiles import shapes_of

from renewable_huber import RenewableHuberRegressor, _engine, estimator


def wrap(owner, attr, label):
    orig = getattr(owner, attr)

    def f(*a, **k):
        with record_function(label):
            return orig(*a, **k)

    setattr(owner, attr, f)


wrap(estimator.RenewableHuberRegressor, "partial_fit", "A partial_fit")
wrap(estimator, "_new_backend", "B _new_backend")
wrap(_engine.EngineHandle, "__init__", "C EngineHandle.__init__")
wrap(_engine.EngineHandle, "restore", "D EngineHandle.restore")
wrap(_engine.EngineHandle, "update", "E EngineHandle.update")
wrap(_engine.EngineHandle, "close", "F EngineHandle.close")
torch.zeros(1, device="cuda")
shape = shapes_of("standard", ["streaming"])[0]
X, y = shape_data(shape)
Xd, yd = cp.asarray(X[: shape.batch_size]), cp.asarray(y[: shape.batch_size])


def cold(k=1):
    m = RenewableHuberRegressor(
        backend="native_cuda", device="cuda", dtype="float64", penalty="none"
    )
    for _ in range(k):
        m.partial_fit(Xd, yd)
    cp.cuda.Device().synchronize()
    return m


for _ in range(5):
    cold(2)
firsts, seconds = [], []
for _ in range(21):
    m = RenewableHuberRegressor(
        backend="native_cuda", device="cuda", dtype="float64", penalty="none"
    )
    t = time.perf_counter()
    m.partial_fit(Xd, yd)
    t1 = time.perf_counter()
    m.partial_fit(Xd, yd)
    t2 = time.perf_counter()
    firsts.append(t1 - t)
    seconds.append(t2 - t1)
    del m
print(
    f"unprofiled: first partial_fit {statistics.median(firsts) * 1e6:.1f} us, "
    f"second {statistics.median(seconds) * 1e6:.1f} us (medians of 21)"
)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(5):
        m = cold(1)
        del m
p.export_chrome_trace("/tmp/cold.json")
ev = [e for e in json.load(open("/tmp/cold.json"))["traceEvents"] if e.get("ph") == "X"]
ann = sorted((e for e in ev if e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
rt = [e for e in ev if e.get("cat") == "cuda_runtime"]
gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
by = collections.defaultdict(list)
calls = collections.defaultdict(collections.Counter)
callt = collections.defaultdict(collections.Counter)
for a in ann:
    by[a["name"]].append(a["dur"])
    for r in rt:
        if a["ts"] <= r["ts"] <= a["ts"] + a["dur"]:
            calls[a["name"]][r["name"]] += 1
            callt[a["name"]][r["name"]] += r["dur"]
print(
    "profiled, per cold first batch (5): annotation median us; "
    "CUDA calls inside (count, total us over 5)"
)
for name in sorted(by):
    print(f"  {name:28s} {statistics.median(by[name]):9.1f} x{len(by[name])}")
    for c, n in calls[name].most_common(12):
        print(f"      {c:34s} {n:4d} {callt[name][c]:9.1f}")
pf = [a for a in ann if a["name"] == "A partial_fit"]
for a in pf[-2:]:
    k = sorted((g for g in gpu if a["ts"] <= g["ts"] <= a["ts"] + a["dur"]), key=lambda g: g["ts"])
    print(
        f"  partial_fit {a['dur']:.1f} us: GPU items {len(k)}, "
        f"busy {sum(g['dur'] for g in k):.1f}, first GPU item at +{k[0]['ts'] - a['ts']:.1f}, "
        f"last end at +{k[-1]['ts'] + k[-1]['dur'] - a['ts']:.1f}"
    )
    prev = a["ts"]
    for g in k[:8]:
        print(f"      +{g['ts'] - a['ts']:8.1f} {g['dur']:7.1f} {g['name'][:60]}")
