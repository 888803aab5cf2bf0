/* Small vector helpers shared by the two solvers. */
#ifndef RH_SOLVER_COMMON_H
#define RH_SOLVER_COMMON_H

#include <math.h>

#include "cpu_engine.h"

static inline double rh_norm2(const double* v, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    s += v[i] * v[i];
  }
  return sqrt(s);
}

static inline int rh_all_finite(const double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!isfinite(v[i])) {
      return 0;
    }
  }
  return 1;
}

/* The float32 rule (docs/decisions.md, "Float32 oracle"): a float32 engine rounds every
 * candidate coefficient vector to float (the stored dtype) before its objective, Delta and the
 * convergence test, so a step below float32 resolution is exactly zero, as in the float32
 * reference; rh_objective returns float32 values. Identity for float64. */
static inline double rh_working_value(const RhProblem* problem, double v) {
  return problem->data.dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)(float)v : v;
}

/* ---- objective.c, beyond cpu_engine.h's rh_objective / rh_start_at_previous: the same
 * evaluation with its three reductions, for the LAMM rejection bound. */
typedef struct RhObjectiveParts {
  double loss;      /* sum w rho(r) */
  double quadratic; /* delta' J delta */
  double linear;    /* history . delta */
} RhObjectiveParts;
/* Q and D at beta; with gradient != NULL it turns X'(w psi) into g; with j_delta != NULL it
 * receives J delta (P values). */
void rh_objective_terms(const RhProblem* problem, const double* beta, double* gradient,
                        double* quadratic, double* linear, double* j_delta);
/* f from its three reductions (a float32 value for a float32 engine); non-decreasing in loss
 * and quadratic, non-increasing in linear. */
double rh_assemble_objective(const RhProblem* problem, double loss, double quadratic,
                             double linear);
double rh_objective_parts(const RhProblem* problem, const double* beta, double* gradient,
                          double* curvature, RhObjectiveParts* parts, double* j_delta);
RhCudaStatus rh_start_at_previous_parts(RhProblem* problem, double* objective,
                                        RhObjectiveParts* parts, double* j_delta,
                                        RhErrorBuffer* err);

static inline void rh_swap_buffers(double** a, double** b) {
  double* t = *a;
  *a = *b;
  *b = t;
}

#endif /* RH_SOLVER_COMMON_H */
