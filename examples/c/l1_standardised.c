/*
 * An L1 (penalised) stream from C on columns in raw units. The engines fit the columns they
 * are given, and the L1 solver is first-order: on columns whose scales are orders of magnitude
 * apart it stops far from the optimum. So this program centres and scales each column by the
 * first batch's mean and standard deviation, keeps those numbers for every later batch, and
 * maps the fitted coefficients back to raw units (coef_j = g_j / scale_j,
 * intercept = b - sum_j center_j coef_j). For contrast it streams the same batches unscaled
 * through a second engine and prints what that one ends with.
 *
 * Build against an installed prefix (see examples/README.md):
 *   cc l1_standardised.c $(pkg-config --cflags --libs rh_cpu) -lm -o l1_standardised_c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rh_cuda.h"

enum { FEATURES = 3, PARAMETERS = FEATURES + 1, ROWS = 2000, BATCHES = 4 };

/* The columns' raw units: x_j = offset_j + scale_j * z_j with z_j standard normal. */
static const double raw_scale[FEATURES] = {1.0, 1e3, 1e5};
static const double raw_offset[FEATURES] = {0.0, 5e3, 1e6};
/* y = 50 + 2 z_0 - 3 z_1 + 0 z_2 + noise: the third column carries nothing. */
static const double effect[FEATURES] = {2.0, -3.0, 0.0};
static const double intercept_z = 50.0;

/* A small deterministic generator (xorshift64*), so the example needs no data file. */
static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static double uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717u) >> 11) / 9007199254740992.0;
}
static double normal(void) {
  return sqrt(-2.0 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform());
}

static int check(RhCudaStatus status, const RhCudaEngine* engine, const char* what) {
  if (status == RH_CUDA_SUCCESS) {
    return 0;
  }
  fprintf(stderr, "%s failed (status %d): %s\n", what, (int)status,
          engine != NULL ? rh_cuda_engine_last_error(engine) : rh_cuda_last_error());
  return 1;
}

static RhCudaEngine* new_engine(void) {
  RhCudaEngineOptions options = {RH_CUDA_ABI_VERSION, sizeof options, RH_CUDA_DTYPE_FLOAT64,
                                 -1, PARAMETERS, 0};
  RhCudaEngine* engine = NULL;
  return check(rh_cuda_engine_create(&options, &engine), NULL, "rh_cuda_engine_create")
             ? NULL
             : engine;
}

static int update(RhCudaEngine* engine, const double* x, const double* y,
                  RhCudaDiagnostics* diagnostics) {
  RhCudaUpdateConfig config;
  memset(&config, 0, sizeof config);
  config.abi_version = RH_CUDA_ABI_VERSION;
  config.struct_size = sizeof config;
  config.n_features_in = FEATURES;
  config.max_iter = 100;
  config.tau = 1.345; /* the noise below has unit scale: tau is in the target's units */
  config.bandwidth_scale = 1.0;
  config.tolerance = 1e-6;
  config.ridge = 1e-8;
  config.penalty = RH_CUDA_PENALTY_L1;
  config.lambda_scale = 1.0;
  RhCudaHostBatch batch;
  memset(&batch, 0, sizeof batch);
  batch.abi_version = RH_CUDA_ABI_VERSION;
  batch.struct_size = sizeof batch;
  batch.x_design = x;
  batch.y = y;
  batch.n_rows = ROWS;
  batch.n_columns = FEATURES; /* the engine appends the intercept column */
  batch.batch_weight = (double)ROWS;
  return check(rh_cuda_engine_update_host(engine, &batch, &config, diagnostics), engine,
               "rh_cuda_engine_update_host");
}

static int coefficients_of(RhCudaEngine* engine, double* coefficients) {
  double information[PARAMETERS * PARAMETERS];
  RhCudaHostState state = {RH_CUDA_ABI_VERSION, sizeof state, coefficients, information, 0, 0,
                           0.0, 0.0, NULL, 0, 0};
  return check(rh_cuda_engine_copy_state(engine, &state), engine, "rh_cuda_engine_copy_state");
}

int main(void) {
  static double x[ROWS * FEATURES], z[ROWS * FEATURES], y[ROWS];
  double center[FEATURES], scale[FEATURES];
  RhCudaDiagnostics diagnostics;
  memset(&diagnostics, 0, sizeof diagnostics);
  diagnostics.abi_version = RH_CUDA_ABI_VERSION;
  diagnostics.struct_size = sizeof diagnostics;

  RhCudaEngine* standardised = new_engine();
  RhCudaEngine* raw = new_engine();
  if (standardised == NULL || raw == NULL) {
    return 1;
  }
  int failures = 0, raw_converged = 0;
  for (int b = 0; b < BATCHES; ++b) {
    for (int i = 0; i < ROWS; ++i) {
      y[i] = intercept_z + normal();
      for (int j = 0; j < FEATURES; ++j) {
        double unit = normal();
        x[i * FEATURES + j] = raw_offset[j] + raw_scale[j] * unit;
        y[i] += effect[j] * unit;
      }
    }
    if (b == 0) { /* the first batch fixes the centre and scale for the whole stream */
      for (int j = 0; j < FEATURES; ++j) {
        double sum = 0.0, squares = 0.0;
        for (int i = 0; i < ROWS; ++i) {
          sum += x[i * FEATURES + j];
        }
        center[j] = sum / ROWS;
        for (int i = 0; i < ROWS; ++i) {
          double d = x[i * FEATURES + j] - center[j];
          squares += d * d;
        }
        scale[j] = squares > 0.0 ? sqrt(squares / ROWS) : 1.0;
      }
    }
    for (int i = 0; i < ROWS * FEATURES; ++i) {
      z[i] = (x[i] - center[i % FEATURES]) / scale[i % FEATURES];
    }
    if (update(standardised, z, y, &diagnostics)) {
      return 1;
    }
    printf("batch %d standardised: %lld iterations, converged %d\n", b + 1,
           (long long)diagnostics.iterations, (int)diagnostics.converged);
    failures += diagnostics.converged != 1;
    if (update(raw, x, y, &diagnostics)) {
      return 1;
    }
    raw_converged += diagnostics.converged == 1;
  }

  /* Back to raw units: the model is b + sum_j g_j (x_j - center_j) / scale_j. */
  double g[PARAMETERS], unscaled[PARAMETERS], coef[FEATURES];
  if (coefficients_of(standardised, g) || coefficients_of(raw, unscaled)) {
    return 1;
  }
  double intercept = g[FEATURES];
  for (int j = 0; j < FEATURES; ++j) {
    coef[j] = g[j] / scale[j];
    intercept -= center[j] * coef[j];
  }
  /* What the data were drawn from, in raw units: slope effect_j / raw_scale_j. */
  double truth_intercept = intercept_z;
  for (int j = 0; j < FEATURES; ++j) {
    double truth = effect[j] / raw_scale[j];
    truth_intercept -= raw_offset[j] * truth;
    printf("slope %d: standardised fit %+.6e, unscaled fit %+.6e, truth %+.6e\n", j, coef[j],
           unscaled[j], truth);
    /* The L1 penalty shrinks the two real effects by about lambda (0.03 here) and sets the
       empty column's coefficient to zero, or next to it. */
    failures += fabs(g[j] - effect[j]) > 0.1;
  }
  printf("intercept: standardised fit %+.6e, unscaled fit %+.6e, truth %+.6e\n", intercept,
         unscaled[FEATURES], truth_intercept);
  printf("unscaled stream: %d of %d batches reported convergence\n", raw_converged, BATCHES);
  failures += fabs(intercept - truth_intercept) > 0.1 * fabs(truth_intercept);

  /* The engine predicts from standardised rows; the raw-unit coefficients must agree. */
  double predictions[4];
  RhCudaPrediction request;
  memset(&request, 0, sizeof request);
  request.abi_version = RH_CUDA_ABI_VERSION;
  request.struct_size = sizeof request;
  request.x_design = z;
  request.prediction = predictions;
  request.n_rows = 4;
  request.n_columns = FEATURES;
  request.n_features_in = FEATURES;
  request.input_location = RH_CUDA_MEMORY_HOST;
  if (check(rh_cuda_engine_predict(standardised, &request), standardised,
            "rh_cuda_engine_predict")) {
    return 1;
  }
  for (int i = 0; i < 4; ++i) {
    double from_raw = intercept;
    for (int j = 0; j < FEATURES; ++j) {
      from_raw += coef[j] * x[i * FEATURES + j];
    }
    failures += fabs(from_raw - predictions[i]) > 1e-9 * fabs(predictions[i]);
  }

  rh_cuda_engine_destroy(raw);
  rh_cuda_engine_destroy(standardised);
  printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
