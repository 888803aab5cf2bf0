/* Allocation-failure sweep over librh_cpu_faults (librh_cpu built with RH_FAULT_INJECTION).
 *
 * For every operation below and every k from 1 up, the operation runs once with its k-th
 * allocation failing (RH_CPU_TEST_FAIL_ALLOCATION=k). Until k passes the number of allocations
 * the operation makes, each run must return ALLOCATION_FAILED with a message, leave the
 * committed state byte-identical (copy_state before and after), and the same call repeated
 * without injection must succeed with exactly the result of a run that never saw a failure.
 * An injected run that succeeds (k past the operation's allocations, or a failure the engine
 * absorbed) must give exactly that result too; TAIL such runs in a row end the sweep, and the
 * last k that failed is the operation's allocation count, printed for the record. Leaks are
 * LeakSanitizer's to find: the ASan build runs this test with detect_leaks=1. */
#include "rh_cuda_row_statistics.h"
#include "test_support.h"

#define FEATURES 3
#define PARAMS 4 /* with the intercept */
#define SMALL_ROWS 20
#define ROWS 60
#define MAX_K 10000
#define TAIL 16

static double X64[ROWS * FEATURES], Y64[ROWS], W64[ROWS];
static float X32[ROWS * FEATURES], Y32[ROWS];

/* The committed state (values as raw bytes of either dtype) and its counters. */
typedef struct Snapshot {
  double coefficients[PARAMS];
  double information[PARAMS * PARAMS];
  int64_t n_samples_seen, batch_count;
  double previous_lambda, weight_sum;
} Snapshot;

/* What an operation produced, compared bytewise with the run that saw no failure. */
typedef struct Outcome {
  Snapshot state;
  RhCudaDiagnostics diagnostics;
  double predictions[ROWS];
  Snapshot exported; /* update_host_with_state's export */
  /* row statistics: loss, weighted norm, score, then the three P x P matrices */
  double row_sums[2 + PARAMS + 3 * PARAMS * PARAMS];
} Outcome;

typedef struct Fixture {
  int32_t dtype;
  RhCudaEngine* engine;
  Outcome out;
} Fixture;

static Snapshot snapshot(RhCudaEngine* engine) {
  Snapshot s;
  memset(&s, 0, sizeof s);
  RhCudaHostState h = rh_state_out(s.coefficients, s.information);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &h), RH_CUDA_SUCCESS);
  s.n_samples_seen = h.n_samples_seen;
  s.batch_count = h.batch_count;
  s.previous_lambda = h.previous_lambda;
  s.weight_sum = h.weight_sum;
  return s;
}

static const void* x_of(const Fixture* f) {
  return f->dtype == RH_CUDA_DTYPE_FLOAT32 ? (const void*)X32 : (const void*)X64;
}
static const void* y_of(const Fixture* f) {
  return f->dtype == RH_CUDA_DTYPE_FLOAT32 ? (const void*)Y32 : (const void*)Y64;
}

static RhCudaEngine* new_engine(int32_t dtype) {
  RhCudaEngineOptions o = rh_options(dtype, PARAMS);
  RhCudaEngine* engine = NULL;
  CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
  return engine;
}

static RhCudaStatus update(Fixture* f, int64_t rows, int32_t penalty, int weighted) {
  RhCudaUpdateConfig c = rh_config(FEATURES, penalty);
  double weight = (double)rows;
  if (weighted) {
    weight = 0.0;
    for (int64_t i = 0; i < rows; ++i)
      weight += W64[i];
  }
  RhCudaHostBatch b = rh_batch(x_of(f), y_of(f), weighted ? W64 : NULL, rows, FEATURES, weight);
  f->out.diagnostics = rh_diagnostics();
  return rh_cuda_engine_update_host(f->engine, &b, &c, &f->out.diagnostics);
}

/* ------------------------------------------------------------------ setups (never injected) */

static void fresh_f64(Fixture* f) {
  f->dtype = RH_CUDA_DTYPE_FLOAT64;
  f->engine = new_engine(f->dtype);
}
static void fresh_f32(Fixture* f) {
  f->dtype = RH_CUDA_DTYPE_FLOAT32;
  f->engine = new_engine(f->dtype);
}
static void no_engine_f64(Fixture* f) {
  f->dtype = RH_CUDA_DTYPE_FLOAT64;
}
static void no_engine_f32(Fixture* f) {
  f->dtype = RH_CUDA_DTYPE_FLOAT32;
}
/* One small batch committed: the workspace exists but is too small for ROWS rows. */
static void small_batch_f64(Fixture* f) {
  fresh_f64(f);
  CHECK_STATUS(update(f, SMALL_ROWS, RH_CUDA_PENALTY_NONE, 0), RH_CUDA_SUCCESS);
}
static void small_batch_f32(Fixture* f) {
  fresh_f32(f);
  CHECK_STATUS(update(f, SMALL_ROWS, RH_CUDA_PENALTY_NONE, 0), RH_CUDA_SUCCESS);
}
/* A full batch committed: the workspace is large enough for the next batch. */
static void full_batch_f64(Fixture* f) {
  fresh_f64(f);
  CHECK_STATUS(update(f, ROWS, RH_CUDA_PENALTY_NONE, 0), RH_CUDA_SUCCESS);
}

/* ------------------------------------------------------------- operations (injected) */

static RhCudaStatus op_create(Fixture* f) {
  RhCudaEngineOptions o = rh_options(f->dtype, PARAMS);
  f->engine = (RhCudaEngine*)&o; /* create must reset it to NULL on failure */
  RhCudaStatus status = rh_cuda_engine_create(&o, &f->engine);
  if (status != RH_CUDA_SUCCESS) {
    CHECK(f->engine == NULL);
    f->engine = NULL;
  }
  return status;
}
static RhCudaStatus op_restore(Fixture* f) {
  double coefficients[PARAMS] = {0.5, -1.25, 2.0, 0.125};
  double information[PARAMS * PARAMS];
  for (int k = 0; k < PARAMS * PARAMS; ++k)
    information[k] = k % (PARAMS + 1) == 0 ? 3.0 : 0.25;
  RhCudaHostStateView v = rh_state_view(coefficients, information);
  v.n_samples_seen = 120;
  v.batch_count = 3;
  v.previous_lambda = 0.0;
  v.weight_sum = 117.5;
  return rh_cuda_engine_restore(f->engine, &v);
}
static RhCudaStatus op_update_newton(Fixture* f) {
  return update(f, ROWS, RH_CUDA_PENALTY_NONE, 0);
}
static RhCudaStatus op_update_l1(Fixture* f) {
  return update(f, ROWS, RH_CUDA_PENALTY_L1, 0);
}
static RhCudaStatus op_update_weighted(Fixture* f) {
  return update(f, ROWS, RH_CUDA_PENALTY_NONE, 1);
}
static RhCudaStatus op_update_with_state(Fixture* f) {
  RhCudaUpdateConfig c = rh_config(FEATURES, RH_CUDA_PENALTY_L1);
  RhCudaHostBatch b = rh_batch(x_of(f), y_of(f), NULL, ROWS, FEATURES, ROWS);
  f->out.diagnostics = rh_diagnostics();
  Snapshot* e = &f->out.exported;
  RhCudaHostState h = rh_state_out(e->coefficients, e->information);
  RhCudaStatus status =
      rh_cuda_engine_update_host_with_state(f->engine, &b, &c, &f->out.diagnostics, &h);
  e->n_samples_seen = h.n_samples_seen;
  e->batch_count = h.batch_count;
  e->previous_lambda = h.previous_lambda;
  e->weight_sum = h.weight_sum;
  return status;
}
static RhCudaStatus op_predict(Fixture* f) {
  RhCudaPrediction p =
      rh_prediction(x_of(f), f->out.predictions, ROWS, FEATURES, FEATURES, RH_CUDA_MEMORY_HOST);
  return rh_cuda_engine_predict(f->engine, &p);
}
/* The optional row-statistics extension on the full design (intercept column appended here);
 * a failed call must leave every output as it was (zero). */
static RhCudaStatus op_row_statistics(Fixture* f) {
  static double design[ROWS * PARAMS];
  for (int64_t i = 0; i < ROWS; ++i) {
    for (int64_t j = 0; j < FEATURES; ++j)
      design[i * PARAMS + j] = X64[i * FEATURES + j];
    design[i * PARAMS + FEATURES] = 1.0;
  }
  double beta[PARAMS];
  for (int64_t j = 0; j < PARAMS; ++j)
    beta[j] = 0.1 * (double)(j + 1);
  /* The outcome is the sums alone: not the diagnostics a setup's update left in f->out. */
  memset(&f->out.diagnostics, 0, sizeof f->out.diagnostics);
  double* sums = f->out.row_sums;
  RhCudaRowStatistics s;
  memset(&s, 0, sizeof s);
  s.abi_version = RH_CUDA_ABI_VERSION;
  s.struct_size = sizeof s;
  s.statistics = RH_CUDA_STATISTIC_ALL;
  s.coefficients = beta;
  s.tau = 1.345;
  s.bandwidth = 0.3;
  s.score = sums + 2;
  s.curvature_gram = sums + 2 + PARAMS;
  s.majoriser_gram = sums + 2 + PARAMS + PARAMS * PARAMS;
  s.meat = sums + 2 + PARAMS + 2 * PARAMS * PARAMS;
  RhCudaHostBatch b = rh_batch(design, Y64, W64, ROWS, PARAMS, 0.0);
  for (int64_t i = 0; i < ROWS; ++i)
    b.batch_weight += W64[i];
  RhCudaStatus status = rh_cuda_engine_row_statistics(f->engine, &b, &s);
  if (status == RH_CUDA_SUCCESS) {
    sums[0] = s.loss;
    sums[1] = s.weighted_norm;
  } else {
    for (size_t k = 0; k < sizeof f->out.row_sums / sizeof(double); ++k)
      CHECK(sums[k] == 0.0);
  }
  return status;
}
static RhCudaStatus op_copy_state(Fixture* f) {
  Snapshot* e = &f->out.exported;
  RhCudaHostState h = rh_state_out(e->coefficients, e->information);
  return rh_cuda_engine_copy_state(f->engine, &h);
}

/* ------------------------------------------------------------------------------- sweep */

static void set_injection(int64_t k) {
  if (k > 0) {
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)k);
    setenv("RH_CPU_TEST_FAIL_ALLOCATION", text, 1);
  } else {
    unsetenv("RH_CPU_TEST_FAIL_ALLOCATION");
  }
}

static void finish(Fixture* f) {
  if (f->engine != NULL) {
    f->out.state = snapshot(f->engine);
  }
}

static void teardown(Fixture* f) {
  CHECK_STATUS(rh_cuda_engine_destroy(f->engine), RH_CUDA_SUCCESS);
  f->engine = NULL;
}

static int64_t total_swept = 0;

/* Returns the number of allocations the operation makes. */
static int64_t sweep(const char* name, void (*setup)(Fixture*), RhCudaStatus (*op)(Fixture*)) {
  Fixture reference;
  memset(&reference, 0, sizeof reference);
  set_injection(0);
  setup(&reference);
  CHECK_STATUS(op(&reference), RH_CUDA_SUCCESS);
  finish(&reference);
  teardown(&reference);

  int64_t k = 1, last_failure = 0, in_a_row = 0, absorbed = 0;
  for (; k <= MAX_K && in_a_row < TAIL; ++k) {
    Fixture f;
    memset(&f, 0, sizeof f);
    setup(&f);
    Snapshot before;
    memset(&before, 0, sizeof before);
    if (f.engine != NULL)
      before = snapshot(f.engine);

    set_injection(k);
    RhCudaStatus status = op(&f);
    set_injection(0);
    if (status == RH_CUDA_SUCCESS) {
      finish(&f);
      CHECK(memcmp(&f.out, &reference.out, sizeof f.out) == 0);
      teardown(&f);
      ++in_a_row;
      continue;
    }
    absorbed += in_a_row;
    in_a_row = 0;
    last_failure = k;
    ++total_swept;
    const char* message =
        f.engine != NULL ? rh_cuda_engine_last_error(f.engine) : rh_cuda_last_error();
    if (status != RH_CUDA_ALLOCATION_FAILED || message[0] == '\0') {
      fprintf(stderr, "%s, allocation %lld failed: status %d, message \"%s\"\n", name, (long long)k,
              (int)status, message);
    }
    CHECK_STATUS(status, RH_CUDA_ALLOCATION_FAILED);
    CHECK_CONTAINS(message, "allocat");
    if (f.engine != NULL) {
      Snapshot after = snapshot(f.engine);
      CHECK(memcmp(&after, &before, sizeof after) == 0);
    }
    /* The same call without injection succeeds, as if the failure never happened. */
    memset(&f.out, 0, sizeof f.out);
    CHECK_STATUS(op(&f), RH_CUDA_SUCCESS);
    finish(&f);
    CHECK(memcmp(&f.out, &reference.out, sizeof f.out) == 0);
    teardown(&f);
  }
  CHECK(in_a_row == TAIL);
  fprintf(stderr, "  %-40s %3lld allocation(s)%s", name, (long long)last_failure,
          last_failure > 0 ? ", each made to fail in turn" : ": nothing to fail");
  if (absorbed > 0)
    fprintf(stderr, " (%lld absorbed)", (long long)absorbed);
  fprintf(stderr, "\n");
  return last_failure;
}

static void test_injection_is_live(void) {
  /* Without this the sweep could pass with an injection that never fires. */
  Fixture f;
  memset(&f, 0, sizeof f);
  no_engine_f64(&f);
  set_injection(1);
  CHECK_STATUS(op_create(&f), RH_CUDA_ALLOCATION_FAILED);
  set_injection(0);
  CHECK_CONTAINS(rh_cuda_last_error(), "allocating the engine");
  CHECK(f.engine == NULL);
}

static void test_every_allocation_of_create_restore_update_predict(void) {
  CHECK(sweep("create (float64)", no_engine_f64, op_create) >= 1);
  CHECK(sweep("create (float32)", no_engine_f32, op_create) >= 1);
  sweep("restore", fresh_f64, op_restore);
  CHECK(sweep("first update, Newton (float64)", fresh_f64, op_update_newton) >= 1);
  CHECK(sweep("first update, Newton (float32)", fresh_f32, op_update_newton) >= 1);
  CHECK(sweep("first update, L1 (float64)", fresh_f64, op_update_l1) >= 1);
  CHECK(sweep("first update, weighted rows", fresh_f64, op_update_weighted) >= 1);
  CHECK(sweep("growing update, Newton (float64)", small_batch_f64, op_update_newton) >= 1);
  CHECK(sweep("growing update, L1 (float32)", small_batch_f32, op_update_l1) >= 1);
  CHECK(sweep("growing update_host_with_state, L1", small_batch_f64, op_update_with_state) >= 1);
  sweep("second update, same size, L1", full_batch_f64, op_update_l1);
  sweep("predict (float64)", full_batch_f64, op_predict);
  sweep("predict (float32)", small_batch_f32, op_predict);
  sweep("copy_state", full_batch_f64, op_copy_state);
  CHECK(sweep("row statistics, fresh engine", fresh_f64, op_row_statistics) >= 1);
  CHECK(sweep("row statistics, growing workspace", small_batch_f64, op_row_statistics) >= 1);
  sweep("row statistics, workspace large enough", full_batch_f64, op_row_statistics);
}

int main(void) {
  for (int64_t i = 0; i < ROWS; ++i) {
    double v = 0.75;
    for (int64_t j = 0; j < FEATURES; ++j) {
      X64[i * FEATURES + j] = rh_normal();
      v += X64[i * FEATURES + j] * (0.5 + (double)j);
    }
    Y64[i] = v + 0.3 * rh_normal() + (i % 11 == 0 ? 6.0 : 0.0);
    W64[i] = (double)(1 + i % 3);
  }
  for (int64_t k = 0; k < ROWS * FEATURES; ++k)
    X32[k] = (float)X64[k];
  for (int64_t i = 0; i < ROWS; ++i)
    Y32[i] = (float)Y64[i];
  RUN_TEST(test_injection_is_live);
  RUN_TEST(test_every_allocation_of_create_restore_update_predict);
  fprintf(stderr, "%lld injected allocation failures, each refused cleanly\n",
          (long long)total_swept);
  return TEST_MAIN_RESULT();
}
