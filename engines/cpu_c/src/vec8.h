/*
 * RhVec8: eight doubles, the unit of every vector loop in the engine. GCC and Clang map it to
 * their vector extension, so each RH_MULTIVERSION clone gets one zmm (AVX-512), two ymm or four
 * xmm registers per value from one source; other compilers get a struct and scalar loops with
 * the same per-lane arithmetic (also chosen with RH_SCALAR_LANES: GCC lowers 8-double vectors
 * poorly without AVX-512, while it vectorises the lane loops well). The operations are macros
 * on the vector path so no function ever takes or returns a vector (which would tie the ABI to
 * one instruction set).
 */
#ifndef RH_VEC8_H
#define RH_VEC8_H

#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(RH_SCALAR_LANES)

#define RH_HAVE_VECTORS 1
/* aligned(8): the engine's arrays are only guaranteed double alignment. */
typedef double RhVec8 __attribute__((vector_size(64), aligned(8)));
typedef float RhVecF8 __attribute__((vector_size(32), aligned(4)));

#define rh_vec8_zero() ((RhVec8){0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0})
#define rh_vec8_splat(s) ((RhVec8){(s), (s), (s), (s), (s), (s), (s), (s)})
#define rh_vec8_load(p) (*(const RhVec8*)(p))
#define rh_vec8_store(p, v) (*(RhVec8*)(p) = (v))
#define rh_vec8_fma(a, b, c) ((a) * (b) + (c))
/* The pairwise order of rh_vec8_sum is part of the results: never change it. */
#define rh_vec8_sum(v) \
  ((((v)[0] + (v)[4]) + ((v)[1] + (v)[5])) + (((v)[2] + (v)[6]) + ((v)[3] + (v)[7])))
#if defined(__AVX512F__)
/* GCC splits __builtin_convertvector from 8 floats into two 4-wide conversions; with AVX-512
 * one instruction does it. */
#include <immintrin.h>
#define rh_vec8_load_f32(p) ((RhVec8)_mm512_cvtps_pd(_mm256_loadu_ps(p)))
#else
#define rh_vec8_load_f32(p) __builtin_convertvector(*(const RhVecF8*)(p), RhVec8)
#endif

typedef long long RhVec8Bits __attribute__((vector_size(64)));
/* Lanewise mask ? a : b, with mask from a vector comparison (all ones or all zeros). */
#define rh_vec8_select(mask, a, b) \
  ((RhVec8)((((RhVec8Bits)(a)) & (mask)) | (((RhVec8Bits)(b)) & ~(mask))))
#define rh_vec8_abs(v) ((RhVec8)(((RhVec8Bits)(v)) & (RhVec8Bits){RH_ABS_BITS8}))
#define RH_ABS_BIT 0x7fffffffffffffffLL
#define RH_ABS_BITS8 \
  RH_ABS_BIT, RH_ABS_BIT, RH_ABS_BIT, RH_ABS_BIT, RH_ABS_BIT, RH_ABS_BIT, RH_ABS_BIT, RH_ABS_BIT

#if defined(__clang__)
#define RH_SHUFFLE8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
  __builtin_shufflevector((a), (b), i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define RH_SHUFFLE8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
  __builtin_shuffle((a), (b), (RhVec8Bits){i0, i1, i2, i3, i4, i5, i6, i7})
#endif

/* out[q] = rh_vec8_sum(acc[q]) for q < 8, as one vector: the same pairwise additions done
 * eight rows at a time by transposing shuffles. */
#define RH_VEC8_SUM_EACH(acc, out)                                                         \
  do {                                                                                     \
    RhVec8 rh_p_[4], rh_c_[2];                                                             \
    for (int rh_k_ = 0; rh_k_ < 4; ++rh_k_) {                                              \
      rh_p_[rh_k_] =                                                                       \
          RH_SHUFFLE8((acc)[2 * rh_k_], (acc)[2 * rh_k_ + 1], 0, 1, 2, 3, 8, 9, 10, 11) +  \
          RH_SHUFFLE8((acc)[2 * rh_k_], (acc)[2 * rh_k_ + 1], 4, 5, 6, 7, 12, 13, 14, 15); \
    }                                                                                      \
    for (int rh_k_ = 0; rh_k_ < 2; ++rh_k_) {                                              \
      rh_c_[rh_k_] =                                                                       \
          RH_SHUFFLE8(rh_p_[2 * rh_k_], rh_p_[2 * rh_k_ + 1], 0, 2, 4, 6, 8, 10, 12, 14) + \
          RH_SHUFFLE8(rh_p_[2 * rh_k_], rh_p_[2 * rh_k_ + 1], 1, 3, 5, 7, 9, 11, 13, 15);  \
    }                                                                                      \
    (out) = RH_SHUFFLE8(rh_c_[0], rh_c_[1], 0, 2, 4, 6, 8, 10, 12, 14) +                   \
            RH_SHUFFLE8(rh_c_[0], rh_c_[1], 1, 3, 5, 7, 9, 11, 13, 15);                    \
  } while (0)

#else

#define RH_HAVE_VECTORS 0
typedef struct RhVec8 {
  double lane[8];
} RhVec8;

static inline RhVec8 rh_vec8_zero(void) {
  RhVec8 v;
  for (int l = 0; l < 8; ++l) {
    v.lane[l] = 0.0;
  }
  return v;
}
static inline RhVec8 rh_vec8_splat(double s) {
  RhVec8 v;
  for (int l = 0; l < 8; ++l) {
    v.lane[l] = s;
  }
  return v;
}
static inline RhVec8 rh_vec8_load(const double* p) {
  RhVec8 v;
  memcpy(v.lane, p, sizeof v.lane);
  return v;
}
static inline RhVec8 rh_vec8_load_f32(const float* p) {
  RhVec8 v;
  for (int l = 0; l < 8; ++l) {
    v.lane[l] = (double)p[l];
  }
  return v;
}
static inline void rh_vec8_store(double* p, RhVec8 v) {
  memcpy(p, v.lane, sizeof v.lane);
}
static inline RhVec8 rh_vec8_fma(RhVec8 a, RhVec8 b, RhVec8 c) {
  for (int l = 0; l < 8; ++l) {
    c.lane[l] += a.lane[l] * b.lane[l];
  }
  return c;
}
static inline double rh_vec8_sum(RhVec8 v) {
  const double* l = v.lane;
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}
#define RH_VEC8_SUM_EACH(acc, out)                   \
  do {                                               \
    for (int rh_k_ = 0; rh_k_ < 8; ++rh_k_) {        \
      (out).lane[rh_k_] = rh_vec8_sum((acc)[rh_k_]); \
    }                                                \
  } while (0)

#endif

#endif /* RH_VEC8_H */
