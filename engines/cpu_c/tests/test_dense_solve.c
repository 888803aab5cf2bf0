/* The minimum-norm rung of the linear solve ladder (dense_solve.c), against independent math:
 * matrices with a known eigendecomposition V diag(lambda) V' built from a random orthogonal V,
 * whose minimum-norm solution V diag(1/lambda on the support) V' b is computed here in long
 * double; exactly singular Gram matrices of integer designs with collinear columns, whose null
 * space is known by construction; 1 x 1 and 2 x 2 cases solved by hand. The symmetric
 * eigensolver and the Jacobi SVD are compared on the same matrices, and an asymmetric matrix
 * must still be solved as such (the Jacobi SVD). Through the engine, a batch with duplicated
 * columns and ridge 0 must report used_regularized_fallback and give the fit of the
 * de-duplicated design with the shared coefficient split equally.
 *
 * dense_solve.c is internal (hidden in the library), so this test compiles it directly; the
 * engine-level checks call the library through the ABI. */
#include <float.h>

#include "dense_solve.h"
#include "test_support.h"

#define P_MAX 300

static double A[P_MAX * P_MAX], V[P_MAX * P_MAX], U[P_MAX * P_MAX];
static double B[P_MAX], X[P_MAX], XJ[P_MAX], REF[P_MAX], LAMBDA[P_MAX];
/* The minimum-norm solvers' report: the number of singular values kept. */
static int64_t rank_kept;

static RhWorkspace workspace(int64_t P) {
  RhWorkspace ws;
  memset(&ws, 0, sizeof ws);
  ws.factor = malloc(sizeof(double) * (size_t)(P * P));
  ws.right_vectors = malloc(sizeof(double) * (size_t)(P * P));
  ws.singular_values = malloc(sizeof(double) * (size_t)P);
  ws.scratch = malloc(sizeof(double) * (size_t)P);
  ws.equilibrated = malloc(sizeof(double) * (size_t)(P * P));
  ws.equilibration = malloc(sizeof(double) * (size_t)(3 * P));
  return ws;
}

static void release(RhWorkspace* ws) {
  free(ws->factor);
  free(ws->right_vectors);
  free(ws->singular_values);
  free(ws->scratch);
  free(ws->equilibrated);
  free(ws->equilibration);
}

/* A random orthogonal P x P matrix (row-major, orthonormal columns): modified Gram-Schmidt on
 * the columns of a Gaussian matrix, every column orthogonalised twice ("twice is enough"). */
static void random_orthogonal(double* q, int P) {
  for (int i = 0; i < P * P; ++i) {
    q[i] = rh_normal();
  }
  for (int j = 0; j < P; ++j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < j; ++i) {
        long double proj = 0.0L;
        for (int r = 0; r < P; ++r) {
          proj += (long double)q[r * P + i] * q[r * P + j];
        }
        for (int r = 0; r < P; ++r) {
          q[r * P + j] -= (double)proj * q[r * P + i];
        }
      }
    }
    long double norm = 0.0L;
    for (int r = 0; r < P; ++r) {
      norm += (long double)q[r * P + j] * q[r * P + j];
    }
    double inv = 1.0 / sqrt((double)norm);
    for (int r = 0; r < P; ++r) {
      q[r * P + j] *= inv;
    }
  }
}

/* a = left diag(lambda) right' (row-major). With left == right the result is made exactly
 * symmetric (one triangle computed, mirrored), as the engine's information is. */
static void spectral_matrix(const double* left, const double* right, const double* lambda, int P,
                            double* a) {
  const int symmetric = left == right;
  for (int i = 0; i < P; ++i) {
    for (int j = 0; j < (symmetric ? i + 1 : P); ++j) {
      long double s = 0.0L;
      for (int k = 0; k < P; ++k) {
        s += (long double)left[i * P + k] * lambda[k] * right[j * P + k];
      }
      a[i * P + j] = (double)s;
      if (symmetric) {
        a[j * P + i] = (double)s;
      }
    }
  }
}

/* The minimum-norm solution of (left diag(lambda) right') x = b: right diag(1/lambda on the
 * support) left' b. */
static void analytic_min_norm(const double* left, const double* right, const double* lambda, int P,
                              const double* b, double* out) {
  long double f[P_MAX];
  for (int k = 0; k < P; ++k) {
    long double c = 0.0L;
    for (int r = 0; r < P; ++r) {
      c += (long double)left[r * P + k] * b[r];
    }
    f[k] = lambda[k] != 0.0 ? c / lambda[k] : 0.0L;
  }
  for (int i = 0; i < P; ++i) {
    long double s = 0.0L;
    for (int k = 0; k < P; ++k) {
      s += (long double)right[i * P + k] * f[k];
    }
    out[i] = (double)s;
  }
}

static double norm2(const double* x, int P) {
  long double s = 0.0L;
  for (int i = 0; i < P; ++i) {
    s += (long double)x[i] * x[i];
  }
  return sqrt((double)s);
}

static double relative_error(const double* x, const double* ref, int P) {
  long double s = 0.0L;
  for (int i = 0; i < P; ++i) {
    s += ((long double)x[i] - ref[i]) * ((long double)x[i] - ref[i]);
  }
  double scale = norm2(ref, P);
  return sqrt((double)s) / (scale > 0.0 ? scale : 1.0);
}

static int all_finite_vector(const double* x, int P) {
  for (int i = 0; i < P; ++i) {
    if (!isfinite(x[i])) {
      return 0;
    }
  }
  return 1;
}

/* Tolerance for the relative error of a computed minimum-norm solution against the exact one
 * of the matrix as built. The matrix differs from V diag(lambda) V' by its rounding (entries
 * within about eps |lambda|_max each) and each solver is backward stable with a backward error
 * of order P eps ||A||. For x = A^+ b with the support kept, first-order perturbation theory
 * (Wedin) bounds the relative change by about kappa^2 ||dA|| / ||A|| when b has a component
 * outside the range (kappa^2 rather than kappa because the null-space component of b enters
 * through (A^+)^2), where kappa = |lambda|_max / |lambda|_min on the support. So
 * 64 P eps kappa^2 leaves a margin of 64 over the rounding-level estimate P eps kappa^2. */
static double min_norm_tolerance(int P, double kappa) {
  return 64.0 * P * DBL_EPSILON * kappa * kappa;
}

/* Support eigenvalues in [1, 10] (kappa <= 10), the rest exactly zero; negative = flip signs
 * at random (both signs present when the support has at least two values). */
static void spectrum(int P, int rank, int negative, double* lambda) {
  for (int k = 0; k < P; ++k) {
    lambda[k] = k < rank ? 1.0 + 9.0 * rh_uniform() : 0.0;
    if (negative && k < rank && (rh_uniform() < 0.5 || k == 1)) {
      lambda[k] = -lambda[k];
    }
  }
  if (negative && rank >= 2 && lambda[0] < 0.0) {
    lambda[0] = -lambda[0];
  }
  /* Spread the zeros among the nonzero eigenvalues so no solver sees them in order. */
  for (int k = P - 1; k > 0; --k) {
    int j = (int)(rh_uniform() * (k + 1));
    double t = lambda[k];
    lambda[k] = lambda[j];
    lambda[j] = t;
  }
}

static void random_vector(double* b, int P) {
  for (int i = 0; i < P; ++i) {
    b[i] = rh_normal();
  }
}

/* One matrix V diag(lambda) V' through the symmetric solve (both working epsilons), the whole
 * ladder and, when asked, the Jacobi SVD; every answer against the analytic one. */
static void check_spectral_case(int P, int rank, int negative, int with_jacobi) {
  RhWorkspace ws = workspace(P);
  random_orthogonal(V, P);
  spectrum(P, rank, negative, LAMBDA);
  spectral_matrix(V, V, LAMBDA, P, A);
  random_vector(B, P);
  analytic_min_norm(V, V, LAMBDA, P, B, REF);
  const double tol = min_norm_tolerance(P, 10.0);
  const double epsilons[2] = {DBL_EPSILON, FLT_EPSILON};
  for (int e = 0; e < 2; ++e) {
    CHECK(rh_min_norm_symmetric_solve(A, B, P, epsilons[e], &ws, X, &rank_kept) == 1);
    CHECK(rank_kept == rank);
    double err = relative_error(X, REF, P);
    if (!(err <= tol)) {
      fprintf(stderr, "P %d rank %d negative %d eps %g: symmetric error %.3g > %.3g\n", P, rank,
              negative, epsilons[e], err, tol);
    }
    CHECK(err <= tol);
  }
  if (rank == P) {
    /* Full rank with kappa <= 10: the ladder's factorisations accept it. (A rounded
     * V diag(lambda) V' with a zero eigenvalue is not exactly singular, so whether the pivot
     * tests refuse it depends on its rounding; exactly singular matrices are checked through
     * the ladder below, with collinear columns.) */
    int used_fallback = 0;
    CHECK(rh_dense_solve(A, B, P, DBL_EPSILON, &ws, X, &used_fallback) == 0); /* nothing dropped */
    CHECK(used_fallback == 0);
    CHECK(relative_error(X, REF, P) <= tol);
  }
  if (with_jacobi) {
    rh_min_norm_jacobi_solve(A, B, P, DBL_EPSILON, &ws, XJ, &rank_kept);
    CHECK(relative_error(XJ, REF, P) <= tol);
    CHECK(rh_min_norm_symmetric_solve(A, B, P, DBL_EPSILON, &ws, X, &rank_kept) == 1);
    CHECK(relative_error(X, XJ, P) <= tol);
  }
  release(&ws);
}

static void test_psd_known_rank_matches_analytic_min_norm(void) {
  const int sizes[] = {1, 2, 3, 17, 64, 300};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    const int P = sizes[s];
    const int ranks[] = {P, P - 1, P / 2, 1};
    for (int r = 0; r < 4; ++r) {
      if (ranks[r] < 1 || (r > 0 && ranks[r] == ranks[r - 1])) {
        continue;
      }
      /* The Jacobi SVD is O(P^3) per sweep: at P = 300 it runs on one case only. */
      check_spectral_case(P, ranks[r], 0, P < 300 || r == 2);
    }
  }
}

static void test_symmetric_indefinite_matches_analytic(void) {
  const int sizes[] = {2, 3, 17, 64, 300};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    const int P = sizes[s];
    /* Full rank: H x = b itself, checked also by its residual. */
    check_spectral_case(P, P, 1, P < 300);
    RhWorkspace ws = workspace(P);
    CHECK(rh_min_norm_symmetric_solve(A, B, P, DBL_EPSILON, &ws, X, &rank_kept) == 1);
    double residual = 0.0, a_norm = 0.0; /* ||H x - b||_inf and ||H||_inf */
    for (int i = 0; i < P; ++i) {
      long double r = -(long double)B[i], row = 0.0L;
      for (int j = 0; j < P; ++j) {
        r += (long double)A[i * P + j] * X[j];
        row += fabsl((long double)A[i * P + j]);
      }
      residual = fmax(residual, fabs((double)r));
      a_norm = fmax(a_norm, (double)row);
    }
    double x_norm = 0.0;
    for (int i = 0; i < P; ++i) {
      x_norm = fmax(x_norm, fabs(X[i]));
    }
    /* Backward stability: the residual is a rounding-level multiple of ||H|| ||x||. */
    CHECK(residual <= 64.0 * P * DBL_EPSILON * a_norm * x_norm);
    release(&ws);
    /* Rank deficient and indefinite: the eigenvectors path with eigenvalues of both signs. */
    if (P >= 3) {
      check_spectral_case(P, P - P / 3, 1, P < 300);
    }
  }
}

/* H = X'X for an integer design whose column 1 repeats column 0 and whose column 3 is the sum
 * of columns 2 and 4: exactly singular (integer arithmetic below 2^53 is exact), null space
 * spanned by e0 - e1 and e2 - e3 + e4. */
static void check_collinear_case(int P) {
  enum { ROWS_PER_PARAMETER = 4 };
  const int n = ROWS_PER_PARAMETER * P;
  double* x = malloc(sizeof(double) * (size_t)n * (size_t)P);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < P; ++j) {
      x[r * P + j] = (double)((int)(rh_uniform() * 7.0) - 3);
    }
    x[r * P + 1] = x[r * P + 0];
    x[r * P + 3] = x[r * P + 2] + x[r * P + 4];
  }
  for (int i = 0; i < P; ++i) {
    for (int j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int r = 0; r < n; ++r) {
        s += x[r * P + i] * x[r * P + j];
      }
      A[i * P + j] = s;
      A[j * P + i] = s;
    }
  }
  free(x);
  random_vector(B, P);
  /* Orthonormal null basis (the two vectors have disjoint supports). */
  static double null_basis[2][P_MAX];
  memset(null_basis, 0, sizeof null_basis);
  null_basis[0][0] = 1.0 / sqrt(2.0);
  null_basis[0][1] = -1.0 / sqrt(2.0);
  null_basis[1][2] = 1.0 / sqrt(3.0);
  null_basis[1][3] = -1.0 / sqrt(3.0);
  null_basis[1][4] = 1.0 / sqrt(3.0);

  RhWorkspace ws = workspace(P);
  int used_fallback = 0;
  CHECK(rh_dense_solve(A, B, P, DBL_EPSILON, &ws, X, &used_fallback) == 1); /* rank P - 2 */
  CHECK(used_fallback == 1);
  CHECK(all_finite_vector(X, P));
  double x_norm = norm2(X, P);
  CHECK(x_norm > 0.0);
  /* The minimum-norm solution has no null-space component, and H x is the projection of b
   * onto the range: b - H x lies in the null space. The Gram of 4P integer rows in [-3, 3]
   * is well conditioned on its range (kappa of order 10: a 4P x P design with entries of one
   * distribution, apart from the two dependent columns), so the rounding-level bound of
   * min_norm_tolerance applies with kappa = 10. */
  const double tol = min_norm_tolerance(P, 10.0);
  double h_norm = 0.0;
  for (int i = 0; i < P * P; ++i) {
    h_norm = fmax(h_norm, fabs(A[i]));
  }
  h_norm *= P; /* >= ||H||_2 */
  double residual[P_MAX];
  for (int i = 0; i < P; ++i) {
    long double s = B[i];
    for (int j = 0; j < P; ++j) {
      s -= (long double)A[i * P + j] * X[j];
    }
    residual[i] = (double)s;
  }
  for (int k = 0; k < 2; ++k) {
    long double along_x = 0.0L, along_r = 0.0L;
    for (int i = 0; i < P; ++i) {
      along_x += (long double)null_basis[k][i] * X[i];
      along_r += (long double)null_basis[k][i] * residual[i];
    }
    CHECK(fabs((double)along_x) <= tol * x_norm);
    for (int i = 0; i < P; ++i) {
      residual[i] -= (double)along_r * null_basis[k][i];
    }
  }
  CHECK(norm2(residual, P) <= tol * h_norm * x_norm);
  if (P <= 64) {
    rh_min_norm_jacobi_solve(A, B, P, DBL_EPSILON, &ws, XJ, &rank_kept);
    CHECK(relative_error(X, XJ, P) <= tol);
  }
  release(&ws);
}

static void test_collinear_columns_give_finite_solution_orthogonal_to_null_space(void) {
  check_collinear_case(5);
  check_collinear_case(40);
  check_collinear_case(300);
}

/* Cases small enough to solve by hand, through the symmetric solve and the ladder. */
static void test_one_and_two_parameters_by_hand(void) {
  RhWorkspace ws = workspace(2);
  double a1[1], b1[1] = {3.0}, x1[1];
  int used_fallback = 0;
  /* 0 x = 3: the minimum-norm solution is 0; Cholesky and LU refuse a zero pivot. */
  a1[0] = 0.0;
  CHECK(rh_min_norm_symmetric_solve(a1, b1, 1, DBL_EPSILON, &ws, x1, &rank_kept) == 1);
  CHECK(x1[0] == 0.0);
  x1[0] = 1.0;
  CHECK(rh_dense_solve(a1, b1, 1, DBL_EPSILON, &ws, x1, &used_fallback) == 1);
  CHECK(x1[0] == 0.0);
  CHECK(used_fallback == 1);
  a1[0] = -2.0;
  CHECK(rh_min_norm_symmetric_solve(a1, b1, 1, FLT_EPSILON, &ws, x1, &rank_kept) == 1);
  CHECK_CLOSE(x1[0], -1.5, 1e-15, 0.0);

  double b2[2] = {1.0, 5.0}, x2[2];
  /* [[1, 1], [1, 1]]: eigenvalues 2 and 0, x = (b1 + b2) / 4 (1, 1). */
  double ones[4] = {1.0, 1.0, 1.0, 1.0};
  used_fallback = 0;
  CHECK(rh_dense_solve(ones, b2, 2, DBL_EPSILON, &ws, x2, &used_fallback) == 1);
  CHECK(used_fallback == 1);
  CHECK_CLOSE(x2[0], 1.5, 1e-14, 0.0);
  CHECK_CLOSE(x2[1], 1.5, 1e-14, 0.0);
  /* [[0, 1], [1, 0]]: x = (b2, b1). */
  double swap[4] = {0.0, 1.0, 1.0, 0.0};
  CHECK(rh_min_norm_symmetric_solve(swap, b2, 2, DBL_EPSILON, &ws, x2, &rank_kept) == 1);
  CHECK_CLOSE(x2[0], 5.0, 1e-14, 0.0);
  CHECK_CLOSE(x2[1], 1.0, 1e-14, 0.0);
  /* [[4, 0], [0, 1e-9]] in the float32 working precision: 1e-9 < 2 eps 4, cut off. */
  double diag[4] = {4.0, 0.0, 0.0, 1e-9};
  CHECK(rh_min_norm_symmetric_solve(diag, b2, 2, FLT_EPSILON, &ws, x2, &rank_kept) == 1);
  CHECK_CLOSE(x2[0], 0.25, 1e-15, 0.0);
  CHECK(x2[1] == 0.0);
  /* ... but kept in float64: 1e-9 > 2 eps 4. */
  CHECK(rh_min_norm_symmetric_solve(diag, b2, 2, DBL_EPSILON, &ws, x2, &rank_kept) == 1);
  CHECK_CLOSE(x2[1], 5e9, 1e-12, 0.0);
  /* The zero matrix: x = 0. */
  double zeros[4] = {0.0, 0.0, 0.0, 0.0};
  CHECK(rh_min_norm_symmetric_solve(zeros, b2, 2, DBL_EPSILON, &ws, x2, &rank_kept) == 1);
  CHECK(x2[0] == 0.0 && x2[1] == 0.0);
  /* A non-finite matrix is refused (the caller then takes the Jacobi SVD). */
  double bad[4] = {1.0, NAN, NAN, 1.0};
  CHECK(rh_min_norm_symmetric_solve(bad, b2, 2, DBL_EPSILON, &ws, x2, &rank_kept) == 0);
  double inf[4] = {INFINITY, 0.0, 0.0, 1.0};
  CHECK(rh_min_norm_symmetric_solve(inf, b2, 2, DBL_EPSILON, &ws, x2, &rank_kept) == 0);
  release(&ws);
}

/* An asymmetric matrix (an information restored from a checkpoint can be one) must keep the
 * general SVD: U diag(d) V' with U != V has the minimum-norm solution V diag(1/d) U' b, which
 * a symmetric eigensolver reading one triangle could not produce. */
static void test_asymmetric_matrix_keeps_the_general_svd(void) {
  const int P = 17;
  RhWorkspace ws = workspace(P);
  random_orthogonal(U, P);
  random_orthogonal(V, P);
  spectrum(P, 11, 0, LAMBDA);
  spectral_matrix(U, V, LAMBDA, P, A);
  random_vector(B, P);
  analytic_min_norm(U, V, LAMBDA, P, B, REF);
  int used_fallback = 0;
  CHECK(rh_dense_solve(A, B, P, DBL_EPSILON, &ws, X, &used_fallback) == 1); /* rank 11 of 17 */
  CHECK(used_fallback == 1);
  CHECK(relative_error(X, REF, P) <= min_norm_tolerance(P, 10.0));
  release(&ws);
}

/* Raw units: A = D S D with D spanning 3e-5 .. 3e5 and S the identity but for two columns of
 * correlation rho = 1 - 1e-5 (their Cholesky pivot share 1 - rho^2 = 2e-5 is below the float32
 * floor 64 P eps = 5.3e-5, so Cholesky and LU refuse S; its singular values 1 +- rho are within
 * the SVD's cutoff eps P sigma_max = 1.7e-6). The ladder's SVD sees the equilibrated system,
 * whose condition is S's, and solves it: x = D^-1 S^-1 D^-1 b. With the cutoff measured across
 * raw columns it would drop every scale but the largest. */
static void test_raw_unit_columns_are_solved_not_truncated(void) {
  const int P = 7;
  const double rho = 1.0 - 1e-5;
  RhWorkspace ws = workspace(P);
  double scale[7], inner[7], error[7], reference[7];
  for (int k = 0; k < P; ++k) {
    scale[k] = 3.0 * pow(10.0, -5.0 + 10.0 * k / (P - 1));
  }
  for (int i = 0; i < P; ++i) {
    for (int j = 0; j < P; ++j) {
      const double s = i == j ? 1.0 : ((i == 2 && j == 5) || (i == 5 && j == 2)) ? rho : 0.0;
      A[i * P + j] = scale[i] * s * scale[j];
    }
  }
  random_vector(B, P);
  /* inner = S^-1 D^-1 b: S^-1 is the identity but for the 2 x 2 block's inverse. */
  for (int i = 0; i < P; ++i) {
    inner[i] = B[i] / scale[i];
  }
  const double det = 1.0 - rho * rho;
  const double b2 = inner[2], b5 = inner[5];
  inner[2] = (b2 - rho * b5) / det;
  inner[5] = (b5 - rho * b2) / det;
  for (int i = 0; i < P; ++i) {
    REF[i] = inner[i] / scale[i];
  }
  int used_fallback = 0;
  /* The SVD ran (LU refused) and kept every singular value: nothing was dropped. */
  CHECK(rh_dense_solve(A, B, P, FLT_EPSILON, &ws, X, &used_fallback) == 0);
  CHECK(used_fallback == 1);
  /* ||D (x - ref)|| / ||D ref||: the error in S's units (double arithmetic, kappa 2e5). */
  for (int i = 0; i < P; ++i) {
    error[i] = scale[i] * (X[i] - REF[i]);
    reference[i] = scale[i] * REF[i];
  }
  const double err = norm2(error, P) / norm2(reference, P);
  if (!(err <= 1e-9)) {
    fprintf(stderr, "raw-unit columns: error %.3g in S's units\n", err);
  }
  CHECK(err <= 1e-9);
  release(&ws);
}

/* ---- Through the engine. */

/* One batch on a fresh engine; coefficients widened to double. */
static RhCudaStatus fit_one_batch(int32_t dtype, const void* x, const void* y, int64_t n,
                                  int64_t columns, int64_t P, double* coefficients,
                                  RhCudaDiagnostics* diagnostics) {
  RhCudaEngineOptions o = rh_options(dtype, P);
  RhCudaEngine* engine = NULL;
  RhCudaStatus status = rh_cuda_engine_create(&o, &engine);
  if (status != RH_CUDA_SUCCESS) {
    return status;
  }
  RhCudaUpdateConfig c = rh_config(columns, RH_CUDA_PENALTY_NONE);
  c.ridge = 0.0;
  c.tolerance = 1e-9;
  RhCudaHostBatch b = rh_batch(x, y, NULL, n, columns, (double)n);
  *diagnostics = rh_diagnostics();
  status = rh_cuda_engine_update_host(engine, &b, &c, diagnostics);
  if (status == RH_CUDA_SUCCESS) {
    static float cf[P_MAX];
    static float info_f[P_MAX * P_MAX];
    static double info_d[P_MAX * P_MAX];
    if (dtype == RH_CUDA_DTYPE_FLOAT32) {
      RhCudaHostState s = rh_state_out(cf, info_f);
      status = rh_cuda_engine_copy_state(engine, &s);
      for (int64_t k = 0; k < P; ++k) {
        coefficients[k] = cf[k];
      }
    } else {
      RhCudaHostState s = rh_state_out(coefficients, info_d);
      status = rh_cuda_engine_copy_state(engine, &s);
    }
  }
  rh_cuda_engine_destroy(engine);
  return status;
}

/* Rows n x (P - 1) features (the engine appends the intercept, P parameters) in which feature
 * 1 duplicates feature 0, and the same data without feature 1. A Newton iteration from zero
 * with minimum-norm steps stays in the row space of the design, so the duplicated fit is the
 * de-duplicated one with coefficient 0 split equally between the twins. */
static void check_duplicated_columns_through_engine(int32_t dtype, int n, int P, double rtol) {
  const int p = P - 1;
  double* xd = malloc(sizeof(double) * (size_t)n * (size_t)p);
  double* xr = malloc(sizeof(double) * (size_t)n * (size_t)(p - 1));
  double* yd = malloc(sizeof(double) * (size_t)n);
  float* xf = malloc(sizeof(float) * (size_t)n * (size_t)p);
  float* xrf = malloc(sizeof(float) * (size_t)n * (size_t)(p - 1));
  float* yf = malloc(sizeof(float) * (size_t)n);
  for (int r = 0; r < n; ++r) {
    double v = 0.5;
    for (int j = 0; j < p; ++j) {
      double value = j == 1 ? xd[r * p] : rh_normal();
      xd[r * p + j] = dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)(float)value : value;
      v += (j == 0 ? 2.0 : 0.1 * (double)(j % 7) - 0.3) * xd[r * p + j];
    }
    yd[r] = v + 0.3 * rh_normal() + (r % 17 == 0 ? 8.0 * rh_normal() : 0.0);
    if (dtype == RH_CUDA_DTYPE_FLOAT32) {
      yd[r] = (double)(float)yd[r];
    }
    for (int j = 0, k = 0; j < p; ++j) {
      if (j != 1) {
        xr[r * (p - 1) + k++] = xd[r * p + j];
      }
    }
  }
  for (int i = 0; i < n * p; ++i) {
    xf[i] = (float)xd[i];
  }
  for (int i = 0; i < n * (p - 1); ++i) {
    xrf[i] = (float)xr[i];
  }
  for (int i = 0; i < n; ++i) {
    yf[i] = (float)yd[i];
  }
  const int f32 = dtype == RH_CUDA_DTYPE_FLOAT32;
  static double full[P_MAX], reduced[P_MAX];
  RhCudaDiagnostics dg_full, dg_reduced;
  CHECK_STATUS(fit_one_batch(dtype, f32 ? (const void*)xf : xd, f32 ? (const void*)yf : yd, n, p, P,
                             full, &dg_full),
               RH_CUDA_SUCCESS);
  CHECK_STATUS(fit_one_batch(dtype, f32 ? (const void*)xrf : xr, f32 ? (const void*)yf : yd, n,
                             p - 1, P - 1, reduced, &dg_reduced),
               RH_CUDA_SUCCESS);
  CHECK(dg_full.used_regularized_fallback == 1);
  CHECK(dg_full.converged == 1);
  CHECK(all_finite_vector(full, P));
  double scale = norm2(reduced, P - 1);
  CHECK_CLOSE(full[0], full[1], 0.0, rtol * scale);
  CHECK_CLOSE(full[0] + full[1], reduced[0], 0.0, rtol * scale);
  for (int j = 2; j < P; ++j) {
    CHECK_CLOSE(full[j], reduced[j - 1], 0.0, rtol * scale);
  }
  free(xd);
  free(xr);
  free(yd);
  free(xf);
  free(xrf);
  free(yf);
}

static void test_duplicated_columns_report_fallback_through_engine(void) {
  /* float64: both fits converge (step below 1e-9 relative, quadratically), so they agree to
   * well below 1e-7 of their norm. */
  check_duplicated_columns_through_engine(RH_CUDA_DTYPE_FLOAT64, 300, 40, 1e-7);
  /* float32 with P = 300 on 400 rows (the shape whose first batch lands on the fallback in
   * float32): the iterations run in double, so the fits agree to the float32 rounding of the
   * stored coefficients (6e-8 relative) plus the convergence tolerance; 1e-5 leaves margin. */
  check_duplicated_columns_through_engine(RH_CUDA_DTYPE_FLOAT32, 400, 300, 1e-5);
}

int main(void) {
  RUN_TEST(test_one_and_two_parameters_by_hand);
  RUN_TEST(test_psd_known_rank_matches_analytic_min_norm);
  RUN_TEST(test_symmetric_indefinite_matches_analytic);
  RUN_TEST(test_collinear_columns_give_finite_solution_orthogonal_to_null_space);
  RUN_TEST(test_asymmetric_matrix_keeps_the_general_svd);
  RUN_TEST(test_raw_unit_columns_are_solved_not_truncated);
  RUN_TEST(test_duplicated_columns_report_fallback_through_engine);
  return TEST_MAIN_RESULT();
}
