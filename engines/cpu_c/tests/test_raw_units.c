/* Data in raw units (docs/algorithm.md, "Solvers"): first batches whose residuals at beta0 all
 * lie beyond tau + h, where the smoothed curvature vanishes and only Newton's majoriser
 * fallback makes progress, and L1 designs whose curvature exceeds LAMM's 40 doublings. The
 * expectations are the problem's own first-order condition and objective, computed here in
 * double from the data, never values taken from an engine run.
 *
 * Every fit uses ridge 1e-8, the estimator's default. With ridge 0 and J = 0, H is exactly zero
 * when every residual lies beyond tau + h, its minimum-norm step is zero, and plain
 * non-increase accepts that zero step as convergence at beta0 (the reference does the same). */
#include "test_support.h"

#define MAX_ROWS 600
#define MAX_FEATURES 6
#define MAX_PARAMS (MAX_FEATURES + 1)

typedef struct RawFit {
  double coefficients[MAX_PARAMS];
  RhCudaDiagnostics diagnostics;
  RhCudaStatus status;
} RawFit;

/* One batch with the intercept appended, on a fresh engine of the given dtype. x and y are the
 * values the engine sees (already float32-representable for a float32 engine). */
static RawFit fit_first_batch(const double* x, const double* y, int64_t n, int64_t p,
                              RhCudaUpdateConfig config, int32_t dtype) {
  static float xf[MAX_ROWS * MAX_FEATURES], yf[MAX_ROWS];
  RawFit fit;
  memset(&fit, 0, sizeof fit);
  const int64_t P = p + 1;
  RhCudaEngineOptions o = rh_options(dtype, P);
  RhCudaEngine* engine = NULL;
  fit.status = rh_cuda_engine_create(&o, &engine);
  if (fit.status != RH_CUDA_SUCCESS) {
    return fit;
  }
  const int is_f32 = dtype == RH_CUDA_DTYPE_FLOAT32;
  if (is_f32) {
    for (int64_t k = 0; k < n * p; ++k) {
      xf[k] = (float)x[k];
    }
    for (int64_t i = 0; i < n; ++i) {
      yf[i] = (float)y[i];
    }
  }
  config.n_features_in = p;
  RhCudaHostBatch b = rh_batch(is_f32 ? (const void*)xf : (const void*)x,
                               is_f32 ? (const void*)yf : (const void*)y, NULL, n, p, (double)n);
  fit.diagnostics = rh_diagnostics();
  fit.status = rh_cuda_engine_update_host(engine, &b, &config, &fit.diagnostics);
  if (fit.status == RH_CUDA_SUCCESS) {
    float cf[MAX_PARAMS], info_f[MAX_PARAMS * MAX_PARAMS];
    double info_d[MAX_PARAMS * MAX_PARAMS];
    RhCudaHostState s = is_f32 ? rh_state_out(cf, info_f) : rh_state_out(fit.coefficients, info_d);
    CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
    for (int64_t j = 0; is_f32 && j < P; ++j) {
      fit.coefficients[j] = (double)cf[j];
    }
  }
  rh_cuda_engine_destroy(engine);
  return fit;
}

static double huber_rho(double r, double tau) {
  double a = fabs(r);
  return a <= tau ? 0.5 * r * r : tau * a - 0.5 * tau * tau;
}

static double huber_psi(double r, double tau) {
  return r > tau ? tau : (r < -tau ? -tau : r);
}

static double residual_at(const double* x, const double* y, int64_t i, int64_t p,
                          const double* beta) {
  double fitted = beta[p];
  for (int64_t j = 0; j < p; ++j) {
    fitted += x[i * p + j] * beta[j];
  }
  return y[i] - fitted;
}

/* The first-order condition of a first batch (J = 0, no history, no penalty): per column of
 * [X, 1], |sum_i psi(r_i) x_ij| relative to sum_i |psi(r_i)| |x_ij|. Returns the worst column;
 * 1 means every row pushes the same way (far from the optimum), 0 is exact stationarity. */
static double worst_first_order_residual(const double* x, const double* y, int64_t n, int64_t p,
                                         const double* beta, double tau) {
  double worst = 0.0;
  for (int64_t j = 0; j <= p; ++j) {
    double sum = 0.0, size = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double xij = j < p ? x[i * p + j] : 1.0;
      const double psi = huber_psi(residual_at(x, y, i, p, beta), tau);
      sum += psi * xij;
      size += fabs(psi * xij);
    }
    const double ratio = size > 0.0 ? fabs(sum) / size : 0.0;
    worst = ratio > worst ? ratio : worst;
  }
  return worst;
}

/* f(beta) + lambda ||slopes||_1 of a first batch: mean rho plus the penalty (the intercept is
 * never penalised). */
static double penalised_objective(const double* x, const double* y, int64_t n, int64_t p,
                                  const double* beta, double tau, double lambda) {
  double loss = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    loss += huber_rho(residual_at(x, y, i, p, beta), tau);
  }
  double l1 = 0.0;
  for (int64_t j = 0; j < p; ++j) {
    l1 += fabs(beta[j]);
  }
  return loss / (double)n + lambda * l1;
}

/* Student t with 3 degrees of freedom: heavy tails, finite variance. */
static double student_t3(void) {
  double z = rh_normal(), a = rh_normal(), b = rh_normal(), c = rh_normal();
  return z / sqrt((a * a + b * b + c * c) / 3.0);
}

/* The unscaled design: feature j has scale s_j log-spaced over [1, 1e5] and mean 3 s_j, the
 * target sits at 1e5 with t(3) errors of scale 2 and one-sided outliers on every 20th row
 * (5%). At beta = 0 every residual is about 1e5. With round_to_float the values are rounded to
 * float32 first, so a float32 engine and this file's checks see the same data. */
static void make_unscaled(double* x, double* y, int64_t n, int64_t p, int round_to_float) {
  static const double slopes[MAX_FEATURES] = {1.5, -2.0, 0.75, 1.0, -1.0, 0.5};
  for (int64_t i = 0; i < n; ++i) {
    double target = 1e5;
    for (int64_t j = 0; j < p; ++j) {
      const double scale = pow(10.0, 5.0 * (double)j / (double)(p - 1));
      const double v = scale * (3.0 + rh_normal());
      x[i * p + j] = round_to_float ? (double)(float)v : v;
      target += slopes[j] / scale * x[i * p + j];
    }
    target += 2.0 * student_t3() + (i % 20 == 7 ? 200.0 + 100.0 * fabs(rh_normal()) : 0.0);
    y[i] = round_to_float ? (double)(float)target : target;
  }
}

/* f is resolved to about eps |F|, which locates its minimiser only to about sqrt(eps) ~ 1.5e-8
 * relative, and the smoothed curvature makes the last Newton iterations linear; 1e-6 leaves
 * room for both. beta0 = 0 scores about 1, and a stop visibly short of the optimum far above
 * 1e-6. */
#define FLOAT64_STATIONARY 1e-6

/* The stopping rule measures a step against 1 + ||beta||, about 1e5 (the intercept) on the
 * unscaled design, while the slopes of the large-scale features are about 1e-5: tol 1e-10
 * keeps the rule from calling a step of the size of those slopes converged. */
#define UNSCALED_TOLERANCE 1e-10

static RhCudaUpdateConfig raw_config(int32_t penalty) {
  RhCudaUpdateConfig c = rh_config(1, penalty);
  c.ridge = 1e-8;
  c.tau = 1.345;
  return c;
}

/* (a) The plain Newton method stops at beta = 0 here (H = ridge I, every halving rejected). */
static void test_unscaled_first_batch_reaches_a_stationary_point(void) {
  enum { N = 400, PF = 5 };
  static double x[N * PF], y[N];
  make_unscaled(x, y, N, PF, 0);
  RhCudaUpdateConfig c = raw_config(RH_CUDA_PENALTY_NONE);
  c.tolerance = UNSCALED_TOLERANCE;
  RawFit fit = fit_first_batch(x, y, N, PF, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1);
  CHECK(fit.diagnostics.iterations < c.max_iter);
  const double zero[MAX_PARAMS] = {0};
  /* The check itself rejects beta0 = 0, where every score is +tau on positive targets. */
  CHECK(worst_first_order_residual(x, y, N, PF, zero, c.tau) > 0.99);
  const double worst = worst_first_order_residual(x, y, N, PF, fit.coefficients, c.tau);
  if (!(worst <= FLOAT64_STATIONARY)) {
    fprintf(stderr, "first-order residual %g\n", worst);
  }
  CHECK(worst <= FLOAT64_STATIONARY);
}

/* (b) Features around 100, targets about 1150 away from beta0 = 0: every residual at beta0
 * exceeds tau + h (h <= tau by definition, so |y_i| > 2 tau suffices), so c(r) = 0 on every
 * row and H = ridge I. Its last halving, 2^-26 / ridge ~ 1.5 times the gradient, moves the fit
 * by about 1e5 and is rejected too (on features of size 1 it would be a lucky gradient step). */
static void test_every_residual_beyond_the_curvature_zone_converges(void) {
  enum { N = 250, PF = 3 };
  static double x[N * PF], y[N];
  const double beta[PF] = {0.5, -1.0, 2.0};
  for (int i = 0; i < N; ++i) {
    double target = 1000.0;
    for (int j = 0; j < PF; ++j) {
      x[i * PF + j] = 100.0 + 10.0 * rh_normal();
      target += beta[j] * x[i * PF + j];
    }
    y[i] = target + 0.3 * rh_normal() + (i % 17 == 0 ? 8.0 * rh_normal() : 0.0);
  }
  RhCudaUpdateConfig c = raw_config(RH_CUDA_PENALTY_NONE);
  int all_beyond = 1;
  for (int i = 0; i < N; ++i) {
    all_beyond = all_beyond && fabs(y[i]) > 2.0 * c.tau;
  }
  CHECK(all_beyond);
  RawFit fit = fit_first_batch(x, y, N, PF, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1);
  CHECK(fit.diagnostics.iterations < c.max_iter);
  CHECK(worst_first_order_residual(x, y, N, PF, fit.coefficients, c.tau) <= FLOAT64_STATIONARY);
  /* Huber's estimate sits near the generating coefficients: noise 0.3 on 250 rows against
   * features of spread 10 pins the slopes to ~1e-3 and the intercept to ~0.3. */
  for (int j = 0; j < PF; ++j) {
    CHECK_CLOSE(fit.coefficients[j], beta[j], 0.0, 0.01);
  }
  CHECK_CLOSE(fit.coefficients[PF], 1000.0, 0.0, 1.5);
}

/* (c) Tiny first batches in raw units, targets in the hundreds (every residual at beta0 lies
 * beyond tau + h), for 4 parameters (3 features and the intercept): 5 rows, and the first 3
 * of them, fewer rows than parameters. */
static const double TINY_X[5 * 3] = {12.0, 310.0, 0.7,   15.5, 280.0, 0.2,   9.0, 350.0,
                                     0.9,  11.0,  330.0, 0.4,  14.0,  295.0, 0.6};
static const double TINY_Y[5] = {420.0, 436.0, 401.0, 433.0, 415.0};

static void test_tiny_first_batch_converges(void) {
  enum { N = 5, PF = 3 };
  RhCudaUpdateConfig c = raw_config(RH_CUDA_PENALTY_NONE);
  RawFit fit = fit_first_batch(TINY_X, TINY_Y, N, PF, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1);
  CHECK(fit.diagnostics.iterations < c.max_iter);
  const double zero[MAX_PARAMS] = {0};
  CHECK(worst_first_order_residual(TINY_X, TINY_Y, N, PF, zero, c.tau) > 0.99);
  CHECK(worst_first_order_residual(TINY_X, TINY_Y, N, PF, fit.coefficients, c.tau) <=
        FLOAT64_STATIONARY);
}

/* With fewer rows than parameters the rows can be interpolated, and an interpolant is a
 * minimiser (f >= 0 = f there): every residual, about 420 at beta0, must vanish; 1e-4 leaves
 * room for a stop at a step of tol (1 + ||beta||) on features of a few hundred. */
static void test_fewer_rows_than_parameters_interpolates(void) {
  enum { N = 3, PF = 3 };
  RhCudaUpdateConfig c = raw_config(RH_CUDA_PENALTY_NONE);
  RawFit fit = fit_first_batch(TINY_X, TINY_Y, N, PF, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1);
  CHECK(fit.diagnostics.iterations < c.max_iter);
  for (int i = 0; i < N; ++i) {
    CHECK_CLOSE(residual_at(TINY_X, TINY_Y, i, PF, fit.coefficients), 0.0, 0.0, 1e-4);
  }
}

/* (d) L1 on features of magnitude 1e6 with targets of a few units: a proximal step from
 * beta0 = 0 moves the fit by about tau ||x||^2 / phi, so the steps overshoot the residuals
 * (~4) and are rejected until phi is near tau ||x||^2 / 4 ~ 2e12, beyond the 2^39 of the 40th
 * doubling from 1: LAMM must go on from the curvature bound. It may stop at max_iter (LAMM is
 * a first-order method and this design's condition number is about 1e12), but never as
 * "exhausted" before it, and it must decrease the objective. */
static void test_l1_on_features_of_magnitude_1e6_does_not_stall(void) {
  enum { N = 200, PF = 3 };
  static double x[N * PF], y[N];
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < PF; ++j) {
      x[i * PF + j] = 1e6 * (1.0 + rh_uniform());
    }
    y[i] = 2.0 + 1e-6 * x[i * PF] - 5e-7 * x[i * PF + 2] + 0.3 * student_t3() +
           (i % 20 == 3 ? 20.0 : 0.0);
  }
  double largest_square = 0.0;
  for (int i = 0; i < N; ++i) {
    double square = 0.0;
    for (int j = 0; j < PF; ++j) {
      square += x[i * PF + j] * x[i * PF + j];
    }
    largest_square = square > largest_square ? square : largest_square;
  }
  CHECK(largest_square > 8.0 * ldexp(1.0, 40));
  RhCudaUpdateConfig c = raw_config(RH_CUDA_PENALTY_L1);
  c.max_iter = 60;
  c.tolerance = 1e-8;
  RawFit fit = fit_first_batch(x, y, N, PF, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1 || fit.diagnostics.iterations == c.max_iter);
  /* lambda = lambda_scale tau sqrt(ln p / N), written out here. */
  const double lambda = c.lambda_scale * c.tau * sqrt(log((double)PF) / (double)N);
  CHECK_CLOSE(fit.diagnostics.lambda_value, lambda, 1e-14, 0.0);
  const double zero[MAX_PARAMS] = {0};
  const double start = penalised_objective(x, y, N, PF, zero, c.tau, lambda);
  const double end = penalised_objective(x, y, N, PF, fit.coefficients, c.tau, lambda);
  /* beta0 = 0 leaves residuals of about 3 tau; the fit brings most of them inside tau. */
  CHECK(end < 0.5 * start);
  CHECK_CLOSE(fit.diagnostics.objective, end, 1e-9, 0.0);
}

/* (e) (a) on a float32 engine. The stored coefficients are float32: rounding the intercept
 * (~1e5, spacing 2^-7) moves every residual by up to ~4e-3, which shifts the scores of the
 * few rows inside [-tau, tau] by as much, about 1e-3 of the scores' total size here; the
 * balance is asked to 1e-2 of it, while beta0 scores about 1. */
static void test_unscaled_first_batch_float32(void) {
  enum { N = 400, PF = 5 };
  static double x[N * PF], y[N];
  make_unscaled(x, y, N, PF, 1);
  RhCudaUpdateConfig c = raw_config(RH_CUDA_PENALTY_NONE);
  c.tolerance = UNSCALED_TOLERANCE;
  RawFit fit = fit_first_batch(x, y, N, PF, c, RH_CUDA_DTYPE_FLOAT32);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1);
  CHECK(fit.diagnostics.iterations < c.max_iter);
  const double worst = worst_first_order_residual(x, y, N, PF, fit.coefficients, c.tau);
  if (!(worst <= 1e-2)) {
    fprintf(stderr, "float32 first-order residual %g\n", worst);
  }
  CHECK(worst <= 1e-2);
}

int main(void) {
  RUN_TEST(test_unscaled_first_batch_reaches_a_stationary_point);
  RUN_TEST(test_every_residual_beyond_the_curvature_zone_converges);
  RUN_TEST(test_tiny_first_batch_converges);
  RUN_TEST(test_fewer_rows_than_parameters_interpolates);
  RUN_TEST(test_l1_on_features_of_magnitude_1e6_does_not_stall);
  RUN_TEST(test_unscaled_first_batch_float32);
  return TEST_MAIN_RESULT();
}
