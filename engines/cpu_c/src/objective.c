#include <math.h>

#include "solver_common.h"
#include "vec8.h"

/* row . v in eight lanes (one vector), then the lanes pairwise: the float32 path's J delta,
 * where f is rounded to float anyway and a P-long dependent chain of additions per row made
 * this O(P^2) loop cost a third of a row pass at P = 257. */
RH_MULTIVERSION static double row_dot_lanes(const double* row, const double* v, int64_t P) {
  double total = 0.0;
  int64_t k = 0;
#if RH_HAVE_VECTORS
  RhVec8 acc = rh_vec8_zero();
  for (; k + 8 <= P; k += 8) {
    acc += rh_vec8_load(row + k) * rh_vec8_load(v + k);
  }
  total = rh_vec8_sum(acc);
#endif
  for (; k < P; ++k) {
    total += row[k] * v[k];
  }
  return total;
}

/* Q = delta' J delta and D = history . delta at beta (delta = beta - beta0). With gradient !=
 * NULL, gradient holds X'(w psi(r)) on entry and g on return; with j_delta_out != NULL it
 * receives J delta. J may be asymmetric (restored), so J delta is used as is, never
 * symmetrised. */
void rh_objective_terms(const RhProblem* problem, const double* beta, double* gradient,
                        double* quadratic, double* linear, double* j_delta_out) {
  const RhWorkspace* ws = problem->ws;
  const int64_t P = problem->P;
  const double inv_n = 1.0 / problem->total_weight;
  double* delta = ws->scratch;
  for (int64_t j = 0; j < P; ++j) {
    delta[j] = beta[j] - ws->beta0[j];
  }
  const int lanes = problem->data.dtype == RH_CUDA_DTYPE_FLOAT32;
  double q = 0.0, d = 0.0;
  for (int64_t i = 0; i < P; ++i) {
    const double* row = ws->information + i * P;
    double j_delta = 0.0;
    if (lanes) {
      j_delta = row_dot_lanes(row, delta, P);
    } else {
      for (int64_t k = 0; k < P; ++k) {
        j_delta += row[k] * delta[k];
      }
    }
    q += delta[i] * j_delta;
    d += ws->history[i] * delta[i];
    if (j_delta_out != NULL) {
      j_delta_out[i] = j_delta;
    }
    if (gradient != NULL) {
      gradient[i] = (j_delta - gradient[i]) * inv_n - ws->history[i];
    }
  }
  *quadratic = q;
  *linear = d;
}

double rh_assemble_objective(const RhProblem* problem, double loss, double quadratic,
                             double linear) {
  if (problem->data.dtype == RH_CUDA_DTYPE_FLOAT32) {
    /* The float32 rule (docs/decisions.md, "Float32 oracle"): the three reductions stay in
     * double, each is rounded once to float, and f is assembled in float arithmetic in the
     * reference's order. 0.5f * q is exact, so a contracted multiply-add rounds the same.
     * Every step is monotone in loss, which the LAMM rejection bound relies on. */
    const float l = (float)loss, q = (float)quadratic, h = (float)linear;
    const float n = (float)problem->total_weight;
    const float scaled = (l + 0.5f * q) / n;
    return (double)(scaled - h);
  }
  return (loss + 0.5 * quadratic) * (1.0 / problem->total_weight) - linear;
}

/* f(beta) = [sum w rho(r) + delta' J delta / 2] / N - history . delta (a float32 value for a
 * float32 engine), and with gradient != NULL g(beta) = [-X'(w psi(r)) + J delta] / N - history
 * and c(r) into curvature. parts (when not NULL) receives the three reductions in double and
 * j_delta (when not NULL) J delta. */
double rh_objective_parts(const RhProblem* problem, const double* beta, double* gradient,
                          double* curvature, RhObjectiveParts* parts, double* j_delta) {
  double loss = 0.0;
  rh_row_pass(problem, beta, &loss, gradient, gradient != NULL ? curvature : NULL);
  double quadratic = 0.0, linear = 0.0;
  rh_objective_terms(problem, beta, gradient, &quadratic, &linear, j_delta);
  if (parts != NULL) {
    parts->loss = loss;
    parts->quadratic = quadratic;
    parts->linear = linear;
  }
  return rh_assemble_objective(problem, loss, quadratic, linear);
}

double rh_objective(const RhProblem* problem, const double* beta, double* gradient,
                    double* curvature) {
  return rh_objective_parts(problem, beta, gradient, curvature, NULL, NULL);
}

RhCudaStatus rh_start_at_previous_parts(RhProblem* problem, double* objective,
                                        RhObjectiveParts* parts, double* j_delta,
                                        RhErrorBuffer* err) {
  RhWorkspace* ws = problem->ws;
  for (int64_t j = 0; j < problem->P; ++j) {
    ws->beta[j] = ws->beta0[j];
  }
  *objective = rh_objective_parts(problem, ws->beta, ws->gradient, ws->curvature, parts, j_delta);
  if (!isfinite(*objective)) {
    RH_TRY(rh_check_design_values(&problem->data, err));
    return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                   "objective at the previous coefficients is %g (overflow)", *objective);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_start_at_previous(RhProblem* problem, double* objective, RhErrorBuffer* err) {
  return rh_start_at_previous_parts(problem, objective, NULL, NULL, err);
}
