/* Overflow-checked element and byte counts, and dtype sizes (rh_common.h). */
#include <float.h>

#include "rh_common.h"

int rh_mul_i64(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) {
    return 1;
  }
  if (a != 0 && b > INT64_MAX / a) {
    return 1;
  }
  *out = a * b;
  return 0;
}

int rh_bytes(int64_t count, size_t elem_size, size_t* out) {
  if (count < 0) {
    return 1;
  }
  /* Byte counts must also fit int64_t so they can be printed and compared as such. */
  uint64_t limit =
      (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX;
  if (elem_size != 0 && (uint64_t)count > limit / (uint64_t)elem_size) {
    return 1;
  }
  *out = (size_t)count * elem_size;
  return 0;
}

double rh_dtype_epsilon(int32_t dtype) {
  return dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
}

size_t rh_dtype_size(int32_t dtype) {
  switch (dtype) {
    case RH_CUDA_DTYPE_FLOAT32:
      return sizeof(float);
    case RH_CUDA_DTYPE_FLOAT64:
      return sizeof(double);
    default:
      return 0;
  }
}
