/* The one home of the algorithm's scalar rules (engines/common/rh_algorithm.h) and of the
 * per-dtype array helpers both engines use (rh_common.h, rh_array_values.c), checked against
 * values worked out by hand from docs/algorithm.md and docs/decisions.md. The constants
 * themselves are compared with the NumPy reference's core/rules.py by
 * python/tests/test_algorithm_rules.py. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "rh_algorithm.h"
#include "rh_common.h"

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "line %d: CHECK failed: %s\n", __LINE__, #cond); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

/* |got - want| <= rtol |want| */
#define CHECK_CLOSE(got, want, rtol) CHECK(fabs((got) - (want)) <= (rtol) * fabs(want))

static void formulas(void) {
  /* h = min(c / (sqrt(N) ln(max(p, 2))), tau): N = 400, p = 10 -> 1 / (20 ln 10); capped at
   * tau; p below 2 counts as 2. */
  CHECK_CLOSE(rh_bandwidth(1.0, 400.0, 10, 1.345), 1.0 / (20.0 * 2.302585092994046), 1e-15);
  CHECK(rh_bandwidth(1e6, 4.0, 3, 0.8) == 0.8);
  CHECK_CLOSE(rh_bandwidth(2.0, 100.0, 1, 5.0), 2.0 / (10.0 * 0.6931471805599453), 1e-15);
  CHECK(rh_bandwidth_is_usable(DBL_MIN) && !rh_bandwidth_is_usable(DBL_MIN / 2.0));
  CHECK(!rh_bandwidth_is_usable(0.0) && !rh_bandwidth_is_usable(NAN));
  /* lambda = c tau sqrt(ln(max(p, 2)) / N) for L1, 0 without. */
  CHECK_CLOSE(rh_lambda(1, 0.5, 1.345, 250.0, 10), 0.5 * 1.345 * sqrt(2.302585092994046 / 250.0),
              1e-15);
  CHECK(rh_lambda(0, 0.5, 1.345, 250.0, 10) == 0.0);
  /* (W / N) lambda_prev: 30 of 40 after lambda 2. */
  CHECK(rh_history_scale(30.0, 40.0, 2.0) == 1.5);
  /* rho: r^2 / 2 inside, tau |r| - tau^2 / 2 outside, continuous at tau. */
  CHECK(rh_huber_rho(0.5, 1.0) == 0.125 && rh_huber_rho(-3.0, 1.0) == 2.5);
  CHECK(rh_huber_rho(2.0, 2.0) == 2.0 && rh_huber_rho(0.0, 1.0) == 0.0);
  CHECK(rh_sign(-2.0) == -1.0 && rh_sign(3.0) == 1.0 && rh_sign(0.0) == 0.0);
  CHECK(rh_sign(-0.0) == 0.0 && rh_sign(NAN) == 0.0);
}

static void solver_tests(void) {
  const double eps64 = ldexp(1.0, -52), eps32 = ldexp(1.0, -23);
  /* Pivot floor 64 P eps and rank cutoff eps P largest: products of powers of two, exact. */
  CHECK(rh_pivot_floor(8, eps64) == ldexp(1.0, -43));
  CHECK(rh_pivot_floor(10, eps32) == 640.0 * eps32);
  CHECK(rh_rank_cutoff(4, eps32, 8.0) == ldexp(1.0, -18));
  /* The ladder's eps: double's at a stream's first batch, the dtype's after it. */
  CHECK(rh_ladder_epsilon(1, eps32) == DBL_EPSILON && rh_ladder_epsilon(0, eps32) == eps32);
  CHECK(rh_ladder_epsilon(1, eps64) == eps64 && rh_ladder_epsilon(0, eps64) == eps64);
  /* ||Delta|| <= tol (1 + ||beta||), boundary included. */
  CHECK(rh_step_converged(1.0, 1.0, 0.5));
  CHECK(!rh_step_converged(nextafter(1.0, 2.0), 1.0, 0.5));
  CHECK(!rh_step_converged(NAN, 1.0, 0.5));
  /* F - f <= tol |f| */
  CHECK(rh_decrease_settled(10.0, 9.5, 0.1) && !rh_decrease_settled(10.0, 9.0, 0.1));
  CHECK(rh_decrease_settled(-1.0, -1.0, 0.0));
  /* LAMM: U = F + <g, s> + phi ||s||^2 / 2 = 1 + 2 + 4 * 3 / 2; accepted up to U + 1e-12. */
  CHECK(rh_lamm_upper(1.0, 2.0, 4.0, 3.0) == 9.0);
  CHECK(rh_lamm_accepts(9.0 + 0.5e-12, 9.0) && !rh_lamm_accepts(9.0 + 2e-12, 9.0));
  CHECK(!rh_lamm_accepts(NAN, 9.0));
  /* phi halves after an acceptance, never below 1e-8. */
  CHECK(rh_lamm_relaxed_phi(1.0) == 0.5 && rh_lamm_relaxed_phi(1.5e-8) == 1e-8);
  CHECK(rh_lamm_relaxed_phi(RH_LAMM_PHI_FLOOR) == RH_LAMM_PHI_FLOOR);
  CHECK(RH_LAMM_INITIAL_PHI == 1.0 && RH_LAMM_ATTEMPTS == 40 && RH_LAMM_SLACK == 1e-12);
  /* (sum w ||x||^2 + trace J) / N */
  CHECK(rh_lamm_phi_bound(6.0, 2.0, 4.0) == 2.0);
  /* 64 eps |F| */
  CHECK(rh_within_rounding(64.0 * eps32 * 10.0, 10.0, eps32));
  CHECK(!rh_within_rounding(65.0 * eps32 * 10.0, 10.0, eps32));
  /* A rejected direction: converged within rounding of F, or when the direction passes the step
   * test at beta (||beta|| = 5, tol 1e-6: up to 6e-6); an exact fit's F ~ 1e-36 defeats the
   * relative test alone. */
  CHECK(rh_rejected_direction_converged(63.0 * eps64 * 2.0, 2.0, eps64, 1.0, 5.0, 1e-6));
  CHECK(!rh_within_rounding(2.6e-39, 9.6e-37, eps64));
  CHECK(rh_rejected_direction_converged(2.6e-39, 9.6e-37, eps64, 5.9e-6, 5.0, 1e-6));
  CHECK(!rh_rejected_direction_converged(2.6e-39, 9.6e-37, eps64, 6.1e-6, 5.0, 1e-6));
}

static void array_values(void) {
  CHECK(rh_dtype_epsilon(RH_CUDA_DTYPE_FLOAT32) == (double)FLT_EPSILON);
  CHECK(rh_dtype_epsilon(RH_CUDA_DTYPE_FLOAT64) == DBL_EPSILON);
  float f[2000];
  double d[2000];
  for (int i = 0; i < 2000; ++i) {
    f[i] = (float)i * 0.25f;
    d[i] = (double)i / 3.0;
  }
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT32, f, 2000) == -1);
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT64, d, 2000) == -1);
  /* The first bad value wins, across the scan's 1024-element blocks. */
  f[1500] = NAN;
  f[1999] = INFINITY;
  d[1030] = -INFINITY;
  d[7] = NAN;
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT32, f, 2000) == 1500);
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT32, f, 1500) == -1);
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT64, d, 2000) == 7);
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT64, d + 8, 1992) == 1022);
  CHECK(rh_first_nonfinite(RH_CUDA_DTYPE_FLOAT64, d, 0) == -1);
  CHECK(rh_value_at(RH_CUDA_DTYPE_FLOAT32, f, 3) == 0.75);
  CHECK(isinf(rh_value_at(RH_CUDA_DTYPE_FLOAT64, d, 1030)));
  double wide[4] = {0.0, 0.0, 0.0, 0.0};
  const float narrow[4] = {0.1f, -2.5f, 3e38f, 1e-45f};
  rh_widen(RH_CUDA_DTYPE_FLOAT32, narrow, 4, wide);
  for (int i = 0; i < 4; ++i) {
    CHECK(wide[i] == (double)narrow[i]);
  }
  const double same[3] = {0.1, -1e300, 5e-324};
  rh_widen(RH_CUDA_DTYPE_FLOAT64, same, 3, wide);
  CHECK(wide[0] == 0.1 && wide[1] == -1e300 && wide[2] == 5e-324 && wide[3] == (double)1e-45f);
  /* Zero values, -0.0 included (whose bytes are not all zero); the smallest subnormal is not. */
  const float zeros32[3] = {0.0f, -0.0f, 0.0f};
  const double zeros64[3] = {-0.0, 0.0, 5e-324};
  CHECK(rh_all_values_zero(RH_CUDA_DTYPE_FLOAT32, zeros32, 3) == 1);
  CHECK(rh_all_bytes_zero(zeros32, sizeof zeros32) == 0);
  CHECK(rh_all_values_zero(RH_CUDA_DTYPE_FLOAT64, zeros64, 2) == 1);
  CHECK(rh_all_values_zero(RH_CUDA_DTYPE_FLOAT64, zeros64, 3) == 0);
  CHECK(rh_all_values_zero(RH_CUDA_DTYPE_FLOAT32, narrow, 0) == 1);
}

int main(void) {
  formulas();
  solver_tests();
  array_values();
  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("algorithm rules: all checks passed\n");
  return 0;
}
