#include <math.h>

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

/* x * 0 is 0 for finite x and NaN for NaN or +-Inf, so one NaN-propagating sum per block
 * (explicit lanes, which compilers vectorise without reassociating) tells whether the block
 * needs the element-wise search. */
#define RH_SCAN_BLOCK 1024
#define RH_DEFINE_FIRST_NONFINITE(name, type)                                      \
  int64_t name(const type* data, int64_t count) {                                  \
    for (int64_t start = 0; start < count; start += RH_SCAN_BLOCK) {               \
      int64_t end = count - start < RH_SCAN_BLOCK ? count : start + RH_SCAN_BLOCK; \
      type lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                    \
      int64_t i = start;                                                           \
      for (; i + 8 <= end; i += 8) {                                               \
        for (int l = 0; l < 8; ++l) {                                              \
          lanes[l] += data[i + l] * (type)0;                                       \
        }                                                                          \
      }                                                                            \
      type total = 0;                                                              \
      for (int l = 0; l < 8; ++l) {                                                \
        total += lanes[l];                                                         \
      }                                                                            \
      for (; i < end; ++i) {                                                       \
        total += data[i] * (type)0;                                                \
      }                                                                            \
      if (total != total) {                                                        \
        for (i = start; i < end; ++i) {                                            \
          if (!isfinite(data[i])) {                                                \
            return i;                                                              \
          }                                                                        \
        }                                                                          \
      }                                                                            \
    }                                                                              \
    return -1;                                                                     \
  }

RH_DEFINE_FIRST_NONFINITE(rh_first_nonfinite_f32, float)
RH_DEFINE_FIRST_NONFINITE(rh_first_nonfinite_f64, double)
