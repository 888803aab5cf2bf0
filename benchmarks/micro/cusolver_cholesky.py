"""cuSOLVER's Cholesky factor and solve at the standard shapes' P (float64, one right-hand side,
lower factor): potrf + potrs against potrfBatched + potrsBatched with a batch of one.

    python3 benchmarks/micro/cusolver_cholesky.py [--sizes 33,91,161,257,513]

Back-to-back calls on one stream, CUDA events around --repetitions calls after 10 warm-up calls.
Every call first restores A and b (the "copies" column); the other columns have that subtracted.
A script, not a test: nothing is asserted. Needs CuPy and a GPU.
"""

from __future__ import annotations

import argparse

import numpy as np


class Case:
    """One SPD system of size n on the device, with the calls to time."""

    def __init__(self, cp, cublas, cusolver, handle, n: int):
        self.cp, self.cusolver, self.handle, self.n = cp, cusolver, handle, n
        self.lower = cublas.CUBLAS_FILL_MODE_LOWER
        rng = np.random.default_rng(n)
        X = rng.standard_normal((4 * n, n))
        self.A0 = cp.asarray(X.T @ X / (4 * n) + np.eye(n) * 1e-3, order="F")
        self.b0 = cp.asarray(rng.standard_normal(n))
        self.A, self.b = self.A0.copy(order="F"), self.b0.copy()
        self.info = cp.zeros(1, dtype=np.int32)
        self.lwork = cusolver.dpotrf_bufferSize(handle, self.lower, n, self.A.data.ptr, n)
        self.work = cp.empty(self.lwork, dtype=np.float64)
        self.A_array = cp.asarray(np.array([self.A.data.ptr], dtype=np.uint64))
        self.b_array = cp.asarray(np.array([self.b.data.ptr], dtype=np.uint64))

    def copies(self):
        self.A[...] = self.A0
        self.b[...] = self.b0

    def potrf(self):
        self.copies()
        self.cusolver.dpotrf(self.handle, self.lower, self.n, self.A.data.ptr, self.n,
                             self.work.data.ptr, self.lwork, self.info.data.ptr)

    def potrf_potrs(self):
        self.potrf()
        self.cusolver.dpotrs(self.handle, self.lower, self.n, 1, self.A.data.ptr, self.n,
                             self.b.data.ptr, self.n, self.info.data.ptr)

    def potrf_batched(self):
        self.copies()
        self.cusolver.dpotrfBatched(self.handle, self.lower, self.n, self.A_array.data.ptr,
                                    self.n, self.info.data.ptr, 1)

    def batched(self):
        self.potrf_batched()
        self.cusolver.dpotrsBatched(self.handle, self.lower, self.n, 1, self.A_array.data.ptr,
                                    self.n, self.b_array.data.ptr, self.n, self.info.data.ptr, 1)


def per_call_us(cp, fn, repetitions: int) -> float:
    for _ in range(10):
        fn()
    began, ended = cp.cuda.Event(), cp.cuda.Event()
    began.record()
    for _ in range(repetitions):
        fn()
    ended.record()
    ended.synchronize()
    return cp.cuda.get_elapsed_time(began, ended) * 1e3 / repetitions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="33,91,161,257,513")
    parser.add_argument("--repetitions", type=int, default=200)
    args = parser.parse_args()
    import cupy as cp
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas, cusolver

    handle = device.get_cusolver_handle()
    for n in map(int, args.sizes.split(",")):
        case = Case(cp, cublas, cusolver, handle, n)
        base = per_call_us(cp, case.copies, args.repetitions)
        times = {name: per_call_us(cp, fn, args.repetitions) - base
                 for name, fn in (("potrf+potrs", case.potrf_potrs), ("potrf", case.potrf),
                                  ("batched", case.batched), ("potrfBatched", case.potrf_batched))}
        case.potrf_potrs()
        plain = case.b.copy()
        case.batched()
        difference = float(cp.abs(case.b - plain).max() / cp.abs(plain).max())
        print(f"n={n:4d} copies {base:7.1f} us | potrf+potrs {times['potrf+potrs']:7.1f} "
              f"(potrf {times['potrf']:6.1f}) | batched {times['batched']:7.1f} "
              f"(potrfBatched {times['potrfBatched']:6.1f}) | rel diff {difference:.2e}",
              flush=True)


if __name__ == "__main__":
    main()
