/* LAMM proximal steps for penalty L1 (spec/ALGORITHM.md): 40 attempts per iteration, phi
 * doubling on rejection, phi = max(phi / 2, 1e-8) on acceptance, phi reset to 1 per batch. */
#include <inttypes.h>

#include "huber_pieces.h"
#include "solver_common.h"

RhCudaStatus rh_solve_lamm(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  double objective = 0.0;
  RH_TRY(rh_start_at_previous(problem, &objective, err));
  double phi = 1.0;
  result->converged = 0;
  for (int64_t it = 1; it <= problem->max_iter; ++it) {
    result->iterations = it;
    int accepted = 0;
    double candidate_objective = 0.0;
    double* delta = ws->step;
    for (int attempt = 0; attempt < 40; ++attempt) {
      double inner = 0.0, squared = 0.0;
      for (int64_t j = 0; j < P; ++j) {
        /* The mask keeps the intercept unthresholded. */
        double threshold = problem->lambda / phi * ws->mask[j];
        ws->candidate[j] = rh_working_value(
            problem, rh_soft_threshold(ws->beta[j] - ws->gradient[j] / phi, threshold));
        delta[j] = ws->candidate[j] - ws->beta[j];
        inner += ws->gradient[j] * delta[j];
        squared += delta[j] * delta[j];
      }
      double upper = objective + inner + phi * squared / 2.0;
      /* Every attempt also forms the gradient and curvature: they ride along in the same
       * pass over X, where computing them after a late acceptance would cost another pass. */
      candidate_objective =
          rh_objective(problem, ws->candidate, ws->gradient_next, ws->curvature_next);
      if (candidate_objective <= upper + 1e-12) {
        accepted = 1;
        break;
      }
      phi *= 2.0;
    }
    if (!accepted) {
      result->objective = objective;
      return RH_CUDA_SUCCESS;
    }
    rh_swap_buffers(&ws->beta, &ws->candidate);
    rh_swap_buffers(&ws->gradient, &ws->gradient_next);
    rh_swap_buffers(&ws->curvature, &ws->curvature_next);
    objective = candidate_objective;
    phi = phi / 2.0 > 1e-8 ? phi / 2.0 : 1e-8;
    if (!rh_all_finite(ws->beta, P) || !isfinite(objective)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                     "LAMM iterate is not finite at iteration %" PRId64, it);
    }
    if (rh_norm2(delta, P) <= problem->tolerance * (1.0 + rh_norm2(ws->beta, P))) {
      result->converged = 1;
      break;
    }
  }
  result->objective = objective;
  return RH_CUDA_SUCCESS;
}
