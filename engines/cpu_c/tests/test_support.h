/* A tiny assertion helper and fixtures for the librh_cpu tests (plain C, no framework). */
#ifndef RH_TEST_SUPPORT_H
#define RH_TEST_SUPPORT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_structs.h"
#include "rh_cuda.h"

static int rh_test_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++rh_test_failures;                                                      \
    }                                                                          \
  } while (0)

#define CHECK_STATUS(call, expected)                                                     \
  do {                                                                                   \
    RhCudaStatus rh_got_ = (call);                                                       \
    if (rh_got_ != (expected)) {                                                         \
      fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call, \
              (int)rh_got_, (int)(expected));                                            \
      ++rh_test_failures;                                                                \
    }                                                                                    \
  } while (0)

#define CHECK_CONTAINS(text, needle)                                                         \
  do {                                                                                       \
    const char* rh_text_ = (text);                                                           \
    if (rh_text_ == NULL || strstr(rh_text_, (needle)) == NULL) {                            \
      fprintf(stderr, "%s:%d: message \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__, \
              rh_text_ ? rh_text_ : "(null)", (needle));                                     \
      ++rh_test_failures;                                                                    \
    }                                                                                        \
  } while (0)

#define CHECK_CLOSE(a, b, rtol, atol)                                                        \
  do {                                                                                       \
    double rh_a_ = (a), rh_b_ = (b);                                                         \
    if (!(fabs(rh_a_ - rh_b_) <= (atol) + (rtol) * fabs(rh_b_))) {                           \
      fprintf(stderr, "%s:%d: %s = %.17g not close to %s = %.17g\n", __FILE__, __LINE__, #a, \
              rh_a_, #b, rh_b_);                                                             \
      ++rh_test_failures;                                                                    \
    }                                                                                        \
  } while (0)

#define RUN_TEST(fn)                                                                   \
  do {                                                                                 \
    int rh_before_ = rh_test_failures;                                                 \
    fn();                                                                              \
    fprintf(stderr, "%s %s\n", rh_test_failures == rh_before_ ? "PASS" : "FAIL", #fn); \
  } while (0)

#define TEST_MAIN_RESULT() (rh_test_failures == 0 ? 0 : 1)

/* Deterministic pseudo-random numbers (xorshift64*), so expected values never depend on the
 * platform's rand(). */
static uint64_t rh_rng_state = 88172645463325252ull;
static inline double rh_uniform(void) {
  rh_rng_state ^= rh_rng_state >> 12;
  rh_rng_state ^= rh_rng_state << 25;
  rh_rng_state ^= rh_rng_state >> 27;
  return (double)((rh_rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double rh_normal(void) {
  double u = rh_uniform(), v = rh_uniform();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* y = X beta + noise with heavy-tailed outliers every 17th row; X is n x p row-major. */
static inline void rh_make_data(double* x, double* y, int64_t n, int64_t p, const double* beta,
                                double intercept) {
  for (int64_t i = 0; i < n; ++i) {
    double v = intercept;
    for (int64_t j = 0; j < p; ++j) {
      x[i * p + j] = rh_normal();
      v += x[i * p + j] * beta[j];
    }
    y[i] = v + 0.3 * rh_normal() + (i % 17 == 0 ? 8.0 * rh_normal() : 0.0);
  }
}

#endif /* RH_TEST_SUPPORT_H */
