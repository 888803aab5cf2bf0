"""Where a native_cuda partial_fit spends its time: engine call vs Python, on device input.

A measurement tool for the GPU host (not a test). Without arguments: times whole partial_fit
calls on the standard batch shapes, then prints a cProfile of the latency shape.
`breakdown`: per batch of a continuing stream (device input), the time of partial_fit, of the
backend's update alone, of the bare ABI call, and a cProfile
of the partial_fit loop, for graphs off and on.
"""
import ctypes
import cProfile
import pstats
import sys
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


def per_call_us(fn, calls):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for i in range(calls):
        fn(i)
    cp.cuda.Device().synchronize()
    return 1e6 * (time.perf_counter() - t0) / calls


def breakdown(batches=64, rounds=5):
    from renewable_huber import _abi
    from renewable_huber.backends import native

    cases = [("latency", 4096, 16), ("streaming", 4096, 32), ("reference", 8192, 90),
             ("wide", 4096, 256)]
    for name, n, p in cases:
        for dtype in ("float64", "float32"):
            for penalty in ("none", "l1"):
                X, y = batch(n * batches, p, dtype)
                Xs = [X[i * n:(i + 1) * n] for i in range(batches)]
                ys = [y[i * n:(i + 1) * n] for i in range(batches)]
                for graphs in (False, True):
                    model = RenewableHuberRegressor(backend="native_cuda", dtype=dtype,
                                                    penalty=penalty, cuda_graphs=graphs)
                    rows = {"partial_fit": [], "backend.update": [],
                            "abi call": []}
                    iterations = []
                    for _ in range(rounds):
                        model.reset()
                        rows["partial_fit"].append(per_call_us(
                            lambda i: model.partial_fit(Xs[i], ys[i]), batches))
                        iterations.append(model.n_iter_)
                        backend = model._backend
                        config = model._update_config(model._validated_params(), p)
                        backend.restore(backend.state().__class__.empty(p + 1, dtype))
                        rows["backend.update"].append(per_call_us(
                            lambda i: backend.update(Xs[i], ys[i], None, config), batches))
                        cfg = backend._config_struct(config)
                        diag = _abi.RhCudaDiagnostics(**native._DIAGNOSTICS_HEADER)
                        _, _, out = backend._new_state_buffers()
                        structs = [_abi.RhCudaDeviceBatch(
                            **native._DEVICE_BATCH_HEADER, x_design=Xs[i].data.ptr,
                            y=ys[i].data.ptr, sample_weight=None, n_rows=n, n_columns=p,
                            batch_weight=float(n)) for i in range(batches)]
                        fn = backend._lib.rh_cuda_engine_update_device_with_state

                        def bare(i, state):
                            status = fn(backend._engine, ctypes.byref(structs[i]),
                                        ctypes.byref(cfg), ctypes.byref(diag), state)
                            assert status == 0, backend._lib.rh_cuda_engine_last_error(backend._engine)

                        backend.restore(backend.state().__class__.empty(p + 1, dtype))
                        rows["abi call"].append(
                            per_call_us(lambda i: bare(i, ctypes.byref(out)), batches))
                    summary = "  ".join(f"{key} {np.median(v):8.1f}" for key, v in rows.items())
                    print(f"{name:9s} {n:5d}x{p:<3d} {dtype} {penalty:4s} graphs={graphs!s:5s} "
                          f"us/batch: {summary}  last-batch it {iterations[-1]}", flush=True)
    X, y = batch(4096 * batches, 32, "float64")
    model = RenewableHuberRegressor(backend="native_cuda")
    profile = cProfile.Profile()
    profile.enable()
    for i in range(batches):
        model.partial_fit(X[i * 4096:(i + 1) * 4096], y[i * 4096:(i + 1) * 4096])
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    if sys.argv[1:] == ["breakdown"]:
        breakdown()
    else:
        main()
