#include "engine.hpp"

#include <cfloat>
#include <cstdlib>
#include <cstring>

#include "engine_error.hpp"

namespace rh {

namespace {

constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

InjectedFailure injected_failure_from_environment() {
  const char* value = std::getenv("RH_CUDA_TEST_INJECT_FAILURE");
  if (value != nullptr && std::strcmp(value, "cusolver") == 0) return InjectedFailure::Cusolver;
  return InjectedFailure::None;
}

void reserve_elems(GrowingBuffer& buffer, int64_t count, size_t elem, const char* what) {
  size_t bytes = 0;
  if (rh_bytes(count, elem, &bytes) != 0) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s: %lld elements overflow the address space", what,
         static_cast<long long>(count));
  }
  buffer.reserve(bytes > 0 ? bytes : elem, what);
}

}  // namespace

DeviceScope::DeviceScope(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceScope::~DeviceScope() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_ && previous_ >= 0) {
    cudaSetDevice(previous_);
  }
}

double Engine::dtype_epsilon() const {
  return dtype == RH_CUDA_DTYPE_FLOAT32 ? static_cast<double>(FLT_EPSILON) : DBL_EPSILON;
}

void Engine::create(const RhCudaEngineOptions& options) {
  device = options.device_id;
  dtype = options.dtype;
  elem_size = rh_dtype_size(dtype);
  P = options.n_parameters;
  requested_flags = options.reserved0;
  // Graphs are enabled when asked for; a capture that fails falls back to eager launches and is
  // counted. TF32 is only ever requested with float32 (rh_validate_options refuses float64).
  enabled_flags = requested_flags;
  injected = injected_failure_from_environment();

  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  for (cudaEvent_t& event : chunk_events) {
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  }
  check_cublas(cublasCreate(&blas), "cublasCreate");
  check_cublas(cublasSetStream(blas, stream), "cublasSetStream");
  // A fixed workspace keeps cuBLAS from allocating during graph capture.
  reserve_elems(ws.blas_work, static_cast<int64_t>(kBlasWorkspaceBytes), 1, "cuBLAS workspace");
  check_cublas(cublasSetWorkspace(blas, ws.blas_work.data(), kBlasWorkspaceBytes),
               "cublasSetWorkspace");
  if (enabled_flags & RH_CUDA_ENGINE_FLAG_FAST_MATH) {
    check_cublas(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH), "cublasSetMathMode");
  }
  check_cusolver(cusolverDnCreate(&solver), "cusolverDnCreate");
  check_cusolver(cusolverDnSetStream(solver, stream), "cusolverDnSetStream");
  check_cusolver(cusolverDnCreateGesvdjInfo(&svd_params), "cusolverDnCreateGesvdjInfo");

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
  for (GrowingBuffer* b : {&ws.beta, &ws.beta0, &ws.dir, &ws.grad, &ws.jdelta, &ws.jdir,
                           &ws.singular_values, &ws.svd_scratch}) {
    reserve_elems(*b, P, sizeof(double), "P-vector");
  }
  reserve_elems(ws.xtu, P, elem_size, "X'u");
  for (GrowingBuffer* b : {&ws.information64, &ws.hessian, &ws.left_vectors, &ws.right_vectors}) {
    reserve_elems(*b, PP, sizeof(double), "P x P matrix");
  }
  reserve_elems(ws.gram, PP, elem_size, "Gram matrix");
  reserve_elems(ws.pivots, P, sizeof(int), "LU pivots");
  reserve_elems(ws.solver_info, 1, sizeof(int), "cuSOLVER info");
  for (GrowingBuffer* b : {&ws.candidates, &ws.candidate_deltas, &ws.candidate_jdeltas}) {
    reserve_elems(*b, P * kLammChunk, sizeof(double), "LAMM candidates");
  }
  reserve_elems(ws.trial_terms, kLammChunk * 4, sizeof(double), "LAMM trial terms");
  reserve_elems(ws.scalars, 1, sizeof(DeviceScalars), "solver scalars");
  reserve_elems(ws.trial_partials, int64_t{kMaxRowBlocks} * kLineSearchTrials, sizeof(double),
                "line-search partials");
  reserve_elems(ws.row_partials, int64_t{kMaxRowBlocks} * 2, sizeof(double), "row partials");
  reserve_elems(ws.host_scalars, 2, sizeof(DeviceScalars), "status block");
  reserve_elems(ws.host_state, P + PP, elem_size, "exported state");

  const int n = static_cast<int>(P);
  int potrf_work = 0, getrf_work = 0, svd_work = 0;
  double* H = ws.hessian.as<double>();
  check_cusolver(cusolverDnDpotrf_bufferSize(solver, CUBLAS_FILL_MODE_UPPER, n, H, n, &potrf_work),
                 "cusolverDnDpotrf_bufferSize");
  check_cusolver(cusolverDnDgetrf_bufferSize(solver, n, n, H, n, &getrf_work),
                 "cusolverDnDgetrf_bufferSize");
  check_cusolver(cusolverDnDgesvdj_bufferSize(solver, CUSOLVER_EIG_MODE_VECTOR, 0, n, n, H, n,
                                              ws.singular_values.as<double>(),
                                              ws.left_vectors.as<double>(), n,
                                              ws.right_vectors.as<double>(), n, &svd_work,
                                              svd_params),
                 "cusolverDnDgesvdj_bufferSize");
  solver_work_elems = potrf_work;
  if (getrf_work > solver_work_elems) solver_work_elems = getrf_work;
  if (svd_work > solver_work_elems) solver_work_elems = svd_work;
  reserve_elems(ws.solver_work, solver_work_elems > 0 ? solver_work_elems : 1, sizeof(double),
                "cuSOLVER workspace");

  for (CommittedState* state : {&committed, &scratch}) {
    reserve_elems(state->coefficients, P, elem_size, "coefficients");
    reserve_elems(state->information, PP, elem_size, "information");
  }
  check_cuda(cudaMemsetAsync(committed.coefficients.data(), 0, P * elem_size, stream),
             "cudaMemsetAsync");
  check_cuda(cudaMemsetAsync(committed.information.data(), 0, PP * elem_size, stream),
             "cudaMemsetAsync");
  synchronize();
}

void Engine::release() noexcept {
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (svd_params != nullptr) cusolverDnDestroyGesvdjInfo(svd_params);
  if (solver != nullptr) cusolverDnDestroy(solver);
  if (blas != nullptr) cublasDestroy(blas);
  for (cudaEvent_t& event : chunk_events) {
    if (event != nullptr) cudaEventDestroy(event);
    event = nullptr;
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
  svd_params = nullptr;
  solver = nullptr;
  blas = nullptr;
  stream = nullptr;
}

void Engine::synchronize() { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }

}  // namespace rh
