/*
 * The Newton step's linear solve, per docs/decisions.md: Cholesky when H is bitwise symmetric,
 * else (or when Cholesky is refused) LU with partial pivoting, else the minimum-norm
 * least-squares solution. The pivot thresholds (64 P eps relative, eps of the engine dtype)
 * send exactly rank-deficient systems to the minimum-norm solve deterministically instead of
 * trusting a factorisation of rounding noise.
 *
 * The minimum-norm solve of a bitwise symmetric H (the normal case) goes through its
 * eigendecomposition (the singular values of a symmetric matrix are the magnitudes of its
 * eigenvalues, so the eps * P * sigma_max cutoff is the same rule); an asymmetric H (restored
 * from a checkpoint), or a symmetric one whose QR iteration does not converge in its bound,
 * takes the one-sided Jacobi SVD.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_engine.h"
#include "dense_solve.h"
#include "rh_algorithm.h"

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

/* L (lower, in l) with a = L L'; 0 when a squared pivot is not positive or not above
 * 64 P eps times its own column's diagonal (docs/decisions.md: the share of the column left
 * after projecting out the earlier ones, a test invariant under diagonal scaling). */
static int cholesky(const double* a, int64_t P, double eps, double* l) {
  memcpy(l, a, (size_t)(P * P) * sizeof(double));
  const double floor = rh_pivot_floor(P, eps);
  for (int64_t j = 0; j < P; ++j) {
    double* lj = l + j * P;
    double diag = lj[j];
    for (int64_t k = 0; k < j; ++k) {
      diag -= lj[k] * lj[k];
    }
    if (!(diag > floor * a[j * P + j])) {
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
  }
  return 1;
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
  if (!(smallest > rh_pivot_floor(P, eps) * largest)) {
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
void rh_min_norm_jacobi_solve(const double* a, const double* rhs, int64_t P, double eps,
                              RhWorkspace* ws, double* x, int64_t* rank) {
  double* bt = ws->factor;
  double* vt = ws->right_vectors;
  double* sigma = ws->singular_values;
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
  const double cutoff = rh_rank_cutoff(P, eps, sigma_max);
  for (int64_t k = 0; k < P; ++k) {
    x[k] = 0.0;
  }
  *rank = 0;
  for (int64_t j = 0; j < P; ++j) {
    if (!(sigma[j] > cutoff)) {
      continue;
    }
    ++*rank;
    double coefficient = dot(bt + j * P, rhs, P) / (sigma[j] * sigma[j]);
    for (int64_t k = 0; k < P; ++k) {
      x[k] += coefficient * vt[j * P + k];
    }
  }
}

/* ---- Minimum-norm solve of a symmetric matrix through its eigendecomposition.
 *
 * A = Q T Q' with T tridiagonal (Householder), Q = H_0 H_1 ... H_{P-3} and
 * H_k = I - beta_k v_k v_k' acting on the indices k+1..P-1; T = Z diag(lambda) Z' (implicit QR
 * with Wilkinson shifts). The solution is x = Q y with y = T^+ Q'b, and
 * y = Z diag(f) Z' (Q'b) with f_i = 1 / lambda_i where |lambda_i| > eps P max|lambda|, else 0.
 *
 * The eigenvalues alone cost O(P^2), the eigenvectors O(P^3), so the eigenvalues come first.
 * When none of them is cut off, T^+ = T^{-1} and y is the solution of the tridiagonal system,
 * computed by Gaussian elimination with partial pivoting in O(P) (backward stable, its growth
 * factor is at most 2 for a tridiagonal matrix). Only when some eigenvalue is cut off does the
 * QR iteration run again with the rotations accumulated into Z. Z is kept transposed (row i of
 * zt is the i-th eigenvector of T) so every rotation and every product with an eigenvector
 * runs over contiguous memory. */

/* a . b with four partial sums (a fixed order, so the result is deterministic). */
static double dot4(const double* a, const double* b, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) {
    s0 += a[i] * b[i];
  }
  return (s0 + s1) + (s2 + s3);
}

/* Reduces t (a copy of A; only its lower triangle is read) in place. On exit d and e hold the
 * diagonal and the off-diagonal (e[k] = T_{k+1,k}) of T, v_k lies in row k of t at columns
 * k+1..P-1 (the unused upper triangle) and beta_k at t[(k+1) P + k], below the diagonal in the
 * column the step has just reduced. work: P doubles. */
static void tridiagonalize(double* t, int64_t P, double* d, double* e, double* work) {
  for (int64_t k = 0; k + 2 < P; ++k) {
    const int64_t n = P - k - 1;
    double* v = t + k * P + k + 1;
    /* The rows and columns of the trailing block A22 are k+1..P-1; element (i, j) of it, for
     * j <= i, is trailing[i P + j]. */
    double* trailing = t + (k + 1) * P + k + 1;
    d[k] = t[k * P + k];
    double scale = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      v[i] = t[(k + 1 + i) * P + k]; /* x = A[k+1:, k] */
      scale = fmax(scale, fabs(v[i]));
    }
    double tail = 0.0; /* |x[1:]|^2 / scale^2, scaled against overflow */
    for (int64_t i = 1; scale > 0.0 && i < n; ++i) {
      const double q = v[i] / scale;
      tail += q * q;
    }
    if (tail == 0.0) { /* the column is already reduced: H_k = I */
      e[k] = v[0];
      t[(k + 1) * P + k] = 0.0;
      continue;
    }
    const double head = v[0] / scale;
    const double norm = scale * sqrt(head * head + tail);
    /* H_k x = alpha e_1 with alpha of the sign opposite to x_0, so v_0 = x_0 - alpha adds two
     * numbers of one sign; v'v = 2 norm |v_0| gives beta = 2 / v'v. */
    const double alpha = v[0] >= 0.0 ? -norm : norm;
    v[0] -= alpha;
    const double beta = (1.0 / norm) / fabs(v[0]);
    e[k] = alpha;
    t[(k + 1) * P + k] = beta;
    /* H A22 H = A22 - v w' - w v' with p = beta A22 v and w = p - (beta p'v / 2) v. A22 v from
     * the lower triangle: row i contributes its part left of the diagonal to p_i (a dot
     * product) and, by symmetry, to p_j for j < i (an axpy), both in one contiguous sweep. */
    memset(work, 0, (size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; ++i) {
      const double* row = trailing + i * P;
      const double vi = v[i];
      double s0 = 0.0, s1 = 0.0;
      int64_t j = 0;
      for (; j + 2 <= i; j += 2) {
        s0 += row[j] * v[j];
        s1 += row[j + 1] * v[j + 1];
        work[j] += row[j] * vi;
        work[j + 1] += row[j + 1] * vi;
      }
      for (; j < i; ++j) {
        s0 += row[j] * v[j];
        work[j] += row[j] * vi;
      }
      work[i] += (s0 + s1) + row[i] * vi;
    }
    double pv = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      work[i] *= beta;
      pv += work[i] * v[i];
    }
    const double half = 0.5 * beta * pv;
    for (int64_t i = 0; i < n; ++i) {
      work[i] -= half * v[i];
    }
    for (int64_t i = 0; i < n; ++i) {
      double* row = trailing + i * P;
      const double vi = v[i], wi = work[i];
      for (int64_t j = 0; j <= i; ++j) {
        row[j] -= vi * work[j] + wi * v[j];
      }
    }
  }
  if (P >= 2) {
    d[P - 2] = t[(P - 2) * P + P - 2];
    e[P - 2] = t[(P - 1) * P + P - 2];
  }
  d[P - 1] = t[(P - 1) * P + P - 1];
}

/* x <- H_k x (H_k is its own inverse and transpose). */
static void apply_reflector(const double* t, int64_t P, int64_t k, double* x) {
  const double beta = t[(k + 1) * P + k];
  if (beta == 0.0) {
    return;
  }
  const double* v = t + k * P + k + 1;
  double* u = x + k + 1;
  const int64_t n = P - k - 1;
  const double s = beta * dot4(v, u, n);
  for (int64_t i = 0; i < n; ++i) {
    u[i] -= s * v[i];
  }
}

/* sqrt(x^2 + z^2) without overflow or harmful underflow. */
static double pythag(double x, double z) {
  const double ax = fabs(x), az = fabs(z);
  const double big = ax > az ? ax : az, small = ax > az ? az : ax;
  if (big == 0.0) {
    return 0.0;
  }
  const double q = small / big;
  return big * sqrt(1.0 + q * q);
}

/* e[k] is negligible against its diagonal neighbours (or underflowed). */
static int negligible(const double* d, const double* e, int64_t k) {
  const double off = fabs(e[k]);
  return off <= DBL_EPSILON * (fabs(d[k]) + fabs(d[k + 1])) || off < DBL_MIN;
}

/* One implicit QR step with the Wilkinson shift on the unreduced block lo..hi of T: T <- G'TG
 * for the rotations G in the planes (k, k+1), k = lo..hi-1, chasing the bulge down; with zt,
 * the same rotations are accumulated into its rows. A rotation maps (x, z) to (r, 0) with
 * c = x / r, s = z / r and acts on rows k, k+1 as [c s; -s c]. */
static void qr_step(double* d, double* e, int64_t lo, int64_t hi, double* zt, int64_t P) {
  /* mu: the eigenvalue of the trailing 2 x 2 block nearer to d[hi]; the denominator adds two
   * numbers of one sign and is nonzero because e[hi-1] is. */
  const double delta = 0.5 * (d[hi - 1] - d[hi]);
  const double b = e[hi - 1];
  const double root = pythag(delta, b);
  const double mu = d[hi] - b * (b / (delta + (delta >= 0.0 ? root : -root)));
  double x = d[lo] - mu, z = e[lo];
  for (int64_t k = lo; k < hi; ++k) {
    const double r = pythag(x, z);
    double c = 1.0, s = 0.0;
    if (r > 0.0) {
      c = x / r;
      s = z / r;
    }
    if (k > lo) {
      e[k - 1] = r; /* the bulge below e[k-1] is gone */
    }
    const double p = d[k], q = d[k + 1], off = e[k];
    const double cc = c * c, ss = s * s, cross = 2.0 * c * s * off;
    d[k] = cc * p + cross + ss * q;
    d[k + 1] = ss * p - cross + cc * q;
    e[k] = c * s * (q - p) + (cc - ss) * off;
    if (k + 1 < hi) {
      z = s * e[k + 1]; /* the new bulge at (k+2, k) */
      e[k + 1] *= c;
      x = e[k];
    }
    if (zt != NULL) {
      double* zk = zt + k * P;
      double* zk1 = zk + P;
      for (int64_t j = 0; j < P; ++j) {
        const double u = zk[j], w = zk1[j];
        zk[j] = c * u + s * w;
        zk1[j] = c * w - s * u;
      }
    }
  }
}

/* Eigenvalues of T (d, e; both overwritten) into d and, when zt != NULL, the eigenvectors into
 * the rows of zt (which must hold the identity). 0 when the eigenvalues need more than 30 QR
 * steps each on average. */
static int tridiagonal_eigen(double* d, double* e, int64_t P, double* zt) {
  int64_t budget = 30 * P;
  int64_t hi = P - 1;
  while (hi > 0) {
    if (negligible(d, e, hi - 1)) {
      e[hi - 1] = 0.0;
      --hi;
      continue;
    }
    int64_t lo = hi - 1;
    while (lo > 0 && !negligible(d, e, lo - 1)) {
      --lo;
    }
    if (lo > 0) {
      e[lo - 1] = 0.0;
    }
    if (budget-- == 0) {
      return 0;
    }
    qr_step(d, e, lo, hi, zt, P);
  }
  return 1;
}

/* Solves T y = y (in place) for T with diagonal d and off-diagonal e by Gaussian elimination
 * with partial pivoting; d and e are overwritten by the first two diagonals of U, u2 receives
 * the third. 0 on a zero pivot. Step k eliminates column k between the current row k (which
 * may reach column k+2 after an earlier interchange) and the original row k+1. */
static int tridiagonal_solve(double* d, double* e, int64_t P, double* u2, double* y) {
  double a = d[0], b = P > 1 ? e[0] : 0.0, c = 0.0, rhs = y[0];
  for (int64_t k = 0; k + 1 < P; ++k) {
    const double l = e[k], dn = d[k + 1], en = k + 2 < P ? e[k + 1] : 0.0, rn = y[k + 1];
    double p0, p1, p2, pr, o0, o1, o2, orhs;
    if (fabs(l) > fabs(a)) {
      p0 = l, p1 = dn, p2 = en, pr = rn;
      o0 = a, o1 = b, o2 = c, orhs = rhs;
    } else {
      p0 = a, p1 = b, p2 = c, pr = rhs;
      o0 = l, o1 = dn, o2 = en, orhs = rn;
    }
    if (p0 == 0.0) {
      return 0;
    }
    const double m = o0 / p0;
    d[k] = p0;
    e[k] = p1;
    u2[k] = p2;
    y[k] = pr;
    a = o1 - m * p1;
    b = o2 - m * p2;
    c = 0.0;
    rhs = orhs - m * pr;
  }
  if (a == 0.0) {
    return 0;
  }
  d[P - 1] = a;
  y[P - 1] = rhs;
  for (int64_t k = P - 1; k >= 0; --k) {
    double v = y[k];
    if (k + 1 < P) {
      v -= e[k] * y[k + 1];
    }
    if (k + 2 < P) {
      v -= u2[k] * y[k + 2];
    }
    y[k] = v / d[k];
  }
  return 1;
}

static int all_finite(const double* v, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += v[i] * 0.0; /* NaN for an infinite or NaN v[i], 0 otherwise */
  }
  return sum == 0.0;
}

int rh_min_norm_symmetric_solve(const double* a, const double* rhs, int64_t P, double eps,
                                RhWorkspace* ws, double* x, int64_t* rank) {
  double* t = ws->factor;
  double* zt = ws->right_vectors;
  double* d = ws->singular_values;
  double* e = ws->scratch;
  /* While only eigenvalues are computed, zt holds a copy of T: its diagonal in zt[0, P), its
   * off-diagonal in zt[P, 2P - 1) and, during the tridiagonal solve, U's third diagonal in
   * zt[2P, 3P) when P >= 3 (else in d). */
  double* saved_d = zt;
  double* saved_e = zt + P;
  if (!all_finite(a, P * P)) {
    return 0;
  }
  memcpy(t, a, (size_t)(P * P) * sizeof(double));
  tridiagonalize(t, P, d, e, x);
  if (!all_finite(d, P) || !all_finite(e, P - 1)) {
    return 0;
  }
  /* x <- Q'b. */
  memcpy(x, rhs, (size_t)P * sizeof(double));
  for (int64_t k = 0; k + 2 < P; ++k) {
    apply_reflector(t, P, k, x);
  }
  memcpy(saved_d, d, (size_t)P * sizeof(double));
  memcpy(saved_e, e, (size_t)(P - 1) * sizeof(double));
  if (!tridiagonal_eigen(d, e, P, NULL)) {
    return 0;
  }
  double lambda_max = 0.0;
  for (int64_t i = 0; i < P; ++i) {
    lambda_max = fmax(lambda_max, fabs(d[i]));
  }
  const double cutoff = rh_rank_cutoff(P, eps, lambda_max);
  int64_t kept = 0;
  for (int64_t i = 0; i < P; ++i) {
    kept += fabs(d[i]) > cutoff;
  }
  *rank = kept;
  if (kept == P) {
    double* u2 = P >= 3 ? zt + 2 * P : d;
    if (!tridiagonal_solve(saved_d, saved_e, P, u2, x)) {
      return 0;
    }
  } else {
    memcpy(d, saved_d, (size_t)P * sizeof(double));
    memcpy(e, saved_e, (size_t)(P - 1) * sizeof(double));
    memset(zt, 0, (size_t)(P * P) * sizeof(double));
    for (int64_t i = 0; i < P; ++i) {
      zt[i * P + i] = 1.0;
    }
    if (!tridiagonal_eigen(d, e, P, zt)) {
      return 0;
    }
    lambda_max = 0.0;
    for (int64_t i = 0; i < P; ++i) {
      lambda_max = fmax(lambda_max, fabs(d[i]));
    }
    const double cut = rh_rank_cutoff(P, eps, lambda_max);
    /* e (free now) <- diag(f) Z' x; x <- Z e. */
    for (int64_t i = 0; i < P; ++i) {
      e[i] = fabs(d[i]) > cut ? dot4(zt + i * P, x, P) / d[i] : 0.0;
    }
    memset(x, 0, (size_t)P * sizeof(double));
    for (int64_t i = 0; i < P; ++i) {
      if (e[i] != 0.0) {
        const double* zi = zt + i * P;
        for (int64_t j = 0; j < P; ++j) {
          x[j] += e[i] * zi[j];
        }
      }
    }
  }
  /* x <- Q x. */
  for (int64_t k = P - 3; k >= 0; --k) {
    apply_reflector(t, P, k, x);
  }
  return 1;
}

/* scaled = diag(d) a diag(d) with d from rh_equilibration_factor of a's diagonal; 0 when a
 * product is not finite (a is then no Newton matrix: the ladder goes on with a unscaled). */
static int equilibrate(const double* a, int64_t P, double* d, double* scaled) {
  for (int64_t i = 0; i < P; ++i) {
    d[i] = rh_equilibration_factor(a[i * P + i]);
  }
  for (int64_t i = 0; i < P; ++i) {
    for (int64_t j = 0; j < P; ++j) {
      scaled[i * P + j] = a[i * P + j] * d[i] * d[j];
    }
  }
  return all_finite(scaled, P * P);
}

/* The minimum-norm rungs on a, with the number of singular values they kept in *rank. */
static void min_norm_solve(const double* a, const double* rhs, int64_t P, double eps, int symmetric,
                           RhWorkspace* ws, double* x, int64_t* rank) {
  if (!symmetric || !rh_min_norm_symmetric_solve(a, rhs, P, eps, ws, x, rank)) {
    rh_min_norm_jacobi_solve(a, rhs, P, eps, ws, x, rank);
  }
}

int rh_dense_solve(const double* hessian, const double* rhs, int64_t P, double eps, RhWorkspace* ws,
                   double* solution, int* used_fallback) {
  const int symmetric = is_bitwise_symmetric(hessian, P);
  if (symmetric && cholesky(hessian, P, eps, ws->factor)) {
    cholesky_solve(ws->factor, P, rhs, solution);
    return 0;
  }
  /* LU's pivot test and the SVD's rank cutoff compare columns with each other, so both run on
   * the equilibrated system diag(d) H diag(d) y = d rhs, x = d y: raw units alone never make H
   * look singular (docs/decisions.md, "Linear solve ladder"). Scaling by powers of two keeps H's
   * symmetry bit for bit. */
  double* d = ws->equilibration;
  double* scaled_rhs = ws->equilibration + P;
  const int scaled = equilibrate(hessian, P, d, ws->equilibrated);
  if (!scaled) { /* no Newton matrix overflows so; whatever did goes on unscaled */
    for (int64_t i = 0; i < P; ++i) {
      d[i] = 1.0;
    }
    memcpy(ws->equilibrated, hessian, (size_t)(P * P) * sizeof(double));
  }
  for (int64_t i = 0; i < P; ++i) {
    scaled_rhs[i] = d[i] * rhs[i];
  }
  int64_t rank = P;
  if (!lu_solve(ws->equilibrated, P, eps, ws->factor, scaled_rhs, solution)) {
    *used_fallback = 1;
    min_norm_solve(ws->equilibrated, scaled_rhs, P, eps, symmetric, ws, solution, &rank);
    if (rank < P && scaled) { /* unscaled, the SVD above was already H's own */
      /* Rank deficient after equilibration. Where the cutoff on H itself keeps the same rank
       * (collinear columns of like scale), the step is H's minimum-norm solution, the norm of
       * beta; where raw units make it cut more, the equilibrated one. */
      double* equilibrated_solution = ws->equilibration + 2 * P;
      memcpy(equilibrated_solution, solution, (size_t)P * sizeof(double));
      int64_t raw_rank = 0;
      min_norm_solve(hessian, rhs, P, eps, symmetric, ws, solution, &raw_rank);
      if (raw_rank == rank) {
        return 1;
      }
      memcpy(solution, equilibrated_solution, (size_t)P * sizeof(double));
    }
  }
  for (int64_t i = 0; i < P; ++i) {
    solution[i] *= d[i];
  }
  return rank < P;
}
