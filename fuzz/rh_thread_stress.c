/*
 * rh_thread_stress -- the thread-safety rule of abi/rh_cuda.h, exercised: "distinct engines may
 * be used concurrently from distinct threads; functions without an engine are thread-safe".
 *
 * Each of T threads creates its own engine (creation is thread-safe), streams its own batches
 * (its own seed, dtype and penalty), makes failing calls whose messages carry a value unique to
 * the thread (so a last-error buffer shared between threads shows up as another thread's text),
 * predicts, exports, and destroys the engine. The same streams are first run one after another
 * on the main thread; every thread's final state and predictions must be byte-identical to its
 * serial run. Built with -fsanitize=thread (build/fuzz-tsan), a data race inside the engine is a
 * ThreadSanitizer report and a failed test.
 *
 * Usage: rh_thread_stress [--threads T] [--batches B] [--rounds R]
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_structs.h"
#include "rh_cuda.h"

#define P_MAX 6
#define ROWS_MAX 40

typedef struct Result {
  double coefficients[P_MAX];
  double information[P_MAX * P_MAX];
  int64_t n_samples_seen, batch_count;
  double previous_lambda, weight_sum;
  double predictions[ROWS_MAX];
  int failures; /* checks that failed inside the stream */
} Result;

typedef struct Job {
  int index;
  int batches;
  Result result;
} Job;

static uint64_t mix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double u01(uint64_t* s) { return (double)(mix(s) >> 11) * (1.0 / 9007199254740992.0); }

/* One stream, fully determined by job->index. */
static void run_stream(Job* job) {
  Result* r = &job->result;
  memset(r, 0, sizeof *r);
  uint64_t seed = 1000003u * (uint64_t)(job->index + 1);
  const int32_t dtype = job->index % 2 ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64;
  const size_t elem = dtype == RH_CUDA_DTYPE_FLOAT32 ? sizeof(float) : sizeof(double);
  const int64_t p = 2 + job->index % 4, P = p + 1;
  const RhCudaEngineOptions o = rh_options(dtype, P);
  RhCudaEngine* e = NULL;
  if (rh_cuda_engine_create(&o, &e) != RH_CUDA_SUCCESS) {
    fprintf(stderr, "thread %d: create failed: %s\n", job->index, rh_cuda_last_error());
    r->failures++;
    return;
  }
  RhCudaUpdateConfig c =
      rh_config(p, job->index % 3 == 2 ? RH_CUDA_PENALTY_L1 : RH_CUDA_PENALTY_NONE);
  c.max_iter = 50;
  c.tolerance = 1e-8;
  c.ridge = 1e-8;
  c.lambda_scale = 0.5;
  RhCudaDiagnostics d = rh_diagnostics();
  unsigned char x[ROWS_MAX * P_MAX * sizeof(double)], y[ROWS_MAX * sizeof(double)];
  for (int b = 0; b < job->batches; ++b) {
    int64_t n = 5 + (int64_t)(mix(&seed) % (ROWS_MAX - 5));
    for (int64_t i = 0; i < n; ++i) {
      double target = 0.3 * job->index;
      for (int64_t j = 0; j < p; ++j) {
        double v = u01(&seed) * 2 - 1;
        target += v * (double)(j + 1);
        if (dtype == RH_CUDA_DTYPE_FLOAT32) ((float*)x)[i * p + j] = (float)v;
        else ((double*)x)[i * p + j] = v;
      }
      target += (u01(&seed) < 0.1 ? 20.0 : 0.3) * (u01(&seed) - 0.5);
      if (dtype == RH_CUDA_DTYPE_FLOAT32) ((float*)y)[i] = (float)target;
      else ((double*)y)[i] = target;
    }
    const RhCudaHostBatch batch = rh_batch(x, y, NULL, n, p, (double)n);
    if (rh_cuda_engine_update_host(e, &batch, &c, &d) != RH_CUDA_SUCCESS) {
      fprintf(stderr, "thread %d batch %d: %s\n", job->index, b, rh_cuda_engine_last_error(e));
      r->failures++;
    }
    /* A refused call on this engine: its message names this thread's value. */
    char expected[64];
    RhCudaHostBatch bad = batch;
    bad.n_rows = -(int64_t)(1000 + job->index);
    snprintf(expected, sizeof expected, "n_rows is %" PRId64, bad.n_rows);
    if (rh_cuda_engine_update_host(e, &bad, &c, &d) != RH_CUDA_INVALID_ARGUMENT ||
        strstr(rh_cuda_engine_last_error(e), expected) == NULL) {
      fprintf(stderr, "thread %d: engine message \"%s\" lacks \"%s\"\n", job->index,
              rh_cuda_engine_last_error(e), expected);
      r->failures++;
    }
    /* A refused call without an engine: the thread-local buffer names this thread's value. */
    RhCudaEngineOptions wrong = o;
    wrong.n_parameters = -(int64_t)(2000 + job->index);
    RhCudaEngine* none = NULL;
    snprintf(expected, sizeof expected, "n_parameters is %" PRId64, wrong.n_parameters);
    if (rh_cuda_engine_create(&wrong, &none) != RH_CUDA_INVALID_ARGUMENT || none != NULL ||
        strstr(rh_cuda_last_error(), expected) == NULL) {
      fprintf(stderr, "thread %d: thread message \"%s\" lacks \"%s\"\n", job->index,
              rh_cuda_last_error(), expected);
      r->failures++;
    }
    int32_t available = 0;
    if (rh_cuda_is_available(&available) != RH_CUDA_SUCCESS || available != 1) r->failures++;
  }
  /* predictions on the last batch's rows, then the final state */
  unsigned char out[ROWS_MAX * sizeof(double)];
  RhCudaPrediction pr;
  memset(&pr, 0, sizeof pr);
  pr.abi_version = RH_CUDA_ABI_VERSION;
  pr.struct_size = sizeof pr;
  pr.x_design = x;
  pr.prediction = out;
  pr.n_rows = 5;
  pr.n_columns = p;
  pr.n_features_in = p;
  pr.input_location = RH_CUDA_MEMORY_HOST;
  if (rh_cuda_engine_predict(e, &pr) != RH_CUDA_SUCCESS) r->failures++;
  for (int i = 0; i < 5; ++i) {
    r->predictions[i] = dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)((float*)out)[i]
                                                       : ((double*)out)[i];
  }
  unsigned char coef[P_MAX * sizeof(double)], info[P_MAX * P_MAX * sizeof(double)];
  RhCudaHostState st = rh_state_out(coef, info);
  if (rh_cuda_engine_copy_state(e, &st) != RH_CUDA_SUCCESS) r->failures++;
  for (int64_t j = 0; j < P; ++j) {
    r->coefficients[j] = dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)((float*)coef)[j]
                                                        : ((double*)coef)[j];
  }
  for (int64_t j = 0; j < P * P; ++j) {
    r->information[j] = dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)((float*)info)[j]
                                                       : ((double*)info)[j];
  }
  (void)elem;
  r->n_samples_seen = st.n_samples_seen;
  r->batch_count = st.batch_count;
  r->previous_lambda = st.previous_lambda;
  r->weight_sum = st.weight_sum;
  rh_cuda_engine_destroy(e);
}

static void* thread_main(void* arg) {
  run_stream((Job*)arg);
  return NULL;
}

int main(int argc, char** argv) {
  int threads = 8, batches = 60, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--batches") == 0) batches = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
  }
  if (threads < 1 || threads > 64 || batches < 1) {
    fprintf(stderr, "usage: %s [--threads 1..64] [--batches B] [--rounds R]\n", argv[0]);
    return 2;
  }
  Job* serial = (Job*)calloc((size_t)threads, sizeof(Job));
  Job* parallel = (Job*)calloc((size_t)threads, sizeof(Job));
  pthread_t* ids = (pthread_t*)calloc((size_t)threads, sizeof(pthread_t));
  if (!serial || !parallel || !ids) return 2;
  int failures = 0;
  for (int t = 0; t < threads; ++t) {
    serial[t].index = t;
    serial[t].batches = batches;
    run_stream(&serial[t]);
    failures += serial[t].result.failures;
  }
  for (int round = 0; round < rounds; ++round) {
    for (int t = 0; t < threads; ++t) {
      parallel[t].index = t;
      parallel[t].batches = batches;
      if (pthread_create(&ids[t], NULL, thread_main, &parallel[t]) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 2;
      }
    }
    for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
    for (int t = 0; t < threads; ++t) {
      failures += parallel[t].result.failures;
      /* every field is written for both runs (memset first), so the bytes compare */
      if (memcmp(&serial[t].result, &parallel[t].result, sizeof(Result)) != 0) {
        fprintf(stderr, "round %d thread %d: concurrent result differs from the serial run "
                "(n_samples_seen %" PRId64 " vs %" PRId64 ", coefficient[0] %.17g vs %.17g)\n",
                round, t, parallel[t].result.n_samples_seen, serial[t].result.n_samples_seen,
                parallel[t].result.coefficients[0], serial[t].result.coefficients[0]);
        ++failures;
      }
    }
  }
  printf("rh_thread_stress: %d threads x %d batches x %d rounds, %d failure(s)\n", threads,
         batches, rounds, failures);
  free(serial);
  free(parallel);
  free(ids);
  return failures == 0 ? 0 : 1;
}
