/*
 * RhVec8: eight doubles, the unit of every vector loop in the engine. GCC and Clang map it to
 * their vector extension, so each RH_MULTIVERSION clone gets one zmm (AVX-512), two ymm or four
 * xmm registers per value from one source; other compilers get a struct and scalar loops with
 * the same per-lane arithmetic. The operations are macros on the vector path so no function
 * ever takes or returns a vector (which would tie the ABI to one instruction set).
 */
#ifndef RH_VEC8_H
#define RH_VEC8_H

#include <string.h>

#if defined(__GNUC__) || defined(__clang__)

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
#define rh_vec8_load_f32(p) __builtin_convertvector(*(const RhVecF8*)(p), RhVec8)

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
static inline void rh_vec8_store(double* p, RhVec8 v) { memcpy(p, v.lane, sizeof v.lane); }
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

#endif

#endif /* RH_VEC8_H */
