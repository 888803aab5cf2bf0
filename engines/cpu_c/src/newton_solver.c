/* Damped Newton for penalty NONE (spec/ALGORITHM.md): 27 halvings, plain non-increase. */
#include <inttypes.h>

#include "solver_common.h"

/* H = (G + J) / N + ridge I, with G = X' diag(w c) X at the current curvature. */
static void build_hessian(RhProblem* problem) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double inv_n = 1.0 / problem->total_weight;
  rh_gram_at_curvature(problem, 1, ws->gram);
  for (int64_t k = 0; k < P * P; ++k) {
    ws->hessian[k] = (ws->gram[k] + ws->information[k]) * inv_n;
  }
  for (int64_t j = 0; j < P; ++j) {
    ws->hessian[j * P + j] += problem->ridge;
  }
}

RhCudaStatus rh_solve_newton(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  double objective = 0.0;
  RH_TRY(rh_start_at_previous(problem, &objective, err));
  result->converged = 0;
  for (int64_t it = 1; it <= problem->max_iter; ++it) {
    result->iterations = it;
    build_hessian(problem);
    rh_dense_solve(ws->hessian, ws->gradient, P, problem->machine_eps, ws, ws->step,
                   &problem->used_fallback);
    if (!rh_all_finite(ws->step, P)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                     "Newton step is not finite at iteration %" PRId64, it);
    }
    int accepted = 0;
    double candidate_objective = 0.0;
    double t = 1.0;
    /* t = 1, 1/2, ..., 2^-26: every trial also forms the gradient and curvature the next
     * iteration needs; they ride along in the same pass over X, where computing them after a
     * later acceptance would cost another pass. */
    for (int trial = 0; trial < 27; ++trial, t *= 0.5) {
      for (int64_t j = 0; j < P; ++j) {
        ws->candidate[j] = rh_working_value(problem, ws->beta[j] - t * ws->step[j]);
      }
      candidate_objective =
          rh_objective(problem, ws->candidate, ws->gradient_next, ws->curvature_next);
      if (candidate_objective <= objective) {
        accepted = 1;
        break;
      }
    }
    if (!accepted) {
      result->objective = objective;
      return RH_CUDA_SUCCESS;
    }
    double* delta = ws->step;
    for (int64_t j = 0; j < P; ++j) {
      delta[j] = ws->candidate[j] - ws->beta[j];
    }
    rh_swap_buffers(&ws->beta, &ws->candidate);
    rh_swap_buffers(&ws->gradient, &ws->gradient_next);
    rh_swap_buffers(&ws->curvature, &ws->curvature_next);
    objective = candidate_objective;
    if (!rh_all_finite(ws->beta, P) || !isfinite(objective)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                     "Newton iterate is not finite at iteration %" PRId64, it);
    }
    if (rh_norm2(delta, P) <= problem->tolerance * (1.0 + rh_norm2(ws->beta, P))) {
      result->converged = 1;
      break;
    }
  }
  result->objective = objective;
  return RH_CUDA_SUCCESS;
}
