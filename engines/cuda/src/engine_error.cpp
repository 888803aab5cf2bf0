#include "engine_error.hpp"

#include <cstdarg>
#include <cstdio>

#include "fault_sites.hpp"

namespace rh {

void fail(RhCudaStatus status, const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  throw EngineError(status, text);
}

void refuse_value(const char* owner, const char* field, int64_t index_or_row, int64_t column,
                  double value, RhValueRule rule) {
  RhErrorBuffer text{};
  const RhCudaStatus status =
      rh_refuse_value(&text, owner, field, index_or_row, column, value, rule);
  throw EngineError(status, text.text);
}

void refuse_weight_sum(const char* batch_name, double claimed, double sum, double previous_weight) {
  // The message is written by the call: it must run before the text is read.
  RhErrorBuffer text{};
  const RhCudaStatus status =
      rh_refuse_weight_sum(&text, batch_name, claimed, sum, previous_weight);
  throw EngineError(status, text.text);
}

// Test builds: the fault-injection sweep's failure in place of a successful result.
static cudaError_t injected(cudaError_t rc) {
  if (rc != cudaSuccess || !fault_injected_here())
    return rc;
  return fault_injection_kind() == FaultKind::Allocation ? cudaErrorMemoryAllocation
                                                         : cudaErrorUnknown;
}
static cublasStatus_t injected(cublasStatus_t rc) {
  if (rc != CUBLAS_STATUS_SUCCESS || !fault_injected_here())
    return rc;
  return fault_injection_kind() == FaultKind::Allocation ? CUBLAS_STATUS_ALLOC_FAILED
                                                         : CUBLAS_STATUS_EXECUTION_FAILED;
}
static cusolverStatus_t injected(cusolverStatus_t rc) {
  if (rc != CUSOLVER_STATUS_SUCCESS || !fault_injected_here())
    return rc;
  return fault_injection_kind() == FaultKind::Allocation ? CUSOLVER_STATUS_ALLOC_FAILED
                                                         : CUSOLVER_STATUS_EXECUTION_FAILED;
}

void check_cuda(cudaError_t rc, const char* what) {
  rc = injected(rc);
  if (rc == cudaSuccess)
    return;
  if (rc == cudaErrorMemoryAllocation) {
    fail(RH_CUDA_ALLOCATION_FAILED, "%s: %s", what, cudaGetErrorString(rc));
  }
  fail(RH_CUDA_CUDA_ERROR, "%s: %s (%s)", what, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

void check_cublas(cublasStatus_t rc, const char* what) {
  rc = injected(rc);
  if (rc == CUBLAS_STATUS_SUCCESS)
    return;
  if (rc == CUBLAS_STATUS_ALLOC_FAILED)
    fail(RH_CUDA_ALLOCATION_FAILED, "%s: cuBLAS allocation failed", what);
  fail(RH_CUDA_CUBLAS_ERROR, "%s: cuBLAS status %d (%s)", what, static_cast<int>(rc),
       cublasGetStatusString(rc));
}

void check_cusolver(cusolverStatus_t rc, const char* what) {
  rc = injected(rc);
  if (rc == CUSOLVER_STATUS_SUCCESS)
    return;
  if (rc == CUSOLVER_STATUS_ALLOC_FAILED) {
    fail(RH_CUDA_ALLOCATION_FAILED, "%s: cuSOLVER allocation failed", what);
  }
  fail(RH_CUDA_CUSOLVER_ERROR, "%s: cuSOLVER status %d", what, static_cast<int>(rc));
}

}  // namespace rh
