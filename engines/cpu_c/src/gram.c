/*
 * The weighted Gram X' diag(v) X, computed as an exactly symmetric matrix.
 *
 * Cost model: a Gram costs n P^2 / 2 multiply-adds and dominates a Newton iteration, but the
 * curvature c(r) is exactly 1 for most rows (|r| < tau - h). So the batch's G_w = X' diag(w) X
 * is computed once, and each iteration only corrects it over the rows whose curvature is not 1:
 *     G = G_w - sum_{c_i < 1} w_i (1 - c_i) x_i x_i'
 * or, when fewer rows have c_i > 0 than c_i < 1, sums those rows directly. The two ways differ
 * by rounding only (about 1e-16 relative), far inside the cross-engine tolerance.
 *
 * Parallel layout: the lower triangle is cut into 8 x 8 tiles and the listed rows into fixed
 * super-blocks of RH_GRAM_SUPERBLOCK; every (super-block, tile) task writes its own partial,
 * and partials are added in super-block order. Neither depends on the thread count, so the
 * result is bitwise identical for any number of threads.
 */
#include "cpu_engine.h"

#define RH_T float
#define RH_NAME(x) x##_f32
#include "gram_typed.h"
#undef RH_T
#undef RH_NAME

#define RH_T double
#define RH_NAME(x) x##_f64
#include "gram_typed.h"
#undef RH_T
#undef RH_NAME

/* gram (P x P, full and symmetric) = sum over the m listed rows of scale[k] x_k x_k'. */
static void accumulate_listed_rows(const RhProblem* problem, int64_t m, double* gram) {
  const RhBatchData* d = &problem->data;
  const int64_t P = problem->P;
  const int64_t tiles_1d = (P + RH_GRAM_TILE - 1) / RH_GRAM_TILE;
  const int64_t n_tiles = tiles_1d * (tiles_1d + 1) / 2;
  const int64_t n_super = m > 0 ? (m + RH_GRAM_SUPERBLOCK - 1) / RH_GRAM_SUPERBLOCK : 0;
  const int64_t n_tasks = n_super * n_tiles;
  const int64_t* rows = problem->ws->row_list;
  const double* scale = problem->ws->row_scale;
  double* partial = problem->ws->gram_partial;
  const int64_t tile_area = RH_GRAM_TILE * RH_GRAM_TILE;

  const int parallel = n_tasks > 1 && m * P * P >= RH_PARALLEL_MIN_GRAM_WORK;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t task = 0; task < n_tasks; ++task) {
    int64_t super = task / n_tiles;
    int64_t tile = task % n_tiles;
    int64_t jb = 0;
    while ((jb + 1) * (jb + 2) / 2 <= tile) {
      ++jb;
    }
    int64_t kb = tile - jb * (jb + 1) / 2;
    int64_t first = super * RH_GRAM_SUPERBLOCK;
    int64_t last = first + RH_GRAM_SUPERBLOCK < m ? first + RH_GRAM_SUPERBLOCK : m;
    double* out = partial + task * tile_area;
    if (d->dtype == RH_CUDA_DTYPE_FLOAT32) {
      gram_tile_f32(d, rows, scale, first, last, jb * RH_GRAM_TILE, kb * RH_GRAM_TILE, out);
    } else {
      gram_tile_f64(d, rows, scale, first, last, jb * RH_GRAM_TILE, kb * RH_GRAM_TILE, out);
    }
  }

  for (int64_t jb = 0, tile = 0; jb < tiles_1d; ++jb) {
    for (int64_t kb = 0; kb <= jb; ++kb, ++tile) {
      for (int64_t a = 0; a < RH_GRAM_TILE; ++a) {
        for (int64_t b = 0; b < RH_GRAM_TILE; ++b) {
          int64_t j = jb * RH_GRAM_TILE + a, k = kb * RH_GRAM_TILE + b;
          /* Only j >= k is taken from the tiles; the upper triangle is its mirror. */
          if (j >= P || k > j) {
            continue;
          }
          double sum = 0.0;
          for (int64_t s = 0; s < n_super; ++s) {
            sum += partial[(s * n_tiles + tile) * tile_area + a * RH_GRAM_TILE + b];
          }
          gram[j * P + k] = sum;
          gram[k * P + j] = sum;
        }
      }
    }
  }
}

static double weight_of(const RhBatchData* d, int64_t i) {
  if (d->weights == NULL) {
    return 1.0;
  }
  return d->dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)((const float*)d->weights)[i]
                                          : ((const double*)d->weights)[i];
}

typedef enum RhRowSelection { RH_ROWS_ALL, RH_ROWS_CURVED, RH_ROWS_NOT_FLAT } RhRowSelection;

/* Fills ws->row_list / ws->row_scale in row order and returns the count:
 * ALL: w_i; CURVED (c_i > 0): w_i c_i; NOT_FLAT (c_i < 1): w_i (1 - c_i). */
static int64_t select_rows(const RhProblem* problem, RhRowSelection selection) {
  const RhBatchData* d = &problem->data;
  const double* c = problem->ws->curvature;
  int64_t* rows = problem->ws->row_list;
  double* scale = problem->ws->row_scale;
  int64_t m = 0;
  for (int64_t i = 0; i < d->n_rows; ++i) {
    double w = weight_of(d, i);
    double v = selection == RH_ROWS_ALL      ? w
               : selection == RH_ROWS_CURVED ? w * c[i]
                                             : w * (1.0 - c[i]);
    if (v != 0.0) {
      rows[m] = i;
      scale[m] = v;
      ++m;
    }
  }
  return m;
}

void rh_gram_at_curvature(RhProblem* problem, int reuse_weighted, double* gram) {
  RhWorkspace* ws = problem->ws;
  const int64_t n = problem->data.n_rows;
  const int64_t P = problem->P;
  int64_t curved = 0, not_flat = 0;
  for (int64_t i = 0; i < n; ++i) {
    curved += ws->curvature[i] > 0.0;
    not_flat += ws->curvature[i] < 1.0;
  }
  /* Without reuse G_w would serve one Gram only, which a direct sum over <= n rows beats. */
  if (curved <= not_flat || (!reuse_weighted && !ws->gram_weighted_ready)) {
    accumulate_listed_rows(problem, select_rows(problem, RH_ROWS_CURVED), gram);
    return;
  }
  if (!ws->gram_weighted_ready) {
    accumulate_listed_rows(problem, select_rows(problem, RH_ROWS_ALL), ws->gram_weighted);
    ws->gram_weighted_ready = 1;
  }
  accumulate_listed_rows(problem, select_rows(problem, RH_ROWS_NOT_FLAT), gram);
  const int64_t square = P * P;
  for (int64_t k = 0; k < square; ++k) {
    gram[k] = ws->gram_weighted[k] - gram[k];
  }
}
