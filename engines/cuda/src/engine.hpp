// The engine behind the opaque RhCudaEngine handle: one device, one non-blocking stream with
// cuBLAS/cuSOLVER bound to it, the committed state on the device, and workspaces that grow to
// the largest batch seen.
//
// The expensive per-engine resources (stream, events, cuBLAS handle and workspace, cuSOLVER
// handle, gesvdj info, pinned host buffers) come from a process-wide pool of idle sets per device
// (engine.cu): destroy returns them, create takes them back. Device workspaces and the state come
// from the stream-ordered allocator (device_buffer.hpp). Thread safety: engines may be created and
// destroyed from several threads at once; one engine is used by one thread at a time.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <array>
#include <cstdint>

#include "device_buffer.hpp"
#include "rh_common.h"
#include "solver_types.hpp"

namespace rh {

// Failure injection for the rollback tests (test builds only, test_switches.hpp): "cusolver"
// makes the linear solve fail as cuSOLVER would.
enum class InjectedFailure { None, Cusolver };

// How host input reaches the device: Pinned copies through the engine's pinned chunks with
// several host threads; Plain (test builds, for A/B measurements) hands the caller's pageable
// memory to cudaMemcpyAsync directly.
enum class StagingMode { Pinned, Plain };

struct ResourceSet;  // the pooled per-device resources (engine.cu)

// The triangle cuSOLVER's Cholesky factors (linear_solve.cu says why this one).
constexpr cublasFillMode_t kCholeskyFill = CUBLAS_FILL_MODE_LOWER;

// Grows `buffer` to hold `count` elements of `elem` bytes (at least one element), refusing a
// count whose bytes overflow; `what` names it in errors. Every workspace and state buffer is
// sized through it (engine.cu at creation, update_pipeline.cu per batch).
void reserve_elems(GrowingBuffer& buffer, int64_t count, size_t elem, const char* what);

struct CommittedState {
  GrowingBuffer coefficients;  // P values of the engine dtype
  GrowingBuffer information;   // P x P row-major
  int64_t n_samples_seen = 0;
  int64_t batch_count = 0;
  double previous_lambda = 0.0;
  double weight_sum = 0.0;
  bool information_symmetric = true;
  // Every entry of information is zero: known at creation and at a restore; an update clears it
  // (and makes batch_count nonzero). With batch_count 0 it marks a stream's first batch
  // (rh_ladder_epsilon).
  bool information_zero = true;
  GrowingBuffer meat;          // P x P doubles: K of the sandwich covariance (meat.cu)
  bool meat_available = true;  // K covers every batch of the stream

  // The state's buffers, each once (for_each_buffer; engine.cu pairs two states' through it).
  using Buffer = GrowingBuffer CommittedState::*;
  static constexpr Buffer kBuffers[] = {&CommittedState::coefficients, &CommittedState::information,
                                        &CommittedState::meat};

  template <class F>
  void for_each_buffer(F&& f) {
    for (Buffer member : kBuffers)
      f(this->*member);
  }
};

struct Workspace {
  // P-sized, allocated once at creation.
  GrowingBuffer beta, beta0, dir, grad, jdelta, jdir, information64, hessian, gram, xtu;
  GrowingBuffer singular_values, left_vectors, right_vectors, svd_scratch, pivots, solver_info;
  // candidates: LAMM's attempts, or (its first P doubles) Newton's speculative candidate.
  GrowingBuffer solver_work, blas_work, candidates, candidate_deltas, candidate_jdeltas;
  GrowingBuffer trial_terms, scalars, trial_partials;
  // X' diag(w m) X for Newton's majoriser fallback, apart from the Gram at beta, which the
  // finish still needs when the fallback's step is rejected and the solve ends.
  GrowingBuffer majoriser_gram;
  // 3 P doubles for the linear solve's LU and SVD rungs: the equilibration d, d * g, and an
  // equilibrated solution kept while the SVD of H itself is tried (linear_solve.cu).
  GrowingBuffer equilibration;
  // The inverses of the 32 x 32 diagonal blocks of cuSOLVER's Cholesky factor, where shared
  // memory does not hold them (linear_solve_kernels.cu, cholesky_verdict_solve_kernel).
  GrowingBuffer tile_inverses;
  // Row-sized, grown to the largest batch.
  GrowingBuffer x_stage, y_stage, w_stage, residual, score, scaled_rows, row_partials;
  // K's scaled design sqrt(w) |psi(r)| x at the final beta (Gram-padded like scaled_rows),
  // reserved only for updates that keep K.
  GrowingBuffer meat_rows;
  GrowingBuffer xtu_partials;  // per row-pass block, xtu_partials_stride(ncols_x) each
  // The Gram's last column from the row passes that form X'u too (row_pass_gram_column), per
  // row-pass block, appended_column_stride(ncols_x) each; reserved only by updates that use it.
  GrowingBuffer gram_column_partials;
  // LAMM's first trials' X'psi: per candidate and trials block, appended_column_stride(ncols_x)
  GrowingBuffer lamm_gradient_partials;
  GrowingBuffer bad_partials;  // per validation block, kBadKinds first bad indices
  GrowingBuffer commit_flags;  // per commit block, a non-finite flag
  // Per-chunk partial Grams (split over rows), reduced in a fixed order.
  GrowingBuffer gram_partials;
  // The incremental Gram (UpdateContext::incremental_gram): per row its recorded curvature
  // weight and last change, the changed-row flags, the changed rows in order, the temporary
  // storage of the selection that lists them and the partials of their update on the device;
  // reserved only by updates that use them.
  GrowingBuffer curvature, curvature_delta, flip_flags, flip_rows, select_temp, gram_flip_partials;
  GrowingBuffer prediction_stage;
  // Pinned host memory: the status block, the exported state and the host-input chunks.
  GrowingBuffer host_scalars{MemoryKind::PinnedHost};
  // Host predictions land here first and reach the caller's array only once the device work
  // has succeeded (prediction.cu); engine-owned, not pooled.
  GrowingBuffer host_predictions{MemoryKind::PinnedHost};
  GrowingBuffer host_state{MemoryKind::PinnedHost};
  // The exported K and meat.cu's non-finite flag after it; engine-owned, reserved only for
  // updates that keep K.
  GrowingBuffer host_meat{MemoryKind::PinnedHost};
  // The row-statistics extension's validation partials and sums on their way to the caller's
  // outputs (row_statistics.cu); engine-owned, reserved only by that call.
  GrowingBuffer host_statistics{MemoryKind::PinnedHost};
  GrowingBuffer host_chunks[2] = {GrowingBuffer{MemoryKind::PinnedHost},
                                  GrowingBuffer{MemoryKind::PinnedHost}};

  // The pinned buffers that travel with the engine's resource set (engine.cu): the status block,
  // the exported state and the staging chunks. The other pinned buffers are the engine's alone.
  std::array<GrowingBuffer*, 4> pooled_pinned() {
    return {&host_scalars, &host_state, &host_chunks[0], &host_chunks[1]};
  }

  // Every member exactly once (binding to the engine stream, release); the static_assert below
  // fails to compile when a member is added without being listed here.
  template <class F>
  void for_each(F&& f) {
    for (GrowingBuffer* b : {&beta,
                             &beta0,
                             &dir,
                             &grad,
                             &jdelta,
                             &jdir,
                             &information64,
                             &hessian,
                             &gram,
                             &xtu,
                             &singular_values,
                             &left_vectors,
                             &right_vectors,
                             &svd_scratch,
                             &pivots,
                             &solver_info,
                             &solver_work,
                             &blas_work,
                             &candidates,
                             &candidate_deltas,
                             &candidate_jdeltas,
                             &trial_terms,
                             &scalars,
                             &trial_partials,
                             &majoriser_gram,
                             &equilibration,
                             &tile_inverses,
                             &x_stage,
                             &y_stage,
                             &w_stage,
                             &residual,
                             &score,
                             &scaled_rows,
                             &row_partials,
                             &meat_rows,
                             &xtu_partials,
                             &gram_column_partials,
                             &lamm_gradient_partials,
                             &bad_partials,
                             &commit_flags,
                             &gram_partials,
                             &curvature,
                             &curvature_delta,
                             &flip_flags,
                             &flip_rows,
                             &select_temp,
                             &gram_flip_partials,
                             &prediction_stage,
                             &host_scalars,
                             &host_predictions,
                             &host_state,
                             &host_meat,
                             &host_statistics,
                             &host_chunks[0],
                             &host_chunks[1]}) {
      f(*b);
    }
  }
};
constexpr size_t kWorkspaceBuffers = 55;
static_assert(sizeof(Workspace) == kWorkspaceBuffers * sizeof(GrowingBuffer),
              "Workspace gained or lost a member: list it in Workspace::for_each and update "
              "kWorkspaceBuffers");

struct GraphCounters {
  uint64_t captures = 0;
  uint64_t replays = 0;
  uint64_t fallbacks = 0;
};

// The repeated pieces of stream work an engine keeps one executable CUDA Graph for, across
// updates (graph_replayer.hpp).
enum GraphSlot : int {
  kNewtonIterationGraph = 0,
  kNewtonSpeculativeGraph = 1,
  kLammIterationGraph = 2,
  kGraphSlots = 3
};

struct Engine {
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() {
    release();
  }

  int device = 0;
  int32_t dtype = RH_CUDA_DTYPE_FLOAT64;
  size_t elem_size = sizeof(double);
  int64_t P = 0;
  uint64_t requested_flags = 0;
  uint64_t enabled_flags = 0;
  InjectedFailure injected = InjectedFailure::None;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  gesvdjInfo_t svd_params = nullptr;
  cudaEvent_t chunk_events[2] = {nullptr, nullptr};
  int solver_work_elems = 0;
  StagingMode staging = StagingMode::Pinned;
  int staging_threads = 1;  // host threads that copy one pinned chunk (the caller included)
  ResourceSet* resources = nullptr;  // leased from the pool; returned by release()
  CommittedState committed;
  CommittedState scratch;  // the next state is built here and swapped in on success
  Workspace ws;
  GraphCounters graphs;
  cudaGraphExec_t graph_cache[kGraphSlots] = {};
  // Iterations the last update needed: how many the next one queues before it first
  // synchronises (update_pipeline.cu, chunk_sizes). Speed only; never changes a result.
  int64_t chunk_hint = 0;
  int64_t forced_chunk = 0;  // a fixed chunk size, for the tests (test_switches.hpp)
  // Newton's heavy Gram incrementally (UpdateContext::incremental_gram), whether its changed
  // rows may be added on the device (UpdateContext::device_gram_flips; only the test build's
  // switch turns it on until it is measured), and the most changed rows the host adds instead
  // of forming the Gram again; the tests turn it off, on or lower the limit (test_switches.hpp).
  bool incremental_gram = true;
  bool device_gram_flips = false;
  int64_t gram_flip_max = INT64_MAX;
  // Newton's speculative whole step (UpdateContext::speculative_newton); the tests turn it off
  // to compare with the line search at every iteration (test_switches.hpp).
  bool newton_speculation = true;
  // Device input checked by the objective at beta0 instead of the validation pass
  // (BatchConstants::checks_deferred); the tests turn it off to compare (test_switches.hpp).
  bool deferred_device_checks = true;
  // K's rows always from meat.cu's own pass, never the solver's row pass (test_switches.hpp).
  bool separate_meat_pass = false;
  // Rows per chunk of the row-statistics sums (0: from the workspace bound, row_statistics.cu);
  // a fixed count for the tests (test_switches.hpp).
  int64_t statistics_chunk_rows = 0;
  // Newton systems of at most this many parameters use the one-block Cholesky (the resource
  // set's limit from the device's shared memory, or the tests' lower cap).
  int64_t small_dense_max = 0;
  // Shared memory the Cholesky solve above that may use (the resource set's, or the tests' 0:
  // its right-hand side and block inverses in global memory, as at large P).
  int cholesky_solve_shared = 0;
  // Above the one-block limit, systems up to cluster_cholesky.max_p parameters are factored by
  // one cluster of blocks (the resource set's limits, or the tests' lower cap), larger ones by
  // cuSOLVER.
  ClusterCholeskyLimits cluster_cholesky;
  // Row passes with the Gram at most this many parameters wide form it themselves, unless they
  // also write K's rows (kFusedGramMaxP, or 0 without float64 tensor cores: has_float64_mma;
  // or the tests' lower cap; UpdateContext::fused_gram).
  int64_t fused_gram_max = 0;
  // LAMM's trials form their dots on the float64 tensor cores where the device has them and the
  // row holds 9 to 128 stored columns (launch_lamm_trials); the tests turn it off to run the
  // kernel for devices without them (test_switches.hpp).
  bool lamm_mma = false;
  // With lamm_mma, LAMM's first group of trials also forms X'psi at its candidates, so an
  // iteration that accepts among them needs no row pass (lamm_solver.cu); off where the device
  // cannot give the kernel its shared memory, and in the tests that run the row pass instead.
  bool lamm_trials_gradient = false;

  bool graphs_enabled() const {
    return (enabled_flags & RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS) != 0;
  }
  double dtype_epsilon() const;

  void create(const RhCudaEngineOptions& options);
  // Frees the device buffers on the stream, waits for it, and returns the resource set to the
  // pool (or destroys it when the pool is full or the stream failed). Idempotent.
  void release() noexcept;
  void synchronize();
};

// Makes the engine's device current for the scope of an entry point and restores the caller's.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace rh

struct RhCudaEngine {
  RhErrorBuffer error;
  rh::Engine impl;
};
