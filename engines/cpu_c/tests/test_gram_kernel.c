/* The packed-panel Gram kernel (src/gram_kernel.c, compiled into this test) against a naive
 * triple loop: every entry of the upper tiles gets exactly its sum, and nothing outside them
 * is written. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gram_kernel.h"

static int failures = 0;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double uniform_pm1(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 2685821657736338717ull) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Value (k, col) of a panel in the gram_kernel.h layout. */
static double* at(double* panel, int64_t stride, int64_t k, int64_t col) {
  return panel + (col / RH_PANEL_WIDTH) * stride * RH_PANEL_WIDTH + k * RH_PANEL_WIDTH +
         col % RH_PANEL_WIDTH;
}

static void check_shape(int64_t groups, int64_t depth, int64_t stride) {
  const int64_t width = groups * RH_PANEL_WIDTH;
  const int64_t ldc = width + 3; /* a leading dimension wider than the tile rows */
  double* scaled = malloc((size_t)(width * stride) * sizeof(double));
  double* plain = malloc((size_t)(width * stride) * sizeof(double));
  double* c = malloc((size_t)(width * ldc) * sizeof(double));
  double* before = malloc((size_t)(width * ldc) * sizeof(double));
  for (int64_t k = 0; k < stride; ++k) {
    for (int64_t col = 0; col < width; ++col) {
      *at(scaled, stride, k, col) = uniform_pm1();
      *at(plain, stride, k, col) = uniform_pm1();
    }
  }
  for (int64_t e = 0; e < width * ldc; ++e) {
    before[e] = c[e] = uniform_pm1();
  }
  rh_panel_gram_upper(scaled, plain, depth, stride, groups, c, ldc);
  for (int64_t i = 0; i < width; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const int in_upper_tiles = j < width && j / RH_PANEL_WIDTH >= i / RH_PANEL_WIDTH;
      double expected = before[i * ldc + j], magnitude = fabs(expected);
      if (in_upper_tiles) {
        for (int64_t k = 0; k < depth; ++k) {
          double term = *at(scaled, stride, k, i) * *at(plain, stride, k, j);
          expected += term;
          magnitude += fabs(term);
        }
      }
      double got = c[i * ldc + j];
      double allowed = in_upper_tiles ? 4.0 * (double)(depth + 1) * 1.2e-16 * magnitude : 0.0;
      if (!(fabs(got - expected) <= allowed)) {
        fprintf(stderr, "groups %lld depth %lld: c[%lld, %lld] = %.17g, expected %.17g\n",
                (long long)groups, (long long)depth, (long long)i, (long long)j, got, expected);
        ++failures;
        i = width; /* one report per shape */
        break;
      }
    }
  }
  free(scaled);
  free(plain);
  free(c);
  free(before);
}

int main(void) {
  const int64_t depths[] = {0, 1, 7, 128, 131};
  for (int64_t groups = 1; groups <= 5; ++groups) {
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; ++d) {
      check_shape(groups, depths[d], depths[d] > 0 ? depths[d] + 2 : 1);
    }
  }
  fprintf(stderr, "%s test_panel_gram_matches_naive_sums\n", failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}
