/* LAMM proximal steps for penalty L1 (docs/algorithm.md, "Solvers", "Penalised"):
 * RH_LAMM_ATTEMPTS attempts per iteration with phi doubling on rejection, then
 * RH_LAMM_BOUND_ATTEMPTS more from the curvature bound of f's Hessian; phi = max(phi / 2,
 * RH_LAMM_PHI_FLOOR) on acceptance, phi reset to 1 per batch. */
#include <inttypes.h>

#include "huber_pieces.h"
#include "lamm_bound.h"
#include "rh_algorithm.h"
#include "solver_common.h"

/* sum_i w_i ||x_i||^2 of rows [first, last) for one dtype, the appended intercept column
 * counted as ones. */
#define RH_WEIGHTED_SQUARES(T)                                                            \
  static double weighted_squares_##T(const RhBatchData* d, int64_t first, int64_t last) { \
    const T* x = (const T*)d->x;                                                          \
    const T* w = (const T*)d->weights;                                                    \
    const int64_t m = d->n_columns;                                                       \
    double total = 0.0;                                                                   \
    for (int64_t i = first; i < last; ++i) {                                              \
      const T* xi = x + i * m;                                                            \
      double row = d->append_intercept ? 1.0 : 0.0;                                       \
      for (int64_t j = 0; j < m; ++j) {                                                   \
        row += (double)xi[j] * (double)xi[j];                                             \
      }                                                                                   \
      total += (w != NULL ? (double)w[i] : 1.0) * row;                                    \
    }                                                                                     \
    return total;                                                                         \
  }
RH_WEIGHTED_SQUARES(float)
RH_WEIGHTED_SQUARES(double)
#undef RH_WEIGHTED_SQUARES

/* rh_lamm_phi_bound for this batch: only a solve whose doublings ran out needs it, so the pass
 * over X it takes never touches the usual path. */
static double curvature_bound(const RhProblem* problem) {
  const RhBatchData* d = &problem->data;
  const int64_t P = problem->P;
  /* Fixed row blocks added in block order, as in row_pass.c: the bound, and so every result
   * after it, does not depend on the thread count. */
  const int64_t n = d->n_rows;
  const int64_t n_blocks = (n + RH_ROW_BLOCK - 1) / RH_ROW_BLOCK;
  double* partial = problem->ws->block_loss;
  const int parallel = n_blocks > 1 && n * d->n_columns >= RH_PARALLEL_MIN_ROW_WORK;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t first = b * RH_ROW_BLOCK;
    const int64_t last = first + RH_ROW_BLOCK < n ? first + RH_ROW_BLOCK : n;
    partial[b] = d->dtype == RH_CUDA_DTYPE_FLOAT32 ? weighted_squares_float(d, first, last)
                                                   : weighted_squares_double(d, first, last);
  }
  double squares = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    squares += partial[b];
  }
  double trace = 0.0;
  for (int64_t j = 0; j < P; ++j) {
    trace += problem->ws->information[j * P + j];
  }
  return rh_lamm_phi_bound(squares, trace, problem->total_weight);
}

RhCudaStatus rh_solve_lamm(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  RhLammBound bound;
  rh_lamm_bound_start(&bound, problem);
  double objective = 0.0;
  RhObjectiveParts parts = {0.0, 0.0, 0.0}, candidate_parts = {0.0, 0.0, 0.0};
  RH_TRY(rh_start_at_previous_parts(problem, &objective, &parts, bound.state.j_delta, err));
  double phi = RH_LAMM_INITIAL_PHI;
  double phi_bound = 0.0; /* rh_lamm_phi_bound, once some iteration has needed it */
  int have_phi_bound = 0;
  result->converged = 0;
  for (int64_t it = 1; it <= problem->max_iter; ++it) {
    result->iterations = it;
    int accepted = 0, zero_step = 0;
    double candidate_objective = 0.0, attempt_phi = phi, squared = 0.0;
    double* delta = ws->step;
    for (int attempt = 0; attempt < RH_LAMM_ATTEMPTS + RH_LAMM_BOUND_ATTEMPTS; ++attempt) {
      if (attempt == RH_LAMM_ATTEMPTS) {
        /* Doublings that ran out from phi are a badly scaled problem, not an optimum: from the
         * bound on f's Hessian the attempt majorises in exact arithmetic. */
        if (!have_phi_bound) {
          phi_bound = curvature_bound(problem);
          have_phi_bound = 1;
        }
        phi = phi > phi_bound ? phi : phi_bound;
      }
      attempt_phi = phi;
      double inner = 0.0;
      squared = 0.0;
      zero_step = 1;
      for (int64_t j = 0; j < P; ++j) {
        /* The mask keeps the intercept unthresholded. */
        double threshold = problem->lambda / phi * ws->mask[j];
        ws->candidate[j] = rh_working_value(
            problem, rh_soft_threshold(ws->beta[j] - ws->gradient[j] / phi, threshold));
        delta[j] = ws->candidate[j] - ws->beta[j];
        zero_step = zero_step && delta[j] == 0.0;
        inner += ws->gradient[j] * delta[j];
        squared += delta[j] * delta[j];
      }
      double upper = rh_lamm_upper(objective, inner, phi, squared);
      if (zero_step) {
        /* candidate == beta bit for bit: f(candidate) = F <= F + 0 + RH_LAMM_SLACK, and its
         * gradient and curvature are the current ones. */
        candidate_objective = objective;
        candidate_parts = parts;
        accepted = 1;
        break;
      }
      if (rh_lamm_rejection_certain(problem, &bound, &parts, upper)) {
        phi *= 2.0;
        continue;
      }
      /* Every evaluated attempt also forms the gradient and curvature: they ride along in the
       * same pass over X, where computing them after a late acceptance would cost another
       * pass. */
      candidate_objective =
          rh_objective_parts(problem, ws->candidate, ws->gradient_next, ws->curvature_next,
                             &candidate_parts, bound.state.j_delta_next);
      if (rh_lamm_accepts(candidate_objective, upper)) {
        accepted = 1;
        break;
      }
      phi *= 2.0;
    }
    if (!accepted) {
      /* Even the bound's attempts rejected: beta is optimal when the decrease the last
       * attempt's model guaranteed is within rounding of F. */
      result->converged =
          rh_within_rounding(0.5 * attempt_phi * squared, objective, problem->machine_eps);
      result->objective = objective;
      return RH_CUDA_SUCCESS;
    }
    rh_swap_buffers(&ws->beta, &ws->candidate);
    if (!zero_step) {
      rh_swap_buffers(&ws->gradient, &ws->gradient_next);
      rh_swap_buffers(&ws->curvature, &ws->curvature_next);
      rh_lamm_bound_advance(&bound);
    }
    objective = candidate_objective;
    parts = candidate_parts;
    phi = rh_lamm_relaxed_phi(phi);
    if (!rh_all_finite(ws->beta, P) || !isfinite(objective)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                     "LAMM iterate is not finite at iteration %" PRId64, it);
    }
    if (rh_step_converged(rh_norm2(delta, P), rh_norm2(ws->beta, P), problem->tolerance)) {
      result->converged = 1;
      break;
    }
  }
  result->objective = objective;
  return RH_CUDA_SUCCESS;
}
