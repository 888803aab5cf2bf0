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

static inline void rh_swap_buffers(double** a, double** b) {
  double* t = *a;
  *a = *b;
  *b = t;
}

#endif /* RH_SOLVER_COMMON_H */
