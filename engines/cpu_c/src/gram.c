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
 * Layout: the listed rows are cut into fixed super-blocks of RH_GRAM_SUPERBLOCK; a super-block
 * is packed chunk by chunk (RH_GRAM_DEPTH rows, widened to double, so a chunk's panels stay in
 * L2 for all of its tiles) and multiplied by the register-blocked kernel of gram_kernel.c into
 * the super-block's own partial. Partials are added in super-block order. Neither the blocks
 * nor the order depend on the thread count, so the result is bitwise identical for any number
 * of threads.
 */
#include <stdint.h>
#include <string.h>

#include "cpu_engine.h"
#include "gram_kernel.h"

/* The four panels of one chunk in rh_gram_and_meat (layout of gram_kernel.h, stride
 * RH_MEAT_DEPTH): every row plain and times w psi^2, the Gram's rows plain and scaled. */
typedef struct RhMeatPanels {
  double* plain;
  double* meat_scaled;
  double* gram_plain;
  double* gram_scaled;
} RhMeatPanels;

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

/* The workspace's Gram buffers carry RH_GRAM_ALIGN_SLACK spare doubles for this. */
static double* align_to_cache_line(double* p) {
  return (double*)(((uintptr_t)p + 63u) & ~(uintptr_t)63u);
}

/* The listed rows [first, last) of one super-block into its zeroed partial (width x width). */
static void super_block_gram(const RhProblem* problem, int64_t first, int64_t last, int64_t groups,
                             double* pack, double* partial) {
  const RhBatchData* d = &problem->data;
  const int64_t* rows = problem->ws->row_list;
  const double* scale = problem->ws->row_scale;
  const int64_t width = groups * RH_PANEL_WIDTH;
  double* scaled = pack;
  double* plain = pack + (int64_t)RH_GRAM_DEPTH * width;
  memset(partial, 0, (size_t)(width * width) * sizeof(double));
  for (int64_t k = first; k < last; k += RH_GRAM_DEPTH) {
    int64_t count = last - k < RH_GRAM_DEPTH ? last - k : RH_GRAM_DEPTH;
    if (d->dtype == RH_CUDA_DTYPE_FLOAT32) {
      pack_chunk_f32(d, rows + k, scale + k, count, groups, scaled, plain);
    } else {
      pack_chunk_f64(d, rows + k, scale + k, count, groups, scaled, plain);
    }
    rh_panel_gram_upper(scaled, plain, count, RH_GRAM_DEPTH, groups, partial, width);
  }
}

/* gram (P x P, full and symmetric) = the super-blocks' partials added in super-block order. */
static void reduce_partials(const double* partials, int64_t n_super, int64_t P, int64_t width,
                            double* gram) {
  const int64_t partial_size = width * width;
  for (int64_t j = 0; j < P; ++j) {
    for (int64_t k = j; k < P; ++k) {
      /* Only j <= k is taken from the partials; the lower triangle is its mirror. */
      double sum = n_super > 0 ? partials[j * width + k] : 0.0;
      for (int64_t s = 1; s < n_super; ++s) {
        sum += partials[s * partial_size + j * width + k];
      }
      gram[j * P + k] = sum;
      gram[k * P + j] = sum;
    }
  }
}

/* gram (P x P, full and symmetric) = sum over the m listed rows of scale[k] x_k x_k'. */
static void accumulate_listed_rows(const RhProblem* problem, int64_t m, double* gram) {
  const int64_t P = problem->P;
  const int64_t groups = (P + RH_PANEL_WIDTH - 1) / RH_PANEL_WIDTH;
  const int64_t width = groups * RH_PANEL_WIDTH;
  const int64_t pack_size = 2 * (int64_t)RH_GRAM_DEPTH * width;
  const int64_t partial_size = width * width;
  const int64_t n_super = m > 0 ? (m + RH_GRAM_SUPERBLOCK - 1) / RH_GRAM_SUPERBLOCK : 0;
  double* packs = align_to_cache_line(problem->ws->gram_pack);
  double* partials = align_to_cache_line(problem->ws->gram_partial);

  const int parallel = n_super > 1 && m * P * P >= RH_PARALLEL_MIN_GRAM_WORK;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t s = 0; s < n_super; ++s) {
    int64_t first = s * RH_GRAM_SUPERBLOCK;
    int64_t last = first + RH_GRAM_SUPERBLOCK < m ? first + RH_GRAM_SUPERBLOCK : m;
    super_block_gram(problem, first, last, groups, packs + s * pack_size,
                     partials + s * partial_size);
  }

  reduce_partials(partials, n_super, P, width, gram);
}

static double weight_of(const RhBatchData* d, int64_t i) {
  if (d->weights == NULL) {
    return 1.0;
  }
  return rh_value_at(d->dtype, d->weights, i);
}

typedef enum RhRowSelection { RH_ROWS_ALL, RH_ROWS_CURVED, RH_ROWS_NOT_FLAT } RhRowSelection;

/* Fills ws->row_list / ws->row_scale in row order and returns the count:
 * ALL: w_i; CURVED (c_i > 0): w_i c_i; NOT_FLAT (c_i < 1): w_i (1 - c_i). */
static int64_t select_rows(const RhProblem* problem, const double* c, RhRowSelection selection) {
  const RhBatchData* d = &problem->data;
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

/* Rows with c > 0 (in the Gram at all) and rows with c < 1 (not at G_w's full weight). */
static void count_curvature(const double* curvature, int64_t n, int64_t* curved,
                            int64_t* not_flat) {
  for (int64_t i = 0; i < n; ++i) {
    *curved += curvature[i] > 0.0;
    *not_flat += curvature[i] < 1.0;
  }
}

void rh_gram_at_curvature(RhProblem* problem, int reuse_weighted, double* gram) {
  RhWorkspace* ws = problem->ws;
  const int64_t n = problem->data.n_rows;
  const int64_t P = problem->P;
  int64_t curved = 0, not_flat = 0;
  count_curvature(ws->curvature, n, &curved, &not_flat);
  /* Without reuse G_w would serve one Gram only, which a direct sum over <= n rows beats. */
  if (curved <= not_flat || (!reuse_weighted && !ws->gram_weighted_ready)) {
    accumulate_listed_rows(problem, select_rows(problem, ws->curvature, RH_ROWS_CURVED), gram);
    return;
  }
  if (!ws->gram_weighted_ready) {
    accumulate_listed_rows(problem, select_rows(problem, ws->curvature, RH_ROWS_ALL),
                           ws->gram_weighted);
    ws->gram_weighted_ready = 1;
  }
  accumulate_listed_rows(problem, select_rows(problem, ws->curvature, RH_ROWS_NOT_FLAT), gram);
  const int64_t square = P * P;
  for (int64_t k = 0; k < square; ++k) {
    gram[k] = ws->gram_weighted[k] - gram[k];
  }
}

void rh_gram_at_row_weights(RhProblem* problem, const double* row_weights, double* gram) {
  accumulate_listed_rows(problem, select_rows(problem, row_weights, RH_ROWS_CURVED), gram);
}

/* One super-block of rh_gram_and_meat: both partials from one packing of each chunk. */
static void super_block_gram_and_meat(const RhProblem* problem, int64_t first, int64_t last,
                                      int64_t groups, double* pack, double* partial,
                                      double* meat_partial) {
  const RhBatchData* d = &problem->data;
  const int64_t* rows = problem->ws->row_list;
  const double* scale = problem->ws->row_scale;
  const double* beta = problem->ws->beta;
  const int64_t width = groups * RH_PANEL_WIDTH;
  const int64_t panel = (int64_t)RH_MEAT_DEPTH * width;
  const RhMeatPanels panels = {pack, pack + panel, pack + 2 * panel, pack + 3 * panel};
  memset(partial, 0, (size_t)(width * width) * sizeof(double));
  memset(meat_partial, 0, (size_t)(width * width) * sizeof(double));
  for (int64_t k = first; k < last; k += RH_MEAT_DEPTH) {
    int64_t count = last - k < RH_MEAT_DEPTH ? last - k : RH_MEAT_DEPTH;
    int64_t kept = d->dtype == RH_CUDA_DTYPE_FLOAT32
                       ? pack_chunk_with_meat_f32(d, rows + k, scale + k, beta, problem->tau, count,
                                                  groups, panels)
                       : pack_chunk_with_meat_f64(d, rows + k, scale + k, beta, problem->tau, count,
                                                  groups, panels);
    if (kept > 0) {
      rh_panel_gram_upper(panels.gram_scaled, panels.gram_plain, kept, RH_MEAT_DEPTH, groups,
                          partial, width);
    }
    rh_panel_gram_upper(panels.meat_scaled, panels.plain, count, RH_MEAT_DEPTH, groups,
                        meat_partial, width);
  }
}

/* Lists every row of non-zero weight with the Gram's scale: w c (direct) or w (1 - c)
 * (correction of G_w). The meat needs every such row, so rows whose Gram scale is zero stay. */
static int64_t select_weighted_rows(const RhProblem* problem, int correction) {
  const RhBatchData* d = &problem->data;
  const double* c = problem->ws->curvature;
  int64_t* rows = problem->ws->row_list;
  double* scale = problem->ws->row_scale;
  int64_t m = 0;
  for (int64_t i = 0; i < d->n_rows; ++i) {
    double w = weight_of(d, i);
    if (w != 0.0) {
      rows[m] = i;
      scale[m] = correction ? w * (1.0 - c[i]) : w * c[i];
      ++m;
    }
  }
  return m;
}

void rh_gram_and_meat(RhProblem* problem, int reuse_weighted, double* gram, double* meat) {
  RhWorkspace* ws = problem->ws;
  const int64_t n = problem->data.n_rows;
  const int64_t P = problem->P;
  int64_t curved = 0, not_flat = 0;
  count_curvature(ws->curvature, n, &curved, &not_flat);
  /* The correction form of rh_gram_at_curvature only where G_w is at hand already: computing
   * it here would cost a third product. */
  const int correction = curved > not_flat && reuse_weighted && ws->gram_weighted_ready;
  const int64_t m = select_weighted_rows(problem, correction);

  const int64_t groups = (P + RH_PANEL_WIDTH - 1) / RH_PANEL_WIDTH;
  const int64_t width = groups * RH_PANEL_WIDTH;
  const int64_t pack_size = 4 * (int64_t)RH_MEAT_DEPTH * width; /* the workspace's 2 x 128 */
  const int64_t partial_size = width * width;
  const int64_t n_super = m > 0 ? (m + RH_GRAM_SUPERBLOCK - 1) / RH_GRAM_SUPERBLOCK : 0;
  double* packs = align_to_cache_line(ws->gram_pack);
  double* partials = align_to_cache_line(ws->gram_partial);
  double* meat_partials = align_to_cache_line(ws->meat_partial);

  const int parallel = n_super > 1 && m * P * P >= RH_PARALLEL_MIN_GRAM_WORK;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t s = 0; s < n_super; ++s) {
    int64_t first = s * RH_GRAM_SUPERBLOCK;
    int64_t last = first + RH_GRAM_SUPERBLOCK < m ? first + RH_GRAM_SUPERBLOCK : m;
    super_block_gram_and_meat(problem, first, last, groups, packs + s * pack_size,
                              partials + s * partial_size, meat_partials + s * partial_size);
  }
  reduce_partials(partials, n_super, P, width, gram);
  reduce_partials(meat_partials, n_super, P, width, meat);
  if (correction) {
    for (int64_t k = 0; k < P * P; ++k) {
      gram[k] = ws->gram_weighted[k] - gram[k];
    }
  }
}
