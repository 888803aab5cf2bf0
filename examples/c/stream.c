/*
 * A stream of batches through librh_cpu from C: create an engine, fold four batches into it,
 * predict, see a refused batch leave the state as it was (with the engine's error text), and
 * carry the state to a second engine through export and restore.
 *
 * Build against an installed prefix (see examples/README.md):
 *   cc stream.c $(pkg-config --cflags --libs rh_cpu) -lm -o stream_c
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rh_cuda.h"

enum { FEATURES = 3, PARAMETERS = FEATURES + 1, ROWS = 500, BATCHES = 4 };

/* A small deterministic generator (xorshift64*), so the example needs no data file. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
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

static RhCudaHostBatch host_batch(const double* x, const double* y, int64_t rows) {
  RhCudaHostBatch batch;
  memset(&batch, 0, sizeof batch);
  batch.abi_version = RH_CUDA_ABI_VERSION;
  batch.struct_size = sizeof batch;
  batch.x_design = x;
  batch.y = y;
  batch.sample_weight = NULL; /* unit weights */
  batch.n_rows = rows;
  batch.n_columns = FEATURES; /* the engine appends the intercept column */
  batch.batch_weight = (double)rows;
  return batch;
}

int main(void) {
  const double truth[PARAMETERS] = {1.5, -2.0, 0.5, 3.0}; /* slopes, then the intercept */
  static double x[ROWS * FEATURES], y[ROWS];

  RhCudaEngineOptions options = {RH_CUDA_ABI_VERSION, sizeof options, RH_CUDA_DTYPE_FLOAT64,
                                 -1, PARAMETERS, 0};
  RhCudaEngine* engine = NULL;
  if (check(rh_cuda_engine_create(&options, &engine), NULL, "rh_cuda_engine_create")) {
    return 1;
  }
  RhCudaUpdateConfig config;
  memset(&config, 0, sizeof config);
  config.abi_version = RH_CUDA_ABI_VERSION;
  config.struct_size = sizeof config;
  config.n_features_in = FEATURES;
  config.max_iter = 100;
  config.tau = 1.345;
  config.bandwidth_scale = 1.0;
  config.tolerance = 1e-6;
  config.ridge = 1e-8;
  config.penalty = RH_CUDA_PENALTY_NONE;
  RhCudaDiagnostics diagnostics;
  memset(&diagnostics, 0, sizeof diagnostics);
  diagnostics.abi_version = RH_CUDA_ABI_VERSION;
  diagnostics.struct_size = sizeof diagnostics;

  for (int b = 0; b < BATCHES; ++b) {
    for (int i = 0; i < ROWS; ++i) {
      double value = truth[FEATURES];
      for (int j = 0; j < FEATURES; ++j) {
        x[i * FEATURES + j] = normal();
        value += truth[j] * x[i * FEATURES + j];
      }
      /* Heavy-ish noise and 5% gross outliers: what the Huber loss is for. */
      y[i] = value + 0.5 * normal() + (uniform() < 0.05 ? 25.0 : 0.0);
    }
    RhCudaHostBatch batch = host_batch(x, y, ROWS);
    if (check(rh_cuda_engine_update_host(engine, &batch, &config, &diagnostics), engine,
              "rh_cuda_engine_update_host")) {
      return 1;
    }
    printf("batch %d: %lld iterations, converged %d\n", b + 1, (long long)diagnostics.iterations,
           (int)diagnostics.converged);
  }

  /* meat: K of the sandwich covariance J^-1 K J^-1 (always doubles); NULL would skip it. */
  double coefficients[PARAMETERS], information[PARAMETERS * PARAMETERS];
  double meat[PARAMETERS * PARAMETERS];
  RhCudaHostState state = {RH_CUDA_ABI_VERSION, sizeof state, coefficients, information, 0, 0,
                           0.0, 0.0, meat, 0, 0};
  if (check(rh_cuda_engine_copy_state(engine, &state), engine, "rh_cuda_engine_copy_state")) {
    return 1;
  }
  int failures = state.meat_available != 1;
  for (int j = 0; j < PARAMETERS; ++j) {
    printf("coefficient %d: %+.4f (truth %+.4f)\n", j, coefficients[j], truth[j]);
    failures += fabs(coefficients[j] - truth[j]) > 0.1;
  }

  /* A refused batch: NaN in y. The engine names it, and the state stays as it was. */
  y[7] = NAN;
  RhCudaHostBatch bad = host_batch(x, y, ROWS);
  RhCudaStatus status = rh_cuda_engine_update_host(engine, &bad, &config, &diagnostics);
  printf("refused batch: status %d, \"%s\"\n", (int)status, rh_cuda_engine_last_error(engine));
  RhCudaHostState after = state;
  double coefficients_after[PARAMETERS], information_after[PARAMETERS * PARAMETERS];
  after.coefficients = coefficients_after;
  after.information = information_after;
  if (check(rh_cuda_engine_copy_state(engine, &after), engine, "rh_cuda_engine_copy_state")) {
    return 1;
  }
  failures += status != RH_CUDA_INVALID_ARGUMENT || after.batch_count != BATCHES ||
              memcmp(coefficients, coefficients_after, sizeof coefficients) != 0;

  /* Export, restore into a second engine, and predict the same values from both. */
  RhCudaEngine* twin = NULL;
  RhCudaHostStateView view = {RH_CUDA_ABI_VERSION, sizeof view, coefficients, information,
                              state.n_samples_seen, state.batch_count, state.previous_lambda,
                              state.weight_sum, meat};
  if (check(rh_cuda_engine_create(&options, &twin), NULL, "rh_cuda_engine_create") ||
      check(rh_cuda_engine_restore(twin, &view), twin, "rh_cuda_engine_restore")) {
    return 1;
  }
  double predictions[2][4];
  for (int e = 0; e < 2; ++e) {
    RhCudaPrediction request;
    memset(&request, 0, sizeof request);
    request.abi_version = RH_CUDA_ABI_VERSION;
    request.struct_size = sizeof request;
    request.x_design = x;
    request.prediction = predictions[e];
    request.n_rows = 4;
    request.n_columns = FEATURES;
    request.n_features_in = FEATURES;
    request.input_location = RH_CUDA_MEMORY_HOST;
    RhCudaEngine* which = e == 0 ? engine : twin;
    if (check(rh_cuda_engine_predict(which, &request), which, "rh_cuda_engine_predict")) {
      return 1;
    }
  }
  failures += memcmp(predictions[0], predictions[1], sizeof predictions[0]) != 0;
  printf("prediction for row 0: %.4f (restored engine: %.4f)\n", predictions[0][0],
         predictions[1][0]);

  rh_cuda_engine_destroy(twin);
  rh_cuda_engine_destroy(engine);
  printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
