/* Every entry point's success path and every refusal: status, message naming the field, and
 * a committed state left byte-identical. */
#include <stddef.h>

#include "test_support.h"

#define P_FEATURES 3
#define P_PARAMS 4 /* with the intercept */
#define N_ROWS 40

static double X[N_ROWS * P_FEATURES], Y[N_ROWS];

typedef struct Snapshot {
  double coefficients[P_PARAMS];
  double information[P_PARAMS * P_PARAMS];
  RhCudaHostState header;
} Snapshot;

static Snapshot snapshot(RhCudaEngine* engine) {
  Snapshot s;
  memset(&s, 0, sizeof s);
  s.header = rh_state_out(s.coefficients, s.information);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s.header), RH_CUDA_SUCCESS);
  s.header.coefficients = NULL;
  s.header.information = NULL;
  return s;
}

static int same_state(const Snapshot* a, const Snapshot* b) {
  return memcmp(a, b, sizeof *a) == 0;
}

static RhCudaEngine* engine_with_one_batch(void) {
  RhCudaEngineOptions o = rh_options(RH_CUDA_DTYPE_FLOAT64, P_PARAMS);
  RhCudaEngine* engine = NULL;
  CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
  RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = rh_batch(X, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  RhCudaDiagnostics d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_host(engine, &b, &c, &d), RH_CUDA_SUCCESS);
  return engine;
}

static void test_library_queries(void) {
  CHECK(rh_cuda_abi_version() == RH_CUDA_ABI_VERSION);
  int32_t value = -7;
  CHECK_STATUS(rh_cuda_is_available(&value), RH_CUDA_SUCCESS);
  CHECK(value == 1);
  CHECK_STATUS(rh_cuda_device_count(&value), RH_CUDA_SUCCESS);
  CHECK(value == 0);
  CHECK_STATUS(rh_cuda_is_available(NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "available");
  CHECK_STATUS(rh_cuda_device_count(NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "count");
  RhCudaRuntimeInfo info;
  memset(&info, 0x5a, sizeof info);
  info.abi_version = RH_CUDA_ABI_VERSION;
  info.struct_size = sizeof info;
  CHECK_STATUS(rh_cuda_runtime_info(&info), RH_CUDA_SUCCESS);
  CHECK(info.runtime_version == 0 && info.driver_version == 0 && info.device_count == 0);
  CHECK(strcmp(rh_cuda_last_error(), "") == 0);
  info.struct_size = 8;
  CHECK_STATUS(rh_cuda_runtime_info(&info), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "RhCudaRuntimeInfo.struct_size");
  CHECK_STATUS(rh_cuda_runtime_info(NULL), RH_CUDA_INVALID_ARGUMENT);
}

static void expect_create_fails(RhCudaEngineOptions o, const char* field) {
  RhCudaEngine* engine = (RhCudaEngine*)&o; /* must be reset to NULL */
  CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  CHECK(engine == NULL);
  CHECK_CONTAINS(rh_cuda_last_error(), field);
}

static void test_engine_create_refusals(void) {
  RhCudaEngineOptions o = rh_options(RH_CUDA_DTYPE_FLOAT64, P_PARAMS);
  RhCudaEngine* engine = NULL;
  CHECK_STATUS(rh_cuda_engine_create(NULL, &engine), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "RhCudaEngineOptions");
  CHECK_STATUS(rh_cuda_engine_create(&o, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "out_engine");
  RhCudaEngineOptions bad = o;
  bad.abi_version = 1;
  expect_create_fails(bad, "abi_version");
  bad = o;
  bad.struct_size = 16;
  expect_create_fails(bad, "struct_size");
  bad = o;
  bad.dtype = 3;
  expect_create_fails(bad, "dtype");
  bad = o;
  bad.device_id = 0;
  expect_create_fails(bad, "device_id");
  bad = o;
  bad.n_parameters = 0;
  expect_create_fails(bad, "n_parameters");
  bad = o;
  bad.n_parameters = -5;
  expect_create_fails(bad, "n_parameters");
  bad = o;
  bad.n_parameters = (int64_t)1 << 40; /* P * P overflows */
  expect_create_fails(bad, "n_parameters");
  bad = o;
  bad.reserved0 = (uint64_t)1 << 5;
  expect_create_fails(bad, "unknown bits");
  bad = o;
  bad.reserved0 = RH_CUDA_ENGINE_FLAG_FAST_MATH;
  expect_create_fails(bad, "FAST_MATH");
}

static void test_flags_are_requested_but_not_enabled(void) {
  RhCudaEngineOptions o = rh_options(RH_CUDA_DTYPE_FLOAT32, P_PARAMS);
  o.reserved0 = RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS | RH_CUDA_ENGINE_FLAG_FAST_MATH;
  RhCudaEngine* engine = NULL;
  CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
  RhCudaEngineFeatures f;
  memset(&f, 0x7f, sizeof f);
  f.abi_version = RH_CUDA_ABI_VERSION;
  f.struct_size = sizeof f;
  CHECK_STATUS(rh_cuda_engine_features(engine, &f), RH_CUDA_SUCCESS);
  CHECK(f.requested_flags == o.reserved0);
  CHECK(f.enabled_flags == 0 && f.graph_captures == 0 && f.graph_replays == 0 &&
        f.graph_fallbacks == 0);
  f.abi_version = 9;
  CHECK_STATUS(rh_cuda_engine_features(engine, &f), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaEngineFeatures.abi_version");
  CHECK_STATUS(rh_cuda_engine_features(engine, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_destroy(engine), RH_CUDA_SUCCESS);
}

static void test_null_engine_everywhere(void) {
  CHECK_STATUS(rh_cuda_engine_destroy(NULL), RH_CUDA_SUCCESS);
  CHECK(strcmp(rh_cuda_engine_last_error(NULL), "engine is null") == 0);
  uintptr_t stream = 1;
  CHECK_STATUS(rh_cuda_engine_stream(NULL, &stream), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "engine");
  CHECK_STATUS(rh_cuda_engine_synchronize(NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_restore(NULL, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_copy_state(NULL, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_update_host(NULL, NULL, NULL, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(NULL, NULL, NULL, NULL, NULL),
               RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_update_device_with_state(NULL, NULL, NULL, NULL, NULL),
               RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_predict(NULL, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_features(NULL, NULL), RH_CUDA_INVALID_ARGUMENT);
}

static void test_services_and_device_calls(void) {
  RhCudaEngine* engine = engine_with_one_batch();
  uintptr_t stream = 99;
  CHECK_STATUS(rh_cuda_engine_stream(engine, &stream), RH_CUDA_SUCCESS);
  CHECK(stream == 0);
  CHECK_STATUS(rh_cuda_engine_stream(engine, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_STATUS(rh_cuda_engine_synchronize(engine), RH_CUDA_SUCCESS);
  CHECK(strcmp(rh_cuda_engine_last_error(engine), "") == 0);
  Snapshot before = snapshot(engine);
  RhCudaDeviceBatch device_batch;
  memset(&device_batch, 0, sizeof device_batch);
  RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);
  RhCudaDiagnostics d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_device_with_state(engine, &device_batch, &c, &d, NULL),
               RH_CUDA_UNAVAILABLE);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "device memory");
  Snapshot after = snapshot(engine);
  CHECK(same_state(&before, &after));

  double out[N_ROWS];
  RhCudaPrediction p = rh_prediction(X, out, N_ROWS, P_FEATURES, P_FEATURES, RH_CUDA_MEMORY_DEVICE);
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_UNAVAILABLE);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "input_location");
  p.input_location = 0;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "input_location");
  p.input_location = RH_CUDA_MEMORY_HOST;
  p.reserved0 = 1;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "reserved0");
  p.reserved0 = 0;
  p.n_columns = P_FEATURES + 2;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "n_columns");
  p.n_columns = P_FEATURES;
  p.prediction = NULL;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "prediction");
  p.prediction = out;
  /* A non-finite design value is refused in the data-value grammar; the output is untouched. */
  static double x_bad[N_ROWS * P_FEATURES];
  memcpy(x_bad, X, sizeof x_bad);
  x_bad[3 * P_FEATURES + 1] = -INFINITY;
  out[0] = 42.0;
  p.x_design = x_bad;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine),
                 "RhCudaPrediction.x_design[3, 1] is -inf: values must be finite");
  CHECK(out[0] == 42.0);
  p.x_design = X;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_SUCCESS);
  double expected = before.coefficients[P_PARAMS - 1];
  for (int j = 0; j < P_FEATURES; ++j) {
    expected += X[j] * before.coefficients[j];
  }
  CHECK_CLOSE(out[0], expected, 1e-14, 1e-14);
  rh_cuda_engine_destroy(engine);
}

/* Runs one failing update and checks status, message and that nothing changed. */
static void expect_update_fails(RhCudaEngine* engine, const RhCudaHostBatch* b,
                                const RhCudaUpdateConfig* c, RhCudaStatus status,
                                const char* field) {
  Snapshot before = snapshot(engine);
  RhCudaDiagnostics d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_host(engine, b, c, &d), status);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), field);
  Snapshot after = snapshot(engine);
  CHECK(same_state(&before, &after));
}

static void test_update_refusals_leave_state_unchanged(void) {
  RhCudaEngine* engine = engine_with_one_batch();
  const RhCudaUpdateConfig good_c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);
  const RhCudaHostBatch good_b = rh_batch(X, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  RhCudaUpdateConfig c = good_c;
  RhCudaHostBatch b = good_b;

  expect_update_fails(engine, &b, NULL, RH_CUDA_INVALID_ARGUMENT, "RhCudaUpdateConfig");
  expect_update_fails(engine, NULL, &c, RH_CUDA_INVALID_ARGUMENT, "RhCudaHostBatch");
  c.struct_size = 64;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "RhCudaUpdateConfig.struct_size");
  c = good_c;
  c.abi_version = 3;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "RhCudaUpdateConfig.abi_version");
  c = good_c;
  c.penalty = 2;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "penalty");
  c = good_c;
  c.reserved0 = 1;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "reserved0");
  c = good_c;
  c.n_features_in = 1;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "n_features_in");
  c = good_c;
  c.max_iter = 0;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "max_iter");
  c = good_c;
  c.max_iter = (int64_t)INT32_MAX + 1;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "max_iter");
  c = good_c;
  c.tau = NAN;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "tau");
  c = good_c;
  c.bandwidth_scale = 0.0;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "bandwidth_scale");
  c = good_c;
  c.tolerance = -1.0;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "tolerance");
  c = good_c;
  c.ridge = INFINITY;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "ridge");
  c = good_c;
  c.lambda_scale = -0.5;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "lambda_scale");
  c = good_c;

  b.struct_size = 48;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "RhCudaHostBatch.struct_size");
  b = good_b;
  b.x_design = NULL;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "x_design");
  b = good_b;
  b.y = NULL;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, ".y");
  b = good_b;
  b.n_rows = 0;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "n_rows");
  b = good_b;
  b.n_rows = -3;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "n_rows");
  b = good_b;
  b.n_columns = P_FEATURES + 2;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "n_columns");
  b = good_b;
  b.n_columns = -1;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "n_columns");
  b = good_b;
  b.n_rows = INT64_MAX / 2; /* n_rows * n_columns overflows before anything is read */
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "overflows");
  b = good_b;
  b.batch_weight = 0.0;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "batch_weight");
  b = good_b;
  b.batch_weight = N_ROWS + 1.0;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "batch_weight");

  double x_bad[N_ROWS * P_FEATURES], y_bad[N_ROWS], w[N_ROWS];
  memcpy(x_bad, X, sizeof x_bad);
  x_bad[5 * P_FEATURES + 2] = NAN;
  b = rh_batch(x_bad, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  /* Refused data values: the whole message, in the grammar of docs/abi.md ("Refused data
   * values"), which both engines write through rh_refuse_value. */
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "RhCudaHostBatch.x_design[5, 2] is nan: values must be finite");
  x_bad[5 * P_FEATURES + 2] = INFINITY;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "RhCudaHostBatch.x_design[5, 2] is inf: values must be finite");
  x_bad[5 * P_FEATURES + 2] = -NAN; /* the sign of a NaN is not reported ("-nan") */
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "RhCudaHostBatch.x_design[5, 2] is nan: values must be finite");
  memcpy(y_bad, Y, sizeof y_bad);
  y_bad[7] = -INFINITY;
  b = rh_batch(X, y_bad, NULL, N_ROWS, P_FEATURES, N_ROWS);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "RhCudaHostBatch.y[7] is -inf: values must be finite");
  for (int i = 0; i < N_ROWS; ++i) {
    w[i] = 1.0;
  }
  w[11] = NAN;
  b = rh_batch(X, Y, w, N_ROWS, P_FEATURES, N_ROWS);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "RhCudaHostBatch.sample_weight[11] is nan: values must be finite");
  w[11] = -1.0;
  b = rh_batch(X, Y, w, N_ROWS, P_FEATURES, N_ROWS - 2.0);
  expect_update_fails(
      engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
      "RhCudaHostBatch.sample_weight[11] is negative: values must be >= 0 (this one is -1)");
  w[11] = 1.0;
  b = rh_batch(X, Y, w, N_ROWS, P_FEATURES, N_ROWS * 1.01);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "batch_weight");
  for (int i = 0; i < N_ROWS; ++i) {
    w[i] = 0.0;
  }
  b = rh_batch(X, Y, w, N_ROWS, P_FEATURES, 1.0);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "batch_weight");

  b = good_b;
  RhCudaDiagnostics d = rh_diagnostics();
  d.struct_size = 40;
  Snapshot before = snapshot(engine);
  CHECK_STATUS(rh_cuda_engine_update_host(engine, &b, &c, &d), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaDiagnostics.struct_size");
  CHECK_STATUS(rh_cuda_engine_update_host(engine, &b, &c, NULL), RH_CUDA_INVALID_ARGUMENT);
  d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, NULL),
               RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaHostState");
  double coef[P_PARAMS];
  RhCudaHostState s = rh_state_out(coef, NULL);
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, &s),
               RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "information");
  Snapshot after = snapshot(engine);
  CHECK(same_state(&before, &after));

  /* A good call still works after all those refusals, and clears the message. */
  CHECK_STATUS(rh_cuda_engine_update_host(engine, &good_b, &good_c, &d), RH_CUDA_SUCCESS);
  CHECK(strcmp(rh_cuda_engine_last_error(engine), "") == 0);
  rh_cuda_engine_destroy(engine);
}

/* The engine finds non-finite x_design values through its first objective, not a separate
 * pass: every kind of bad value, in every position, on a fresh engine (zero coefficients, where
 * inf * 0 is NaN) and after a batch, for both solvers, must still be named exactly and leave
 * the state alone. */
static void test_nonfinite_design_values_are_named_for_both_solvers(void) {
  const double bad_values[3] = {NAN, INFINITY, -INFINITY};
  const int64_t positions[3] = {0, 5 * P_FEATURES + 2, N_ROWS * P_FEATURES - 1};
  const char* names[3][3] = {
      {"x_design[0, 0] is nan: ", "x_design[5, 2] is nan: ", "x_design[39, 2] is nan: "},
      {"x_design[0, 0] is inf: ", "x_design[5, 2] is inf: ", "x_design[39, 2] is inf: "},
      {"x_design[0, 0] is -inf: ", "x_design[5, 2] is -inf: ", "x_design[39, 2] is -inf: "}};
  static double x_bad[N_ROWS * P_FEATURES];
  for (int penalty = RH_CUDA_PENALTY_NONE; penalty <= RH_CUDA_PENALTY_L1; ++penalty) {
    const RhCudaUpdateConfig c = rh_config(P_FEATURES, penalty);
    for (int fresh = 0; fresh <= 1; ++fresh) {
      RhCudaEngine* engine = NULL;
      if (fresh) {
        RhCudaEngineOptions o = rh_options(RH_CUDA_DTYPE_FLOAT64, P_PARAMS);
        CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
      } else {
        engine = engine_with_one_batch();
      }
      for (int v = 0; v < 3; ++v) {
        for (int p = 0; p < 3; ++p) {
          memcpy(x_bad, X, sizeof x_bad);
          x_bad[positions[p]] = bad_values[v];
          RhCudaHostBatch b = rh_batch(x_bad, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
          expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, names[v][p]);
        }
      }
      rh_cuda_engine_destroy(engine);
    }
  }
}

static void test_update_with_state_exports_the_commit(void) {
  RhCudaEngine* engine = engine_with_one_batch();
  RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_L1);
  RhCudaHostBatch b = rh_batch(X, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  RhCudaDiagnostics d = rh_diagnostics();
  double coef[P_PARAMS], info[P_PARAMS * P_PARAMS];
  RhCudaHostState s = rh_state_out(coef, info);
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, &s), RH_CUDA_SUCCESS);
  CHECK(s.n_samples_seen == 2 * N_ROWS && s.batch_count == 2 && s.weight_sum == 2.0 * N_ROWS);
  CHECK(s.previous_lambda == d.lambda_value && d.lambda_value > 0.0);
  Snapshot now = snapshot(engine);
  CHECK(memcmp(now.coefficients, coef, sizeof coef) == 0);
  CHECK(memcmp(now.information, info, sizeof info) == 0);
  rh_cuda_engine_destroy(engine);
}

static void test_restore_refusals_and_asymmetric_round_trip(void) {
  RhCudaEngine* engine = engine_with_one_batch();
  double coef[P_PARAMS] = {0.5, -1.25, 3.0, 0.125};
  double info[P_PARAMS * P_PARAMS];
  for (int k = 0; k < P_PARAMS * P_PARAMS; ++k) {
    info[k] = (k % 5 == 0 ? 10.0 : 0.0) + 0.01 * k; /* asymmetric on purpose */
  }
  RhCudaHostStateView v;
  memset(&v, 0, sizeof v);
  v.abi_version = RH_CUDA_ABI_VERSION;
  v.struct_size = sizeof v;
  v.coefficients = coef;
  v.information = info;
  v.n_samples_seen = 123;
  v.batch_count = 4;
  v.previous_lambda = 0.25;
  v.weight_sum = 99.5;
  const RhCudaHostStateView good = v;
  Snapshot before = snapshot(engine);
#define EXPECT_RESTORE_FAILS(stmt, field)                                       \
  do {                                                                          \
    v = good;                                                                   \
    stmt;                                                                       \
    CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_INVALID_ARGUMENT); \
    CHECK_CONTAINS(rh_cuda_engine_last_error(engine), field);                   \
    Snapshot rh_after_ = snapshot(engine);                                      \
    CHECK(same_state(&before, &rh_after_));                                     \
  } while (0)
  EXPECT_RESTORE_FAILS(v.struct_size = 8, "struct_size");
  EXPECT_RESTORE_FAILS(v.abi_version = 0, "abi_version");
  EXPECT_RESTORE_FAILS(v.coefficients = NULL, "coefficients");
  EXPECT_RESTORE_FAILS(v.information = NULL, "information");
  EXPECT_RESTORE_FAILS(v.n_samples_seen = -1, "n_samples_seen");
  EXPECT_RESTORE_FAILS(v.batch_count = 0, "batch_count");
  EXPECT_RESTORE_FAILS(v.batch_count = 200, "batch_count");
  EXPECT_RESTORE_FAILS(v.previous_lambda = NAN, "previous_lambda");
  EXPECT_RESTORE_FAILS(v.weight_sum = 0.0, "weight_sum");
  EXPECT_RESTORE_FAILS(v.weight_sum = INFINITY, "weight_sum");
  /* a state without a batch has weight 0: every batch adds a weight > 0 */
  EXPECT_RESTORE_FAILS((v.n_samples_seen = 0, v.batch_count = 0, v.weight_sum = 5.0),
                       "weight_sum is 5 with batch_count 0");
  info[6] = NAN;
  EXPECT_RESTORE_FAILS((void)0,
                       "RhCudaHostStateView.information[1, 2] is nan: values must be finite");
  info[6] = 0.06;
  coef[2] = INFINITY;
  EXPECT_RESTORE_FAILS((void)0,
                       "RhCudaHostStateView.coefficients[2] is inf: values must be finite");
  coef[2] = 3.0;
  CHECK_STATUS(rh_cuda_engine_restore(engine, NULL), RH_CUDA_INVALID_ARGUMENT);
#undef EXPECT_RESTORE_FAILS

  v = good;
  CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_SUCCESS);
  double coef_out[P_PARAMS], info_out[P_PARAMS * P_PARAMS];
  RhCudaHostState s = rh_state_out(coef_out, info_out);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
  CHECK(memcmp(coef_out, coef, sizeof coef) == 0);
  CHECK(memcmp(info_out, info, sizeof info) == 0);
  CHECK(s.n_samples_seen == 123 && s.batch_count == 4 && s.previous_lambda == 0.25 &&
        s.weight_sum == 99.5);
  s.struct_size = 4;
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaHostState.struct_size");
  s = rh_state_out(NULL, info_out);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "coefficients");

  /* An update against the asymmetric information keeps its asymmetry (J + symmetric G). */
  RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = rh_batch(X, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  RhCudaDiagnostics d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_host(engine, &b, &c, &d), RH_CUDA_SUCCESS);
  s = rh_state_out(coef_out, info_out);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
  CHECK_CLOSE(info_out[1] - info_out[4], info[1] - info[4], 1e-12, 1e-12);
  rh_cuda_engine_destroy(engine);
}

/* h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau) must be a positive normal double at
 * the batch's cumulative weight N; checked before any work, the state untouched. */
static void test_bandwidth_below_the_normal_range_is_refused(void) {
  RhCudaEngine* engine = engine_with_one_batch();
  RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);
  const RhCudaHostBatch b = rh_batch(X, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  /* N = 80, ln 3: h = 1e-300 / (8.94 * 1.0986) = 1.02e-301, normal: accepted */
  c.bandwidth_scale = 1e-300;
  RhCudaDiagnostics d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_host(engine, &b, &c, &d), RH_CUDA_SUCCESS);
  CHECK_CLOSE(d.bandwidth, 1e-300 / (sqrt(80.0) * log(3.0)), 1e-15, 0.0);
  /* N = 120: h = 1e-310 / (10.95 * 1.0986) = 8.3e-312, subnormal */
  c.bandwidth_scale = 1e-310;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      ": must be a positive normal number (>= 2.2250738585072014e-308)");
  /* the same through tau: h = min(..., tau) */
  c.bandwidth_scale = 1.0;
  c.tau = 4.9e-324;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "bandwidth h");
  /* h = 0: a tiny scale against a huge restored weight */
  double coef[P_PARAMS] = {0.0, 0.0, 0.0, 0.0}, info[P_PARAMS * P_PARAMS] = {0.0};
  RhCudaHostStateView v = rh_state_view(coef, info);
  v.n_samples_seen = 10;
  v.batch_count = 1;
  v.weight_sum = 1e300;
  CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_SUCCESS);
  c = rh_config(P_FEATURES, RH_CUDA_PENALTY_L1);
  c.bandwidth_scale = 1e-300;
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "bandwidth h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau) is 0 "
                      "for RhCudaUpdateConfig.bandwidth_scale 1e-300");
  rh_cuda_engine_destroy(engine);
}

/* K = sum_i psi(r_i)^2 x_i x_i' at the exported coefficients, written out independently. */
static void expected_meat(const double* y, const double* coef, double tau, double* meat) {
  memset(meat, 0, sizeof(double) * P_PARAMS * P_PARAMS);
  for (int i = 0; i < N_ROWS; ++i) {
    double x[P_PARAMS], r = y[i];
    for (int j = 0; j < P_PARAMS; ++j) {
      x[j] = j < P_FEATURES ? X[i * P_FEATURES + j] : 1.0;
      r -= x[j] * coef[j];
    }
    double psi = r > tau ? tau : (r < -tau ? -tau : r);
    for (int j = 0; j < P_PARAMS; ++j) {
      for (int k = 0; k < P_PARAMS; ++k) {
        meat[j * P_PARAMS + k] += psi * psi * x[j] * x[k];
      }
    }
  }
}

/* Callers built before K pass 56-byte state structs: allocated at exactly that size here, so a
 * sanitizer build catches any read or write past them. */
static void test_meat_and_old_size_state_structs(void) {
  double y[N_ROWS];
  for (int i = 0; i < N_ROWS; ++i) {
    y[i] = Y[i] + (i % 7 == 0 ? 8.0 : 0.0); /* outliers beyond tau */
  }
  RhCudaEngineOptions o = rh_options(RH_CUDA_DTYPE_FLOAT64, P_PARAMS);
  RhCudaEngine* engine = NULL;
  CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
  RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = rh_batch(X, y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  RhCudaDiagnostics d = rh_diagnostics();
  double coef[P_PARAMS], info[P_PARAMS * P_PARAMS], meat[P_PARAMS * P_PARAMS];
  double expected[P_PARAMS * P_PARAMS];
  RhCudaHostState s = rh_state_out(coef, info);
  s.meat = meat;
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, &s), RH_CUDA_SUCCESS);
  CHECK(s.meat_available == 1 && s.reserved1 == 0);
  expected_meat(y, coef, c.tau, expected);
  for (int k = 0; k < P_PARAMS * P_PARAMS; ++k) {
    CHECK_CLOSE(meat[k], expected[k], 1e-12, 1e-12);
  }

  const uint32_t old_size = (uint32_t)offsetof(RhCudaHostState, meat);
  CHECK(old_size == 56 && offsetof(RhCudaHostStateView, meat) == 56);
  /* Byte buffers of exactly the old size, filled and read through memcpy: member access
   * through a pointer to the larger struct type would reach past them (and compilers say so). */
  unsigned char* old_out = (unsigned char*)malloc(old_size);
  unsigned char* old_view = (unsigned char*)malloc(old_size);
  CHECK(old_out != NULL && old_view != NULL);
  if (old_out == NULL || old_view == NULL) {
    free(old_out);
    free(old_view);
    rh_cuda_engine_destroy(engine);
    return;
  }
  RhCudaHostState old_state = s;
  old_state.struct_size = old_size;
  memcpy(old_out, &old_state, old_size);
  CHECK_STATUS(
      rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, (RhCudaHostState*)(void*)old_out),
      RH_CUDA_SUCCESS);
  memcpy(&old_state, old_out, old_size);
  CHECK(old_state.batch_count == 2);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, (RhCudaHostState*)(void*)old_out),
               RH_CUDA_SUCCESS);
  memcpy(&old_state, old_out, old_size);

  /* an old caller's restore: the engine holds no K from then on */
  RhCudaHostStateView v = rh_state_view(coef, info);
  v.n_samples_seen = old_state.n_samples_seen;
  v.batch_count = old_state.batch_count;
  v.previous_lambda = old_state.previous_lambda;
  v.weight_sum = old_state.weight_sum;
  RhCudaHostStateView old_state_view = v;
  old_state_view.struct_size = old_size;
  memcpy(old_view, &old_state_view, old_size);
  CHECK_STATUS(rh_cuda_engine_restore(engine, (const RhCudaHostStateView*)(const void*)old_view),
               RH_CUDA_SUCCESS);
  for (int k = 0; k < P_PARAMS * P_PARAMS; ++k) {
    meat[k] = -3.0;
  }
  s = rh_state_out(coef, info);
  s.meat = meat;
  s.meat_available = 9;
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
  CHECK(s.meat_available == 0 && meat[0] == -3.0 && meat[P_PARAMS * P_PARAMS - 1] == -3.0);
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, &s), RH_CUDA_SUCCESS);
  CHECK(s.meat_available == 0 && meat[0] == -3.0);

  /* a new caller restores K; sizes between the two layouts and a bad K are refused */
  v.meat = expected;
  CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_SUCCESS);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
  CHECK(s.meat_available == 1 && memcmp(meat, expected, sizeof meat) == 0);
  Snapshot before = snapshot(engine);
  v.struct_size = 60;
  CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine),
                 "RhCudaHostStateView.struct_size is 60: must be 56");
  v.struct_size = sizeof v;
  expected[P_PARAMS + 1] = -1.0;
  CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine),
                 "RhCudaHostStateView.meat[1, 1] is negative: diagonal entries must be >= 0 "
                 "(this one is -1)");
  expected[P_PARAMS + 1] = NAN;
  CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine),
                 "RhCudaHostStateView.meat[1, 1] is nan: values must be finite");
  s.struct_size = 64;
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "or at least 72");
  Snapshot after = snapshot(engine);
  CHECK(same_state(&before, &after));
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_INVALID_ARGUMENT);
  s.struct_size = sizeof s;
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &s), RH_CUDA_SUCCESS);
  CHECK(s.meat_available == 1 && meat[P_PARAMS + 1] != -1.0 && isfinite(meat[P_PARAMS + 1]));

  /* an L1 batch ends K */
  c.penalty = RH_CUDA_PENALTY_L1;
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, &s), RH_CUDA_SUCCESS);
  CHECK(s.meat_available == 0);
  free(old_out);
  free(old_view);
  rh_cuda_engine_destroy(engine);
}

/* Every array pointer the engine reads or writes must be aligned to its elements: a misaligned
 * one is refused before anything is read or written, naming the struct, the field and the
 * element size, and the committed state is unchanged (the bytes behind the misaligned pointers
 * hold valid values, so only the alignment can be refused). */
static void test_misaligned_arrays_are_refused(void) {
  RhCudaEngine* engine = engine_with_one_batch();
  const Snapshot before = snapshot(engine);
  /* Copies of X, Y, a weight vector and a state 4 bytes into double-aligned buffers. */
  static double x_room[N_ROWS * P_FEATURES + 1], y_room[N_ROWS + 1], w_room[N_ROWS + 1];
  static double coef_room[P_PARAMS + 1], info_room[P_PARAMS * P_PARAMS + 1];
  static double meat_room[P_PARAMS * P_PARAMS + 1], out_room[N_ROWS + 1];
  char* x_odd = (char*)x_room + 4;
  char* y_odd = (char*)y_room + 4;
  char* w_odd = (char*)w_room + 4;
  memcpy(x_odd, X, sizeof X);
  memcpy(y_odd, Y, sizeof Y);
  for (int i = 0; i < N_ROWS; ++i) {
    const double one = 1.0;
    memcpy(w_odd + i * sizeof(double), &one, sizeof one);
  }
  const RhCudaUpdateConfig c = rh_config(P_FEATURES, RH_CUDA_PENALTY_NONE);

  RhCudaHostBatch b = rh_batch(x_odd, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  char expected[160];
  snprintf(expected, sizeof expected,
           "RhCudaHostBatch.x_design (%p) is not aligned to its 8-byte elements", (void*)x_odd);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, expected);
  b = rh_batch(X, y_odd, NULL, N_ROWS, P_FEATURES, N_ROWS);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT, "RhCudaHostBatch.y (0x");
  b = rh_batch(X, Y, w_odd, N_ROWS, P_FEATURES, N_ROWS);
  expect_update_fails(engine, &b, &c, RH_CUDA_INVALID_ARGUMENT,
                      "RhCudaHostBatch.sample_weight (0x");

  /* The export target of an update: refused before the update runs. */
  double coef_out[P_PARAMS], info_out[P_PARAMS * P_PARAMS];
  RhCudaHostState out = rh_state_out((char*)coef_room + 4, info_out);
  b = rh_batch(X, Y, NULL, N_ROWS, P_FEATURES, N_ROWS);
  RhCudaDiagnostics d = rh_diagnostics();
  CHECK_STATUS(rh_cuda_engine_update_host_with_state(engine, &b, &c, &d, &out),
               RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaHostState.coefficients (0x");
  Snapshot after = snapshot(engine);
  CHECK(same_state(&before, &after));
  /* copy_state's target, K included. */
  out = rh_state_out(coef_out, (char*)info_room + 4);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &out), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaHostState.information (0x");
  out = rh_state_out(coef_out, info_out);
  out.meat = (char*)meat_room + 4;
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &out), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaHostState.meat (0x");

  /* Restore: the committed state's own values, at misaligned addresses. */
  double coef[P_PARAMS], info[P_PARAMS * P_PARAMS], meat[P_PARAMS * P_PARAMS];
  out = rh_state_out(coef, info);
  out.meat = meat;
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &out), RH_CUDA_SUCCESS);
  memcpy((char*)coef_room + 4, coef, sizeof coef);
  memcpy((char*)info_room + 4, info, sizeof info);
  memcpy((char*)meat_room + 4, meat, sizeof meat);
  RhCudaHostStateView v = rh_state_view(coef, info);
  v.meat = meat;
  v.n_samples_seen = out.n_samples_seen;
  v.batch_count = out.batch_count;
  v.previous_lambda = out.previous_lambda;
  v.weight_sum = out.weight_sum;
  const RhCudaHostStateView good = v;
  const char* fields[3] = {"RhCudaHostStateView.coefficients (0x",
                           "RhCudaHostStateView.information (0x", "RhCudaHostStateView.meat (0x"};
  for (int k = 0; k < 3; ++k) {
    v = good;
    if (k == 0) {
      v.coefficients = (char*)coef_room + 4;
    } else if (k == 1) {
      v.information = (char*)info_room + 4;
    } else {
      v.meat = (char*)meat_room + 4;
    }
    CHECK_STATUS(rh_cuda_engine_restore(engine, &v), RH_CUDA_INVALID_ARGUMENT);
    CHECK_CONTAINS(rh_cuda_engine_last_error(engine), fields[k]);
    after = snapshot(engine);
    CHECK(same_state(&before, &after));
  }
  CHECK_STATUS(rh_cuda_engine_restore(engine, &good), RH_CUDA_SUCCESS);

  /* Prediction: its design and its output; the output is not written. */
  RhCudaPrediction p =
      rh_prediction(x_odd, out_room, N_ROWS, P_FEATURES, P_FEATURES, RH_CUDA_MEMORY_HOST);
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaPrediction.x_design (0x");
  p.x_design = X;
  memset(out_room, 0x5a, sizeof out_room);
  p.prediction = (char*)out_room + 4;
  CHECK_STATUS(rh_cuda_engine_predict(engine, &p), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaPrediction.prediction (0x");
  for (size_t k = 0; k < sizeof out_room; ++k) {
    CHECK(((const unsigned char*)out_room)[k] == 0x5a);
  }
  after = snapshot(engine);
  CHECK(same_state(&before, &after));
  rh_cuda_engine_destroy(engine);
}

int main(void) {
  for (int i = 0; i < N_ROWS * P_FEATURES; ++i) {
    X[i] = rh_normal();
  }
  for (int i = 0; i < N_ROWS; ++i) {
    Y[i] = 1.0 + X[i * P_FEATURES] - 2.0 * X[i * P_FEATURES + 2] + 0.1 * rh_normal();
  }
  RUN_TEST(test_library_queries);
  RUN_TEST(test_engine_create_refusals);
  RUN_TEST(test_flags_are_requested_but_not_enabled);
  RUN_TEST(test_null_engine_everywhere);
  RUN_TEST(test_services_and_device_calls);
  RUN_TEST(test_update_refusals_leave_state_unchanged);
  RUN_TEST(test_nonfinite_design_values_are_named_for_both_solvers);
  RUN_TEST(test_update_with_state_exports_the_commit);
  RUN_TEST(test_restore_refusals_and_asymmetric_round_trip);
  RUN_TEST(test_bandwidth_below_the_normal_range_is_refused);
  RUN_TEST(test_meat_and_old_size_state_structs);
  RUN_TEST(test_misaligned_arrays_are_refused);
  return TEST_MAIN_RESULT();
}
