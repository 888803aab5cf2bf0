#include "engine.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine_error.hpp"
#include "kernels.hpp"
#include "memory_access.hpp"
#include "test_switches.hpp"

namespace rh {

namespace {

constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;
// Idle resource sets kept per device; a destroy beyond that releases its set for real.
constexpr size_t kMaxIdleSetsPerDevice = 4;
// A pooled set keeps pinned buffers up to this size; larger ones are freed when it goes idle.
constexpr size_t kMaxPooledPinnedBytes = size_t{64} << 20;
// And device buffers (besides the cuBLAS workspace) up to this many bytes in all, the largest
// freed first: a standard batch's workspace stays for the next engine, a large batch's goes back
// to the engine pool.
constexpr size_t kMaxPooledDeviceBytes = size_t{64} << 20;
// Freed device memory the engine pool keeps cached across synchronisations (beyond it, the
// driver returns unused memory to the OS at the next synchronisation). Covers the workspaces of
// every standard and large benchmark batch of one engine.
constexpr uint64_t kPoolReleaseThreshold = uint64_t{1} << 30;

}  // namespace

void reserve_elems(GrowingBuffer& buffer, int64_t count, size_t elem, const char* what) {
  size_t bytes = 0;
  if (rh_bytes(count, elem, &bytes) != 0) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s: %lld elements overflow the address space", what,
         static_cast<long long>(count));
  }
  buffer.reserve(bytes > 0 ? bytes : elem, what);
}

// What one engine needs that is expensive to make, kept across engines of the same device. The
// destructor really releases it; pooled sets are never destroyed (the pool lives until the
// process exits, when the driver reclaims everything).
struct ResourceSet {
  int device = -1;
  cudaMemPool_t memory = nullptr;  // the device's engine pool (null: cudaMalloc)
  cudaStream_t stream = nullptr;
  cudaEvent_t chunk_events[2] = {nullptr, nullptr};
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  gesvdjInfo_t svd_params = nullptr;  // never modified by the engine: default tolerance, sweeps
  // What an engine leaves for the next one on this set (Engine::release, lease_resources), in the
  // members of the same names as the engine's: the cuBLAS workspace; the pinned status block,
  // exported state and staging chunks; the device workspace and the state buffers, so that an
  // engine of a shape seen before allocates nothing (kMaxPooledDeviceBytes). Device buffers are
  // bound to this set's stream and the device's engine pool. The pinned buffers an engine owns
  // alone (Workspace) never come here (travels_with_set).
  Workspace ws;
  CommittedState committed, scratch;  // their buffers only
  // cuSOLVER's workspace answer for the last P (a function of P alone on one device).
  int64_t solver_sized_for = -1;
  int solver_work_elems = 0;
  // The one-block Cholesky's limit on this device (configure_small_dense: the kernels'
  // shared-memory opt-in is set once per set, not per engine).
  int64_t small_dense_max = 0;
  int cholesky_solve_shared = 0;  // likewise for the Cholesky solve (configure_cholesky_solve)
  ClusterCholeskyLimits cluster_cholesky;  // and the cluster Cholesky
  bool float64_mma = false;           // the device has the float64 tensor cores (has_float64_mma)
  bool lamm_trials_gradient = false;  // configure_lamm_trials_gradient

  ResourceSet() = default;
  ResourceSet(const ResourceSet&) = delete;
  ResourceSet& operator=(const ResourceSet&) = delete;
  ~ResourceSet() {
    if (stream != nullptr)
      cudaStreamSynchronize(stream);
    if (svd_params != nullptr)
      cusolverDnDestroyGesvdjInfo(svd_params);
    if (solver != nullptr)
      cusolverDnDestroy(solver);
    if (blas != nullptr)
      cublasDestroy(blas);
    // The device buffers are freed on the stream, before it is destroyed.
    ws.for_each([](GrowingBuffer& b) {
      if (b.kind() == MemoryKind::Device)
        b.reset();
    });
    for (CommittedState* state : {&committed, &scratch})
      state->for_each_buffer([](GrowingBuffer& b) { b.reset(); });
    if (stream != nullptr)
      cudaStreamSynchronize(stream);
    for (cudaEvent_t event : chunk_events) {
      if (event != nullptr)
        cudaEventDestroy(event);
    }
    if (stream != nullptr)
      cudaStreamDestroy(stream);
    // The pinned buffers free themselves (cudaFreeHost) as members.
  }
};

namespace {

// The process-wide pool: idle resource sets per device and one stream-ordered memory pool per
// device. One mutex guards both; creating a resource set happens outside it, so concurrent
// creates on an empty pool do not serialise. Leaked on purpose: destroying CUDA objects from a
// static destructor at exit races the runtime's own teardown.
class ResourcePool {
 public:
  static ResourcePool& instance() {
    static ResourcePool* pool = new ResourcePool();
    return *pool;
  }

  // The most recently returned idle set of `device`, or null.
  std::unique_ptr<ResourceSet> take(int device) {
    for (;;) {
      ResourceSet* found = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
          if ((*it)->device == device) {
            found = *it;
            idle_.erase(std::next(it).base());
            break;
          }
        }
      }
      if (found == nullptr)
        return nullptr;
      const cudaError_t alive = cudaStreamQuery(found->stream);
      if (alive == cudaSuccess || alive == cudaErrorNotReady) {
        return std::unique_ptr<ResourceSet>(found);
      }
      // Its context is gone (cudaDeviceReset): every handle in it is dead and releasing them is
      // not safe, so the set is dropped unreleased, and so is the device's memory pool.
      (void)cudaGetLastError();
      std::lock_guard<std::mutex> lock(mutex_);
      memory_pools_.erase(device);
    }
  }

  // Keeps a synchronised set for the next engine, or destroys it when `device` has enough idle.
  void give_back(std::unique_ptr<ResourceSet> set) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      size_t idle_here = 0;
      for (const ResourceSet* s : idle_)
        idle_here += s->device == set->device ? 1 : 0;
      if (idle_here < kMaxIdleSetsPerDevice) {
        idle_.push_back(set.release());
        return;
      }
    }
    set.reset();
  }

  // The engines' stream-ordered pool on `device`, created on first use; null when the device
  // has no memory-pool support (then buffers fall back to cudaMalloc).
  cudaMemPool_t memory_pool(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = memory_pools_.find(device);
    if (found != memory_pools_.end())
      return found->second;
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      supported = 0;
    }
    cudaMemPool_t pool = nullptr;
    if (supported != 0) {
      cudaMemPoolProps props;
      std::memset(&props, 0, sizeof props);
      props.allocType = cudaMemAllocationTypePinned;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      check_cuda(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
      uint64_t threshold = kPoolReleaseThreshold;
      const cudaError_t rc =
          cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
      if (rc != cudaSuccess) {
        cudaMemPoolDestroy(pool);
        check_cuda(rc, "cudaMemPoolSetAttribute (release threshold)");
      }
    }
    memory_pools_.emplace(device, pool);
    return pool;
  }

 private:
  ResourcePool() = default;

  std::mutex mutex_;
  std::vector<ResourceSet*> idle_;  // owned
  std::map<int, cudaMemPool_t> memory_pools_;
};

std::unique_ptr<ResourceSet> make_resource_set(int device) {
  auto set = std::make_unique<ResourceSet>();
  set->device = device;
  set->memory = ResourcePool::instance().memory_pool(device);
  check_cuda(cudaStreamCreateWithFlags(&set->stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
  for (cudaEvent_t& event : set->chunk_events) {
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  }
  check_cublas(cublasCreate(&set->blas), "cublasCreate");
  check_cusolver(cusolverDnCreate(&set->solver), "cusolverDnCreate");
  check_cusolver(cusolverDnCreateGesvdjInfo(&set->svd_params), "cusolverDnCreateGesvdjInfo");
  set->small_dense_max = configure_small_dense(device, kSmallDenseCap);
  set->cholesky_solve_shared = configure_cholesky_solve(device);
  set->cluster_cholesky = configure_cluster_cholesky(device);
  set->float64_mma = has_float64_mma(device);
  set->lamm_trials_gradient = set->float64_mma && configure_lamm_trials_gradient(device);
  set->ws.blas_work.bind(set->stream, set->memory);
  // A fixed workspace keeps cuBLAS from allocating during graph capture.
  set->ws.blas_work.reserve(kBlasWorkspaceBytes, "cuBLAS workspace");
  for (GrowingBuffer* pinned : set->ws.pooled_pinned())
    pinned->bind(set->stream, nullptr);
  return set;
}

// Whether a member of `ws` travels with the resource set: every device buffer, and the pinned
// ones of Workspace::pooled_pinned (not the pinned buffers an engine owns alone).
bool travels_with_set(Workspace& ws, const GrowingBuffer& b) {
  if (b.kind() == MemoryKind::Device)
    return true;
  const auto pinned = ws.pooled_pinned();
  return std::find(pinned.begin(), pinned.end(), &b) != pinned.end();
}

// f(the set's buffer, the engine's buffer of the same name) for every buffer that travels with
// the set, the state buffers included.
template <class F>
void for_each_carried(ResourceSet& set, Engine& e, F&& f) {
  std::array<GrowingBuffer*, kWorkspaceBuffers> pooled{};
  std::array<GrowingBuffer*, kWorkspaceBuffers> mine{};
  size_t n = 0;
  set.ws.for_each([&](GrowingBuffer& b) { pooled[n++] = &b; });
  n = 0;
  e.ws.for_each([&](GrowingBuffer& b) { mine[n++] = &b; });
  for (size_t i = 0; i < kWorkspaceBuffers; ++i) {
    if (travels_with_set(e.ws, *mine[i]))
      f(*pooled[i], *mine[i]);
  }
  for (CommittedState::Buffer member : CommittedState::kBuffers) {
    f(set.committed.*member, e.committed.*member);
    f(set.scratch.*member, e.scratch.*member);
  }
}

// A set going idle keeps device buffers (besides the cuBLAS workspace) up to
// kMaxPooledDeviceBytes in all: the largest are freed, in stream order, until the rest fit.
void trim_pooled_device_buffers(ResourceSet& set) {
  std::vector<GrowingBuffer*> held;
  size_t total = 0;
  auto hold = [&](GrowingBuffer& b) {
    if (b.kind() != MemoryKind::Device || &b == &set.ws.blas_work || b.capacity() == 0)
      return;
    held.push_back(&b);
    total += b.capacity();
  };
  set.ws.for_each(hold);
  set.committed.for_each_buffer(hold);
  set.scratch.for_each_buffer(hold);
  std::sort(held.begin(), held.end(), [](const GrowingBuffer* a, const GrowingBuffer* b) {
    return a->capacity() > b->capacity();
  });
  for (GrowingBuffer* b : held) {
    if (total <= kMaxPooledDeviceBytes)
      break;
    total -= b->capacity();
    b->reset();
  }
}

// Engine::create's steps, in the order it takes them.

// The engine's settings from validated options (and, in the test build, the test switches).
void take_options(Engine& e, const RhCudaEngineOptions& options) {
  e.device = options.device_id;
  e.dtype = options.dtype;
  e.elem_size = rh_dtype_size(e.dtype);
  e.P = options.n_parameters;
  e.requested_flags = options.reserved0;
  // Graphs are enabled when asked for; a capture that fails falls back to eager launches and is
  // counted. TF32 is only ever requested with float32 (rh_validate_options refuses float64).
  e.enabled_flags = e.requested_flags;
  e.injected = injected_failure_setting();
  e.forced_chunk = forced_chunk_setting();
  e.incremental_gram = incremental_gram_setting();
  e.device_gram_flips = device_gram_flips_setting();
  e.newton_speculation = newton_speculation_setting();
  e.deferred_device_checks = deferred_device_checks_setting();
  e.gram_flip_max = gram_flip_limit_setting(INT64_MAX);
  e.separate_meat_pass = separate_meat_pass_setting();
  e.statistics_chunk_rows = statistics_chunk_rows_setting();
}

// The commit kernels write the exported state and the status block straight into pinned host
// memory, which needs unified addressing (every 64-bit Linux/Windows CUDA setup has it).
void require_unified_addressing(int device) {
  int unified = 0;
  if (cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device) != cudaSuccess ||
      unified == 0) {
    (void)cudaGetLastError();
    fail(RH_CUDA_UNAVAILABLE,
         "CUDA device %d does not support unified addressing, which librh_cuda needs", device);
  }
}

// P * P, refused when it overflows or P exceeds what cuSOLVER's 32-bit sizes take.
int64_t matrix_elems(int64_t P) {
  int64_t PP = 0;
  if (rh_mul_i64(P, P, &PP) != 0) {
    fail(RH_CUDA_INVALID_ARGUMENT, "RhCudaEngineOptions.n_parameters %lld: P * P overflows",
         static_cast<long long>(P));
  }
  if (P > 46340) {
    fail(RH_CUDA_INVALID_ARGUMENT,
         "RhCudaEngineOptions.n_parameters %lld exceeds the CUDA engine's limit of 46340 "
         "(cuSOLVER takes 32-bit sizes for P x P)",
         static_cast<long long>(P));
  }
  return PP;
}

// An idle set of the engine's device, or a new one (from here release() hands it back): its
// stream, events and library handles, and the buffers it carries (those the engine before left,
// for_each_carried); every device buffer is bound to the stream and the device's pool.
void lease_resources(Engine& e) {
  std::unique_ptr<ResourceSet> set = ResourcePool::instance().take(e.device);
  if (set == nullptr)
    set = make_resource_set(e.device);
  e.resources = set.release();
  ResourceSet& r = *e.resources;
  e.stream = r.stream;
  e.chunk_events[0] = r.chunk_events[0];
  e.chunk_events[1] = r.chunk_events[1];
  e.blas = r.blas;
  e.solver = r.solver;
  e.svd_params = r.svd_params;
  e.small_dense_max = small_dense_limit_setting(r.small_dense_max);
  e.cholesky_solve_shared = cholesky_solve_shared_setting(r.cholesky_solve_shared);
  e.cluster_cholesky = r.cluster_cholesky;
  e.cluster_cholesky.max_p = cluster_cholesky_limit_setting(r.cluster_cholesky.max_p);
  e.fused_gram_max = fused_gram_limit_setting(r.float64_mma ? kFusedGramMaxP : 0);
  e.lamm_mma = r.float64_mma && lamm_mma_setting();
  e.lamm_trials_gradient = e.lamm_mma && r.lamm_trials_gradient && lamm_trials_gradient_setting();
  for_each_carried(r, e, [](GrowingBuffer& pooled, GrowingBuffer& mine) { mine.swap(pooled); });
  e.ws.for_each([&](GrowingBuffer& b) {
    if (b.kind() == MemoryKind::Device)
      b.bind(e.stream, r.memory);
  });
  for (CommittedState* state : {&e.committed, &e.scratch})
    state->for_each_buffer([&](GrowingBuffer& b) { b.bind(e.stream, r.memory); });
}

// Everything a previous engine may have changed on the handles goes back to this engine's
// settings: a FAST_MATH engine's TF32 mode must never reach a strict one. cublasSetStream also
// drops the user workspace, so the workspace is set after it.
void reset_library_handles(Engine& e) {
  check_cublas(cublasSetStream(e.blas, e.stream), "cublasSetStream");
  check_cublas(cublasSetWorkspace(e.blas, e.ws.blas_work.data(), e.ws.blas_work.capacity()),
               "cublasSetWorkspace");
  check_cublas(cublasSetMathMode(e.blas, (e.enabled_flags & RH_CUDA_ENGINE_FLAG_FAST_MATH)
                                             ? CUBLAS_TF32_TENSOR_OP_MATH
                                             : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode");
  check_cublas(cublasSetPointerMode(e.blas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  check_cublas(cublasSetAtomicsMode(e.blas, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
  check_cublas(cublasSetSmCountTarget(e.blas, 0), "cublasSetSmCountTarget");
  check_cusolver(cusolverDnSetStream(e.solver, e.stream), "cusolverDnSetStream");
}

// The workspace's buffers whose sizes depend on P alone (PP = P * P); the batch-sized ones
// grow with the batches.
void reserve_workspace(Engine& e, int64_t PP) {
  const int64_t P = e.P;
  Workspace& ws = e.ws;
  for (GrowingBuffer* b : {&ws.beta, &ws.beta0, &ws.dir, &ws.grad, &ws.jdelta, &ws.jdir,
                           &ws.singular_values, &ws.svd_scratch}) {
    reserve_elems(*b, P, sizeof(double), "P-vector");
  }
  reserve_elems(ws.xtu, P, e.elem_size, "X'u");
  for (GrowingBuffer* b : {&ws.information64, &ws.hessian, &ws.left_vectors, &ws.right_vectors}) {
    reserve_elems(*b, PP, sizeof(double), "P x P matrix");
  }
  reserve_elems(ws.gram, PP, e.elem_size, "Gram matrix");
  reserve_elems(ws.majoriser_gram, PP, e.elem_size, "majoriser Gram matrix");
  reserve_elems(ws.equilibration, 3 * P, sizeof(double), "linear-solve equilibration");
  reserve_elems(ws.tile_inverses, cholesky_tile_inverse_elems(P), sizeof(double),
                "Cholesky tile inverses");
  reserve_elems(ws.pivots, P, sizeof(int), "LU pivots");
  reserve_elems(ws.solver_info, 1, sizeof(int), "cuSOLVER info");
  for (GrowingBuffer* b : {&ws.candidates, &ws.candidate_deltas, &ws.candidate_jdeltas}) {
    reserve_elems(*b, P * kLammMaxGroup, sizeof(double), "LAMM candidates");
  }
  reserve_elems(ws.trial_terms, kLammMaxGroup * 4, sizeof(double), "LAMM trial terms");
  reserve_elems(ws.scalars, 1, sizeof(DeviceScalars), "solver scalars");
  reserve_elems(ws.trial_partials,
                int64_t{kMaxRowBlocks} * std::max(kLineSearchTrials, kLammMaxGroup), sizeof(double),
                "line-search partials");
  reserve_elems(ws.row_partials, int64_t{kMaxRowBlocks} * 2, sizeof(double), "row partials");
  reserve_elems(ws.xtu_partials,
                int64_t{kMaxRowBlocks} * xtu_partials_stride(std::min(P, kRowPassXtuMaxColumns)),
                sizeof(double), "X'u partials");
  if (e.lamm_trials_gradient && (lamm_trials_on_mma(P, true) || lamm_trials_on_mma(P - 1, true)))
    reserve_elems(ws.lamm_gradient_partials,
                  int64_t{kLammChunk} * kFusedGramMaxBlocks * appended_column_stride(P),
                  sizeof(double), "LAMM trials' X'psi partials");
  reserve_elems(ws.bad_partials, int64_t{kMaxRowBlocks} * kBadKinds, sizeof(unsigned long long),
                "validation partials");
  reserve_elems(ws.commit_flags, kMaxElementwiseBlocks, sizeof(int), "commit flags");
  reserve_elems(ws.host_scalars, 1, sizeof(DeviceScalars), "status block");
  reserve_elems(ws.host_state, P + PP, e.elem_size, "exported state");
  // A pooled status block still holds the previous engine's last status.
  std::memset(ws.host_scalars.data(), 0, ws.host_scalars.capacity());
}

// cuSOLVER's workspace for the ladder's factorisations (Cholesky, LU, SVD) of a P x P system:
// asked once per P per resource set (the answer depends on P alone on one device).
void reserve_solver_workspace(Engine& e) {
  ResourceSet& r = *e.resources;
  if (r.solver_sized_for != e.P) {
    const int n = static_cast<int>(e.P);
    int potrf_work = 0, getrf_work = 0, svd_work = 0;
    double* H = e.ws.hessian.as<double>();
    check_cusolver(cusolverDnDpotrf_bufferSize(e.solver, kCholeskyFill, n, H, n, &potrf_work),
                   "cusolverDnDpotrf_bufferSize");
    check_cusolver(cusolverDnDgetrf_bufferSize(e.solver, n, n, H, n, &getrf_work),
                   "cusolverDnDgetrf_bufferSize");
    check_cusolver(cusolverDnDgesvdj_bufferSize(
                       e.solver, CUSOLVER_EIG_MODE_VECTOR, 0, n, n, H, n,
                       e.ws.singular_values.as<double>(), e.ws.left_vectors.as<double>(), n,
                       e.ws.right_vectors.as<double>(), n, &svd_work, e.svd_params),
                   "cusolverDnDgesvdj_bufferSize");
    int elems = potrf_work;
    if (getrf_work > elems)
      elems = getrf_work;
    if (svd_work > elems)
      elems = svd_work;
    r.solver_work_elems = elems;
    r.solver_sized_for = e.P;
  }
  e.solver_work_elems = r.solver_work_elems;
  reserve_elems(e.ws.solver_work, e.solver_work_elems > 0 ? e.solver_work_elems : 1, sizeof(double),
                "cuSOLVER workspace");
}

// The committed and scratch states' buffers; the committed state starts at zero coefficients,
// information and meat K (an engine before its first batch).
void start_committed_state(Engine& e, int64_t PP) {
  for (CommittedState* state : {&e.committed, &e.scratch}) {
    reserve_elems(state->coefficients, e.P, e.elem_size, "coefficients");
    reserve_elems(state->information, PP, e.elem_size, "information");
    reserve_elems(state->meat, PP, sizeof(double), "meat matrix K");
  }
  check_cuda(cudaMemsetAsync(e.committed.coefficients.data(), 0, e.P * e.elem_size, e.stream),
             "cudaMemsetAsync");
  check_cuda(cudaMemsetAsync(e.committed.information.data(), 0, PP * e.elem_size, e.stream),
             "cudaMemsetAsync");
  check_cuda(cudaMemsetAsync(e.committed.meat.data(), 0, PP * sizeof(double), e.stream),
             "cudaMemsetAsync");
  e.committed.meat_available = true;
}

}  // namespace

DeviceScope::DeviceScope(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device)
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceScope::~DeviceScope() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_ && previous_ >= 0) {
    cudaSetDevice(previous_);
  }
}

double Engine::dtype_epsilon() const {
  return rh_dtype_epsilon(dtype);
}

void Engine::create(const RhCudaEngineOptions& options) {
  take_options(*this, options);
  require_unified_addressing(device);
  chunk_hint = 0;
  configure_staging(*this);
  const int64_t PP = matrix_elems(P);
  lease_resources(*this);
  reset_library_handles(*this);
  reserve_workspace(*this, PP);
  reserve_solver_workspace(*this);
  start_committed_state(*this, PP);
  synchronize();
}

void Engine::release() noexcept {
  if (resources == nullptr)
    return;
  std::unique_ptr<ResourceSet> set(resources);
  resources = nullptr;
  // The buffers that travel with the set go back with it (the device buffers beyond the set's
  // allowance are freed in stream order, after whatever is still queued on the stream); the
  // pinned buffers the engine owns alone are freed.
  for_each_carried(*set, *this,
                   [](GrowingBuffer& pooled, GrowingBuffer& mine) { mine.swap(pooled); });
  ws.for_each([](GrowingBuffer& b) { b.reset(); });
  trim_pooled_device_buffers(*set);
  // Once the stream has drained, the frees above are complete: any stream may reuse the memory.
  const cudaError_t drained = cudaStreamSynchronize(stream);
  for (cudaGraphExec_t& exec : graph_cache) {
    if (exec != nullptr)
      (void)cudaGraphExecDestroy(exec);
    exec = nullptr;
  }
  stream = nullptr;
  blas = nullptr;
  solver = nullptr;
  svd_params = nullptr;
  chunk_events[0] = chunk_events[1] = nullptr;
  if (drained != cudaSuccess) {
    // A failed stream (or a device error) is not handed to the next engine.
    (void)cudaGetLastError();
    set.reset();
    return;
  }
  for (GrowingBuffer* pinned : set->ws.pooled_pinned()) {
    if (pinned->capacity() > kMaxPooledPinnedBytes)
      pinned->reset();
  }
  ResourcePool::instance().give_back(std::move(set));
}

void Engine::synchronize() {
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

}  // namespace rh
