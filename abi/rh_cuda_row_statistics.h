/*
 * rh_cuda_row_statistics.h -- OPTIONAL extension of the renewable-huber engine ABI 2:
 * sums over the rows of one batch at given coefficients ("row statistics"), version 2.
 *
 * Why an extension and not part of the core: the 17 symbols of rh_cuda.h are what every engine
 * must export, and ABI 2 callers and engines stay exactly as they are. An engine MAY export the
 * three symbols below in addition (librh_cpu and librh_cuda do). A caller must look them up at
 * run time (dlsym / GetProcAddress / ctypes attribute lookup), treat a missing symbol as
 * "extension absent", and check rh_cuda_row_statistics_version() before calling anything else
 * of it.
 *
 * Versions only add: version N keeps every function and field of version N - 1 unchanged, so a
 * caller needs version >= the one that introduced what it calls. Version 1: the version query
 * and rh_cuda_engine_row_statistics (host rows). Version 2 adds
 * rh_cuda_engine_row_statistics_device (rows in device memory). Fields are only ever appended
 * to RhCudaRowStatistics (struct_size, as for the core structs).
 *
 * What it is for: a caller that holds a batch's rows in pieces (one partition per worker of a
 * cluster) and solves on a client needs, per piece, the same sums over rows the engine forms
 * inside an update: the Huber loss, the score, the curvature and majoriser Grams, the meat
 * matrix and the weighted squared norm (docs/algorithm.md). The engine computes them with its
 * own row and Gram code, always in double; the engine's committed state is neither read nor
 * changed (the call uses the engine for its dtype, P, workspace and last-error buffer only).
 *
 * All conventions of rh_cuda.h hold (status codes, last error on the engine, row-major,
 * intercept LAST, no exception crosses the boundary, one thread per engine at a time).
 */
#ifndef RH_CUDA_ROW_STATISTICS_H
#define RH_CUDA_ROW_STATISTICS_H

#include "rh_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this extension that this header describes. */
#define RH_CUDA_ROW_STATISTICS_VERSION 2u

/* Statistic bits (uint64_t, RhCudaRowStatistics.statistics). r = y - X beta, w the sample
 * weights (1 without them), rho / psi the Huber loss and score at tau, c(r) the smoothed
 * curvature with half-width `bandwidth`, m(r) = max(c(r), min(1, tau / |r|)). */
#define RH_CUDA_STATISTIC_LOSS ((uint64_t)1u << 0)      /* loss = sum w rho(r) */
#define RH_CUDA_STATISTIC_SCORE ((uint64_t)1u << 1)     /* score = X' (w psi(r)), P values */
#define RH_CUDA_STATISTIC_CURVATURE ((uint64_t)1u << 2) /* X' diag(w c(r)) X, P x P */
#define RH_CUDA_STATISTIC_MAJORISER ((uint64_t)1u << 3) /* X' diag(w m(r)) X, P x P */
#define RH_CUDA_STATISTIC_MEAT ((uint64_t)1u << 4)      /* X' diag(w psi(r)^2) X, P x P */
#define RH_CUDA_STATISTIC_NORM ((uint64_t)1u << 5)      /* weighted_norm = sum w ||x||^2 */
#define RH_CUDA_STATISTIC_ALL ((uint64_t)0x3fu)

/* One request. 88 bytes. abi_version must be RH_CUDA_ABI_VERSION (2) and struct_size at least
 * 88. Every output is double whatever the engine dtype; the P x P matrices are full, row-major
 * and exactly symmetric. An output pointer must be non-NULL exactly when its bit is set. */
typedef struct RhCudaRowStatistics {
  uint32_t abi_version;
  uint32_t struct_size;
  uint64_t statistics;      /* RH_CUDA_STATISTIC_* bits: non-zero, no unknown bit */
  const void* coefficients; /* beta: P values in the engine dtype, finite; may be NULL only when
                               statistics is NORM alone */
  double tau;               /* finite > 0 */
  double bandwidth;         /* h: a positive normal number, finite (used by CURVATURE and
                               MAJORISER only, checked always) */
  double loss;              /* out (LOSS) */
  double weighted_norm;     /* out (NORM) */
  double* score;            /* out (SCORE): P doubles */
  double* curvature_gram;   /* out (CURVATURE): P x P doubles */
  double* majoriser_gram;   /* out (MAJORISER): P x P doubles */
  double* meat;             /* out (MEAT): P x P doubles */
} RhCudaRowStatistics;

/* Returns RH_CUDA_ROW_STATISTICS_VERSION of the library. Thread-safe. */
RH_CUDA_API uint32_t rh_cuda_row_statistics_version(void);

/* The requested sums over the rows of *batch at statistics->coefficients.
 * batch: as for rh_cuda_engine_update_host, except that n_columns must be P (the design with
 * its intercept column, when any, already appended) and batch_weight may be 0 (a batch whose
 * weights are all zero; its sums are then zero); without sample_weight batch_weight is n_rows,
 * with it the sum of the weights (within the update's relative tolerance). NaN or Inf in
 * x_design, y, sample_weight or the coefficients, and negative weights, are INVALID_ARGUMENT in
 * the wording of the ABI guide's "Refused data values" (owner RhCudaHostBatch or
 * RhCudaRowStatistics). Values are checked before anything is written: on any failure the
 * outputs are untouched. On success a sum may still be Inf or NaN by overflow of finite
 * inputs; the caller decides what that means. The engine's committed state is never read or
 * changed. batch, statistics and their arrays: borrowed for the call. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_row_statistics(RhCudaEngine* engine,
                                                       const RhCudaHostBatch* batch,
                                                       RhCudaRowStatistics* statistics);

/* Version 2. The same sums as rh_cuda_engine_row_statistics over rows held in device memory on
 * the engine's device, read in place on the engine's stream (the rules of RhCudaDeviceBatch and
 * rh_cuda_engine_update_device_with_state: the data must be complete when the call is made;
 * every pointer aligned to the engine dtype). statistics and its coefficients and outputs stay
 * in host memory. The same validation, in the same order and wording, as the host call (the
 * non-finite and negative-weight scans run on the device before any sum is formed); the
 * outputs are written only on success and the call returns after every sum is in host memory.
 * The CPU engine returns RH_CUDA_UNAVAILABLE, as for its other device entry points. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_row_statistics_device(RhCudaEngine* engine,
                                                              const RhCudaDeviceBatch* batch,
                                                              RhCudaRowStatistics* statistics);

#ifdef __cplusplus
}
#endif

#endif /* RH_CUDA_ROW_STATISTICS_H */
