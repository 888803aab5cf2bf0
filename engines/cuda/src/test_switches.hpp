// Settings the engine's tests and A/B measurements change through the environment. Only the
// test build of the engine (librh_cuda_testing, RH_CUDA_TESTING) reads them; the shipped
// librh_cuda compiles the same functions to their defaults and reads no environment.
#pragma once

#include <cstdint>

#include "engine.hpp"
#include "fault_sites.hpp"

namespace rh {

// RH_CUDA_TEST_INJECT_FAILURE=cusolver: the linear solve fails as cuSOLVER would.
InjectedFailure injected_failure_setting();
// RH_CUDA_TEST_CHUNK=N: exactly N iterations per synchronisation (0: adaptive).
int64_t forced_chunk_setting();
// RH_CUDA_TEST_MEAT_PASS=separate: K's scaled rows always come from meat.cu's own pass over the
// rows instead of the solver's row pass at the final beta (both give the same bits).
bool separate_meat_pass_setting();
// RH_CUDA_TEST_STATISTICS_ROWS=N: the row-statistics sums over chunks of exactly N rows
// (0 or unset: the engine's own chunk size).
int64_t statistics_chunk_rows_setting();
// RH_CUDA_TEST_SMALL_DENSE_MAX=N: the one-block Cholesky up to min(N, device_limit) parameters
// (0: for no P, so the cluster Cholesky factors up to its limit and cuSOLVER beyond);
// device_limit when unset.
int64_t small_dense_limit_setting(int64_t device_limit);
// RH_CUDA_TEST_CLUSTER_CHOLESKY_MAX=N: the cluster Cholesky up to min(N, device_limit)
// parameters (0: cuSOLVER's factor above the one-block limit); device_limit when unset.
int64_t cluster_cholesky_limit_setting(int64_t device_limit);
// RH_CUDA_TEST_CHOLESKY_SHARED=N: the Cholesky solve above the one-block limit uses at most
// min(N, device_limit) bytes of shared memory (0: its right-hand side and block inverses in
// global memory, as for P beyond what the device's shared memory holds); device_limit when unset.
int cholesky_solve_shared_setting(int device_limit);
// RH_CUDA_TEST_FUSED_GRAM_MAX=N: the row pass forms the Gram itself up to min(N, device_limit)
// parameters (0: cuBLAS for every P); device_limit when unset.
int64_t fused_gram_limit_setting(int64_t device_limit);
// RH_CUDA_TEST_INCREMENTAL_GRAM=off: Newton's heavy Gram formed in full at every row pass, in
// chunks as without it.
bool incremental_gram_setting();
// RH_CUDA_TEST_NEWTON_STEP=line-search: every Newton iteration searches the 27 trials along
// its direction, without the speculative whole step first (UpdateContext::speculative_newton).
bool newton_speculation_setting();
// RH_CUDA_TEST_LAMM_TRIALS=cuda-cores: LAMM's trials on the CUDA cores (the kernel for devices
// without float64 tensor cores) wherever the engine would use the tensor cores.
bool lamm_mma_setting();
// RH_CUDA_TEST_LAMM_GRADIENT=row-pass: every LAMM iteration forms X'u by its row pass, the first
// group's trials forming none (Engine::lamm_trials_gradient).
bool lamm_trials_gradient_setting();
// RH_CUDA_TEST_DEVICE_CHECKS=pass: device input is checked by the validation pass over X, y and
// the weights before the solve, as host input is, instead of by the objective at beta0
// (BatchConstants::checks_deferred).
bool deferred_device_checks_setting();
// RH_CUDA_TEST_GRAM_FLIPS=device: the incremental Gram's changed rows are added on the device
// right after each row pass (launch_gram_flip_update) up to the one-block limit, in the chunks
// of any Newton update, instead of by the host after each iteration's synchronisation (cuBLAS,
// chunks of one iteration; the shipped library's way: the device's was not faster on the
// large-stream shape, docs/decisions.md, "The incremental Gram").
bool device_gram_flips_setting();
// RH_CUDA_TEST_GRAM_FLIP_MAX=N: where the host adds them, the incremental Gram adds the update
// of at most min(N, limit) changed rows (0: it forms the Gram again in full whenever a row
// changed); limit when unset.
int64_t gram_flip_limit_setting(int64_t limit);
// RH_CUDA_STAGING = pinned (default) | plain.
StagingMode staging_mode_setting();
// RH_CUDA_STAGING_THREADS = 1..max_setting host copy threads; `fallback` when unset.
int staging_threads_setting(int fallback, int max_setting);

}  // namespace rh
