/* LAMM proximal steps for penalty L1 (spec/ALGORITHM.md): 40 attempts per iteration, phi
 * doubling on rejection, phi = max(phi / 2, 1e-8) on acceptance, phi reset to 1 per batch. */
#include <float.h>
#include <inttypes.h>

#include "huber_pieces.h"
#include "solver_common.h"

/* Absolute sizes of the batch that bound the rounding error of a row pass: sum_i w_i ||x_i||_1
 * and max_i ||x_i||_1 (the appended intercept column counted as ones), sum_i w_i |y_i|. */
typedef struct RhBatchMass {
  int ready;
  double weighted_x;
  double max_row_x;
  double weighted_y;
} RhBatchMass;

static void measure_batch_mass(const RhProblem* problem, RhBatchMass* mass) {
  const RhBatchData* d = &problem->data;
  const int64_t m = d->n_columns;
  const int is_f32 = d->dtype == RH_CUDA_DTYPE_FLOAT32;
  double weighted_x = 0.0, max_row_x = 0.0, weighted_y = 0.0;
  for (int64_t i = 0; i < d->n_rows; ++i) {
    double row = d->append_intercept ? 1.0 : 0.0, y, w = 1.0;
    if (is_f32) {
      const float* x = (const float*)d->x + i * m;
      for (int64_t j = 0; j < m; ++j) {
        row += fabs((double)x[j]);
      }
      y = ((const float*)d->y)[i];
      if (d->weights != NULL) {
        w = ((const float*)d->weights)[i];
      }
    } else {
      const double* x = (const double*)d->x + i * m;
      for (int64_t j = 0; j < m; ++j) {
        row += fabs(x[j]);
      }
      y = ((const double*)d->y)[i];
      if (d->weights != NULL) {
        w = ((const double*)d->weights)[i];
      }
    }
    weighted_x += w * row;
    weighted_y += w * fabs(y);
    max_row_x = row > max_row_x ? row : max_row_x;
  }
  mass->weighted_x = weighted_x;
  mass->max_row_x = max_row_x;
  mass->weighted_y = weighted_y;
  mass->ready = 1;
}

/* 1 when the attempt at ws->candidate (step ws->step from ws->beta, not zero) is certain to be
 * rejected, i.e. f(candidate) > upper + 1e-12 for the f a row pass would compute; 0 when not
 * certain (then the row pass decides). No row pass: the smooth part is convex, so with
 * s = X'(w psi(r(beta))) = J delta - N (g + history) the loss obeys
 * L(candidate) >= L(beta) - s . step, and Q and D at the candidate are computed exactly as the
 * row pass's evaluation would; f is monotone in L. The rounding of both row passes (the one
 * that gave L(beta), g and the one skipped) is bounded from the batch's absolute sizes
 * (Higham: a sum whose terms each pass through at most k additions errs by at most
 * k u sum |terms|) with a factor 4 to spare.
 *
 * This only saves row passes: every decision is the one the full evaluation would take.
 * Under the float32 rule it removes most of the rejections at the end of a batch, where
 * candidates within float32 resolution of beta are rejected one by one (f rounds to F while
 * U < F) until phi is large enough for the step to round to zero. */
static int rejection_certain(RhProblem* problem, RhBatchMass* mass, double loss_beta,
                             double upper) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double u = DBL_EPSILON / 2.0;
  const double n_total = problem->total_weight;
  if (!mass->ready) {
    measure_batch_mass(problem, mass);
  }
  double quadratic = 0.0, linear = 0.0;
  rh_objective_terms(problem, ws->candidate, NULL, &quadratic, &linear);
  /* s . step with s rebuilt from g, and the size of what the rebuild rounds. */
  double s_step = 0.0, rebuilt = 0.0, largest_beta = 0.0, largest_step = 0.0;
  for (int64_t i = 0; i < P; ++i) {
    const double* row = ws->information + i * P;
    double j_delta = 0.0, j_delta_abs = 0.0;
    for (int64_t k = 0; k < P; ++k) {
      const double term = row[k] * (ws->beta[k] - ws->beta0[k]);
      j_delta += term;
      j_delta_abs += fabs(term);
    }
    const double s = j_delta - n_total * (ws->gradient[i] + ws->history[i]);
    s_step += s * ws->step[i];
    rebuilt += fabs(ws->step[i]) * (j_delta_abs + n_total * (fabs(ws->gradient[i]) +
                                                             fabs(ws->history[i])));
    const double b = fabs(ws->beta[i]) > fabs(ws->candidate[i]) ? fabs(ws->beta[i])
                                                                 : fabs(ws->candidate[i]);
    largest_beta = b > largest_beta ? b : largest_beta;
    largest_step = fabs(ws->step[i]) > largest_step ? fabs(ws->step[i]) : largest_step;
  }
  /* Summation depths of row_pass.c: a row's dot adds at most P + 16 terms in sequence (lanes,
   * their sum, the tail); the loss and each score sum add a row at most RH_ROW_BLOCK + 16 times
   * within its block (lanes of eight, then the lanes), then once per block. */
  const double n_blocks = (double)((problem->data.n_rows + RH_ROW_BLOCK - 1) / RH_ROW_BLOCK);
  const double gamma_dot = ((double)P + 16.0) * u;
  const double gamma_sum = ((double)RH_ROW_BLOCK + 16.0 + n_blocks) * u;
  /* sum_i w_i a_i with a_i = |y_i| + sum_j |x_ij beta_j| bounds every residual's size, for
   * beta and the candidate alike; residual errors are gamma_dot a_i, psi is tau-bounded and
   * 1-Lipschitz, rho is tau-Lipschitz and below tau |r|. */
  const double residual_mass = mass->weighted_y + largest_beta * mass->weighted_x;
  const double loss_error = 2.0 * problem->tau * residual_mass * (gamma_dot + gamma_sum);
  const double score_error =
      largest_step * (gamma_dot * mass->max_row_x * residual_mass +
                      2.0 * gamma_sum * problem->tau * mass->weighted_x);
  const double rebuild_error = (8.0 * u + gamma_dot) * rebuilt;
  const double subtraction_error = 4.0 * u * (fabs(loss_beta) + fabs(s_step));
  const double margin = 4.0 * (loss_error + score_error + rebuild_error + subtraction_error);
  double loss_bound = loss_beta - s_step - margin;
  if (!(loss_bound > 0.0)) {
    loss_bound = 0.0; /* a sum of w rho >= 0 */
  }
  return rh_assemble_objective(problem, loss_bound, quadratic, linear) > upper + 1e-12;
}

RhCudaStatus rh_solve_lamm(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  /* The bound pays off where decisions are taken on float32 values (many rejections within
   * float32 resolution); float64 rejections are rare and cost the same either way. */
  const int bound_rejections = problem->data.dtype == RH_CUDA_DTYPE_FLOAT32;
  RhBatchMass mass = {0, 0.0, 0.0, 0.0};
  double objective = 0.0, loss = 0.0;
  RH_TRY(rh_start_at_previous_with_loss(problem, &objective, &loss, err));
  double phi = 1.0;
  result->converged = 0;
  for (int64_t it = 1; it <= problem->max_iter; ++it) {
    result->iterations = it;
    int accepted = 0, zero_step = 0;
    double candidate_objective = 0.0, candidate_loss = 0.0;
    double* delta = ws->step;
    for (int attempt = 0; attempt < 40; ++attempt) {
      double inner = 0.0, squared = 0.0;
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
      double upper = objective + inner + phi * squared / 2.0;
      if (zero_step) {
        /* candidate == beta bit for bit: f(candidate) = F <= F + 0 + 1e-12, and its gradient
         * and curvature are the current ones. */
        candidate_objective = objective;
        candidate_loss = loss;
        accepted = 1;
        break;
      }
      if (bound_rejections && rejection_certain(problem, &mass, loss, upper)) {
        phi *= 2.0;
        continue;
      }
      /* Every evaluated attempt also forms the gradient and curvature: they ride along in the
       * same pass over X, where computing them after a late acceptance would cost another
       * pass. */
      candidate_objective = rh_objective_with_loss(problem, ws->candidate, ws->gradient_next,
                                                   ws->curvature_next, &candidate_loss);
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
    if (!zero_step) {
      rh_swap_buffers(&ws->gradient, &ws->gradient_next);
      rh_swap_buffers(&ws->curvature, &ws->curvature_next);
    }
    objective = candidate_objective;
    loss = candidate_loss;
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
