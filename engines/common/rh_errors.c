#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "rh_algorithm.h"
#include "rh_common.h"

#if defined(_MSC_VER)
#define RH_THREAD_LOCAL __declspec(thread)
#else
#define RH_THREAD_LOCAL _Thread_local
#endif

static RH_THREAD_LOCAL RhErrorBuffer thread_error;

const char* rh_status_name(RhCudaStatus status) {
  switch (status) {
    case RH_CUDA_SUCCESS:
      return "SUCCESS";
    case RH_CUDA_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case RH_CUDA_UNAVAILABLE:
      return "UNAVAILABLE";
    case RH_CUDA_ALLOCATION_FAILED:
      return "ALLOCATION_FAILED";
    case RH_CUDA_CUDA_ERROR:
      return "CUDA_ERROR";
    case RH_CUDA_CUBLAS_ERROR:
      return "CUBLAS_ERROR";
    case RH_CUDA_CUSOLVER_ERROR:
      return "CUSOLVER_ERROR";
    case RH_CUDA_NUMERICAL_ERROR:
      return "NUMERICAL_ERROR";
    case RH_CUDA_INTERNAL_ERROR:
      return "INTERNAL_ERROR";
    default:
      return "UNKNOWN_STATUS";
  }
}

RhCudaStatus rh_fail(RhErrorBuffer* err, RhCudaStatus status, const char* fmt, ...) {
  if (err != NULL) {
    va_list args;
    va_start(args, fmt);
    int written = vsnprintf(err->text, sizeof err->text, fmt, args);
    va_end(args);
    if (written < 0) {
      snprintf(err->text, sizeof err->text, "%s (message formatting failed)",
               rh_status_name(status));
    }
  }
  return status;
}

void rh_error_clear(RhErrorBuffer* err) {
  if (err != NULL) {
    err->text[0] = '\0';
  }
}

RhErrorBuffer* rh_thread_error(void) {
  return &thread_error;
}

RhCudaStatus rh_refuse_value(RhErrorBuffer* err, const char* owner, const char* field,
                             int64_t index_or_row, int64_t column, double value, RhValueRule rule) {
  char where[48];
  if (column < 0) {
    snprintf(where, sizeof where, "[%" PRId64 "]", index_or_row);
  } else {
    snprintf(where, sizeof where, "[%" PRId64 ", %" PRId64 "]", index_or_row, column);
  }
  if (!isfinite(value)) {
    /* "nan" whatever the NaN's sign bit, which carries nothing */
    const char* kind = isnan(value) ? "nan" : (value > 0.0 ? "inf" : "-inf");
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.%s%s is %s: values must be finite", owner,
                   field, where, kind);
  }
  if (rule != RH_VALUE_FINITE && value < 0.0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.%s%s is negative: %s must be >= 0 (this one is %.17g)", owner, field, where,
                   rule == RH_VALUE_NONNEGATIVE_DIAGONAL ? "diagonal entries" : "values", value);
  }
  return rh_fail(err, RH_CUDA_INTERNAL_ERROR,
                 "%s.%s%s holds %.17g, which breaks no rule it was refused for (engine bug)", owner,
                 field, where, value);
}

RhCudaStatus rh_refuse_weight_sum(RhErrorBuffer* err, const char* batch, double declared,
                                  double sum, double previous_weight) {
  return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                 "%s.batch_weight is %.17g but sample_weight sums to %.17g (within a relative "
                 "difference of %g, the sum and the cumulative weight %.17g plus it must be "
                 "finite)",
                 batch, declared, sum, RH_WEIGHT_SUM_RTOL, previous_weight);
}
