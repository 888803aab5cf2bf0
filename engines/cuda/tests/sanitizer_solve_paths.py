"""One short update on each of librh_cuda's linear-solve paths, for compute-sanitizer: the
entry-point test's P = 5 reaches only the smallest one-block solve, while the cluster kernel
(factor and solves), cuSOLVER's factor and the verdict-and-solve kernel run only above the
one-block limit (docs/decisions.md, "Linear solve ladder"). P = 17, 91, 129 and 160: the
one-block kernel (160 its limit on an H200; at 91 the fused row pass forms X'u in three rounds
of 32 columns; at 129 the row pass's teams of 8 lanes hold a row's 128 columns); 257, 289
and 383: the cluster kernel with 9 tile rows on 8 blocks, 10 rows with two on some blocks, and
its limit; 384: cuSOLVER's; 1,025: cuSOLVER's, and the row pass's 32 X'u slots a lane (rows
of 513 to 1,024 columns). Float64, host input, two iterations each (the cap's convergence
warnings are silenced), without a penalty and, at P = 17, 129, 257 and 1,025, with the L1
penalty (its LAMM kernels; at 129 and 257 the finish's row pass forms the Gram's last
column). Then the incremental Gram (a heavy Gram, 2 n P^2 > 2e9): two batches of 16,000 x 256
(P = 257, the cluster Cholesky) and of 64,000 x 128 (P = 129, the one-block Cholesky), four
iterations each, so rows change weight between row passes; the second batch
takes the speculative whole step on it.
At P = 17, 257 and 384 without a penalty a second batch follows the first: from a fitted beta0
Newton takes the speculative whole step (its candidate from each solve path, the verdict in the
gradient's launch).
Run by run_device_suite.sh under memcheck and racecheck with RH_CUDA_LIBRARY pointing at the
library under test; exits non-zero if an update fails. With --incremental-only, only the
incremental Gram's streams: the suite runs them again on the test build with
RH_CUDA_TEST_GRAM_FLIPS=device (the changed rows added on the device).
"""

import sys
import warnings

import numpy as np

from renewable_huber import RenewableHuberRegressor


def main(incremental_only: bool) -> int:
    rng = np.random.default_rng(5)
    for parameters in () if incremental_only else (17, 91, 129, 160, 257, 289, 383, 384, 1025):
        features = parameters - 1
        X = rng.standard_normal((2 * parameters + 64, features))
        y = X @ rng.uniform(-1, 1, features) + rng.standard_t(3, X.shape[0])
        for penalty in ("none", "l1") if parameters in (17, 129, 257, 1025) else ("none",):
            model = RenewableHuberRegressor(backend="native_cuda", device="cuda",
                                            dtype="float64", penalty=penalty, max_iter=2)
            batches = 2 if penalty == "none" and parameters in (17, 257, 384) else 1
            for batch in range(batches):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.partial_fit(X[batch:], y[batch:])
                if not np.isfinite(model.coef_).all():
                    print(f"P = {parameters} {penalty}, batch {batch}: non-finite coefficients")
                    return 1
                print(f"P = {parameters} {penalty}, batch {batch}: {model.n_iter_} iterations")
    for rows, features in ((16_000, 256), (64_000, 128)):
        model = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype="float64",
                                        max_iter=4)
        beta = rng.uniform(-1, 1, features)
        for batch in range(2):
            X = rng.standard_normal((rows, features))
            y = X @ beta + rng.standard_t(3, X.shape[0])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.partial_fit(X, y)
            if not np.isfinite(model.coef_).all():
                print(f"incremental Gram, P = {features + 1}, batch {batch}: non-finite "
                      "coefficients")
                return 1
            print(f"incremental Gram, P = {features + 1}, batch {batch}: {model.n_iter_} "
                  "iterations")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["--incremental-only"]):
        sys.exit(f"usage: {sys.argv[0]} [--incremental-only]")
    sys.exit(main(sys.argv[1:] == ["--incremental-only"]))
