/*
 * rh_algorithm.h -- the algorithm's constants and scalar formulas, in one place for every
 * engine (docs/algorithm.md is their contract). Header-only, so it serves C (librh_cpu), host
 * C++ and CUDA device code (librh_cuda) alike; the NumPy reference states the same numbers in
 * python/renewable_huber/core and the tests compare them.
 */
#ifndef RH_ALGORITHM_H
#define RH_ALGORITHM_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define RH_ALGORITHM_FN static inline __host__ __device__
#else
#define RH_ALGORITHM_FN static inline
#endif

/* ---------------------------------------------------------------------------- constants */

/* Newton's line search: t = 1, 1/2, ..., 2^-26 (the next halving would fall below 1e-8). */
#define RH_LINE_SEARCH_TRIALS 27
/* LAMM: phi, 2 phi, ..., 2^39 phi; then RH_LAMM_BOUND_ATTEMPTS more from
 * max(phi, rh_lamm_phi_bound(...)), doubling on rejection. */
#define RH_LAMM_ATTEMPTS 40
/* phi at the start of every batch's LAMM solve. */
#define RH_LAMM_INITIAL_PHI 1.0
#define RH_LAMM_BOUND_ATTEMPTS 8
/* Absolute slack on LAMM's majorisation test, so rounding in f cannot reject an exact
 * majoriser. */
#define RH_LAMM_SLACK 1e-12
/* phi after an accepted LAMM step: max(phi / 2, RH_LAMM_PHI_FLOOR). */
#define RH_LAMM_PHI_FLOOR 1e-8
/* A solve whose every step was rejected ends converged when the decrease its last step
 * predicted is at most RH_ROUNDING_FLOOR_FACTOR * eps * |F| (eps of the working dtype): no
 * representable step can then decrease f measurably. */
#define RH_ROUNDING_FLOOR_FACTOR 64.0
/* The linear-solve ladder's relative pivot floor (docs/decisions.md, "Linear solve ladder"): a
 * Cholesky or LU factor is refused when a pivot is not above RH_PIVOT_FACTOR * P * eps times
 * its reference (rh_pivot_floor). */
#define RH_PIVOT_FACTOR 64.0

/* A batch's declared weight must match the sum of its sample weights to this relative
 * difference (the caller sums in its own order). */
#define RH_WEIGHT_SUM_RTOL 1e-6

/* The least bandwidth an update accepts (DBL_MIN): h must be a positive normal double. A zero
 * or subnormal h, from a bandwidth_scale tiny against sqrt(N), would make the curvature ramps'
 * slope 1 / (2h) infinite and the solve meaningless, so such a batch is refused up front. */
#define RH_MIN_BANDWIDTH 2.2250738585072014e-308

/* ----------------------------------------------------------------------------- formulas */

/* rho(r) = r^2 / 2 for |r| <= tau, tau |r| - tau^2 / 2 beyond (docs/algorithm.md). */
RH_ALGORITHM_FN double rh_huber_rho(double r, double tau) {
  const double a = fabs(r);
  return a <= tau ? 0.5 * r * r : tau * a - 0.5 * tau * tau;
}

/* sign(v): 1, -1, or 0 for 0 and NaN (the historical subgradient's sign of beta0). */
RH_ALGORITHM_FN double rh_sign(double v) {
  return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0);
}

/* h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau). */
RH_ALGORITHM_FN double rh_bandwidth(double bandwidth_scale, double total_weight,
                                    int64_t n_features_in, double tau) {
  const double log_p = log(n_features_in > 2 ? (double)n_features_in : 2.0);
  const double h = bandwidth_scale / (sqrt(total_weight) * log_p);
  return h < tau ? h : tau;
}

/* 1 when h is a bandwidth an update can use (positive, normal; NaN is not). */
RH_ALGORITHM_FN int rh_bandwidth_is_usable(double h) {
  return h >= RH_MIN_BANDWIDTH;
}

/* lambda = lambda_scale tau sqrt(ln(max(p, 2)) / N) for L1, 0 otherwise. */
RH_ALGORITHM_FN double rh_lambda(int l1, double lambda_scale, double tau, double total_weight,
                                 int64_t n_features_in) {
  if (!l1) {
    return 0.0;
  }
  const double log_p = log(n_features_in > 2 ? (double)n_features_in : 2.0);
  return lambda_scale * tau * sqrt(log_p / total_weight);
}

/* The historical subgradient's scale for L1 (docs/algorithm.md): (W / N) lambda_prev, W the
 * weight before the batch, N the weight after it; the history term is that times sign(beta0) on
 * the penalised coefficients. */
RH_ALGORITHM_FN double rh_history_scale(double previous_weight, double total_weight,
                                        double previous_lambda) {
  return previous_weight / total_weight * previous_lambda;
}

/* 1 when the sample weights' sum is within RH_WEIGHT_SUM_RTOL of the declared batch weight and
 * the cumulative weight previous_weight + sum stays finite. An infinite sum (weights near the
 * dtype's maximum) is refused: the state would carry an infinite weight, which no engine can
 * restore or continue. */
RH_ALGORITHM_FN int rh_weight_sum_matches(double sum, double declared, double previous_weight) {
  return isfinite(previous_weight + sum) && fabs(sum - declared) <= RH_WEIGHT_SUM_RTOL * sum;
}

/* The majoriser's row weight (before the sample weight) for Newton's fallback step:
 * max(c(r), min(1, tau / |r|)). min(1, tau / |r|) = psi(r) / r is the weight of the quadratic
 * that touches rho at r from above (rho is concave in r^2), so any weight at least as large
 * majorises f; taking c where it is larger keeps the step a Newton step on rows inside the
 * quadratic zone. `curvature` is c(r) as the engine computed it. */
RH_ALGORITHM_FN double rh_majoriser_weight(double r, double tau, double curvature) {
  const double a = fabs(r);
  const double irls = a <= tau ? 1.0 : tau / a;
  return curvature > irls ? curvature : irls;
}

/* 1 when a predicted decrease of f (>= 0) is within rounding of F: RH_ROUNDING_FLOOR_FACTOR
 * eps |F|, eps the working dtype's machine epsilon. */
RH_ALGORITHM_FN int rh_within_rounding(double predicted_decrease, double objective, double eps) {
  return predicted_decrease <= RH_ROUNDING_FLOOR_FACTOR * eps * fabs(objective);
}

/* LAMM's curvature bound, the least phi of the attempts after the 40th rejection:
 * (sum_i w_i ||x_i||^2 + trace J) / N >= the largest eigenvalue of f's Hessian (rho'' <= 1,
 * J positive semi-definite). sum_w_x2 includes the appended intercept column (w_i each). */
RH_ALGORITHM_FN double rh_lamm_phi_bound(double sum_w_x2, double trace_information,
                                         double total_weight) {
  return (sum_w_x2 + trace_information) / total_weight;
}

/* The pivot floor of a P x P factorisation in a working dtype of machine epsilon eps: Cholesky
 * refuses a squared pivot not above floor times its own column's diagonal, LU a smallest |u_ii|
 * not above floor times the largest. */
RH_ALGORITHM_FN double rh_pivot_floor(int64_t P, double eps) {
  return RH_PIVOT_FACTOR * (double)P * eps;
}

/* The minimum-norm solve's rank cutoff: singular values (or |eigenvalues|) of a P x P matrix
 * not above eps P times the largest are dropped. */
RH_ALGORITHM_FN double rh_rank_cutoff(int64_t P, double eps, double largest) {
  return eps * (double)P * largest;
}

/* The eps of the Newton ladder's thresholds (rh_pivot_floor, rh_rank_cutoff; docs/decisions.md,
 * "The Newton system's precision"). The system is summed and solved in double for every working
 * dtype. At a stream's first batch (batch count 0 and an all-zero information matrix) H is the
 * batch's Gram alone, exact to double rounding, and is judged at double's epsilon; after that H
 * holds the information stored in the working dtype, whose rounding can leave it indefinite at
 * that dtype's epsilon, and is judged at dtype_eps. */
RH_ALGORITHM_FN double rh_ladder_epsilon(int stream_start, double dtype_eps) {
  return stream_start ? DBL_EPSILON : dtype_eps;
}

/* The step test of both solvers: ||Delta|| <= tol (1 + ||beta||), beta the accepted iterate
 * (norms passed already taken). */
RH_ALGORITHM_FN int rh_step_converged(double step_norm, double beta_norm, double tolerance) {
  return step_norm <= tolerance * (1.0 + beta_norm);
}

/* Newton's solve ends when every trial along its last direction (the majoriser's) was rejected;
 * it is converged when the decrease that direction predicted is within rounding of F
 * (rh_within_rounding), or when the direction itself passes the step test at beta: its whole
 * step would have ended the solve had rounding let f decrease. The second covers F at its own
 * rounding floor (an exact fit, F ~ 1e-36), where no relative test on F can. */
RH_ALGORITHM_FN int rh_rejected_direction_converged(double predicted_decrease, double objective,
                                                    double eps, double direction_norm,
                                                    double beta_norm, double tolerance) {
  return rh_within_rounding(predicted_decrease, objective, eps) ||
         rh_step_converged(direction_norm, beta_norm, tolerance);
}

/* A Newton step the line search cut short ends the solve only when it also changed f by at most
 * tol |f| (docs/algorithm.md, "Unpenalised"): F the objective before it, f after. */
RH_ALGORITHM_FN int rh_decrease_settled(double F, double f, double tolerance) {
  return F - f <= tolerance * fabs(f);
}

/* LAMM's model of f at a candidate beta + step: F + <g, step> + phi ||step||^2 / 2, from
 * inner = <g, step> and squared = ||step||^2. */
RH_ALGORITHM_FN double rh_lamm_upper(double F, double inner, double phi, double squared) {
  return F + inner + phi * squared / 2.0;
}

/* 1 when LAMM accepts a candidate of objective f under its model's value `upper`. */
RH_ALGORITHM_FN int rh_lamm_accepts(double f, double upper) {
  return f <= upper + RH_LAMM_SLACK;
}

/* phi for the next iteration after an attempt at phi was accepted: max(phi / 2,
 * RH_LAMM_PHI_FLOOR). */
RH_ALGORITHM_FN double rh_lamm_relaxed_phi(double phi) {
  const double relaxed = phi / 2.0;
  return relaxed > RH_LAMM_PHI_FLOOR ? relaxed : RH_LAMM_PHI_FLOOR;
}

/* The linear-solve ladder's equilibration (docs/decisions.md, "Linear solve ladder"): the power
 * of two d with d^2 a in [1/2, 2) for a column whose diagonal entry is a, 1 when a is not a
 * positive finite number. LU and the SVD run on diag(d) A diag(d); multiplying by powers of two is
 * exact, so that system is A in other units, not a rounded copy of it. */
RH_ALGORITHM_FN double rh_equilibration_factor(double diagonal) {
  if (!(diagonal > 0.0) || !isfinite(diagonal)) {
    return 1.0;
  }
  int exponent = 0;
  (void)frexp(diagonal, &exponent); /* diagonal = m 2^exponent, m in [1/2, 1) */
  /* floor(exponent / 2), also for a negative exponent. */
  const int halved = exponent >= 0 ? exponent / 2 : -((1 - exponent) / 2);
  return ldexp(1.0, -halved);
}

#undef RH_ALGORITHM_FN

#endif /* RH_ALGORITHM_H */
