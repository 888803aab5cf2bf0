"""Where a native_cuda partial_fit spends its time: whole calls and a cProfile, device input.

A measurement tool for the GPU host (not a test): times whole partial_fit calls (cold and
steady) on the standard batch shapes, with and without CUDA graphs, then prints a cProfile of
the latency shape. The Python cost per batch against the bare engine call is measured by
benchmarks/micro/python_overhead.py.
"""
import cProfile
import pstats
import time

import cupy as cp
import numpy as np

from renewable_huber import RenewableHuberRegressor

SHAPES = {"latency": (4096, 16), "reference": (32768, 90), "wide": (4096, 256),
          "streaming": (65536, 32)}


def batch(n, p, dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(dtype)
    y = (X @ rng.standard_normal(p) + 0.2 * rng.standard_normal(n)).astype(dtype)
    return cp.asarray(X), cp.asarray(y)


def timed(fn, reps):
    out = []
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        out.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(out))


def main():
    for name, (n, p) in SHAPES.items():
        for dtype in ("float64", "float32"):
            for penalty in ("none", "l1"):
                X, y = batch(n, p, dtype)
                for graphs in (False, True):
                    model = RenewableHuberRegressor(backend="native_cuda", dtype=dtype,
                                                    penalty=penalty, cuda_graphs=graphs)
                    model.partial_fit(X, y)

                    def one():
                        model.reset()
                        model.partial_fit(X, y)

                    cold = timed(one, 15)
                    backend = model._backend
                    state = backend.state()

                    def steady():
                        backend.restore(state.__class__.empty(state.coefficients.size, dtype))
                        model.partial_fit(X, y)

                    warm = timed(steady, 15)
                    print(f"{name:9s} {dtype} {penalty:4s} graphs={graphs!s:5s} "
                          f"cold partial_fit {cold:8.3f} ms  steady {warm:8.3f} ms  "
                          f"it {model.n_iter_ if hasattr(model, 'n_iter_') else '?'}")
    X, y = batch(4096, 16, "float64")
    model = RenewableHuberRegressor(backend="native_cuda")
    model.partial_fit(X, y)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(50):
        model.reset()
        model.partial_fit(X, y)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
