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
                                      double h, double slope, RhVec8* lane_loss,
                                      RhVec8* lane_score, double* scores, double* curvature) {
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
    lane_loss->lane[q] += weight[q] * rh_huber_loss(residual[q], tau);
    lane_score->lane[q] += score;
    scores[q] = score;
    curvature[q] = rh_smoothed_curvature(residual[q], tau, h);
  }
#endif
}

#define RH_T float
#define RH_NAME(x) x##_f32
#define RH_LOAD8(p) rh_vec8_load_f32(p)
#include "row_pass_typed.h"
#undef RH_T
#undef RH_NAME
#undef RH_LOAD8

#define RH_T double
#define RH_NAME(x) x##_f64
#define RH_LOAD8(p) rh_vec8_load(p)
#include "row_pass_typed.h"
#undef RH_T
#undef RH_NAME
#undef RH_LOAD8

/* Thread-count independence: the blocks are fixed RH_ROW_BLOCK-row ranges, each block's
 * partial sums go to its own slot, and the slots are added in block order below. Any OpenMP
 * thread count therefore produces bitwise identical loss and gradient. */
void rh_row_pass(const RhProblem* problem, const double* beta, double* loss, double* gradient,
                 double* curvature) {
  const RhBatchData* d = &problem->data;
  const int64_t n = d->n_rows;
  const int64_t P = problem->P;
  const int64_t n_blocks = (n + RH_ROW_BLOCK - 1) / RH_ROW_BLOCK;
  double* block_loss = problem->ws->block_loss;
  double* block_gradient = problem->ws->block_gradient;
  const int is_f32 = d->dtype == RH_CUDA_DTYPE_FLOAT32;
  const int parallel = n_blocks > 1 && n * d->n_columns >= RH_PARALLEL_MIN_ROW_WORK;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t first = b * RH_ROW_BLOCK;
    int64_t last = first + RH_ROW_BLOCK < n ? first + RH_ROW_BLOCK : n;
    double* partial = gradient != NULL ? block_gradient + b * P : NULL;
    if (is_f32) {
      row_block_f32(problem, beta, first, last, block_loss + b, partial, curvature);
    } else {
      row_block_f64(problem, beta, first, last, block_loss + b, partial, curvature);
    }
  }
  double total = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    total += block_loss[b];
  }
  *loss = total;
  if (gradient != NULL) {
    for (int64_t j = 0; j < P; ++j) {
      gradient[j] = block_gradient[j];
    }
    for (int64_t b = 1; b < n_blocks; ++b) {
      const double* partial = block_gradient + b * P;
      for (int64_t j = 0; j < P; ++j) {
        gradient[j] += partial[j];
      }
    }
  }
}

void rh_predict_rows(int32_t dtype, const void* x, int64_t n_rows, int64_t n_columns,
                     int append_intercept, const double* beta, void* prediction) {
  const int64_t n_blocks = (n_rows + RH_ROW_BLOCK - 1) / RH_ROW_BLOCK;
  const double intercept = append_intercept ? beta[n_columns] : 0.0;
  const int parallel = n_blocks > 1 && n_rows * n_columns >= RH_PARALLEL_MIN_ROW_WORK;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t first = b * RH_ROW_BLOCK;
    int64_t last = first + RH_ROW_BLOCK < n_rows ? first + RH_ROW_BLOCK : n_rows;
    if (dtype == RH_CUDA_DTYPE_FLOAT32) {
      predict_block_f32((const float*)x, first, last, n_columns, intercept, beta,
                        (float*)prediction);
    } else {
      predict_block_f64((const double*)x, first, last, n_columns, intercept, beta,
                        (double*)prediction);
    }
  }
}
