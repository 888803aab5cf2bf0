/* Damped Newton for penalty NONE with the majoriser fallback (docs/algorithm.md, "Solvers",
 * "Unpenalised"): RH_LINE_SEARCH_TRIALS halvings under plain non-increase; when all of them
 * are rejected, the same search on the step of a matrix that majorises f. */
#include <inttypes.h>
#include <string.h>

#include "rh_algorithm.h"
#include "solver_common.h"

/* ws->hessian = (ws->gram + J) / N + ridge I. */
static void finish_matrix(RhProblem* problem) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double inv_n = 1.0 / problem->total_weight;
  for (int64_t k = 0; k < P * P; ++k) {
    ws->hessian[k] = (ws->gram[k] + ws->information[k]) * inv_n;
  }
  for (int64_t j = 0; j < P; ++j) {
    ws->hessian[j * P + j] += problem->ridge;
  }
}

/* H with G = X' diag(w c) X at the current curvature. */
static void build_hessian(RhProblem* problem) {
  rh_gram_at_curvature(problem, 1, problem->ws->gram);
  finish_matrix(problem);
}

/* M with G = X' diag(w m(r)) X at beta. Only a rejected Newton step gets here, so the extra
 * pass for the residuals costs nothing where Newton works; curvature_next is free until the
 * line search below refills it, and ws->curvature stays c(r) at beta for the information. */
static void build_majoriser(RhProblem* problem) {
  RhWorkspace* ws = problem->ws;
  rh_majoriser_row_weights(problem, ws->beta, ws->curvature, ws->curvature_next);
  rh_gram_at_row_weights(problem, ws->curvature_next, ws->gram);
  finish_matrix(problem);
}

/* ws->step = ws->hessian^{-1} ws->gradient; *truncated (when not NULL): the SVD dropped
 * singular values (rh_dense_solve). */
static RhCudaStatus solve_step(RhProblem* problem, const char* which, int64_t it, int* truncated,
                               RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  const int dropped = rh_dense_solve(ws->hessian, ws->gradient, problem->P, problem->ladder_eps, ws,
                                     ws->step, &problem->used_fallback);
  if (truncated != NULL) {
    *truncated = dropped;
  }
  if (!rh_all_finite(ws->step, problem->P)) {
    return rh_fail(err, RH_CUDA_NUMERICAL_ERROR, "%s step is not finite at iteration %" PRId64,
                   which, it);
  }
  return RH_CUDA_SUCCESS;
}

/* The first of beta - t step, t = 1, 1/2, ..., with f <= F (f < F when strict) into
 * ws->candidate (and its f into *candidate_objective), returning its trial number (1 for the
 * full step); 0 when every trial is rejected. Every trial also forms the gradient
 * and curvature the next iteration needs: they ride along in the same pass over X, where
 * computing them after a later acceptance would cost another pass. */
static int line_search(const RhProblem* problem, double objective, int strict,
                       double* candidate_objective) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  double t = 1.0;
  for (int trial = 0; trial < RH_LINE_SEARCH_TRIALS; ++trial, t *= 0.5) {
    for (int64_t j = 0; j < P; ++j) {
      ws->candidate[j] = rh_working_value(problem, ws->beta[j] - t * ws->step[j]);
    }
    *candidate_objective =
        rh_objective(problem, ws->candidate, ws->gradient_next, ws->curvature_next);
    if (*candidate_objective < objective || (*candidate_objective == objective && !strict)) {
      return trial + 1;
    }
  }
  return 0;
}

static int all_zero(const double* v, int64_t P) {
  for (int64_t j = 0; j < P; ++j) {
    if (v[j] != 0.0) {
      return 0;
    }
  }
  return 1;
}

/* Rule 3's test of ws->step as a direction at ws->beta (rh_rejected_direction_converged): the
 * decrease it predicts, g'd / 2, within rounding of F, or the direction itself short enough to
 * pass the step test. */
static int direction_converged(const RhProblem* problem, double objective) {
  const RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  double predicted = 0.0;
  for (int64_t j = 0; j < P; ++j) {
    predicted += ws->gradient[j] * ws->step[j];
  }
  return rh_rejected_direction_converged(0.5 * predicted, objective, problem->machine_eps,
                                         rh_norm2(ws->step, P), rh_norm2(ws->beta, P),
                                         problem->tolerance);
}

/* The majoriser's direction at the accepted ws->beta into ws->step, and whether it passes rule
 * 3's test: the confirmation of docs/algorithm.md ("Unpenalised", rule 5) that a step along a
 * truncated Newton direction needs before it ends the solve. ws->gradient and ws->curvature are
 * the new beta's. */
static RhCudaStatus majoriser_confirms(RhProblem* problem, double objective, int64_t it,
                                       int* confirmed, RhErrorBuffer* err) {
  build_majoriser(problem);
  RH_TRY(solve_step(problem, "majoriser", it, NULL, err));
  *confirmed = direction_converged(problem, objective);
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_solve_newton(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  double objective = 0.0;
  RH_TRY(rh_start_at_previous(problem, &objective, err));
  result->converged = 0;
  /* ws->step holds the majoriser's direction at beta that a confirmation refused to end the
   * solve on: the next iteration searches along it instead of solving with H. */
  int pending = 0;
  for (int64_t it = 1; it <= problem->max_iter; ++it) {
    result->iterations = it;
    double candidate_objective = 0.0;
    int accepted = 0;
    int newton_truncated = 0; /* the step is along a Newton direction the SVD truncated */
    if (pending) {
      pending = 0;
      accepted = line_search(problem, objective, 0, &candidate_objective);
    } else {
      build_hessian(problem);
      RH_TRY(solve_step(problem, "Newton", it, &newton_truncated, err));
      accepted = line_search(problem, objective, 0, &candidate_objective);
      /* A zero Newton direction (a singular H, e.g. ridge 0 with every residual beyond
       * tau + h) gives way to a majoriser step that strictly decreases f; without one the zero
       * step stands (beta is then optimal to rounding). */
      const int stalled = accepted && all_zero(ws->step, P);
      if (!accepted || stalled) {
        newton_truncated = 0;
        build_majoriser(problem);
        RH_TRY(solve_step(problem, "majoriser", it, NULL, err));
        accepted = line_search(problem, objective, stalled, &candidate_objective);
        if (stalled && !accepted) {
          /* Back to the zero step: candidate = beta, with its f; the gradient and curvature
           * at beta are the current ones. */
          memcpy(ws->candidate, ws->beta, (size_t)P * sizeof(double));
          memcpy(ws->gradient_next, ws->gradient, (size_t)P * sizeof(double));
          memcpy(ws->curvature_next, ws->curvature, (size_t)problem->data.n_rows * sizeof(double));
          candidate_objective = objective;
          accepted = 1;
        }
      }
    }
    if (!accepted) {
      /* No representable step along the majoriser's direction decreases f: beta is optimal
       * when that direction passes rule 3's test. */
      result->converged = direction_converged(problem, objective);
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
    /* A step the line search cut short ends the solve only when it also changed f by at most
     * tol |f|: short because of the cut, it says nothing of the distance to the optimum, which
     * a first-order decrease of f reveals. */
    const int settled =
        accepted == 1 || rh_decrease_settled(objective, candidate_objective, problem->tolerance);
    objective = candidate_objective;
    if (!rh_all_finite(ws->beta, P) || !isfinite(objective)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                     "Newton iterate is not finite at iteration %" PRId64, it);
    }
    if (settled &&
        rh_step_converged(rh_norm2(delta, P), rh_norm2(ws->beta, P), problem->tolerance)) {
      /* A direction the SVD truncated ignores g's part in the dropped directions, so its short
       * step says nothing of the distance to the optimum: the majoriser, whose matrix weights
       * every row, confirms it or gives the next iteration's direction. */
      int confirmed = 1;
      if (newton_truncated) {
        RH_TRY(majoriser_confirms(problem, objective, it, &confirmed, err));
      }
      if (confirmed) {
        result->converged = 1;
        break;
      }
      pending = 1;
    }
  }
  result->objective = objective;
  return RH_CUDA_SUCCESS;
}
