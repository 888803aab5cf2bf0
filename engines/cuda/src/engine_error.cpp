#include "engine_error.hpp"

#include <cstdarg>
#include <cstdio>

namespace rh {

void fail(RhCudaStatus status, const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  throw EngineError(status, text);
}

void check_cuda(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  if (rc == cudaErrorMemoryAllocation) {
    fail(RH_CUDA_ALLOCATION_FAILED, "%s: %s", what, cudaGetErrorString(rc));
  }
  fail(RH_CUDA_CUDA_ERROR, "%s: %s (%s)", what, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

void check_cublas(cublasStatus_t rc, const char* what) {
  if (rc == CUBLAS_STATUS_SUCCESS) return;
  if (rc == CUBLAS_STATUS_ALLOC_FAILED) fail(RH_CUDA_ALLOCATION_FAILED, "%s: cuBLAS allocation failed", what);
  fail(RH_CUDA_CUBLAS_ERROR, "%s: cuBLAS status %d (%s)", what, static_cast<int>(rc),
       cublasGetStatusString(rc));
}

void check_cusolver(cusolverStatus_t rc, const char* what) {
  if (rc == CUSOLVER_STATUS_SUCCESS) return;
  if (rc == CUSOLVER_STATUS_ALLOC_FAILED) {
    fail(RH_CUDA_ALLOCATION_FAILED, "%s: cuSOLVER allocation failed", what);
  }
  fail(RH_CUDA_CUSOLVER_ERROR, "%s: cuSOLVER status %d", what, static_cast<int>(rc));
}

void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace rh
