#include "cpu_engine.h"
#include "rh_algorithm.h"

/* Where row_pass_avx512.c provides the 8-double vector kernels, the clones built here are the
 * AVX2 and baseline ones, which run best on plain lane loops (vec8.h). */
#if RH_HAVE_AVX512_KERNELS
#define RH_SCALAR_LANES
#endif
#define RH_KERNEL_SUFFIX
#define RH_KERNEL_ATTRIBUTES RH_MULTIVERSION static
#include "row_kernels.h"

typedef void (*RhRowBlockFn)(const RhProblem*, const double*, int64_t, int64_t, double*, double*,
                             double*);

static RhRowBlockFn row_block_for(int is_f32) {
#if RH_HAVE_AVX512_KERNELS
  if (rh_cpu_has_avx512()) {
    return is_f32 ? row_block_f32_avx512 : row_block_f64_avx512;
  }
#endif
  return is_f32 ? row_block_f32 : row_block_f64;
}

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
  const RhRowBlockFn row_block = row_block_for(d->dtype == RH_CUDA_DTYPE_FLOAT32);
  const int parallel = n_blocks > 1 && n * d->n_columns >= RH_PARALLEL_MIN_ROW_WORK;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t first = b * RH_ROW_BLOCK;
    int64_t last = first + RH_ROW_BLOCK < n ? first + RH_ROW_BLOCK : n;
    double* partial = gradient != NULL ? block_gradient + b * P : NULL;
    row_block(problem, beta, first, last, block_loss + b, partial, curvature);
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

void rh_majoriser_row_weights(const RhProblem* problem, const double* beta, const double* curvature,
                              double* weights) {
  const RhBatchData* d = &problem->data;
  const int64_t n = d->n_rows, m = d->n_columns;
  const double intercept = d->append_intercept ? beta[m] : 0.0;
  const double tau = problem->tau;
  const int is_f32 = d->dtype == RH_CUDA_DTYPE_FLOAT32;
#pragma omp parallel for schedule(static) if (n * m >= RH_PARALLEL_MIN_ROW_WORK)
  for (int64_t i = 0; i < n; ++i) {
    /* row_dot sums in the row kernels' order, so r is the residual the row pass saw. */
    const double fitted = is_f32 ? row_dot_f32((const float*)d->x + i * m, beta, m)
                                 : row_dot_f64((const double*)d->x + i * m, beta, m);
    const double y = is_f32 ? (double)((const float*)d->y)[i] : ((const double*)d->y)[i];
    weights[i] = rh_majoriser_weight(y - (fitted + intercept), tau, curvature[i]);
  }
}

void rh_predict_rows(int32_t dtype, const void* x, int64_t n_rows, int64_t n_columns,
                     int append_intercept, const double* beta, void* prediction) {
  const int64_t n_blocks = (n_rows + RH_ROW_BLOCK - 1) / RH_ROW_BLOCK;
  const double intercept = append_intercept ? beta[n_columns] : 0.0;
  const int parallel = n_blocks > 1 && n_rows * n_columns >= RH_PARALLEL_MIN_ROW_WORK;
#if RH_HAVE_AVX512_KERNELS
  const int avx512 = rh_cpu_has_avx512();
#endif
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t first = b * RH_ROW_BLOCK;
    int64_t last = first + RH_ROW_BLOCK < n_rows ? first + RH_ROW_BLOCK : n_rows;
#if RH_HAVE_AVX512_KERNELS
    if (avx512 && dtype == RH_CUDA_DTYPE_FLOAT32) {
      predict_block_f32_avx512((const float*)x, first, last, n_columns, intercept, beta,
                               (float*)prediction);
      continue;
    }
    if (avx512) {
      predict_block_f64_avx512((const double*)x, first, last, n_columns, intercept, beta,
                               (double*)prediction);
      continue;
    }
#endif
    if (dtype == RH_CUDA_DTYPE_FLOAT32) {
      predict_block_f32((const float*)x, first, last, n_columns, intercept, beta,
                        (float*)prediction);
    } else {
      predict_block_f64((const double*)x, first, last, n_columns, intercept, beta,
                        (double*)prediction);
    }
  }
}
