/* LAMM's float32 rejection bound (lamm_bound.h states what it bounds and why): the batch's
 * sizes, J's row sums, the iterate's terms and the test itself. */
#include "lamm_bound.h"

#include <float.h>

#include "rh_algorithm.h"
#include "vec8.h"

/* The batch's sizes for one dtype, as cheaply as a pass over X allows: sum_i w_i |x_ij| is
 * accumulated in vectors across rows, and max_i ||x_i||_1 is bounded by n_columns max |x_ij|
 * (plus the intercept). Threads split the rows; the order of the sums only moves the last bits
 * of a bound with a factor 4 to spare, and no result depends on it. */
#if RH_HAVE_VECTORS
#define RH_MASS_VECTOR(LOAD8)                          \
  for (; j + 8 <= m; j += 8) {                         \
    const RhVec8 v = rh_vec8_abs(LOAD8(xi + j));       \
    acc += rh_vec8_splat(wi) * v;                      \
    largest = rh_vec8_select(v > largest, v, largest); \
  }
#define RH_MASS_FINISH                                           \
  local_x += rh_vec8_sum(acc);                                   \
  for (int l = 0; l < 8; ++l) {                                  \
    local_max = largest[l] > local_max ? largest[l] : local_max; \
  }
#define RH_MASS_START RhVec8 acc = rh_vec8_zero(), largest = rh_vec8_zero();
#else
#define RH_MASS_VECTOR(LOAD8)
#define RH_MASS_FINISH
#define RH_MASS_START
#endif
#define RH_BATCH_MASS(T, LOAD8)                                                         \
  RH_MULTIVERSION static void batch_mass_##T(const RhBatchData* d, RhBatchMass* mass) { \
    const T* x = (const T*)d->x;                                                        \
    const T* y = (const T*)d->y;                                                        \
    const T* w = (const T*)d->weights;                                                  \
    const int64_t m = d->n_columns, n = d->n_rows;                                      \
    const int prefetch = m * (int64_t)sizeof(T) <= 512;                                 \
    double weighted_x = 0.0, largest_x = 0.0, weighted_y = 0.0, total_w = 0.0;          \
    _Pragma("omp parallel if (n * m >= RH_PARALLEL_MIN_ROW_WORK)") {                    \
      double local_x = 0.0, local_max = 0.0, local_y = 0.0, local_w = 0.0;              \
      RH_MASS_START                                                                     \
      _Pragma("omp for schedule(static)") for (int64_t i = 0; i < n; ++i) {             \
        const T* xi = x + i * m;                                                        \
        /* Narrow rows defeat the hardware prefetcher, as in row_pass_typed.h. */       \
        if (prefetch && (i & 7) == 0 && i + 24 <= n) {                                  \
          const char* ahead = (const char*)(x + (i + 16) * m);                          \
          for (int64_t k = 0; k < 8 * m * (int64_t)sizeof(T); k += 64) {                \
            __builtin_prefetch(ahead + k);                                              \
          }                                                                             \
        }                                                                               \
        const double wi = w != NULL ? (double)w[i] : 1.0;                               \
        int64_t j = 0;                                                                  \
        RH_MASS_VECTOR(LOAD8)                                                           \
        for (; j < m; ++j) {                                                            \
          const double v = fabs((double)xi[j]);                                         \
          local_x += wi * v;                                                            \
          local_max = v > local_max ? v : local_max;                                    \
        }                                                                               \
        local_y += wi * fabs((double)y[i]);                                             \
        local_w += wi;                                                                  \
      }                                                                                 \
      RH_MASS_FINISH                                                                    \
      _Pragma("omp critical(rh_batch_mass)") {                                          \
        weighted_x += local_x;                                                          \
        weighted_y += local_y;                                                          \
        total_w += local_w;                                                             \
        largest_x = local_max > largest_x ? local_max : largest_x;                      \
      }                                                                                 \
    }                                                                                   \
    const double intercept = d->append_intercept ? 1.0 : 0.0;                           \
    mass->weighted_x = (weighted_x + intercept * total_w) * (1.0 + 1e-12);              \
    mass->max_row_x = ((double)m * largest_x + intercept) * (1.0 + 1e-12);              \
    mass->weighted_y = weighted_y * (1.0 + 1e-12);                                      \
    mass->ready = 1;                                                                    \
  }
RH_BATCH_MASS(float, rh_vec8_load_f32)
RH_BATCH_MASS(double, rh_vec8_load)
#undef RH_BATCH_MASS
#undef RH_MASS_VECTOR
#undef RH_MASS_FINISH
#undef RH_MASS_START

static void measure_batch_mass(const RhProblem* problem, RhBatchMass* mass) {
  if (problem->data.dtype == RH_CUDA_DTYPE_FLOAT32) {
    batch_mass_float(&problem->data, mass);
  } else {
    batch_mass_double(&problem->data, mass);
  }
}

/* ws->bound_terms, 6 x P: */
enum {
  RH_BOUND_SCORE,       /* s, rebuilt from g */
  RH_BOUND_SYMMETRIC,   /* (J + J') delta */
  RH_BOUND_WEIGHT,      /* each coordinate's absolute weight in the bound's rounding */
  RH_BOUND_ROWS,        /* sum_k |J_ik|, per batch */
  RH_BOUND_J_DELTA,     /* J delta at beta, kept by the row pass's evaluation */
  RH_BOUND_J_DELTA_NEXT /* J delta at the candidate evaluated last */
};

/* sum_k |J_ik| per row: |v' J v| <= ||v||_inf sum_i |v_i| (that sum), and |J| |v| <= (that
 * sum) ||v||_inf. J is fixed for the batch. Returns whether J is bitwise symmetric (the
 * normal case), where J' delta is J delta. */
RH_MULTIVERSION static int measure_information_rows(const RhWorkspace* ws, int64_t P) {
  double* rows = ws->bound_terms + RH_BOUND_ROWS * P;
  const double* information = ws->information;
  int symmetric = 1;
  for (int64_t i = 0; i < P && symmetric; ++i) {
    for (int64_t k = 0; k < i; ++k) {
      if (information[i * P + k] != information[k * P + i]) {
        symmetric = 0;
        break;
      }
    }
  }
  for (int64_t i = 0; i < P; ++i) {
    const double* row = information + i * P;
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= P; k += 8) {
      for (int l = 0; l < 8; ++l) {
        lanes[l] += fabs(row[k + l]);
      }
    }
    for (; k < P; ++k) {
      lanes[0] += fabs(row[k]);
    }
    double total = 0.0;
    for (int l = 0; l < 8; ++l) {
      total += lanes[l];
    }
    rows[i] = total * (1.0 + 1e-12);
  }
  return symmetric;
}

/* The per-iterate terms from J delta at beta (kept by its evaluation): O(P) for a symmetric J,
 * O(P^2) for an asymmetric one (J' delta). */
static void prepare_bound(const RhProblem* problem, RhBoundState* bound) {
  const RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double n_total = problem->total_weight;
  double* s = ws->bound_terms + RH_BOUND_SCORE * P;
  double* sym = ws->bound_terms + RH_BOUND_SYMMETRIC * P;
  double* weight = ws->bound_terms + RH_BOUND_WEIGHT * P;
  const double* rows = ws->bound_terms + RH_BOUND_ROWS * P;
  const double* j_delta = bound->j_delta;
  double largest = 0.0, largest_delta = 0.0, abs_linear = 0.0, row_weighted_delta = 0.0;
  for (int64_t k = 0; k < P; ++k) {
    const double delta = ws->beta[k] - ws->beta0[k];
    largest = fabs(ws->beta[k]) > largest ? fabs(ws->beta[k]) : largest;
    largest_delta = fabs(delta) > largest_delta ? fabs(delta) : largest_delta;
    abs_linear += fabs(ws->history[k] * delta);
    row_weighted_delta += rows[k] * fabs(delta);
  }
  for (int64_t i = 0; i < P; ++i) {
    s[i] = j_delta[i] - n_total * (ws->gradient[i] + ws->history[i]);
    sym[i] = j_delta[i];
    /* |J| |delta| both ways (Q's rounding), then the sizes the rebuild of s rounds. */
    weight[i] = 2.0 * rows[i] * largest_delta + fabs(j_delta[i]) +
                n_total * (fabs(ws->gradient[i]) + fabs(ws->history[i]));
  }
  if (bound->symmetric) {
    for (int64_t i = 0; i < P; ++i) {
      sym[i] += j_delta[i];
    }
  } else {
    /* J' delta, row by row. |J|' |delta| <= ||J||_inf-of-columns ||delta||_inf is not kept,
     * so its rounding weight is added here exactly. */
    for (int64_t i = 0; i < P; ++i) {
      const double* row = ws->information + i * P;
      const double delta = ws->beta[i] - ws->beta0[i];
      for (int64_t k = 0; k < P; ++k) {
        sym[k] += row[k] * delta;
        weight[k] += fabs(row[k] * delta);
      }
    }
  }
  bound->largest_beta = largest;
  bound->abs_quadratic = largest_delta * row_weighted_delta;
  bound->abs_linear = abs_linear;
  bound->ready = 1;
}

/* step' J step and |step|' |J| |step|, one eight-double vector per row chunk, over the rows
 * where step is non-zero. */
RH_MULTIVERSION static void step_quadratic(const double* information, const double* step, int64_t P,
                                           double* value, double* size) {
  double total = 0.0, abs_total = 0.0;
  for (int64_t i = 0; i < P; ++i) {
    const double si = step[i];
    if (si == 0.0) {
      continue;
    }
    const double* row = information + i * P;
    double row_value = 0.0, row_size = 0.0;
    int64_t k = 0;
#if RH_HAVE_VECTORS
    RhVec8 acc = rh_vec8_zero(), abs_acc = rh_vec8_zero();
    for (; k + 8 <= P; k += 8) {
      const RhVec8 term = rh_vec8_load(row + k) * rh_vec8_load(step + k);
      acc += term;
      abs_acc += rh_vec8_abs(term);
    }
    row_value = rh_vec8_sum(acc);
    row_size = rh_vec8_sum(abs_acc);
#endif
    for (; k < P; ++k) {
      row_value += row[k] * step[k];
      row_size += fabs(row[k] * step[k]);
    }
    total += si * row_value;
    abs_total += fabs(si) * row_size;
  }
  *value = total;
  *size = abs_total;
}

/* rh_lamm_rejection_certain once the batch's and the iterate's terms are ready. */
static int rejection_certain(const RhProblem* problem, const RhBatchMass* mass,
                             const RhBoundState* bound, const RhObjectiveParts* at_beta,
                             double upper) {
  const RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double u = DBL_EPSILON / 2.0;
  const double* s = ws->bound_terms + RH_BOUND_SCORE * P;
  const double* sym = ws->bound_terms + RH_BOUND_SYMMETRIC * P;
  const double* weight = ws->bound_terms + RH_BOUND_WEIGHT * P;
  double s_step = 0.0, sym_step = 0.0, history_step = 0.0, weighted_step = 0.0;
  double abs_history_step = 0.0, largest_step = 0.0, row_weighted_step = 0.0;
  const double* information_rows = ws->bound_terms + RH_BOUND_ROWS * P;
  for (int64_t j = 0; j < P; ++j) {
    const double step = ws->step[j], abs_step = fabs(step);
    row_weighted_step += information_rows[j] * abs_step;
    s_step += s[j] * step;
    sym_step += sym[j] * step;
    history_step += ws->history[j] * step;
    weighted_step += weight[j] * abs_step;
    abs_history_step += fabs(ws->history[j]) * abs_step;
    largest_step = abs_step > largest_step ? abs_step : largest_step;
  }
  /* Summation depths: a dot or J-row sum adds at most P + 16 terms in sequence, Q's double
   * sum 2P + 16; row_pass.c adds each row's loss and score at most RH_ROW_BLOCK + 16 times
   * within its block (lanes of eight, then the lanes), then once per block. */
  const double n_blocks = (double)((problem->data.n_rows + RH_ROW_BLOCK - 1) / RH_ROW_BLOCK);
  const double gamma_dot = (2.0 * (double)P + 16.0) * u;
  const double gamma_sum = ((double)RH_ROW_BLOCK + 16.0 + n_blocks) * u;
  const double tau = problem->tau;
  /* sum_i w_i a_i, a_i = |y_i| + sum_j |x_ij b_j| >= |r_i| for b = beta and b = candidate;
   * residuals err by gamma_dot a_i, psi is tau-bounded and 1-Lipschitz, rho is tau-Lipschitz
   * and at most tau |r|. */
  const double largest = bound->largest_beta + largest_step;
  const double residual_mass = mass->weighted_y + largest * mass->weighted_x;
  const double two_passes = 2.0 * tau * residual_mass * (gamma_dot + gamma_sum);
  const double score = largest_step * (gamma_dot * mass->max_row_x * residual_mass +
                                       gamma_sum * tau * mass->weighted_x);
  const double coordinates = (gamma_dot + 8.0 * u) * weighted_step;
  double loss_bound =
      at_beta->loss - s_step -
      4.0 * (two_passes + score + coordinates + 2.0 * u * (fabs(at_beta->loss) + fabs(s_step)));
  if (!(loss_bound > 0.0)) {
    loss_bound = 0.0; /* a sum of w rho >= 0 */
  }
  const double linear_bound =
      at_beta->linear + history_step +
      4.0 * (gamma_dot * (2.0 * bound->abs_linear + 2.0 * abs_history_step) +
             2.0 * u * (fabs(at_beta->linear) + fabs(history_step)));
  /* Q's bound for a given step' J step (and its absolute size). */
#define RH_QUADRATIC_BOUND(value, size)                                                   \
  (at_beta->quadratic + sym_step + (value) -                                              \
   4.0 * (gamma_dot * (2.0 * bound->abs_quadratic + 3.0 * weighted_step + 3.0 * (size)) + \
          coordinates + 2.0 * u * (fabs(at_beta->quadratic) + fabs(sym_step) + fabs(value))))
  const double limit = upper + RH_LAMM_SLACK;
  /* step' J step lies in [-A, A]: certain with -A, hopeless with +A (no size error), and
   * in between, rarely, the O(P^2) value decides. */
  const double a = largest_step * row_weighted_step;
  if (rh_assemble_objective(problem, loss_bound, RH_QUADRATIC_BOUND(-a, a), linear_bound) > limit) {
    return 1;
  }
  if (!(rh_assemble_objective(problem, loss_bound, at_beta->quadratic + sym_step + a,
                              linear_bound) > limit)) {
    return 0;
  }
  double step_j_step = 0.0, step_j_step_size = 0.0;
  step_quadratic(ws->information, ws->step, P, &step_j_step, &step_j_step_size);
  return rh_assemble_objective(problem, loss_bound,
                               RH_QUADRATIC_BOUND(step_j_step, step_j_step_size),
                               linear_bound) > limit;
#undef RH_QUADRATIC_BOUND
}

void rh_lamm_bound_start(RhLammBound* bound, const RhProblem* problem) {
  const RhLammBound none = {0, {0, 0.0, 0.0, 0.0}, {0, 0, NULL, NULL, 0.0, 0.0, 0.0}};
  *bound = none;
  bound->enabled = problem->data.dtype == RH_CUDA_DTYPE_FLOAT32;
  if (bound->enabled) {
    bound->state.j_delta = problem->ws->bound_terms + RH_BOUND_J_DELTA * problem->P;
    bound->state.j_delta_next = problem->ws->bound_terms + RH_BOUND_J_DELTA_NEXT * problem->P;
  }
}

int rh_lamm_rejection_certain(const RhProblem* problem, RhLammBound* bound,
                              const RhObjectiveParts* at_beta, double upper) {
  if (!bound->enabled) {
    return 0;
  }
  if (!bound->mass.ready) {
    measure_batch_mass(problem, &bound->mass);
    bound->state.symmetric = measure_information_rows(problem->ws, problem->P);
  }
  if (!bound->state.ready) {
    prepare_bound(problem, &bound->state);
  }
  return rejection_certain(problem, &bound->mass, &bound->state, at_beta, upper);
}

void rh_lamm_bound_advance(RhLammBound* bound) {
  if (bound->enabled) {
    rh_swap_buffers(&bound->state.j_delta, &bound->state.j_delta_next);
    bound->state.ready = 0;
  }
}
