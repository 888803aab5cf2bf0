/* Host arrays of an ABI dtype (rh_common.h): the scan for the first non-finite value (the
 * engines' finiteness check of restored states, predictions and the CPU engine's batches), the
 * all-zero test of a restored state, and the per-dtype dispatch written once for the engines. */
#include <math.h>
#include <string.h>

#include "rh_common.h"

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

int64_t rh_first_nonfinite(int32_t dtype, const void* data, int64_t count) {
  return dtype == RH_CUDA_DTYPE_FLOAT32 ? rh_first_nonfinite_f32((const float*)data, count)
                                        : rh_first_nonfinite_f64((const double*)data, count);
}

int rh_all_values_zero(int32_t dtype, const void* data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (rh_value_at(dtype, data, i) != 0.0) {
      return 0;
    }
  }
  return 1;
}

int rh_all_bytes_zero(const void* data, size_t bytes) {
  /* An OR over 64-byte blocks (vectorised, no branch per element), checked once per block so a
   * non-zero array is usually told apart in its first block. */
  const unsigned char* p = (const unsigned char*)data;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    uint64_t words[8];
    memcpy(words, p + i, sizeof words);
    uint64_t any = 0;
    for (int w = 0; w < 8; ++w) {
      any |= words[w];
    }
    if (any != 0) {
      return 0;
    }
  }
  for (; i < bytes; ++i) {
    if (p[i] != 0) {
      return 0;
    }
  }
  return 1;
}

void rh_widen(int32_t dtype, const void* src, int64_t count, double* dst) {
  if (dtype == RH_CUDA_DTYPE_FLOAT32) {
    const float* s = (const float*)src;
    for (int64_t i = 0; i < count; ++i) {
      dst[i] = (double)s[i];
    }
  } else {
    memcpy(dst, src, (size_t)count * sizeof(double));
  }
}
