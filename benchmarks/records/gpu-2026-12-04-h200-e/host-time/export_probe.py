"""How fast the host reads P + P^2 values out of pinned memory, by who wrote it last."""

import statistics
import time

import cupy as cp
import cupyx
import numpy as np


def med(f, setup, reps=101):
    ts = []
    for _ in range(reps):
        setup()
        t = time.perf_counter_ns()
        f()
        ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts) / 1e3


for P, dt in [(257, np.float64), (257, np.float32), (91, np.float64), (33, np.float64)]:
    n = P + P * P
    pinned = cupyx.empty_pinned(n, dtype=dt)
    dev = cp.random.random(n).astype(dt)
    mapped = cp.ndarray(
        (n,),
        dt,
        cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(pinned.ctypes.data, pinned.nbytes, pinned), 0),
    )
    reuse = np.empty(n, dt)

    def cpu(pinned=pinned):
        pinned[:] = 1.0

    def dma(pinned=pinned, dev=dev):
        dev.get(out=pinned)
        cp.cuda.Device().synchronize()

    def kern(mapped=mapped, dev=dev):
        mapped[:] = dev
        cp.cuda.Device().synchronize()

    def into_reused(reuse=reuse, pinned=pinned):
        np.copyto(reuse, pinned)

    def into_new(pinned=pinned):
        np.array(pinned, copy=True)

    row = []
    for name, setup in (("cpu-written", cpu), ("dma-written", dma), ("kernel-written", kern)):
        a = med(into_reused, setup)
        b = med(into_new, setup)
        row.append(f"{name}: into a reused array {a:.1f} us, into a new one {b:.1f} us")
    print(f"P = {P} {np.dtype(dt).name} ({pinned.nbytes / 1024:.0f} KiB): " + "; ".join(row))
