// The one exception type that travels inside librh_cuda; api_guard.hpp turns it into a status.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <stdexcept>
#include <string>

#include "rh_common.h"
#include "rh_cuda.h"

namespace rh {

class EngineError : public std::runtime_error {
 public:
  EngineError(RhCudaStatus status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  RhCudaStatus status() const noexcept {
    return status_;
  }

 private:
  RhCudaStatus status_;
};

[[noreturn]] void fail(RhCudaStatus status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Refuses an array's value in the message grammar both engines share (rh_refuse_value in
// rh_common.h): INVALID_ARGUMENT naming owner.field[index] or owner.field[row, column] (column
// >= 0) and the value's kind.
[[noreturn]] void refuse_value(const char* owner, const char* field, int64_t index_or_row,
                               int64_t column, double value, RhValueRule rule);
// Refuses a batch_weight that disagrees with the weights' sum, in the shared wording
// (rh_refuse_weight_sum in rh_common.h).
[[noreturn]] void refuse_weight_sum(const char* batch_name, double claimed, double sum,
                                    double previous_weight);

void check_cuda(cudaError_t rc, const char* what);
void check_cublas(cublasStatus_t rc, const char* what);
void check_cusolver(cusolverStatus_t rc, const char* what);

}  // namespace rh
