/*
 * The row-pass kernels: rh_eight_pieces and, per dtype, row_block and predict_block. Included
 * once by row_pass.c (portable lanes, RH_MULTIVERSION clones) and, where
 * RH_HAVE_AVX512_KERNELS, once more by row_pass_avx512.c (8-double vectors compiled for
 * AVX-512); each defines RH_KERNEL_SUFFIX (appended to the names) and RH_KERNEL_ATTRIBUTES
 * (linkage and target of the two entry points) first. Both builds compute every row's values
 * in the same order.
 */
#include "cpu_engine.h"
#include "huber_pieces.h"
#include "vec8.h"

#if RH_HAVE_VECTORS
#define RH_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define RH_ALWAYS_INLINE static inline
#endif

/* The Huber pieces of eight rows (huber_pieces.h, lane by lane; slope = rh_curvature_slope(h),
 * computed once per block): adds w rho(r) and w psi(r) to
 * the lane sums, writes w psi(r) to scores and c(r) to curvature. */
RH_ALWAYS_INLINE void rh_eight_pieces(const double* residual, const double* weight, double tau,
                                      double h, double slope, RhVec8* lane_loss, RhVec8* lane_score,
                                      double* scores, double* curvature) {
#if RH_HAVE_VECTORS
  const RhVec8 r = rh_vec8_load(residual), w = rh_vec8_load(weight);
  const RhVec8 a = rh_vec8_abs(r);
  const RhVec8 t = rh_vec8_splat(tau), neg_t = rh_vec8_splat(-tau);
  const RhVec8 linear = tau * a - rh_vec8_splat(0.5 * tau * tau);
  const RhVec8 rho = rh_vec8_select(a <= t, 0.5 * r * r, linear);
  const RhVec8 psi = rh_vec8_select(r < neg_t, neg_t, rh_vec8_select(r > t, t, r));
  const RhVec8 score = w * psi;
  *lane_loss = w * rho + *lane_loss;
  *lane_score = *lane_score + score;
  rh_vec8_store(scores, score);
  const RhVec8 rising = 0.5 + (r + t) * rh_vec8_splat(slope);
  const RhVec8 falling = 0.5 - (r - t) * rh_vec8_splat(slope);
  RhVec8 c = rh_vec8_select(r >= rh_vec8_splat(tau - h), falling, rh_vec8_splat(1.0));
  c = rh_vec8_select(r <= rh_vec8_splat(-tau + h), rising, c);
  c = rh_vec8_select(r > rh_vec8_splat(tau + h), rh_vec8_zero(), c);
  c = rh_vec8_select(r < rh_vec8_splat(-tau - h), rh_vec8_zero(), c);
  rh_vec8_store(curvature, c);
#else
  for (int q = 0; q < 8; ++q) {
    double score = weight[q] * rh_huber_score(residual[q], tau);
    lane_loss->lane[q] += weight[q] * rh_huber_rho(residual[q], tau);
    lane_score->lane[q] += score;
    scores[q] = score;
    curvature[q] = rh_smoothed_curvature(residual[q], tau, h, slope);
  }
#endif
}

#define RH_PASTE3_(a, b, c) a##b##c
#define RH_PASTE3(a, b, c) RH_PASTE3_(a, b, c)

#define RH_T float
#define RH_NAME(x) RH_PASTE3(x, _f32, RH_KERNEL_SUFFIX)
#define RH_LOAD8(p) rh_vec8_load_f32(p)
#include "row_pass_typed.h"
#undef RH_T
#undef RH_NAME
#undef RH_LOAD8

#define RH_T double
#define RH_NAME(x) RH_PASTE3(x, _f64, RH_KERNEL_SUFFIX)
#define RH_LOAD8(p) rh_vec8_load(p)
#include "row_pass_typed.h"
#undef RH_T
#undef RH_NAME
#undef RH_LOAD8
