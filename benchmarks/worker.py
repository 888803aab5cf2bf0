"""Benchmark worker: times one engine of one renewable_huber installation in its own process.

Runs under any interpreter that can import a `renewable_huber` exposing the public estimator
API (this project's package, or the external peer in its own virtual environment), so it
imports nothing else from this repository: NumPy, the standard library, and optionally
threadpoolctl and CuPy.

Protocol: one JSON object per line on stdin, one JSON reply per line on the real stdout
(anything the estimator prints goes to stderr so it cannot corrupt a reply). Requests:
  {"op": "hello", "backend": ..., "n_jobs": int|null, "pin_blas": bool}
  {"op": "load", "x": path, "y": path, "sha256": hex, "transport": "host"|"device"}
  {"op": "prepare", "case": {...}, "warmups": int}  -> the seconds of one calibration run
  {"op": "freeze", "repetitions": int}  (the runner sizes the blocks)
  {"op": "sample"}
  {"op": "quit"}
Every reply has "ok"; a failure carries "error" with the exception's type and message.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import json
import os
import sys
import time
import traceback

import numpy as np


class Worker:
    def __init__(self) -> None:
        self.backend: str | None = None
        self.n_jobs: int | None = None
        self.module = None
        self.cupy = None
        self.blas_limiter = None
        self.data_key: tuple | None = None
        self.X = None
        self.y = None
        self.case: dict | None = None
        self.repetitions = 0
        self.steady_estimator = None

    # ------------------------------------------------------------------ requests

    def hello(self, backend: str, n_jobs: int | None, pin_blas: bool) -> dict:
        self.backend = backend
        self.n_jobs = n_jobs
        blas = self._pin_blas() if pin_blas else {"pinned": False}
        import renewable_huber

        self.module = renewable_huber
        reason = self._unavailable_reason()
        if backend in ("cupy", "native_cuda") and reason is None:
            import cupy

            self.cupy = cupy
        return {
            "python": sys.version.split()[0],
            "python_executable": sys.executable,
            "numpy": np.__version__,
            "package_version": getattr(renewable_huber, "__version__", "unknown"),
            "package_path": os.path.dirname(renewable_huber.__file__),
            "abi_version": self._abi_version(),
            "available": reason is None,
            "reason": reason,
            "blas": blas,
            "thread_variables": {k: v for k, v in os.environ.items() if k.endswith("_NUM_THREADS")},
        }

    def load(self, x: str, y: str, sha256: str, transport: str) -> dict:
        key = (x, y, transport)
        if key != self.data_key:
            self.X = self.y = None
            self.steady_estimator = None
            gc.collect()
            X, Y = np.load(x), np.load(y)
            digest = hashlib.sha256()
            digest.update(np.ascontiguousarray(X).data)
            digest.update(np.ascontiguousarray(Y).data)
            if digest.hexdigest() != sha256:
                raise ValueError(f"dataset {x} has sha256 {digest.hexdigest()}, expected {sha256}")
            if transport == "device":
                X, Y = self.cupy.asarray(X), self.cupy.asarray(Y)
                self._synchronize()
            self.X, self.y, self.data_key = X, Y, key
        return {"sha256": sha256}

    def prepare(self, case: dict, warmups: int) -> dict:
        self.case = case
        self.repetitions = 0
        self.steady_estimator = None
        if case["lifecycle"] == "steady":
            self.steady_estimator = self._new_estimator()
        for _ in range(warmups):
            self._run_once()
        seconds, iterations, converged = self._run_once()
        return {"calibration_seconds": seconds, "iterations": iterations, "converged": converged}

    def freeze(self, repetitions: int) -> dict:
        if repetitions < 1:
            raise ValueError(f"repetitions must be >= 1, got {repetitions}")
        self.repetitions = int(repetitions)
        return {}

    def sample(self) -> dict:
        """Mean seconds of one block of the frozen repetition count."""
        total = 0.0
        all_converged = True
        gc.collect()
        gc.disable()
        try:
            for _ in range(self.repetitions):
                seconds, iterations, converged = self._run_once()
                total += seconds
                all_converged = all_converged and converged
        finally:
            gc.enable()
        return {"seconds": total / self.repetitions, "iterations": iterations,
                "converged": all_converged}

    # ------------------------------------------------------------------ timing one run

    def _run_once(self) -> tuple[float, list[int], bool]:
        """One timed pass of the case: (seconds, iterations per batch, all converged).

        cold: the estimator (and so its engine) is created inside the timer and released
        after it. steady: the primed estimator is reset outside the timer.
        """
        case = self.case
        cold = case["lifecycle"] == "cold"
        if not cold:
            self.steady_estimator.reset()
        self._synchronize()
        start = time.perf_counter()
        estimator = self._new_estimator() if cold else self.steady_estimator
        if case["operation"] == "fit":
            estimator.fit(self.X, self.y)
            diagnostics = [estimator.diagnostics_]
        else:
            diagnostics = []
            batch = case["batch_size"]
            for lo in range(0, self.X.shape[0], batch):
                estimator.partial_fit(self.X[lo:lo + batch], self.y[lo:lo + batch])
                diagnostics.append(estimator.diagnostics_)
        self._synchronize()
        seconds = time.perf_counter() - start
        del estimator
        iterations = [int(_field(d, "iterations")) for d in diagnostics]
        converged = all(bool(_field(d, "converged")) for d in diagnostics)
        return seconds, iterations, converged

    def _new_estimator(self):
        case = self.case
        params = {"backend": self.backend, "dtype": case["dtype"], "penalty": case["penalty"]}
        if self.backend in ("cupy", "native_cuda"):
            params["device"] = "cuda"
        if self.n_jobs is not None and self.backend == "native_cpu":
            params["n_jobs"] = self.n_jobs
        return self.module.RenewableHuberRegressor(**params)

    # ------------------------------------------------------------------ environment

    def _synchronize(self) -> None:
        if self.cupy is not None:
            self.cupy.cuda.get_current_stream().synchronize()
            self.cupy.cuda.Device().synchronize()

    def _pin_blas(self) -> dict:
        try:
            from threadpoolctl import threadpool_info, threadpool_limits
        except ImportError:
            # The launcher also set the *_NUM_THREADS variables before start, which is what
            # pins OpenBLAS/MKL when threadpoolctl is missing from this environment.
            return {"pinned": True, "mechanism": "environment variables", "threads": 1}
        self.blas_limiter = threadpool_limits(limits=1, user_api="blas")
        pools = [{"internal_api": p.get("internal_api"), "num_threads": p.get("num_threads"),
                  "version": p.get("version")} for p in threadpool_info()
                 if p.get("user_api") == "blas"]
        return {"pinned": True, "mechanism": "threadpoolctl", "threads": 1, "pools": pools}

    def _unavailable_reason(self) -> str | None:
        try:
            backends = importlib.import_module(self.module.__name__ + ".backends")
        except ImportError:
            backends = None
        probe = getattr(backends, "unavailable_reason", None)
        if probe is not None:
            return probe(self.backend)
        try:
            if self.backend in ("cupy", "native_cuda"):
                import cupy

                cupy.cuda.runtime.getDeviceCount()
            estimator = self.module.RenewableHuberRegressor(
                backend=self.backend, **({"device": "cuda"} if self.backend in (
                    "cupy", "native_cuda") else {}))
            rng = np.random.default_rng(0)
            X = rng.standard_normal((64, 2))
            estimator.partial_fit(X, X @ np.array([1.0, -1.0]))
        except Exception as error:  # noqa: BLE001 - any failure means "unavailable", with why
            return f"{type(error).__name__}: {error}"
        return None

    def _abi_version(self):
        for name in ("abi_version", "ABI_VERSION"):
            value = getattr(self.module, name, None)
            if value is not None:
                return value() if callable(value) else value
        return None


def _field(diagnostics, name: str):
    """diagnostics_ is a mapping in this project and an object with attributes in the peer."""
    if isinstance(diagnostics, dict):
        return diagnostics[name]
    return getattr(diagnostics, name)


def main() -> int:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr
    worker = Worker()
    handlers = {
        "hello": worker.hello,
        "load": worker.load,
        "prepare": worker.prepare,
        "freeze": worker.freeze,
        "sample": worker.sample,
    }
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        if op == "quit":
            break
        try:
            reply = {"ok": True, **handlers[op](**request)}
        except Exception as error:  # noqa: BLE001 - reported to the runner, which records it
            traceback.print_exc()
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        replies.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
