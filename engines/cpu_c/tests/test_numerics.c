/* Numerical behaviour pinned against independent expectations: least squares from the normal
 * equations, the virtual intercept, thread-count independence, the minimum-norm fallback,
 * weights as replication, float32 against float64, and the float32 rule's exact zero steps. */
#include "test_support.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

#define MAX_P 24

typedef struct Fit {
  double coefficients[MAX_P];
  double information[MAX_P * MAX_P];
  RhCudaDiagnostics diagnostics;
  RhCudaStatus status;
} Fit;

/* Fits the batches [0, n) in batches of batch_rows on a fresh float64 engine. */
static Fit fit_stream(const void* x, const void* y, const void* w, int64_t n, int64_t columns,
                      int64_t n_features, int64_t P, int64_t batch_rows, RhCudaUpdateConfig config,
                      int32_t dtype) {
  Fit fit;
  memset(&fit, 0, sizeof fit);
  RhCudaEngineOptions o = rh_options(dtype, P);
  RhCudaEngine* engine = NULL;
  fit.status = rh_cuda_engine_create(&o, &engine);
  if (fit.status != RH_CUDA_SUCCESS) {
    return fit;
  }
  size_t elem = dtype == RH_CUDA_DTYPE_FLOAT32 ? sizeof(float) : sizeof(double);
  config.n_features_in = n_features;
  for (int64_t first = 0; first < n && fit.status == RH_CUDA_SUCCESS; first += batch_rows) {
    int64_t rows = n - first < batch_rows ? n - first : batch_rows;
    double weight = (double)rows;
    if (w != NULL) {
      weight = 0.0;
      for (int64_t i = first; i < first + rows; ++i) {
        weight += dtype == RH_CUDA_DTYPE_FLOAT32 ? ((const float*)w)[i] : ((const double*)w)[i];
      }
    }
    RhCudaHostBatch b = rh_batch(
        (const char*)x + (size_t)(first * columns) * elem, (const char*)y + (size_t)first * elem,
        w ? (const char*)w + (size_t)first * elem : NULL, rows, columns, weight);
    fit.diagnostics = rh_diagnostics();
    fit.status = rh_cuda_engine_update_host(engine, &b, &config, &fit.diagnostics);
  }
  if (dtype == RH_CUDA_DTYPE_FLOAT64) {
    RhCudaHostState s = rh_state_out(fit.coefficients, fit.information);
    CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
  } else {
    float c[MAX_P], info[MAX_P * MAX_P];
    RhCudaHostState s = rh_state_out(c, info);
    CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
    for (int64_t k = 0; k < P; ++k) {
      fit.coefficients[k] = c[k];
    }
    for (int64_t k = 0; k < P * P; ++k) {
      fit.information[k] = info[k];
    }
  }
  rh_cuda_engine_destroy(engine);
  return fit;
}

/* Solves A x = b (P x P) by Gaussian elimination with partial pivoting: the test's own solver,
 * independent of the engine's ladder. */
static void solve_dense(double* a, double* b, int P) {
  for (int k = 0; k < P; ++k) {
    int piv = k;
    for (int i = k + 1; i < P; ++i) {
      if (fabs(a[i * P + k]) > fabs(a[piv * P + k])) {
        piv = i;
      }
    }
    for (int j = 0; j < P; ++j) {
      double t = a[k * P + j];
      a[k * P + j] = a[piv * P + j];
      a[piv * P + j] = t;
    }
    double t = b[k];
    b[k] = b[piv];
    b[piv] = t;
    for (int i = k + 1; i < P; ++i) {
      double f = a[i * P + k] / a[k * P + k];
      for (int j = k; j < P; ++j) {
        a[i * P + j] -= f * a[k * P + j];
      }
      b[i] -= f * b[k];
    }
  }
  for (int i = P - 1; i >= 0; --i) {
    for (int j = i + 1; j < P; ++j) {
      b[i] -= a[i * P + j] * b[j];
    }
    b[i] /= a[i * P + i];
  }
}

/* With tau far above every residual the fit is least squares: the information after one batch
 * is X'X and the coefficients solve the normal equations (the test's own elimination). Shapes
 * cover rows that leave a partial group of eight and a partial row block, columns below and
 * above the vector width, and float32 data (the same values widened, so only the stored state
 * is rounded). */
static void check_least_squares_limit(int n, int p, int32_t dtype, double info_rtol, double rtol) {
  enum { MAX_N = 2100, MAX_PF = 13 };
  static double x[MAX_N * MAX_PF], y[MAX_N];
  static float xf[MAX_N * MAX_PF], yf[MAX_N];
  double beta[MAX_PF];
  for (int j = 0; j < p; ++j) {
    beta[j] = (double)(j % 5) - 2.0;
  }
  rh_make_data(x, y, n, p, beta, 0.7);
  if (dtype == RH_CUDA_DTYPE_FLOAT32) {
    for (int k = 0; k < n * p; ++k) {
      xf[k] = (float)x[k];
      x[k] = (double)xf[k];
    }
    for (int i = 0; i < n; ++i) {
      yf[i] = (float)y[i];
      y[i] = (double)yf[i];
    }
  }
  RhCudaUpdateConfig c = rh_config(p, RH_CUDA_PENALTY_NONE);
  c.tau = 100.0;
  const int is_f32 = dtype == RH_CUDA_DTYPE_FLOAT32;
  Fit fit =
      fit_stream(is_f32 ? (const void*)xf : (const void*)x,
                 is_f32 ? (const void*)yf : (const void*)y, NULL, n, p, p, p + 1, n, c, dtype);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.converged == 1);
  const int P = p + 1;
  double xtx[(MAX_PF + 1) * (MAX_PF + 1)] = {0}, xty[MAX_PF + 1] = {0};
  for (int i = 0; i < n; ++i) {
    double row[MAX_PF + 1];
    for (int j = 0; j < p; ++j) {
      row[j] = x[i * p + j];
    }
    row[p] = 1.0;
    for (int j = 0; j < P; ++j) {
      xty[j] += row[j] * y[i];
      for (int k = 0; k < P; ++k) {
        xtx[j * P + k] += row[j] * row[k];
      }
    }
  }
  for (int k = 0; k < P * P; ++k) {
    CHECK_CLOSE(fit.information[k], xtx[k], info_rtol, 1e-9);
  }
  solve_dense(xtx, xty, P);
  for (int j = 0; j < P; ++j) {
    CHECK_CLOSE(fit.coefficients[j], xty[j], rtol, 1e-12);
  }
}

static void test_large_tau_reproduces_least_squares(void) {
  check_least_squares_limit(300, 5, RH_CUDA_DTYPE_FLOAT64, 1e-12, 1e-10);
  check_least_squares_limit(2053, 13, RH_CUDA_DTYPE_FLOAT64, 1e-12, 1e-10);
  /* float32 state: information and coefficients are rounded to float when committed. */
  check_least_squares_limit(2053, 13, RH_CUDA_DTYPE_FLOAT32, 1e-6, 1e-6);
}

#define N_STREAM 9000
#define P_STREAM 6

static double SX[N_STREAM * P_STREAM], SY[N_STREAM], SX1[N_STREAM * (P_STREAM + 1)];

static void test_virtual_intercept_matches_explicit_ones_column(void) {
  for (int i = 0; i < N_STREAM; ++i) {
    for (int j = 0; j < P_STREAM; ++j) {
      SX1[i * (P_STREAM + 1) + j] = SX[i * P_STREAM + j];
    }
    SX1[i * (P_STREAM + 1) + P_STREAM] = 1.0;
  }
  for (int penalty = RH_CUDA_PENALTY_NONE; penalty <= RH_CUDA_PENALTY_L1; ++penalty) {
    RhCudaUpdateConfig c = rh_config(P_STREAM, penalty);
    c.tolerance = penalty == RH_CUDA_PENALTY_L1 ? 1e-7 : 1e-10;
    Fit virtual_fit = fit_stream(SX, SY, NULL, N_STREAM, P_STREAM, P_STREAM, P_STREAM + 1, 3000, c,
                                 RH_CUDA_DTYPE_FLOAT64);
    Fit explicit_fit = fit_stream(SX1, SY, NULL, N_STREAM, P_STREAM + 1, P_STREAM, P_STREAM + 1,
                                  3000, c, RH_CUDA_DTYPE_FLOAT64);
    CHECK_STATUS(virtual_fit.status, RH_CUDA_SUCCESS);
    CHECK_STATUS(explicit_fit.status, RH_CUDA_SUCCESS);
    for (int j = 0; j <= P_STREAM; ++j) {
      CHECK_CLOSE(virtual_fit.coefficients[j], explicit_fit.coefficients[j], 1e-9, 1e-12);
    }
    for (int k = 0; k < (P_STREAM + 1) * (P_STREAM + 1); ++k) {
      CHECK_CLOSE(virtual_fit.information[k], explicit_fit.information[k], 1e-8, 1e-9);
    }
    CHECK(virtual_fit.diagnostics.converged == explicit_fit.diagnostics.converged);
  }
}

#define N_THREADS_TEST 20000
#define P_THREADS_TEST 20

/* 20000 x 20 is above both parallel thresholds (cpu_engine.h): twenty row blocks and five Gram
 * super-blocks really are spread over the threads. */
static void test_results_are_bitwise_identical_for_any_thread_count(void) {
#if defined(_OPENMP)
  static double x[N_THREADS_TEST * P_THREADS_TEST], y[N_THREADS_TEST];
  double beta[P_THREADS_TEST];
  for (int j = 0; j < P_THREADS_TEST; ++j) {
    beta[j] = rh_normal();
  }
  rh_make_data(x, y, N_THREADS_TEST, P_THREADS_TEST, beta, 0.5);
  for (int penalty = RH_CUDA_PENALTY_NONE; penalty <= RH_CUDA_PENALTY_L1; ++penalty) {
    RhCudaUpdateConfig c = rh_config(P_THREADS_TEST, penalty);
    c.tolerance = 1e-7;
    static Fit fits[3];
    const int threads[3] = {1, 2, 3};
    for (int t = 0; t < 3; ++t) {
      omp_set_num_threads(threads[t]);
      fits[t] = fit_stream(x, y, NULL, N_THREADS_TEST, P_THREADS_TEST, P_THREADS_TEST,
                           P_THREADS_TEST + 1, N_THREADS_TEST, c, RH_CUDA_DTYPE_FLOAT64);
      CHECK_STATUS(fits[t].status, RH_CUDA_SUCCESS);
    }
    for (int t = 1; t < 3; ++t) {
      CHECK(memcmp(&fits[0], &fits[t], sizeof fits[0]) == 0);
    }
  }
  omp_set_num_threads(2);
#else
  fprintf(stderr, "built without OpenMP: one thread only, nothing to compare\n");
#endif
}

static void test_collinear_columns_use_minimum_norm_fallback(void) {
  enum { N = 200, PF = 3 };
  static double x[N * PF], y[N];
  for (int i = 0; i < N; ++i) {
    x[i * PF] = rh_normal();
    x[i * PF + 1] = x[i * PF]; /* exact duplicate column */
    x[i * PF + 2] = rh_normal();
    y[i] = 2.0 * x[i * PF] - x[i * PF + 2] + 0.1 * rh_normal();
  }
  RhCudaUpdateConfig c = rh_config(PF, RH_CUDA_PENALTY_NONE);
  c.tolerance = 1e-8;
  Fit fit = fit_stream(x, y, NULL, N, PF, PF, PF, N, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(fit.status, RH_CUDA_SUCCESS);
  CHECK(fit.diagnostics.used_regularized_fallback == 1);
  for (int j = 0; j < PF; ++j) {
    CHECK(isfinite(fit.coefficients[j]));
  }
  /* The minimum-norm solution splits the shared effect equally between the twins. */
  CHECK_CLOSE(fit.coefficients[0], fit.coefficients[1], 1e-8, 1e-8);
  CHECK_CLOSE(fit.coefficients[0] + fit.coefficients[1], 2.0, 0.05, 0.0);
  /* A full-rank design never takes the fallback. */
  Fit full = fit_stream(SX, SY, NULL, N_STREAM, P_STREAM, P_STREAM, P_STREAM, N_STREAM, c,
                        RH_CUDA_DTYPE_FLOAT64);
  CHECK(full.diagnostics.used_regularized_fallback == 0);
}

static void test_integer_weights_equal_row_replication(void) {
  enum { N = 150, PF = 3 };
  static double x[N * PF], y[N], w[N], xr[3 * N * PF], yr[3 * N];
  const double beta[PF] = {0.5, -1.0, 2.0};
  rh_make_data(x, y, N, PF, beta, 0.0);
  int rows = 0;
  for (int i = 0; i < N; ++i) {
    w[i] = (double)(i % 3); /* 0, 1 or 2 copies */
    for (int k = 0; k < (int)w[i]; ++k, ++rows) {
      memcpy(xr + rows * PF, x + i * PF, PF * sizeof(double));
      yr[rows] = y[i];
    }
  }
  RhCudaUpdateConfig c = rh_config(PF, RH_CUDA_PENALTY_NONE);
  Fit weighted = fit_stream(x, y, w, N, PF, PF, PF + 1, N, c, RH_CUDA_DTYPE_FLOAT64);
  Fit replicated = fit_stream(xr, yr, NULL, rows, PF, PF, PF + 1, rows, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK_STATUS(weighted.status, RH_CUDA_SUCCESS);
  CHECK_STATUS(replicated.status, RH_CUDA_SUCCESS);
  for (int j = 0; j <= PF; ++j) {
    CHECK_CLOSE(weighted.coefficients[j], replicated.coefficients[j], 1e-9, 1e-12);
  }
  CHECK_CLOSE(weighted.diagnostics.objective, replicated.diagnostics.objective, 1e-10, 0.0);
}

/* The stream rounded to float32 (xf, yf) and the same float32 values widened back to double
 * (xd, yd), so float32 and float64 fits see identical data. */
static float xf[N_STREAM * P_STREAM], yf[N_STREAM];
static double xd[N_STREAM * P_STREAM], yd[N_STREAM];

static void make_float32_stream(void) {
  for (int k = 0; k < N_STREAM * P_STREAM; ++k) {
    xf[k] = (float)SX[k];
    xd[k] = (double)xf[k];
  }
  for (int i = 0; i < N_STREAM; ++i) {
    yf[i] = (float)SY[i];
    yd[i] = (double)yf[i];
  }
}

static void test_float32_tracks_float64(void) {
  make_float32_stream();
  for (int penalty = RH_CUDA_PENALTY_NONE; penalty <= RH_CUDA_PENALTY_L1; ++penalty) {
    RhCudaUpdateConfig c = rh_config(P_STREAM, penalty);
    c.tolerance = 1e-6;
    Fit f32 = fit_stream(xf, yf, NULL, N_STREAM, P_STREAM, P_STREAM, P_STREAM + 1, 800, c,
                         RH_CUDA_DTYPE_FLOAT32);
    Fit f64 = fit_stream(xd, yd, NULL, N_STREAM, P_STREAM, P_STREAM, P_STREAM + 1, 800, c,
                         RH_CUDA_DTYPE_FLOAT64);
    CHECK_STATUS(f32.status, RH_CUDA_SUCCESS);
    for (int j = 0; j <= P_STREAM; ++j) {
      CHECK_CLOSE(f32.coefficients[j], f64.coefficients[j], 4e-4, 4e-5);
    }
    for (int k = 0; k < (P_STREAM + 1) * (P_STREAM + 1); ++k) {
      CHECK_CLOSE(f32.information[k], f64.information[k], 4e-4, 4e-5);
    }
  }
}

/* The float32 rule (docs/decisions.md, "Float32 oracle"): candidates are rounded to float and
 * objectives are float32 values, so once LAMM's progress is below float32 resolution a
 * rejection doubles phi until the step rounds to zero, Delta is exactly zero and the solver
 * converges, as the float32 reference does. tol 3e-8 lies below what double-precision LAMM
 * steps settle to on this stream (that rule ran to max_iter here); at tol >~ 1e-7 both stop
 * normally. The result still tracks the float64 fit at an ordinary tolerance within the golden
 * float32 tolerance. */
static void test_float32_converges_below_float32_resolution(void) {
  make_float32_stream();
  for (int penalty = RH_CUDA_PENALTY_NONE; penalty <= RH_CUDA_PENALTY_L1; ++penalty) {
    RhCudaUpdateConfig tight = rh_config(P_STREAM, penalty);
    tight.tolerance = 3e-8;
    tight.max_iter = 1000;
    /* One batch, so the diagnostics fit_stream keeps are those of the only solve. */
    Fit f32 = fit_stream(xf, yf, NULL, 3000, P_STREAM, P_STREAM, P_STREAM + 1, 3000, tight,
                         RH_CUDA_DTYPE_FLOAT32);
    CHECK_STATUS(f32.status, RH_CUDA_SUCCESS);
    CHECK(f32.diagnostics.converged == 1);
    CHECK(f32.diagnostics.iterations <= 100);
    if (penalty == RH_CUDA_PENALTY_NONE) {
      /* The reported objective is F itself, a float32 value. */
      CHECK(f32.diagnostics.objective == (double)(float)f32.diagnostics.objective);
    }
    RhCudaUpdateConfig usual = rh_config(P_STREAM, penalty);
    usual.tolerance = 1e-8;
    Fit f64 = fit_stream(xd, yd, NULL, 3000, P_STREAM, P_STREAM, P_STREAM + 1, 3000, usual,
                         RH_CUDA_DTYPE_FLOAT64);
    CHECK_STATUS(f64.status, RH_CUDA_SUCCESS);
    for (int j = 0; j <= P_STREAM; ++j) {
      CHECK_CLOSE(f32.coefficients[j], f64.coefficients[j], 4e-4, 4e-5);
    }
  }
}

static void test_bounded_influence_of_one_outlier(void) {
  enum { N = 101 };
  static double x[N], y[N];
  for (int i = 0; i < N; ++i) {
    x[i] = (double)i / (N - 1) * 2.0 - 1.0;
    y[i] = 1.0 + 2.0 * x[i] + 0.05 * rh_normal();
  }
  RhCudaUpdateConfig c = rh_config(1, RH_CUDA_PENALTY_NONE);
  Fit clean = fit_stream(x, y, NULL, N, 1, 1, 2, N, c, RH_CUDA_DTYPE_FLOAT64);
  y[N / 2] += 1000.0;
  Fit dirty = fit_stream(x, y, NULL, N, 1, 1, 2, N, c, RH_CUDA_DTYPE_FLOAT64);
  CHECK(fabs(clean.coefficients[0] - dirty.coefficients[0]) < 0.03);
  CHECK(fabs(clean.coefficients[1] - dirty.coefficients[1]) < 0.03);
}

int main(void) {
  const double beta[P_STREAM] = {1.5, 0.0, -2.0, 0.0, 0.75, 0.0};
  rh_make_data(SX, SY, N_STREAM, P_STREAM, beta, -0.4);
  RUN_TEST(test_large_tau_reproduces_least_squares);
  RUN_TEST(test_virtual_intercept_matches_explicit_ones_column);
  RUN_TEST(test_results_are_bitwise_identical_for_any_thread_count);
  RUN_TEST(test_collinear_columns_use_minimum_norm_fallback);
  RUN_TEST(test_integer_weights_equal_row_replication);
  RUN_TEST(test_float32_tracks_float64);
  RUN_TEST(test_float32_converges_below_float32_resolution);
  RUN_TEST(test_bounded_influence_of_one_outlier);
  return TEST_MAIN_RESULT();
}
