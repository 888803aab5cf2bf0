/*
 * The Newton step's linear solve, per docs/decisions.md: Cholesky when H is bitwise symmetric,
 * else (or when Cholesky is refused) LU with partial pivoting, else the minimum-norm
 * least-squares solution through a one-sided Jacobi SVD. The pivot thresholds (64 P eps
 * relative, eps of the engine dtype) send exactly rank-deficient systems to the SVD
 * deterministically instead of trusting a factorisation of rounding noise.
 */
#include <math.h>
#include <string.h>

#include "cpu_engine.h"

static int is_bitwise_symmetric(const double* a, int64_t P) {
  for (int64_t i = 0; i < P; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      if (a[i * P + j] != a[j * P + i]) {
        return 0;
      }
    }
  }
  return 1;
}

/* L (lower, in l) with a = L L'; 0 when a pivot is not positive or the pivots are too
 * unequal. */
static int cholesky(const double* a, int64_t P, double eps, double* l) {
  memcpy(l, a, (size_t)(P * P) * sizeof(double));
  double largest = 0.0, smallest = INFINITY;
  for (int64_t j = 0; j < P; ++j) {
    double* lj = l + j * P;
    double diag = lj[j];
    for (int64_t k = 0; k < j; ++k) {
      diag -= lj[k] * lj[k];
    }
    if (!(diag > 0.0)) {
      return 0;
    }
    double pivot = sqrt(diag);
    lj[j] = pivot;
    for (int64_t i = j + 1; i < P; ++i) {
      double* li = l + i * P;
      double v = li[j];
      for (int64_t k = 0; k < j; ++k) {
        v -= li[k] * lj[k];
      }
      li[j] = v / pivot;
    }
    largest = diag > largest ? diag : largest;
    smallest = diag < smallest ? diag : smallest;
  }
  return smallest > 64.0 * (double)P * eps * largest;
}

static void cholesky_solve(const double* l, int64_t P, const double* b, double* x) {
  for (int64_t i = 0; i < P; ++i) {
    double v = b[i];
    for (int64_t k = 0; k < i; ++k) {
      v -= l[i * P + k] * x[k];
    }
    x[i] = v / l[i * P + i];
  }
  for (int64_t i = P - 1; i >= 0; --i) {
    double v = x[i];
    for (int64_t k = i + 1; k < P; ++k) {
      v -= l[k * P + i] * x[k];
    }
    x[i] = v / l[i * P + i];
  }
}

/* In-place LU with partial pivoting, solving for b (permuted along); 0 when the pivots are too
 * unequal or zero. */
static int lu_solve(const double* a, int64_t P, double eps, double* lu, const double* b,
                    double* x) {
  memcpy(lu, a, (size_t)(P * P) * sizeof(double));
  memcpy(x, b, (size_t)P * sizeof(double));
  double largest = 0.0, smallest = INFINITY;
  for (int64_t k = 0; k < P; ++k) {
    int64_t pivot_row = k;
    for (int64_t i = k + 1; i < P; ++i) {
      if (fabs(lu[i * P + k]) > fabs(lu[pivot_row * P + k])) {
        pivot_row = i;
      }
    }
    if (pivot_row != k) {
      for (int64_t j = 0; j < P; ++j) {
        double t = lu[k * P + j];
        lu[k * P + j] = lu[pivot_row * P + j];
        lu[pivot_row * P + j] = t;
      }
      double t = x[k];
      x[k] = x[pivot_row];
      x[pivot_row] = t;
    }
    double pivot = lu[k * P + k];
    double magnitude = fabs(pivot);
    largest = magnitude > largest ? magnitude : largest;
    smallest = magnitude < smallest ? magnitude : smallest;
    if (pivot == 0.0) {
      return 0;
    }
    for (int64_t i = k + 1; i < P; ++i) {
      double factor = lu[i * P + k] / pivot;
      lu[i * P + k] = factor;
      if (factor != 0.0) {
        for (int64_t j = k + 1; j < P; ++j) {
          lu[i * P + j] -= factor * lu[k * P + j];
        }
        x[i] -= factor * x[k];
      }
    }
  }
  if (!(smallest > 64.0 * (double)P * eps * largest)) {
    return 0;
  }
  for (int64_t i = P - 1; i >= 0; --i) {
    double v = x[i];
    for (int64_t j = i + 1; j < P; ++j) {
      v -= lu[i * P + j] * x[j];
    }
    x[i] = v / lu[i * P + i];
  }
  return 1;
}

static double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    s += a[i] * b[i];
  }
  return s;
}

/* One-sided Jacobi (Hestenes) on the rows of B = A' (the columns of A, contiguous), with the
 * same rotations applied to Vt. On exit the rows of B are sigma_j u_j' and the rows of Vt are
 * v_j', so x = sum_j v_j (b_j . rhs) / sigma_j^2 over the kept singular values. */
static void min_norm_svd_solve(const double* a, int64_t P, double eps, double* bt, double* vt,
                               double* sigma, const double* rhs, double* x) {
  for (int64_t i = 0; i < P; ++i) {
    for (int64_t j = 0; j < P; ++j) {
      bt[i * P + j] = a[j * P + i];
      vt[i * P + j] = i == j ? 1.0 : 0.0;
    }
  }
  const double orthogonality = 1e-15;
  for (int sweep = 0; sweep < 80; ++sweep) {
    int rotated = 0;
    for (int64_t i = 0; i < P - 1; ++i) {
      for (int64_t j = i + 1; j < P; ++j) {
        double* bi = bt + i * P;
        double* bj = bt + j * P;
        double alpha = dot(bi, bi, P), beta = dot(bj, bj, P), gamma = dot(bi, bj, P);
        if (gamma == 0.0 || fabs(gamma) <= orthogonality * sqrt(alpha * beta)) {
          continue;
        }
        rotated = 1;
        double zeta = (beta - alpha) / (2.0 * gamma);
        double t = (zeta >= 0.0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
        double c = 1.0 / sqrt(1.0 + t * t), s = c * t;
        double* vi = vt + i * P;
        double* vj = vt + j * P;
        for (int64_t k = 0; k < P; ++k) {
          double p = bi[k], q = bj[k];
          bi[k] = c * p - s * q;
          bj[k] = s * p + c * q;
          p = vi[k];
          q = vj[k];
          vi[k] = c * p - s * q;
          vj[k] = s * p + c * q;
        }
      }
    }
    if (!rotated) {
      break;
    }
  }
  double sigma_max = 0.0;
  for (int64_t j = 0; j < P; ++j) {
    sigma[j] = sqrt(dot(bt + j * P, bt + j * P, P));
    sigma_max = sigma[j] > sigma_max ? sigma[j] : sigma_max;
  }
  const double cutoff = eps * (double)P * sigma_max;
  for (int64_t k = 0; k < P; ++k) {
    x[k] = 0.0;
  }
  for (int64_t j = 0; j < P; ++j) {
    if (!(sigma[j] > cutoff)) {
      continue;
    }
    double coefficient = dot(bt + j * P, rhs, P) / (sigma[j] * sigma[j]);
    for (int64_t k = 0; k < P; ++k) {
      x[k] += coefficient * vt[j * P + k];
    }
  }
}

void rh_dense_solve(const double* hessian, const double* rhs, int64_t P, double eps,
                    RhWorkspace* ws, double* solution, int* used_fallback) {
  if (is_bitwise_symmetric(hessian, P) && cholesky(hessian, P, eps, ws->factor)) {
    cholesky_solve(ws->factor, P, rhs, solution);
    return;
  }
  if (lu_solve(hessian, P, eps, ws->factor, rhs, solution)) {
    return;
  }
  min_norm_svd_solve(hessian, P, eps, ws->factor, ws->right_vectors, ws->singular_values, rhs,
                     solution);
  *used_fallback = 1;
}
