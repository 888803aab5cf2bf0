#include <math.h>

#include "cpu_engine.h"

/* f(beta) = [sum w rho(r) + delta' J delta / 2] / N - history . delta (a float32 value for a
 * float32 engine, see below), and
 * g(beta) = [-X'(w psi(r)) + J delta] / N - history, with delta = beta - beta0. J may be
 * asymmetric (restored), so J delta is used as is, never symmetrised. */
double rh_objective(const RhProblem* problem, const double* beta, double* gradient,
                    double* curvature) {
  const RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double inv_n = 1.0 / problem->total_weight;
  double loss = 0.0;
  rh_row_pass(problem, beta, &loss, gradient, gradient != NULL ? curvature : NULL);
  double* delta = ws->scratch;
  for (int64_t j = 0; j < P; ++j) {
    delta[j] = beta[j] - ws->beta0[j];
  }
  double quadratic = 0.0, linear = 0.0;
  for (int64_t i = 0; i < P; ++i) {
    const double* row = ws->information + i * P;
    double j_delta = 0.0;
    for (int64_t k = 0; k < P; ++k) {
      j_delta += row[k] * delta[k];
    }
    quadratic += delta[i] * j_delta;
    linear += ws->history[i] * delta[i];
    if (gradient != NULL) {
      gradient[i] = (j_delta - gradient[i]) * inv_n - ws->history[i];
    }
  }
  if (problem->data.dtype == RH_CUDA_DTYPE_FLOAT32) {
    /* The float32 rule (docs/decisions.md, "Float32 oracle"): the three reductions stay in
     * double, each is rounded once to float, and f is assembled in float arithmetic in the
     * reference's order. 0.5f * q is exact, so a contracted multiply-add rounds the same. */
    const float l = (float)loss, q = (float)quadratic, h = (float)linear;
    const float n = (float)problem->total_weight;
    const float scaled = (l + 0.5f * q) / n;
    return (double)(scaled - h);
  }
  return (loss + 0.5 * quadratic) * inv_n - linear;
}

RhCudaStatus rh_start_at_previous(RhProblem* problem, double* objective, RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  for (int64_t j = 0; j < problem->P; ++j) {
    ws->beta[j] = ws->beta0[j];
  }
  *objective = rh_objective(problem, ws->beta, ws->gradient, ws->curvature);
  if (!isfinite(*objective)) {
    RH_TRY(rh_check_design_values(&problem->data, err));
    return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                   "objective at the previous coefficients is %g (overflow)", *objective);
  }
  return RH_CUDA_SUCCESS;
}
