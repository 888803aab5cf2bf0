/*
 * rh_abi_fuzz -- a seeded random-call fuzzer over the 17 symbols of the engine ABI (abi/rh_cuda.h),
 * linked against librh_cpu and meant to run under AddressSanitizer + UndefinedBehaviorSanitizer.
 *
 * Every fuzzed call is generated together with an independent prediction of its outcome, made
 * from the rules in docs/abi.md ("Validation rules") rather than from the engine's code:
 *   - a call that breaks a documented rule must return INVALID_ARGUMENT (UNAVAILABLE where the
 *     CPU engine documents it: device batches and device predictions);
 *   - a call that breaks none must return SUCCESS, or NUMERICAL_ERROR / ALLOCATION_FAILED where
 *     the documentation allows those (updates that overflow, an engine too large to allocate).
 * Then, for every call:
 *   - no status outside the documented set, and a non-empty one-line message (<= 511 bytes) in
 *     the right buffer (the engine's, or the thread's for calls without an engine) on failure;
 *   - the fuzzed engine's committed state, exported with copy_state, is byte-identical to what it
 *     was before the call unless the call was a successful update or restore;
 *   - a twin engine receives exactly the successful state-changing calls and must stay
 *     byte-identical (state, diagnostics, predictions): a failed call that leaked into the state,
 *     or a success that is not reproducible, shows up as a difference;
 *   - every committed state must be accepted by restore on a third engine ("closure"): the engine
 *     must never commit a state that its own validation refuses;
 *   - output structs declared larger than this header's struct keep their extra bytes (the engine
 *     writes only the fields it knows), input arrays are never written, and the arrays handed to
 *     the engine are allocated at exactly their declared size, so the sanitizer sees any read past
 *     a declared shape or a struct declared smaller than the engine's.
 *
 * Usage: rh_abi_fuzz [--calls N] [--seed S] [--regressions] [--verbose]
 *   --calls N          fuzzed calls (default 200000; the long mode is --calls 10000000)
 *   --seed S           the generator's seed (default 1); a finding prints the seed and the call
 *                      index, so the same command reproduces it
 *   --regressions      run the crafted regression cases only (see run_regressions)
 * The exit status is 0 when no finding was made, 1 otherwise. Sanitizer reports abort the process.
 *
 * Defects found so far (each has a crafted case in run_regressions):
 *   K1 weight-sum-overflow: sample weights whose double sum overflows to inf passed the engine's
 *      batch_weight consistency check (|inf - declared| <= 1e-6 * inf); the engine committed
 *      weight_sum = inf (a state its own restore refuses, after which every batch is refused)
 *      or failed later with NUMERICAL_ERROR instead of INVALID_ARGUMENT. The same when the
 *      engine's own cumulative weight_sum + sum overflowed while the validated weight_sum +
 *      batch_weight did not. Fixed by the shared weight-sum rule (rh_weight_sum_matches).
 *   K2 bandwidth-underflow (found on the CUDA engine by a GPU-host run): a bandwidth_scale like
 *      1e-300 against a large cumulative weight gave h = 0 (or subnormal), and the update ran
 *      with an infinite curvature slope and returned SUCCESS. Fixed by the shared rule that h
 *      at the cumulative weight must be a positive normal number (rh_validate_batch).
 *   K3 weight-without-batch: restore accepted weight_sum > 0 with batch_count 0, a state no
 *      stream can reach (the Python checkpoint loader already refused it). Fixed in
 *      rh_validate_state_view: weight_sum > 0 exactly when batch_count > 0.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi_structs.h"
#include "rh_cuda.h"

/* ------------------------------------------------------------------------------ generator */

static uint64_t g_rng;

static uint64_t next_u64(void) { /* splitmix64: full period, no bad seeds */
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform01(void) { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
/* An integer in [lo, hi] (hi - lo small). */
static int64_t range_i64(int64_t lo, int64_t hi) {
  return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}
static int chance(double p) { return uniform01() < p; }
static double normal01(void) {
  double u = uniform01(), v = uniform01();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* Values a hostile or unlucky caller passes where a double is expected. */
static double special_double(void) {
  static const double values[] = {0.0,      -0.0,     1.0,      -1.0,    1e308,    -1e308,
                                  DBL_MAX,  -DBL_MAX, 1e-310,   -1e-310, DBL_MIN,  1e150,
                                  -1e150,   1e-150,   3.5e38,   -3.5e38, FLT_MAX,  1e20,
                                  4.9e-324, 1e300,    -1e300,   2.0,     0.5,      1e-300};
  int k = (int)range_i64(0, (int64_t)(sizeof values / sizeof values[0]) + 2);
  if (k == (int)(sizeof values / sizeof values[0])) return INFINITY;
  if (k == (int)(sizeof values / sizeof values[0]) + 1) return -INFINITY;
  if (k == (int)(sizeof values / sizeof values[0]) + 2) return NAN;
  return values[k];
}

/* A data value: mostly ordinary, sometimes special. */
static double data_value(double special_rate) {
  if (chance(special_rate)) return special_double();
  return normal01() * (chance(0.1) ? 1e3 : 1.0);
}

static int64_t special_i64(void) {
  static const int64_t values[] = {0,         -1,        1,         2,         INT64_MAX,
                                   INT64_MIN, INT32_MAX, (int64_t)INT32_MAX + 1,
                                   (int64_t)1 << 61,     ((int64_t)1 << 62) + 3,
                                   INT64_MAX - 1,        -((int64_t)1 << 40)};
  return values[range_i64(0, (int64_t)(sizeof values / sizeof values[0]) - 1)];
}

/* ------------------------------------------------------------------------------ reporting */

static uint64_t g_seed = 1;
static long long g_call = 0; /* index of the fuzzed call being made */
static int g_findings = 0;
static int g_verbose = 0;
static char g_context[3072]; /* what the current call is, for finding reports */

#if defined(__GNUC__)
#define RH_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RH_PRINTF(a, b)
#endif

static void context(const char* fmt, ...) RH_PRINTF(1, 2);
static void finding(const char* fmt, ...) RH_PRINTF(1, 2);

static void context(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(g_context, sizeof g_context, fmt, args);
  va_end(args);
}

static void finding(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "FINDING (seed %" PRIu64 ", call %lld): ", g_seed, g_call);
  vfprintf(stderr, fmt, args);
  fprintf(stderr, "\n  call: %s\n", g_context);
  va_end(args);
  ++g_findings;
  if (g_findings >= 20) {
    fprintf(stderr, "stopping after 20 findings\n");
    exit(1);
  }
}

static const char* status_name(RhCudaStatus s) {
  static const char* names[] = {"SUCCESS",      "INVALID_ARGUMENT", "UNAVAILABLE",
                                "ALLOCATION_FAILED", "CUDA_ERROR",  "CUBLAS_ERROR",
                                "CUSOLVER_ERROR", "NUMERICAL_ERROR", "INTERNAL_ERROR"};
  return s >= 0 && s <= 8 ? names[s] : "UNDOCUMENTED";
}

/* Statistics printed at the end. */
static long long g_status_count[10];
static long long g_abi_calls = 0; /* every ABI call, fuzzed and checking */
static long long g_twin_replays = 0, g_closure_checks = 0, g_engines_created = 0;

static void count_status(RhCudaStatus s) { ++g_status_count[s >= 0 && s <= 8 ? s : 9]; }

/* The failure text must exist, be one line and fit the documented 511 bytes. */
static void check_message(const char* text, const char* where) {
  if (text == NULL || text[0] == '\0') {
    finding("%s: failure without a message", where);
    return;
  }
  size_t n = strlen(text);
  if (n > 511) finding("%s: message longer than 511 bytes (%zu)", where, n);
  if (strchr(text, '\n') != NULL) finding("%s: message spans lines: %s", where, text);
}

/* expectation of one call */
typedef enum { EXPECT_VALID, EXPECT_INVALID, EXPECT_UNAVAILABLE, EXPECT_INVALID_OR_UNAVAILABLE } Expect;

/* Checks the status against the prediction. `can_overflow`: the call may legitimately end in
 * NUMERICAL_ERROR (an update) or ALLOCATION_FAILED (create, update). Returns 1 when it is a
 * success. */
static int check_status(RhCudaStatus got, Expect expect, int can_overflow, const char* message,
                        const char* fn) {
  ++g_abi_calls;
  count_status(got);
  if (got < 0 || got > 8) {
    finding("%s returned undocumented status %d", fn, (int)got);
    return 0;
  }
  if (got != RH_CUDA_SUCCESS) check_message(message, fn);
  switch (expect) {
    case EXPECT_VALID:
      if (got == RH_CUDA_SUCCESS) return 1;
      if (can_overflow && (got == RH_CUDA_NUMERICAL_ERROR || got == RH_CUDA_ALLOCATION_FAILED)) {
        return 0;
      }
      finding("%s refused a call the documented rules accept: %s: %s", fn, status_name(got),
              message ? message : "(null)");
      return 0;
    case EXPECT_INVALID:
      if (got != RH_CUDA_INVALID_ARGUMENT) {
        finding("%s returned %s for a call that breaks a documented rule (expected "
                "INVALID_ARGUMENT)%s%s",
                fn, status_name(got), got ? ": " : "", got ? message : "");
      }
      return got == RH_CUDA_SUCCESS;
    case EXPECT_UNAVAILABLE:
      if (got != RH_CUDA_UNAVAILABLE) {
        finding("%s returned %s, expected UNAVAILABLE (CPU engine)", fn, status_name(got));
      }
      return got == RH_CUDA_SUCCESS;
    case EXPECT_INVALID_OR_UNAVAILABLE:
      if (got != RH_CUDA_INVALID_ARGUMENT && got != RH_CUDA_UNAVAILABLE) {
        finding("%s returned %s, expected INVALID_ARGUMENT or UNAVAILABLE", fn,
                status_name(got));
      }
      return got == RH_CUDA_SUCCESS;
  }
  return 0;
}

/* ------------------------------------------------------------------------ struct buffers */

/* A struct as a caller hands it over: a heap block of exactly the declared size when that is
 * smaller than this header's struct (so a read past the declared size is an ASan report), or
 * this header's struct followed by canary bytes when the declared size is larger. */
typedef struct StructBuf {
  unsigned char* block;
  size_t alloc;
  size_t known;
  uint32_t declared;
  int header_ok; /* abi_version 2 and declared >= known */
} StructBuf;

#define CANARY 0xA5

/* `value`: the full struct as this header declares it (header fields are overwritten). */
static void* make_struct(StructBuf* buf, const void* value, size_t known, int mutate) {
  uint32_t version = RH_CUDA_ABI_VERSION;
  uint32_t declared = (uint32_t)known;
  if (mutate) {
    switch (range_i64(0, 9)) {
      case 0: version = (uint32_t)range_i64(0, 1); break;
      case 1: version = 3; break;
      case 2: version = (uint32_t)next_u64(); break;
      case 3: declared = (uint32_t)range_i64(0, (int64_t)known - 1); break;
      case 4: declared = (uint32_t)known - 8; break;
      case 5: declared = (uint32_t)known + (uint32_t)range_i64(1, 64); break;
      case 6: declared = UINT32_MAX; break;
      case 7: declared = (uint32_t)known + 8; version = 1; break;
      default: declared = (uint32_t)known - 1; break;
    }
  }
  if (version == RH_CUDA_ABI_VERSION && declared < known) {
    /* keep the version right now and then so the size check itself is exercised */
  }
  size_t alloc;
  if (declared < known) {
    alloc = declared < 8 ? 8 : declared;
  } else {
    size_t extra = declared - known > 64 ? 64 : declared - known;
    alloc = known + extra;
  }
  buf->block = (unsigned char*)malloc(alloc);
  if (buf->block == NULL) {
    fprintf(stderr, "out of memory in the driver\n");
    exit(2);
  }
  memset(buf->block, CANARY, alloc);
  memcpy(buf->block, value, alloc < known ? alloc : known);
  memcpy(buf->block, &version, 4);
  memcpy(buf->block + 4, &declared, 4);
  buf->alloc = alloc;
  buf->known = known;
  buf->declared = declared;
  buf->header_ok = version == RH_CUDA_ABI_VERSION && declared >= known;
  return buf->block;
}

/* The state structs also take the size ABI 2 callers had before the meat matrix K was
 * appended (the offset of `meat`); the engine then reads and writes only that prefix. */
static void accept_state_size_without_meat(StructBuf* buf) {
  uint32_t version;
  memcpy(&version, buf->block, 4);
  if (version == RH_CUDA_ABI_VERSION &&
      buf->declared == (uint32_t)offsetof(RhCudaHostState, meat)) {
    buf->header_ok = 1;
  }
}

/* Copies what a caller's struct holds into a full one, zero past its declared size. */
static void read_struct(void* full, size_t known, const StructBuf* buf) {
  memset(full, 0, known);
  memcpy(full, buf->block, buf->alloc < known ? buf->alloc : known);
}

/* The bytes beyond this header's struct must be untouched (the engine writes known fields). */
static void check_canary(const StructBuf* buf, const char* name) {
  for (size_t i = buf->known; i < buf->alloc; ++i) {
    if (buf->block[i] != CANARY) {
      finding("%s declared %u bytes: the engine wrote byte %zu beyond the %zu it knows", name,
              buf->declared, i, buf->known);
      return;
    }
  }
}

static void free_struct(StructBuf* buf) {
  free(buf->block);
  buf->block = NULL;
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory in the driver\n");
    exit(2);
  }
  return p;
}

/* ---------------------------------------------------------------------- engines and states */

typedef struct Snapshot {
  unsigned char* coefficients;
  unsigned char* information;
  int64_t n_samples_seen;
  int64_t batch_count;
  double previous_lambda;
  double weight_sum;
} Snapshot;

typedef struct World {
  int32_t dtype;
  size_t elem;
  int64_t P;
  uint64_t flags;
  RhCudaEngine* fuzzed; /* E: receives every fuzzed call */
  RhCudaEngine* twin;   /* T: receives only the successful state-changing calls */
  RhCudaEngine* probe;  /* R: restores every committed state (closure) */
  Snapshot snap;        /* E's committed state as it must be now */
  int extreme;          /* the state came from extreme values (restored or fitted): an update
                           may then overflow (NUMERICAL_ERROR); an ordinary one must not */
} World;

static void snapshot_alloc(Snapshot* s, const World* w) {
  s->coefficients = (unsigned char*)xmalloc((size_t)w->P * w->elem);
  s->information = (unsigned char*)xmalloc((size_t)(w->P * w->P) * w->elem);
}

static void snapshot_free(Snapshot* s) {
  free(s->coefficients);
  free(s->information);
  s->coefficients = s->information = NULL;
}

/* Exports an engine's state with a well-formed request (a checking call, never fuzzed). */
static void export_state(RhCudaEngine* engine, Snapshot* out, const char* who) {
  RhCudaHostState st;
  memset(&st, 0, sizeof st);
  st.abi_version = RH_CUDA_ABI_VERSION;
  st.struct_size = sizeof st;
  st.coefficients = out->coefficients;
  st.information = out->information;
  ++g_abi_calls;
  RhCudaStatus s = rh_cuda_engine_copy_state(engine, &st);
  if (s != RH_CUDA_SUCCESS) {
    finding("copy_state of the %s engine failed on a well-formed request: %s: %s", who,
            status_name(s), rh_cuda_engine_last_error(engine));
    exit(1);
  }
  out->n_samples_seen = st.n_samples_seen;
  out->batch_count = st.batch_count;
  out->previous_lambda = st.previous_lambda;
  out->weight_sum = st.weight_sum;
}

static int snapshots_equal(const World* w, const Snapshot* a, const Snapshot* b) {
  return memcmp(a->coefficients, b->coefficients, (size_t)w->P * w->elem) == 0 &&
         memcmp(a->information, b->information, (size_t)(w->P * w->P) * w->elem) == 0 &&
         a->n_samples_seen == b->n_samples_seen && a->batch_count == b->batch_count &&
         memcmp(&a->previous_lambda, &b->previous_lambda, sizeof(double)) == 0 &&
         memcmp(&a->weight_sum, &b->weight_sum, sizeof(double)) == 0;
}

static void describe_snapshot(const Snapshot* s, char* out, size_t n) {
  snprintf(out, n, "n_samples_seen %" PRId64 ", batch_count %" PRId64
           ", previous_lambda %.17g, weight_sum %.17g",
           s->n_samples_seen, s->batch_count, s->previous_lambda, s->weight_sum);
}

/* E must still hold w->snap (after any call that is not a successful update or restore). */
static void check_unchanged(World* w, const char* fn) {
  Snapshot now;
  snapshot_alloc(&now, w);
  export_state(w->fuzzed, &now, "fuzzed");
  if (!snapshots_equal(w, &now, &w->snap)) {
    char before[256], after[256];
    describe_snapshot(&w->snap, before, sizeof before);
    describe_snapshot(&now, after, sizeof after);
    finding("%s changed the committed state although it did not succeed as an update or "
            "restore\n  before: %s\n  after:  %s",
            fn, before, after);
    memcpy(w->snap.coefficients, now.coefficients, (size_t)w->P * w->elem);
    memcpy(w->snap.information, now.information, (size_t)(w->P * w->P) * w->elem);
    w->snap.n_samples_seen = now.n_samples_seen;
    w->snap.batch_count = now.batch_count;
    w->snap.previous_lambda = now.previous_lambda;
    w->snap.weight_sum = now.weight_sum;
  }
  snapshot_free(&now);
}

static RhCudaStatus restore_from(const World* w, RhCudaEngine* engine, const Snapshot* s) {
  RhCudaHostStateView v;
  memset(&v, 0, sizeof v);
  v.abi_version = RH_CUDA_ABI_VERSION;
  v.struct_size = sizeof v;
  v.coefficients = s->coefficients;
  v.information = s->information;
  v.n_samples_seen = s->n_samples_seen;
  v.batch_count = s->batch_count;
  v.previous_lambda = s->previous_lambda;
  v.weight_sum = s->weight_sum;
  (void)w;
  ++g_abi_calls;
  return rh_cuda_engine_restore(engine, &v);
}

static void resync(World* w, const Snapshot* previous);

/* After a successful state change on E and its replay on T: E == T, and R accepts the state. */
static void check_committed(World* w, const char* fn, const Snapshot* previous) {
  Snapshot e, t;
  snapshot_alloc(&e, w);
  snapshot_alloc(&t, w);
  export_state(w->fuzzed, &e, "fuzzed");
  export_state(w->twin, &t, "twin");
  if (!snapshots_equal(w, &e, &t)) {
    char a[256], b[256];
    describe_snapshot(&e, a, sizeof a);
    describe_snapshot(&t, b, sizeof b);
    finding("%s: the fuzzed engine and its twin differ after the same successful calls\n"
            "  fuzzed: %s\n  twin:   %s",
            fn, a, b);
  }
  ++g_closure_checks;
  RhCudaStatus s = restore_from(w, w->probe, &e);
  int recovered = 0;
  if (s != RH_CUDA_SUCCESS) {
    char a[256];
    describe_snapshot(&e, a, sizeof a);
    finding("%s committed a state that restore refuses (%s: %s)\n  state: %s", fn,
            status_name(s), rh_cuda_engine_last_error(w->probe), a);
    /* Go on from the state before the call, on both engines, so one defect does not end the
       run: every later batch would be refused. */
    resync(w, previous);
    recovered = 1;
  }
  if (!recovered) {
    memcpy(w->snap.coefficients, e.coefficients, (size_t)w->P * w->elem);
    memcpy(w->snap.information, e.information, (size_t)(w->P * w->P) * w->elem);
    w->snap.n_samples_seen = e.n_samples_seen;
    w->snap.batch_count = e.batch_count;
    w->snap.previous_lambda = e.previous_lambda;
    w->snap.weight_sum = e.weight_sum;
  }
  snapshot_free(&e);
  snapshot_free(&t);
}

/* After a finding where the engine accepted a call it should have refused: put E and T back on
 * the state before the call, so the run can go on checking other things. */
static void resync(World* w, const Snapshot* previous) {
  if (restore_from(w, w->fuzzed, previous) != RH_CUDA_SUCCESS ||
      restore_from(w, w->twin, previous) != RH_CUDA_SUCCESS) {
    finding("restoring the previous committed state failed: %s",
            rh_cuda_engine_last_error(w->fuzzed));
    exit(1);
  }
}

static RhCudaEngineOptions valid_options(int32_t dtype, int64_t P, uint64_t flags) {
  RhCudaEngineOptions o = rh_options(dtype, P);
  o.reserved0 = flags;
  return o;
}

static RhCudaEngine* create_or_die(int32_t dtype, int64_t P, uint64_t flags) {
  RhCudaEngineOptions o = valid_options(dtype, P, flags);
  RhCudaEngine* e = NULL;
  ++g_abi_calls;
  if (rh_cuda_engine_create(&o, &e) != RH_CUDA_SUCCESS || e == NULL) {
    fprintf(stderr, "creating an engine (dtype %d, P %" PRId64 ") failed: %s\n", (int)dtype, P,
            rh_cuda_last_error());
    exit(2);
  }
  ++g_engines_created;
  return e;
}

static void world_close(World* w) {
  rh_cuda_engine_destroy(w->fuzzed);
  rh_cuda_engine_destroy(w->twin);
  rh_cuda_engine_destroy(w->probe);
  g_abi_calls += 3;
  snapshot_free(&w->snap);
}

static void world_open(World* w) {
  w->dtype = chance(0.5) ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64;
  w->elem = w->dtype == RH_CUDA_DTYPE_FLOAT32 ? sizeof(float) : sizeof(double);
  w->P = chance(0.8) ? range_i64(1, 5) : range_i64(6, 12);
  w->flags = 0;
  if (chance(0.3)) w->flags |= RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS;
  if (w->dtype == RH_CUDA_DTYPE_FLOAT32 && chance(0.3)) w->flags |= RH_CUDA_ENGINE_FLAG_FAST_MATH;
  w->fuzzed = create_or_die(w->dtype, w->P, w->flags);
  w->twin = create_or_die(w->dtype, w->P, w->flags);
  w->probe = create_or_die(w->dtype, w->P, 0);
  snapshot_alloc(&w->snap, w);
  /* A new engine holds the empty state: zero arrays and counters (rh_cuda.h). */
  memset(w->snap.coefficients, 0, (size_t)w->P * w->elem);
  memset(w->snap.information, 0, (size_t)(w->P * w->P) * w->elem);
  w->snap.n_samples_seen = 0;
  w->snap.batch_count = 0;
  w->snap.previous_lambda = 0.0;
  w->snap.weight_sum = 0.0;
  w->extreme = 0;
  check_unchanged(w, "rh_cuda_engine_create (empty state)");
}

/* ----------------------------------------------------------------------- typed arrays */

static void store(const World* w, void* array, int64_t i, double v) {
  if (w->dtype == RH_CUDA_DTYPE_FLOAT32) {
    float f;
    /* out-of-range doubles become +-inf explicitly: the conversion itself is undefined in C */
    if (isnan(v)) f = NAN;
    else if (v > FLT_MAX) f = INFINITY;
    else if (v < -FLT_MAX) f = -INFINITY;
    else f = (float)v;
    ((float*)array)[i] = f;
  } else {
    ((double*)array)[i] = v;
  }
}

static double load(const World* w, const void* array, int64_t i) {
  return w->dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)((const float*)array)[i]
                                           : ((const double*)array)[i];
}

static int all_finite(const World* w, const void* array, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!isfinite(load(w, array, i))) return 0;
  }
  return 1;
}

/* An array of `count` values with the given special-value rate, exactly `count` elements long. */
static void* make_array(const World* w, int64_t count, double special_rate) {
  void* a = xmalloc((size_t)count * w->elem);
  for (int64_t i = 0; i < count; ++i) store(w, a, i, data_value(special_rate));
  return a;
}

/* ----------------------------------------------------------------------------- configs */

typedef struct ConfigCall {
  StructBuf buf;
  RhCudaUpdateConfig value;
  int is_null;
  int valid;   /* by the documented rules */
  int extreme; /* mutated: valid extremes (tau 1e308, ridge 1e-300, ...) may overflow a solve */
} ConfigCall;

static int finite_positive(double v) { return isfinite(v) && v > 0.0; }
static int finite_nonnegative(double v) { return isfinite(v) && v >= 0.0; }

static void make_config(ConfigCall* c, const World* w, int mutate) {
  RhCudaUpdateConfig* v = &c->value;
  memset(v, 0, sizeof *v);
  int64_t p = w->P == 1 ? 1 : (chance(0.5) ? w->P - 1 : w->P);
  v->n_features_in = p;
  v->max_iter = chance(0.7) ? range_i64(1, 30) : range_i64(31, 64);
  v->tau = chance(0.8) ? 1.345 : exp(normal01() * 3);
  v->bandwidth_scale = chance(0.8) ? 1.0 : exp(normal01() * 2);
  v->tolerance = chance(0.7) ? 1e-6 : pow(10.0, -(double)range_i64(1, 14));
  v->ridge = chance(0.5) ? 0.0 : (chance(0.5) ? 1e-8 : exp(normal01() * 4));
  v->penalty = chance(0.6) ? RH_CUDA_PENALTY_NONE : RH_CUDA_PENALTY_L1;
  v->reserved0 = 0;
  v->lambda_scale = chance(0.7) ? 1.0 : (chance(0.2) ? 0.0 : exp(normal01() * 2));
  int header_mutation = 0;
  c->is_null = 0;
  c->extreme = mutate;
  if (mutate) {
    int n = (int)range_i64(1, 2);
    for (int k = 0; k < n; ++k) {
      switch (range_i64(0, 15)) {
        case 0: c->is_null = 1; break;
        case 1: header_mutation = 1; break;
        case 2: v->n_features_in = chance(0.5) ? special_i64() : w->P + range_i64(-3, 3); break;
        case 3: v->max_iter = special_i64(); break;
        case 4: v->tau = special_double(); break;
        case 5: v->bandwidth_scale = special_double(); break;
        case 6: v->tolerance = special_double(); break;
        case 7: v->ridge = special_double(); break;
        case 8: v->penalty = (int32_t)(chance(0.5) ? range_i64(-2, 4) : (int64_t)(int32_t)next_u64()); break;
        case 9: v->reserved0 = (int32_t)(chance(0.5) ? 1 : (int32_t)next_u64()); break;
        case 10: v->lambda_scale = special_double(); break;
        /* valid extremes: huge or tiny but finite and positive */
        case 11: v->tau = chance(0.5) ? 1e308 : 1e-300; break;
        case 12: v->bandwidth_scale = chance(0.5) ? 1e300 : 1e-300; break;
        case 13: v->ridge = chance(0.5) ? 1e308 : 1e-300; break;
        case 14: v->lambda_scale = chance(0.5) ? 1e308 : 1e-300; break;
        default: v->tolerance = chance(0.5) ? 1e300 : 1e-300; break;
      }
    }
  }
  /* A valid call never runs longer than 64 iterations: max_iter values beyond that appear
   * only together with another broken rule (see below), so a valid huge max_iter cannot make
   * the run crawl. */
  make_struct(&c->buf, v, sizeof *v, header_mutation);
  int64_t P = w->P;
  c->valid = !c->is_null && c->buf.header_ok && v->n_features_in > 0 &&
             (P - v->n_features_in == 0 || P - v->n_features_in == 1) && v->max_iter >= 1 &&
             v->max_iter <= INT32_MAX && finite_positive(v->tau) &&
             finite_positive(v->bandwidth_scale) && finite_positive(v->tolerance) &&
             finite_nonnegative(v->ridge) &&
             (v->penalty == RH_CUDA_PENALTY_NONE || v->penalty == RH_CUDA_PENALTY_L1) &&
             v->reserved0 == 0 && finite_nonnegative(v->lambda_scale);
  if (c->valid && v->max_iter > 64) {
    /* break the config instead (the engine must then refuse it before any work) */
    v->reserved0 = 7;
    memcpy(c->buf.block + offsetof(RhCudaUpdateConfig, reserved0), &v->reserved0, 4);
    c->valid = 0;
  }
}

static const RhCudaUpdateConfig* config_ptr(const ConfigCall* c) {
  return c->is_null ? NULL : (const RhCudaUpdateConfig*)(const void*)c->buf.block;
}

/* ----------------------------------------------------------------------------- batches */

typedef struct BatchCall {
  StructBuf buf;
  RhCudaHostBatch value;
  void* x;
  void* y;
  void* w;
  int64_t x_count, y_count, w_count; /* allocated elements */
  int is_null;
  int structural_valid; /* the struct rules (header, pointers, shape, scalars) */
  int data_valid;       /* the value rules (finite X/y/weights, weights >= 0, batch_weight) */
  int extreme;          /* special values, huge weights or a mutated struct: may overflow */
  int weight_overflow;  /* valid but for this: the weights' double sum, or the cumulative
                           weight_sum + that sum, overflows (defect K1) */
} BatchCall;

static int shape_ok(int64_t n_rows, int64_t n_columns, int64_t P, int64_t p, size_t elem) {
  if (n_rows < 1 || n_columns < 1) return 0;
  if (n_columns != P && n_columns != p) return 0;
  /* every size (rows x columns, and that times the element bytes) must fit int64 */
  if (n_rows > INT64_MAX / n_columns) return 0;
  return n_rows * n_columns <= INT64_MAX / (int64_t)elem;
}

/* documented: the bandwidth h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau) at the
 * declared cumulative weight N must be a positive normal double */
static int bandwidth_usable(const RhCudaUpdateConfig* c, double N) {
  const double log_p = log(c->n_features_in > 2 ? (double)c->n_features_in : 2.0);
  double h = c->bandwidth_scale / (sqrt(N) * log_p);
  h = h < c->tau ? h : c->tau;
  return h >= DBL_MIN;
}

static void make_batch(BatchCall* b, const World* w, const ConfigCall* c, int mutate) {
  memset(b, 0, sizeof *b);
  RhCudaHostBatch* v = &b->value;
  int64_t P = w->P;
  int64_t p = c->value.n_features_in; /* may be broken when the config is */
  int64_t n = chance(0.85) ? range_i64(1, 6) : range_i64(7, 24);
  int64_t cols = (p >= 1 && p <= P && chance(0.5)) ? p : P;
  int with_weights = chance(0.5);
  double special_rate = chance(0.8) ? 0.0 : 0.05;
  int header_mutation = 0, x_null = 0, y_null = 0;
  int64_t declared_rows = n, declared_cols = cols;
  double weight_override = NAN;
  int override_weight = 0;
  int weights_kind = 0; /* 0 ordinary, 1 zeros here and there, 2 huge, 3 special */
  if (mutate) {
    int k = (int)range_i64(1, 2);
    for (int i = 0; i < k; ++i) {
      switch (range_i64(0, 13)) {
        case 0: b->is_null = 1; break;
        case 1: header_mutation = 1; break;
        case 2: x_null = 1; break;
        case 3: y_null = 1; break;
        case 4: declared_rows = chance(0.5) ? range_i64(-2, 0) : special_i64(); break;
        case 5: declared_cols = chance(0.5) ? P + range_i64(-3, 3) : special_i64(); break;
        case 6: override_weight = 1; weight_override = special_double(); break;
        case 7: override_weight = 1; weight_override = (double)n + (chance(0.5) ? 1e-9 : 1.0); break;
        case 8: with_weights = 1; weights_kind = 1; break;
        case 9: with_weights = 1; weights_kind = 2; break;
        case 10: with_weights = 1; weights_kind = 3; break;
        case 11: special_rate = 0.2; break;
        case 12: special_rate = 1.0; break;
        default: with_weights = 0; override_weight = 1; weight_override = (double)n * (1 + 1e-7); break;
      }
    }
  }
  /* the caller's arrays follow its declared shape when that shape is sane; otherwise a small
   * block the engine must never read (the shape rules refuse the call first) */
  int sane = declared_rows >= 1 && declared_rows <= 64 && declared_cols >= 1 && declared_cols <= 64;
  if (!sane && shape_ok(declared_rows, declared_cols, P, p, w->elem)) {
    /* a huge shape the rules accept (2^31 rows) would make the engine read data the caller does
     * not have: such a call would be the caller's lie, so make the size overflow instead */
    declared_rows = INT64_MAX;
  }
  int64_t rows_alloc = sane ? declared_rows : 1;
  int64_t cols_alloc = sane ? declared_cols : 1;
  b->x_count = rows_alloc * cols_alloc;
  b->y_count = rows_alloc;
  b->x = make_array(w, b->x_count, special_rate);
  b->y = make_array(w, b->y_count, special_rate);
  double declared_weight = (double)rows_alloc;
  if (with_weights) {
    b->w_count = rows_alloc;
    b->w = xmalloc((size_t)rows_alloc * w->elem);
    for (int64_t i = 0; i < rows_alloc; ++i) {
      double value;
      switch (weights_kind) {
        case 1: value = chance(0.5) ? 0.0 : uniform01() * 3; break;
        case 2: value = chance(0.7) ? 1e308 : (chance(0.5) ? 0.0 : 1.0); break;
        case 3: value = chance(0.3) ? special_double() : uniform01() * 2; break;
        default: value = 0.1 + uniform01() * 2; break;
      }
      store(w, b->w, i, value);
    }
    /* the declared batch weight: the double sum, as the caller computes it */
    double sum = 0.0;
    for (int64_t i = 0; i < rows_alloc; ++i) sum += load(w, b->w, i);
    declared_weight = sum;
    if (!isfinite(sum)) declared_weight = chance(0.5) ? 1e308 : DBL_MAX;
    if (chance(0.2)) declared_weight *= 1 + (uniform01() - 0.5) * 4e-6; /* around the 1e-6 edge */
  }
  if (override_weight) declared_weight = weight_override;
  b->extreme = mutate || special_rate > 0.0;
  v->x_design = x_null ? NULL : b->x;
  v->y = y_null ? NULL : b->y;
  v->sample_weight = with_weights ? b->w : NULL;
  v->n_rows = declared_rows;
  v->n_columns = declared_cols;
  v->batch_weight = declared_weight;
  make_struct(&b->buf, v, sizeof *v, header_mutation);

  b->structural_valid = !b->is_null && b->buf.header_ok && !x_null && !y_null &&
                        shape_ok(declared_rows, declared_cols, P, p, w->elem) &&
                        finite_positive(declared_weight) &&
                        w->snap.n_samples_seen <= INT64_MAX - declared_rows &&
                        w->snap.batch_count != INT64_MAX &&
                        isfinite(w->snap.weight_sum + declared_weight) &&
                        w->snap.weight_sum + declared_weight > 0.0 &&
                        (!c->valid || bandwidth_usable(&c->value,
                                                       w->snap.weight_sum + declared_weight));
  if (!b->structural_valid) {
    b->data_valid = 1; /* irrelevant: the call is refused on its structure */
    return;
  }
  int ok = all_finite(w, b->x, declared_rows * declared_cols) && all_finite(w, b->y, declared_rows);
  if (ok && with_weights) {
    double sum = 0.0;
    for (int64_t i = 0; i < declared_rows && ok; ++i) {
      double wi = load(w, b->w, i);
      if (!isfinite(wi) || wi < 0.0) ok = 0;
      sum += wi;
    }
    /* documented: the declared batch weight agrees with the weights' double sum to a relative
       1e-6, and the engine then uses its own sum. A sum that overflows to inf agrees with no
       finite declared weight, and a cumulative weight that overflows is refused. */
    if (ok && (!isfinite(sum) || !isfinite(w->snap.weight_sum + sum))) {
      b->weight_overflow = 1;
      ok = 0;
    } else if (ok && !(fabs(sum - declared_weight) <= 1e-6 * sum)) {
      ok = 0;
    }
  } else if (ok && declared_weight != (double)declared_rows) {
    ok = 0; /* without weights the batch weight is n_rows exactly */
  }
  b->data_valid = ok;
}

static const RhCudaHostBatch* batch_ptr(const BatchCall* b) {
  return b->is_null ? NULL : (const RhCudaHostBatch*)(const void*)b->buf.block;
}

static void free_batch(BatchCall* b) {
  free(b->x);
  free(b->y);
  free(b->w);
  free_struct(&b->buf);
}

/* -------------------------------------------------------------------------- operations */

static const char* engine_error_for(RhCudaEngine* e) {
  return e == NULL ? rh_cuda_last_error() : rh_cuda_engine_last_error(e);
}

/* A library query answering through an int32_t out-pointer, passed NULL at times: refused then,
 * else `expected` (the CPU engine's answer). */
static void query_int32(const char* name, RhCudaStatus (*query)(int32_t*), int32_t expected) {
  int use_null = chance(0.3);
  int32_t value = -7;
  context("%s(%s)", name, use_null ? "NULL" : "&value");
  RhCudaStatus s = query(use_null ? NULL : &value);
  if (check_status(s, use_null ? EXPECT_INVALID : EXPECT_VALID, 0, rh_cuda_last_error(), name) &&
      value != expected) {
    finding("%s reported %d on the CPU engine", name, (int)value);
  }
}

static void op_library_queries(void) {
  switch (range_i64(0, 4)) {
    case 0: {
      context("rh_cuda_abi_version()");
      ++g_abi_calls;
      if (rh_cuda_abi_version() != RH_CUDA_ABI_VERSION) finding("rh_cuda_abi_version is not 2");
      break;
    }
    case 1:
      query_int32("rh_cuda_is_available", rh_cuda_is_available, 1);
      break;
    case 2:
      query_int32("rh_cuda_device_count", rh_cuda_device_count, 0);
      break;
    case 3: {
      RhCudaRuntimeInfo v;
      memset(&v, 0x5A, sizeof v);
      StructBuf buf;
      int use_null = chance(0.15);
      make_struct(&buf, &v, sizeof v, chance(0.4));
      context("rh_cuda_runtime_info(%s, declared %u)", use_null ? "NULL" : "info", buf.declared);
      RhCudaStatus s =
          rh_cuda_runtime_info(use_null ? NULL : (RhCudaRuntimeInfo*)(void*)buf.block);
      int ok = check_status(s, !use_null && buf.header_ok ? EXPECT_VALID : EXPECT_INVALID, 0,
                            rh_cuda_last_error(), "rh_cuda_runtime_info");
      if (ok) {
        RhCudaRuntimeInfo got;
        memcpy(&got, buf.block, sizeof got);
        if (got.runtime_version || got.driver_version || got.device_count) {
          finding("rh_cuda_runtime_info reported non-zero facts on the CPU engine");
        }
        check_canary(&buf, "RhCudaRuntimeInfo");
      }
      free_struct(&buf);
      break;
    }
    default: {
      context("rh_cuda_engine_last_error(NULL)");
      ++g_abi_calls;
      const char* t = rh_cuda_engine_last_error(NULL);
      if (t == NULL || strcmp(t, "engine is null") != 0) {
        finding("rh_cuda_engine_last_error(NULL) is \"%s\"", t ? t : "(null)");
      }
      break;
    }
  }
}

static void op_create(void) {
  RhCudaEngineOptions o = valid_options(chance(0.5) ? 1 : 2, range_i64(1, 8), 0);
  int header_mutation = 0, out_null = 0, opt_null = 0, huge_valid = 0;
  if (chance(0.8)) {
    switch (range_i64(0, 9)) {
      case 0: opt_null = 1; break;
      case 1: header_mutation = 1; break;
      case 2: o.dtype = (int32_t)(chance(0.5) ? range_i64(-1, 4) : (int64_t)(int32_t)next_u64()); break;
      case 3: o.device_id = (int32_t)(chance(0.5) ? range_i64(-3, 3) : (int64_t)(int32_t)next_u64()); break;
      case 4: o.n_parameters = special_i64(); break;
      case 5: o.reserved0 = chance(0.5) ? (uint64_t)range_i64(0, 8) : next_u64(); break;
      case 6: o.reserved0 = RH_CUDA_ENGINE_FLAG_FAST_MATH; break;
      case 7: out_null = 1; break;
      /* valid, but P x P cannot be allocated: (2^21)^2 doubles are 32 TiB */
      case 8: o.n_parameters = ((int64_t)1 << 21) + range_i64(0, 1000); huge_valid = 1; break;
      default: o.n_parameters = 3037000500; break; /* P x P overflows int64 */
    }
  }
  StructBuf buf;
  make_struct(&buf, &o, sizeof o, header_mutation);
  size_t elem = o.dtype == 1 ? 4 : (o.dtype == 2 ? 8 : 0);
  /* P x P x 8 bytes must fit int64 (docs/abi.md: "P x P x 8 bytes representable") */
  int size_ok = o.n_parameters >= 1 && o.n_parameters <= INT64_MAX / o.n_parameters &&
                o.n_parameters * o.n_parameters <= INT64_MAX / 8;
  int valid = !opt_null && !out_null && buf.header_ok && elem != 0 && size_ok &&
              (o.reserved0 & ~(uint64_t)3) == 0 &&
              (!(o.reserved0 & RH_CUDA_ENGINE_FLAG_FAST_MATH) || o.dtype == 1) &&
              o.device_id == -1;
  RhCudaEngine* sentinel = (RhCudaEngine*)(void*)&buf; /* any non-NULL value */
  RhCudaEngine* out = sentinel;
  context("rh_cuda_engine_create(dtype %d, device_id %d, P %" PRId64 ", flags 0x%" PRIx64
          ", declared %u%s%s)",
          (int)o.dtype, (int)o.device_id, o.n_parameters, o.reserved0, buf.declared,
          opt_null ? ", options NULL" : "", out_null ? ", out NULL" : "");
  RhCudaStatus s = rh_cuda_engine_create(opt_null ? NULL : (const RhCudaEngineOptions*)(void*)buf.block,
                                         out_null ? NULL : &out);
  int ok = check_status(s, valid ? EXPECT_VALID : EXPECT_INVALID, huge_valid,
                        rh_cuda_last_error(), "rh_cuda_engine_create");
  if (huge_valid && s == RH_CUDA_SUCCESS) {
    /* allowed (an overcommitting allocator), but never used */
  }
  if (!out_null) {
    if (s != RH_CUDA_SUCCESS && out != NULL) {
      finding("rh_cuda_engine_create failed without setting *out_engine to NULL");
    }
    if (s == RH_CUDA_SUCCESS && (out == NULL || out == sentinel)) {
      finding("rh_cuda_engine_create succeeded without an engine");
      out = NULL;
    }
  }
  if (ok && out != NULL) {
    ++g_engines_created;
    ++g_abi_calls;
    if (rh_cuda_engine_destroy(out) != RH_CUDA_SUCCESS) finding("destroy failed");
  }
  free_struct(&buf);
}

static void op_engine_services(World* w) {
  RhCudaEngine* e = chance(0.1) ? NULL : w->fuzzed;
  switch (range_i64(0, 3)) {
    case 0: {
      context("rh_cuda_engine_synchronize(%s)", e ? "engine" : "NULL");
      RhCudaStatus s = rh_cuda_engine_synchronize(e);
      check_status(s, e ? EXPECT_VALID : EXPECT_INVALID, 0, engine_error_for(e),
                   "rh_cuda_engine_synchronize");
      break;
    }
    case 1: {
      int out_null = chance(0.2);
      uintptr_t stream = 12345;
      context("rh_cuda_engine_stream(%s, %s)", e ? "engine" : "NULL", out_null ? "NULL" : "&s");
      RhCudaStatus s = rh_cuda_engine_stream(e, out_null ? NULL : &stream);
      if (check_status(s, e && !out_null ? EXPECT_VALID : EXPECT_INVALID, 0, engine_error_for(e),
                       "rh_cuda_engine_stream") && stream != 0) {
        finding("rh_cuda_engine_stream is not 0 on the CPU engine");
      }
      break;
    }
    case 2: {
      RhCudaEngineFeatures v;
      memset(&v, 0x5A, sizeof v);
      StructBuf buf;
      int out_null = chance(0.15);
      make_struct(&buf, &v, sizeof v, chance(0.4));
      context("rh_cuda_engine_features(%s, %s, declared %u)", e ? "engine" : "NULL",
              out_null ? "NULL" : "features", buf.declared);
      RhCudaStatus s = rh_cuda_engine_features(
          e, out_null ? NULL : (RhCudaEngineFeatures*)(void*)buf.block);
      int ok = check_status(s, e && !out_null && buf.header_ok ? EXPECT_VALID : EXPECT_INVALID,
                            0, engine_error_for(e), "rh_cuda_engine_features");
      if (ok) {
        RhCudaEngineFeatures got;
        memcpy(&got, buf.block, sizeof got);
        if (got.requested_flags != w->flags || got.enabled_flags != 0 || got.graph_captures ||
            got.graph_replays || got.graph_fallbacks) {
          finding("rh_cuda_engine_features: requested 0x%" PRIx64 " (created with 0x%" PRIx64
                  "), enabled 0x%" PRIx64,
                  got.requested_flags, w->flags, got.enabled_flags);
        }
        check_canary(&buf, "RhCudaEngineFeatures");
      }
      free_struct(&buf);
      break;
    }
    default: {
      /* the device entry point: UNAVAILABLE on the CPU engine whatever it is given */
      RhCudaDiagnostics d;
      memset(&d, 0, sizeof d);
      d.abi_version = RH_CUDA_ABI_VERSION;
      d.struct_size = sizeof d;
      RhCudaDeviceBatch batch;
      memset(&batch, 0, sizeof batch);
      int null_batch = chance(0.5);
      context("rh_cuda_engine_update_device_with_state(%s, %s)", e ? "engine" : "NULL",
              null_batch ? "NULL" : "batch");
      RhCudaStatus s = rh_cuda_engine_update_device_with_state(e, null_batch ? NULL : &batch,
                                                               NULL, &d, NULL);
      check_status(s, e ? EXPECT_UNAVAILABLE : EXPECT_INVALID, 0, engine_error_for(e),
                   "rh_cuda_engine_update_device_with_state");
      break;
    }
  }
  check_unchanged(w, "engine service");
}

static void op_copy_state(World* w) {
  RhCudaEngine* e = chance(0.05) ? NULL : w->fuzzed;
  int64_t P = w->P;
  void* coef = xmalloc((size_t)P * w->elem);
  void* info = xmalloc((size_t)(P * P) * w->elem);
  RhCudaHostState v;
  memset(&v, 0, sizeof v);
  v.coefficients = coef;
  v.information = info;
  v.n_samples_seen = -5;
  int null_struct = 0, header_mutation = 0;
  if (chance(0.5)) {
    switch (range_i64(0, 3)) {
      case 0: null_struct = 1; break;
      case 1: header_mutation = 1; break;
      case 2: v.coefficients = NULL; break;
      default: v.information = NULL; break;
    }
  }
  StructBuf buf;
  make_struct(&buf, &v, sizeof v, header_mutation);
  accept_state_size_without_meat(&buf);
  int valid = e && !null_struct && buf.header_ok && v.coefficients && v.information;
  context("rh_cuda_engine_copy_state(%s, declared %u%s%s%s)", e ? "engine" : "NULL", buf.declared,
          null_struct ? ", struct NULL" : "", v.coefficients ? "" : ", coefficients NULL",
          v.information ? "" : ", information NULL");
  RhCudaStatus s =
      rh_cuda_engine_copy_state(e, null_struct ? NULL : (RhCudaHostState*)(void*)buf.block);
  if (check_status(s, valid ? EXPECT_VALID : EXPECT_INVALID, 0, engine_error_for(e),
                   "rh_cuda_engine_copy_state")) {
    RhCudaHostState got;
    read_struct(&got, sizeof got, &buf);
    if (memcmp(coef, w->snap.coefficients, (size_t)P * w->elem) != 0 ||
        memcmp(info, w->snap.information, (size_t)(P * P) * w->elem) != 0 ||
        got.n_samples_seen != w->snap.n_samples_seen || got.batch_count != w->snap.batch_count ||
        memcmp(&got.previous_lambda, &w->snap.previous_lambda, 8) != 0 ||
        memcmp(&got.weight_sum, &w->snap.weight_sum, 8) != 0) {
      finding("rh_cuda_engine_copy_state exported something other than the committed state");
    }
    check_canary(&buf, "RhCudaHostState");
  }
  free_struct(&buf);
  free(coef);
  free(info);
  check_unchanged(w, "rh_cuda_engine_copy_state");
}

/* A state to restore: perturbed current, random valid, empty, extreme counters. */
static void op_restore(World* w) {
  RhCudaEngine* e = chance(0.03) ? NULL : w->fuzzed;
  const int64_t P = w->P;
  void* coef = xmalloc((size_t)P * w->elem);
  void* info = xmalloc((size_t)(P * P) * w->elem);
  RhCudaHostStateView v;
  memset(&v, 0, sizeof v);
  int extreme = 0;
  switch (range_i64(0, 3)) {
    case 0: /* the committed state itself */
      extreme = w->extreme;
      memcpy(coef, w->snap.coefficients, (size_t)P * w->elem);
      memcpy(info, w->snap.information, (size_t)(P * P) * w->elem);
      v.n_samples_seen = w->snap.n_samples_seen;
      v.batch_count = w->snap.batch_count;
      v.previous_lambda = w->snap.previous_lambda;
      v.weight_sum = w->snap.weight_sum;
      break;
    case 1: /* empty */
      memset(coef, 0, (size_t)P * w->elem);
      memset(info, 0, (size_t)(P * P) * w->elem);
      break;
    default: { /* random, mostly consistent */
      double scale = chance(0.8) ? 1.0 : pow(10.0, (double)range_i64(-300, 300));
      for (int64_t j = 0; j < P; ++j) store(w, coef, j, normal01() * scale);
      for (int64_t j = 0; j < P * P; ++j) store(w, info, j, normal01() * scale);
      for (int64_t j = 0; j < P; ++j) store(w, info, j * P + j, fabs(normal01()) * 10 + P);
      v.n_samples_seen = chance(0.8) ? range_i64(1, 100000) : INT64_MAX - range_i64(0, 30);
      v.batch_count = chance(0.7) ? range_i64(1, v.n_samples_seen < 50 ? v.n_samples_seen : 50)
                                  : (chance(0.5) ? v.n_samples_seen : INT64_MAX - range_i64(0, 3));
      v.previous_lambda = chance(0.5) ? 0.0 : fabs(normal01());
      v.weight_sum = chance(0.7) ? fabs(normal01()) * 1000 + 1e-3
                                 : (chance(0.5) ? 1.7e308 : 1e-300);
      extreme = scale != 1.0 || v.weight_sum > 1e300 || v.weight_sum < 1e-200;
      break;
    }
  }
  int null_struct = 0, header_mutation = 0;
  if (chance(0.5)) {
    int k = (int)range_i64(1, 2);
    extreme = 1;
    for (int i = 0; i < k; ++i) {
      switch (range_i64(0, 10)) {
        case 0: null_struct = 1; break;
        case 1: header_mutation = 1; break;
        case 2: v.n_samples_seen = special_i64(); break;
        case 3: v.batch_count = special_i64(); break;
        case 4: v.previous_lambda = special_double(); break;
        case 5: v.weight_sum = special_double(); break;
        case 6: store(w, coef, range_i64(0, P - 1), special_double()); break;
        case 7: store(w, info, range_i64(0, P * P - 1), special_double()); break;
        case 8: v.batch_count = v.n_samples_seen < INT64_MAX ? v.n_samples_seen + 1 : 0; break;
        case 9: v.n_samples_seen = 0; break;
        default: v.weight_sum = 0.0; break;
      }
    }
  }
  int coef_null = chance(0.03), info_null = chance(0.03);
  v.coefficients = coef_null ? NULL : coef;
  v.information = info_null ? NULL : info;
  StructBuf buf;
  make_struct(&buf, &v, sizeof v, header_mutation);
  accept_state_size_without_meat(&buf);
  int valid = e && !null_struct && buf.header_ok && !coef_null && !info_null &&
              all_finite(w, coef, P) && all_finite(w, info, P * P) && v.n_samples_seen >= 0 &&
              v.batch_count >= 0 && (v.batch_count == 0) == (v.n_samples_seen == 0) &&
              v.batch_count <= v.n_samples_seen && finite_nonnegative(v.previous_lambda) &&
              finite_nonnegative(v.weight_sum) && (v.batch_count > 0) == (v.weight_sum > 0.0);
  context("rh_cuda_engine_restore(%s, declared %u, n_samples_seen %" PRId64
          ", batch_count %" PRId64 ", previous_lambda %.17g, weight_sum %.17g%s%s%s)",
          e ? "engine" : "NULL", buf.declared, v.n_samples_seen, v.batch_count,
          v.previous_lambda, v.weight_sum, null_struct ? ", struct NULL" : "",
          coef_null ? ", coefficients NULL" : "", info_null ? ", information NULL" : "");
  const RhCudaHostStateView* arg = null_struct ? NULL : (const RhCudaHostStateView*)(void*)buf.block;
  Snapshot previous = w->snap;
  RhCudaStatus s = rh_cuda_engine_restore(e, arg);
  int ok = check_status(s, valid ? EXPECT_VALID : EXPECT_INVALID, 0, engine_error_for(e),
                        "rh_cuda_engine_restore");
  if (ok && !valid) {
    resync(w, &w->snap); /* already a finding: an invalid state was taken */
  } else if (ok) {
    ++g_twin_replays;
    ++g_abi_calls;
    RhCudaStatus t = rh_cuda_engine_restore(w->twin, arg);
    if (t != RH_CUDA_SUCCESS) finding("the twin refused a restore the fuzzed engine took");
    Snapshot copy;
    snapshot_alloc(&copy, w);
    memcpy(copy.coefficients, previous.coefficients, (size_t)P * w->elem);
    memcpy(copy.information, previous.information, (size_t)(P * P) * w->elem);
    copy.n_samples_seen = previous.n_samples_seen;
    copy.batch_count = previous.batch_count;
    copy.previous_lambda = previous.previous_lambda;
    copy.weight_sum = previous.weight_sum;
    check_committed(w, "rh_cuda_engine_restore", &copy);
    w->extreme = extreme;
    /* and the state committed is exactly the one given */
    if (memcmp(w->snap.coefficients, coef, (size_t)P * w->elem) != 0 ||
        memcmp(w->snap.information, info, (size_t)(P * P) * w->elem) != 0 ||
        w->snap.n_samples_seen != v.n_samples_seen || w->snap.batch_count != v.batch_count) {
      finding("rh_cuda_engine_restore committed something other than the state it was given");
    }
    snapshot_free(&copy);
  } else {
    check_unchanged(w, "rh_cuda_engine_restore");
  }
  free_struct(&buf);
  free(coef);
  free(info);
}

static void describe_batch(const World* w, const ConfigCall* c, const BatchCall* b, char* out,
                           size_t n) {
  const RhCudaHostBatch* v = &b->value;
  int used = snprintf(out, n,
                      "dtype %s, P %" PRId64 ", batch %s(declared %u, n_rows %" PRId64
                      ", n_columns %" PRId64 ", batch_weight %.17g, weights %s, x %s, y %s), "
                      "config %s(declared %u, n_features_in %" PRId64 ", max_iter %" PRId64
                      ", tau %.17g, bandwidth_scale %.17g, tol %.17g, ridge %.17g, penalty %d, "
                      "reserved0 %d, lambda_scale %.17g)",
                      w->dtype == 1 ? "float32" : "float64", w->P, b->is_null ? "NULL " : "",
                      b->buf.declared, v->n_rows, v->n_columns, v->batch_weight,
                      v->sample_weight ? "given" : "NULL", v->x_design ? "given" : "NULL",
                      v->y ? "given" : "NULL", c->is_null ? "NULL " : "", c->buf.declared,
                      c->value.n_features_in, c->value.max_iter, c->value.tau,
                      c->value.bandwidth_scale, c->value.tolerance, c->value.ridge,
                      (int)c->value.penalty, (int)c->value.reserved0, c->value.lambda_scale);
  /* the values of small batches, so a finding can be replayed by hand */
  size_t at = used > 0 ? (size_t)used : n;
  const void* arrays[3] = {b->w, b->x, b->y};
  const int64_t counts[3] = {v->sample_weight ? b->w_count : 0, b->x_count, b->y_count};
  const char* names[3] = {"sample_weight", "x", "y"};
  for (int a = 0; a < 3; ++a) {
    if (counts[a] == 0 || counts[a] > 12 || at >= n) continue;
    at += (size_t)snprintf(out + at, n - at, "; %s =", names[a]);
    for (int64_t i = 0; i < counts[a] && at < n; ++i) {
      at += (size_t)snprintf(out + at, n - at, " %.17g", load(w, arrays[a], i));
    }
  }
}

static void op_update(World* w, int with_state) {
  RhCudaEngine* e = chance(0.02) ? NULL : w->fuzzed;
  int mutate = chance(0.4);
  ConfigCall c;
  BatchCall b;
  /* mostly one broken piece at a time, so each rule is reached on its own */
  int which = mutate ? (int)range_i64(0, 3) : -1;
  make_config(&c, w, which == 0 || which == 3);
  make_batch(&b, w, &c, which == 1 || which == 3);
  RhCudaDiagnostics dv;
  memset(&dv, 0x5A, sizeof dv);
  StructBuf dbuf;
  int diag_null = which == 2 && chance(0.3);
  make_struct(&dbuf, &dv, sizeof dv, which == 2 && !diag_null);
  /* the state export target (with_state only) */
  const int64_t P = w->P;
  void* coef = xmalloc((size_t)P * w->elem);
  void* info = xmalloc((size_t)(P * P) * w->elem);
  RhCudaHostState sv;
  memset(&sv, 0, sizeof sv);
  sv.coefficients = coef;
  sv.information = info;
  int state_null = 0, state_header = 0;
  if (with_state && which == 2 && chance(0.5)) {
    switch (range_i64(0, 3)) {
      case 0: state_null = 1; break;
      case 1: state_header = 1; break;
      case 2: sv.coefficients = NULL; break;
      default: sv.information = NULL; break;
    }
  }
  StructBuf sbuf;
  make_struct(&sbuf, &sv, sizeof sv, state_header);
  accept_state_size_without_meat(&sbuf);

  int valid = e && c.valid && b.structural_valid && b.data_valid && !diag_null &&
              dbuf.header_ok &&
              (!with_state || (!state_null && sbuf.header_ok && sv.coefficients && sv.information));
  char text[2048];
  describe_batch(w, &c, &b, text, sizeof text);
  context("%s(%s, %s)", with_state ? "rh_cuda_engine_update_host_with_state" : "rh_cuda_engine_update_host",
          e ? "engine" : "NULL", text);

  /* input arrays must come back unchanged */
  void* x_copy = xmalloc((size_t)b.x_count * w->elem);
  memcpy(x_copy, b.x, (size_t)b.x_count * w->elem);
  RhCudaDiagnostics* diag = diag_null ? NULL : (RhCudaDiagnostics*)(void*)dbuf.block;
  RhCudaHostState* state_arg = state_null ? NULL : (RhCudaHostState*)(void*)sbuf.block;
  Snapshot previous;
  snapshot_alloc(&previous, w);
  memcpy(previous.coefficients, w->snap.coefficients, (size_t)P * w->elem);
  memcpy(previous.information, w->snap.information, (size_t)(P * P) * w->elem);
  previous.n_samples_seen = w->snap.n_samples_seen;
  previous.batch_count = w->snap.batch_count;
  previous.previous_lambda = w->snap.previous_lambda;
  previous.weight_sum = w->snap.weight_sum;

  RhCudaStatus s = with_state ? rh_cuda_engine_update_host_with_state(e, batch_ptr(&b), config_ptr(&c), diag, state_arg)
                              : rh_cuda_engine_update_host(e, batch_ptr(&b), config_ptr(&c), diag);
  const char* fn = with_state ? "rh_cuda_engine_update_host_with_state" : "rh_cuda_engine_update_host";
  /* an ordinary batch on an ordinary state must succeed: NUMERICAL_ERROR is allowed only where
   * extreme values (special data, valid extremes of the config, a restored extreme state) can
   * overflow the solve */
  int can_overflow = c.extreme || b.extreme || w->extreme;
  int ok = check_status(s, valid ? EXPECT_VALID : EXPECT_INVALID, can_overflow,
                        engine_error_for(e), fn);
  if (memcmp(x_copy, b.x, (size_t)b.x_count * w->elem) != 0) finding("%s wrote into x_design", fn);
  if (ok && !valid) {
    resync(w, &previous); /* already a finding: an invalid call was committed */
  } else if (ok) {
    /* replay on the twin: same arguments, a fresh diagnostics and export target */
    RhCudaDiagnostics td;
    memset(&td, 0, sizeof td);
    td.abi_version = RH_CUDA_ABI_VERSION;
    td.struct_size = sizeof td;
    ++g_twin_replays;
    ++g_abi_calls;
    RhCudaStatus t = rh_cuda_engine_update_host(w->twin, batch_ptr(&b), config_ptr(&c), &td);
    if (t != RH_CUDA_SUCCESS) {
      finding("the twin refused (%s: %s) an update the fuzzed engine committed", status_name(t),
              rh_cuda_engine_last_error(w->twin));
    } else if (memcmp(&td.iterations, &diag->iterations, sizeof td - 8) != 0) {
      finding("%s: diagnostics differ between the fuzzed engine and its twin", fn);
    }
    check_canary(&dbuf, "RhCudaDiagnostics");
    /* the diagnostics: documented ranges (rh_cuda.h), and h and lambda by the formulas of
     * docs/algorithm.md with N the cumulative weight after this batch, computed here */
    const RhCudaDiagnostics* dg = diag;
    if ((dg->converged != 0 && dg->converged != 1) ||
        (dg->used_regularized_fallback != 0 && dg->used_regularized_fallback != 1) ||
        dg->iterations < 0 || dg->iterations > c.value.max_iter || !isfinite(dg->objective) ||
        !isfinite(dg->lambda_value) || dg->lambda_value < 0.0 || !isfinite(dg->bandwidth) ||
        dg->bandwidth < 0.0 || dg->bandwidth > c.value.tau) {
      finding("%s: diagnostics out of their documented ranges: iterations %" PRId64
              " (max_iter %" PRId64 "), converged %d, fallback %d, objective %.17g, lambda %.17g, "
              "bandwidth %.17g (tau %.17g)",
              fn, dg->iterations, c.value.max_iter, (int)dg->converged,
              (int)dg->used_regularized_fallback, dg->objective, dg->lambda_value, dg->bandwidth,
              c.value.tau);
    }
    if (with_state) check_canary(&sbuf, "RhCudaHostState");
    check_committed(w, fn, &previous);
    w->extreme |= can_overflow;
    if (t == RH_CUDA_SUCCESS && w->snap.batch_count == previous.batch_count + 1) {
      const double N = w->snap.weight_sum; /* the cumulative weight the batch was solved with */
      const int64_t p = c.value.n_features_in;
      const double log_p = log(p > 2 ? (double)p : 2.0);
      double h = c.value.bandwidth_scale / (sqrt(N) * log_p);
      h = h < c.value.tau ? h : c.value.tau;
      const double lambda = c.value.penalty == RH_CUDA_PENALTY_L1
                                ? c.value.lambda_scale * c.value.tau * sqrt(log_p / N)
                                : 0.0;
      if (!(fabs(diag->bandwidth - h) <= 1e-12 * h) ||
          !(fabs(diag->lambda_value - lambda) <= 1e-12 * lambda)) {
        finding("%s: bandwidth %.17g and lambda %.17g, expected %.17g and %.17g "
                "(docs/algorithm.md, N %.17g)",
                fn, diag->bandwidth, diag->lambda_value, h, lambda, N);
      }
    }
    if (with_state && t == RH_CUDA_SUCCESS && w->snap.batch_count == previous.batch_count + 1) {
      /* the state exported by the call is the committed state */
      RhCudaHostState got;
      read_struct(&got, sizeof got, &sbuf);
      if (memcmp(coef, w->snap.coefficients, (size_t)P * w->elem) != 0 ||
          memcmp(info, w->snap.information, (size_t)(P * P) * w->elem) != 0 ||
          got.n_samples_seen != w->snap.n_samples_seen ||
          got.batch_count != w->snap.batch_count ||
          memcmp(&got.weight_sum, &w->snap.weight_sum, 8) != 0) {
        finding("%s exported a state other than the committed one", fn);
      }
    }
  } else {
    check_unchanged(w, fn);
  }
  snapshot_free(&previous);
  free(x_copy);
  free(coef);
  free(info);
  free_struct(&sbuf);
  free_struct(&dbuf);
  free_struct(&c.buf);
  free_batch(&b);
}

static void op_predict(World* w) {
  RhCudaEngine* e = chance(0.03) ? NULL : w->fuzzed;
  const int64_t P = w->P;
  RhCudaPrediction v;
  memset(&v, 0, sizeof v);
  int64_t p = P == 1 ? 1 : (chance(0.5) ? P - 1 : P);
  int64_t n = range_i64(1, 6);
  int64_t cols = chance(0.5) ? p : P;
  v.n_rows = n;
  v.n_columns = cols;
  v.n_features_in = p;
  v.input_location = RH_CUDA_MEMORY_HOST;
  double special_rate = chance(0.8) ? 0.0 : 0.1;
  int null_struct = 0, header_mutation = 0, x_null = 0, out_null = 0;
  if (chance(0.4)) {
    switch (range_i64(0, 9)) {
      case 0: null_struct = 1; break;
      case 1: header_mutation = 1; break;
      case 2: x_null = 1; break;
      case 3: out_null = 1; break;
      case 4: v.n_rows = chance(0.5) ? range_i64(-2, 0) : special_i64(); break;
      case 5: v.n_columns = chance(0.5) ? P + range_i64(-3, 3) : special_i64(); break;
      case 6: v.n_features_in = chance(0.5) ? P + range_i64(-3, 3) : special_i64(); break;
      case 7: v.input_location = (int32_t)(chance(0.7) ? range_i64(0, 3) : (int64_t)(int32_t)next_u64()); break;
      case 8: v.reserved0 = (int32_t)range_i64(1, 3); break;
      default: special_rate = 0.5; break;
    }
  }
  int sane = v.n_rows >= 1 && v.n_rows <= 64 && v.n_columns >= 1 && v.n_columns <= 64;
  if (!sane && v.n_features_in >= 1 && shape_ok(v.n_rows, v.n_columns, P, v.n_features_in, w->elem)) {
    v.n_rows = INT64_MAX; /* as in make_batch: never claim rows that do not exist */
  }
  int64_t x_count = sane ? v.n_rows * v.n_columns : 1;
  int64_t out_count = sane ? v.n_rows : 1;
  void* x = make_array(w, x_count, special_rate);
  void* out = xmalloc((size_t)out_count * w->elem);
  void* out_twin = xmalloc((size_t)out_count * w->elem);
  v.x_design = x_null ? NULL : x;
  v.prediction = out_null ? NULL : out;
  StructBuf buf;
  make_struct(&buf, &v, sizeof v, header_mutation);
  int64_t q = v.n_features_in;
  int structural = e && !null_struct && buf.header_ok && !x_null && !out_null && q > 0 &&
                   (P - q == 0 || P - q == 1) &&
                   (v.input_location == RH_CUDA_MEMORY_HOST ||
                    v.input_location == RH_CUDA_MEMORY_DEVICE) &&
                   v.reserved0 == 0 && shape_ok(v.n_rows, v.n_columns, P, q, w->elem);
  Expect expect;
  if (structural && v.input_location == RH_CUDA_MEMORY_DEVICE) {
    expect = EXPECT_UNAVAILABLE;
  } else if (!structural && e && !null_struct && buf.header_ok &&
             v.input_location == RH_CUDA_MEMORY_DEVICE) {
    expect = EXPECT_INVALID_OR_UNAVAILABLE; /* the order of the two refusals is not specified */
  } else if (structural && all_finite(w, x, v.n_rows * v.n_columns)) {
    expect = EXPECT_VALID;
  } else {
    expect = EXPECT_INVALID;
  }
  context("rh_cuda_engine_predict(%s, declared %u, n_rows %" PRId64 ", n_columns %" PRId64
          ", n_features_in %" PRId64 ", input_location %d, reserved0 %d, P %" PRId64 "%s%s%s)",
          e ? "engine" : "NULL", buf.declared, v.n_rows, v.n_columns, v.n_features_in,
          (int)v.input_location, (int)v.reserved0, P, null_struct ? ", struct NULL" : "",
          x_null ? ", x NULL" : "", out_null ? ", prediction NULL" : "");
  const RhCudaPrediction* arg = null_struct ? NULL : (const RhCudaPrediction*)(void*)buf.block;
  RhCudaStatus s = rh_cuda_engine_predict(e, arg);
  if (check_status(s, expect, 0, engine_error_for(e), "rh_cuda_engine_predict") &&
      expect == EXPECT_VALID) {
    /* the twin predicts the same bytes */
    RhCudaPrediction tv;
    memcpy(&tv, buf.block, sizeof tv);
    tv.prediction = out_twin;
    ++g_abi_calls;
    if (rh_cuda_engine_predict(w->twin, &tv) != RH_CUDA_SUCCESS ||
        memcmp(out, out_twin, (size_t)v.n_rows * w->elem) != 0) {
      finding("rh_cuda_engine_predict: the twin predicts differently");
    }
    /* and the value is X . coefficients, computed here independently */
    int append = v.n_columns != P;
    double tol = w->dtype == RH_CUDA_DTYPE_FLOAT32 ? 1e-5 : 1e-12;
    for (int64_t i = 0; i < v.n_rows; ++i) {
      double ref = 0.0, mag = 0.0;
      for (int64_t j = 0; j < v.n_columns; ++j) {
        double t = load(w, x, i * v.n_columns + j) * load(w, w->snap.coefficients, j);
        ref += t;
        mag += fabs(t);
      }
      if (append) {
        double t = load(w, w->snap.coefficients, P - 1);
        ref += t;
        mag += fabs(t);
      }
      double got = load(w, out, i);
      /* only where the exact value is representable in the engine's dtype */
      double limit = w->dtype == RH_CUDA_DTYPE_FLOAT32 ? 1e37 : 1e300;
      if (isfinite(mag) && mag < limit && (!isfinite(got) || fabs(got - ref) > tol * mag + 1e-300 + (w->dtype == 1 ? FLT_MIN : 0.0))) {
        finding("rh_cuda_engine_predict row %" PRId64 ": %.17g, expected %.17g (+- %.3g)", i,
                got, ref, tol * mag);
        break;
      }
    }
  }
  free_struct(&buf);
  free(x);
  free(out);
  free(out_twin);
  check_unchanged(w, "rh_cuda_engine_predict");
}

/* ----------------------------------------------------------------------------- regressions */

/* One crafted float64 batch of one feature, P = 1 (no intercept) or 2 (intercept), on a fresh
 * engine, or on one restored to `weight_sum0` first. Returns the update's status; *committed_weight_sum and
 * *restorable describe the state it left. */
static RhCudaStatus crafted_update(int64_t P, const double* x, const double* y, const double* weights,
                                   int64_t n, double batch_weight, double weight_sum0,
                                   double* committed_weight_sum, int* restorable) {
  RhCudaEngine* e = create_or_die(RH_CUDA_DTYPE_FLOAT64, P, 0);
  RhCudaEngine* r = create_or_die(RH_CUDA_DTYPE_FLOAT64, P, 0);
  double coef[2] = {0.0, 0.0}, info[4] = {1.0, 0.0, 0.0, 1.0}; /* P = 1 uses the first values */
  RhCudaHostStateView v = rh_state_view(coef, info);
  if (weight_sum0 > 0.0) {
    v.n_samples_seen = 10;
    v.batch_count = 1;
    v.weight_sum = weight_sum0;
    if (rh_cuda_engine_restore(e, &v) != RH_CUDA_SUCCESS) {
      fprintf(stderr, "regression set-up: %s\n", rh_cuda_engine_last_error(e));
      exit(2);
    }
  }
  const RhCudaHostBatch b = rh_batch(x, y, weights, n, 1, batch_weight);
  RhCudaUpdateConfig c = rh_config(1, RH_CUDA_PENALTY_NONE);
  c.max_iter = 50;
  c.tolerance = 1e-6;
  RhCudaDiagnostics d = rh_diagnostics();
  RhCudaStatus s = rh_cuda_engine_update_host(e, &b, &c, &d);
  RhCudaHostState st = rh_state_out(coef, info);
  (void)rh_cuda_engine_copy_state(e, &st);
  v.n_samples_seen = st.n_samples_seen;
  v.batch_count = st.batch_count;
  v.previous_lambda = st.previous_lambda;
  v.weight_sum = st.weight_sum;
  *committed_weight_sum = st.weight_sum;
  *restorable = rh_cuda_engine_restore(r, &v) == RH_CUDA_SUCCESS;
  rh_cuda_engine_destroy(e);
  rh_cuda_engine_destroy(r);
  return s;
}

/* K2: one crafted float64 batch (two rows, one feature, intercept) with the given
 * bandwidth_scale, on an engine restored to weight_sum0 first when it is > 0. Returns the
 * update's status and the engine's message in `message`. */
static RhCudaStatus crafted_bandwidth_update(double bandwidth_scale, double weight_sum0,
                                             char* message, size_t size) {
  static const double x[2] = {0.5, -1.0}, y[2] = {1.0, -0.5};
  RhCudaEngine* e = create_or_die(RH_CUDA_DTYPE_FLOAT64, 2, 0);
  double coef[2] = {0.0, 0.0}, info[4] = {1.0, 0.0, 0.0, 1.0};
  RhCudaHostStateView v = rh_state_view(coef, info);
  if (weight_sum0 > 0.0) {
    v.n_samples_seen = 10;
    v.batch_count = 1;
    v.weight_sum = weight_sum0;
    if (rh_cuda_engine_restore(e, &v) != RH_CUDA_SUCCESS) {
      fprintf(stderr, "regression set-up: %s\n", rh_cuda_engine_last_error(e));
      exit(2);
    }
  }
  const RhCudaHostBatch b = rh_batch(x, y, NULL, 2, 1, 2.0);
  RhCudaUpdateConfig c = rh_config(1, RH_CUDA_PENALTY_NONE);
  c.bandwidth_scale = bandwidth_scale;
  RhCudaDiagnostics d = rh_diagnostics();
  RhCudaStatus s = rh_cuda_engine_update_host(e, &b, &c, &d);
  snprintf(message, size, "%s", rh_cuda_engine_last_error(e));
  rh_cuda_engine_destroy(e);
  return s;
}

/* Crafted inputs of the defects found so far. Prints one line per case and returns the number
 * of cases that regressed. */
static int run_regressions(void) {
  /* K1: every case below breaks the documented weight rule (the weights' double sum overflows,
   * so it agrees with no finite batch_weight; or the engine's cumulative weight overflows).
   * Expected: INVALID_ARGUMENT. Observed on the defective engine: SUCCESS with weight_sum = inf
   * committed (cases 4 and 5), or NUMERICAL_ERROR from the solve that followed the accepted
   * check (cases 1 to 3). */
  static const double x2[2] = {1e-3, -2e-3}, y2[2] = {1e-3, -1e-3}, big2[2] = {1e308, 1e308};
  static const double zeros[3] = {0.0, 0.0, 0.0}, big3[3] = {1e308, 1e308, 1.0};
  static const double x3[3] = {0.5, -0.25, 1.0}, y3[3] = {0.1, 0.2, -0.3};
  static const double one2[2] = {0.6e308, 0.6e308};
  const struct {
    const char* name;
    int64_t P;
    const double *x, *y, *w;
    int64_t n;
    double batch_weight, weight_sum0;
  } cases[] = {
      {"2 rows, sample_weight 1e308 each, batch_weight 1e308", 2, x2, y2, big2, 2, 1e308, 0.0},
      {"2 zero rows, sample_weight 1e308 each, batch_weight 1e308", 2, zeros, zeros, big2, 2,
       1e308, 0.0},
      {"3 rows, sample_weight {1e308, 1e308, 1}, batch_weight 3", 2, x3, y3, big3, 3, 3.0, 0.0},
      /* found by the fuzzer (seed 8, call 51): no intercept, bandwidth_scale 1 */
      {"P 1, 3 rows, sample_weight {1e308, 1e308, 1}, batch_weight 3", 1, x3, y3, big3, 3, 3.0,
       0.0},
      /* weight_sum + batch_weight is finite (the declared weight is 5e-7 below the sum), but
       * weight_sum + the engine's own sum is not */
      {"weight_sum (DBL_MAX - 1.19999994e308)(1 - 1e-12) restored, then sample_weight "
       "{0.6e308, 0.6e308} declared 1.19999994e308",
       2, x2, y2, one2, 2, 1.19999994e308, (DBL_MAX - 1.19999994e308) * (1 - 1e-12)},
  };
  int regressed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    double ws = 0.0;
    int restorable = 0;
    RhCudaStatus s = crafted_update(cases[i].P, cases[i].x, cases[i].y, cases[i].w, cases[i].n,
                                    cases[i].batch_weight, cases[i].weight_sum0, &ws, &restorable);
    int bad = s != RH_CUDA_INVALID_ARGUMENT || !restorable;
    printf("K1 weight-sum-overflow, %s: update_host -> %s (expected INVALID_ARGUMENT); committed "
           "weight_sum %.17g, %s by restore: %s\n",
           cases[i].name, status_name(s), ws, restorable ? "accepted" : "REFUSED",
           bad ? "REGRESSED" : "ok");
    regressed += bad;
  }
  /* K2: h = min(bandwidth_scale / (sqrt(N) ln 2), tau) is zero or subnormal. Expected:
   * INVALID_ARGUMENT naming the bandwidth. Observed before the rule: SUCCESS with h = 0
   * reported and a solve on an infinite curvature slope. */
  const struct {
    const char* name;
    double bandwidth_scale, weight_sum0;
  } bandwidth_cases[] = {
      {"bandwidth_scale 1e-300, weight_sum 1e30 restored (h subnormal)", 1e-300, 1e30},
      {"bandwidth_scale 1e-300, weight_sum 1e300 restored (h = 0)", 1e-300, 1e300},
      {"bandwidth_scale 4.9e-324 on a fresh engine (h subnormal)", 4.9e-324, 0.0},
  };
  for (size_t i = 0; i < sizeof bandwidth_cases / sizeof bandwidth_cases[0]; ++i) {
    char message[512];
    RhCudaStatus s = crafted_bandwidth_update(bandwidth_cases[i].bandwidth_scale,
                                              bandwidth_cases[i].weight_sum0, message,
                                              sizeof message);
    int bad = s != RH_CUDA_INVALID_ARGUMENT || strstr(message, "bandwidth") == NULL;
    printf("K2 bandwidth-underflow, %s: update_host -> %s (expected INVALID_ARGUMENT naming the "
           "bandwidth): %s\n",
           bandwidth_cases[i].name, status_name(s), bad ? "REGRESSED" : "ok");
    regressed += bad;
  }
  /* K3: a restored state without a batch (batch_count 0, n_samples_seen 0) but weight_sum > 0.
   * Expected: INVALID_ARGUMENT, as for a checkpoint. Observed before the rule: accepted, and
   * the next batch was solved with N = weight_sum + its own weight. */
  {
    RhCudaEngine* e = create_or_die(RH_CUDA_DTYPE_FLOAT64, 2, 0);
    double coef[2] = {0.0, 0.0}, info[4] = {0.0, 0.0, 0.0, 0.0};
    RhCudaHostStateView v = rh_state_view(coef, info);
    v.weight_sum = 5.0;
    RhCudaStatus s = rh_cuda_engine_restore(e, &v);
    int bad = s != RH_CUDA_INVALID_ARGUMENT ||
              strstr(rh_cuda_engine_last_error(e), "weight_sum") == NULL;
    printf("K3 weight-without-batch, weight_sum 5 with batch_count 0: restore -> %s (expected "
           "INVALID_ARGUMENT naming weight_sum): %s\n",
           status_name(s), bad ? "REGRESSED" : "ok");
    regressed += bad;
    rh_cuda_engine_destroy(e);
  }
  return regressed;
}

/* ------------------------------------------------------------------------------------ main */

int main(int argc, char** argv) {
  long long calls = 200000;
  int regressions = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = atoll(argv[++i]);
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      g_seed = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--regressions") == 0) {
      regressions = 1;
    } else if (strcmp(argv[i], "--verbose") == 0) {
      g_verbose = 1;
    } else {
      fprintf(stderr,
              "usage: %s [--calls N] [--seed S] [--regressions] [--verbose]\n",
              argv[0]);
      return 2;
    }
  }
  if (regressions) {
    int n = run_regressions();
    printf("%d regression case(s) failed\n", n);
    return n == 0 ? 0 : 1;
  }
  g_rng = g_seed;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  World w;
  world_open(&w);
  long long episode_left = range_i64(50, 600);
  for (g_call = 0; g_call < calls; ++g_call) {
    if (--episode_left <= 0) {
      world_close(&w);
      world_open(&w);
      episode_left = range_i64(50, 600);
    }
    int op = (int)range_i64(0, 99);
    if (op < 40) op_update(&w, 0);
    else if (op < 55) op_update(&w, 1);
    else if (op < 67) op_restore(&w);
    else if (op < 77) op_predict(&w);
    else if (op < 84) op_copy_state(&w);
    else if (op < 90) op_engine_services(&w);
    else if (op < 95) op_create();
    else op_library_queries();
  }
  world_close(&w);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("rh_abi_fuzz: seed %" PRIu64 ", %lld fuzzed calls (%lld ABI calls with the checks) in "
         "%.1f s; %lld twin replays, %lld closure restores, %lld engines created\n",
         g_seed, calls, g_abi_calls, seconds, g_twin_replays, g_closure_checks,
         g_engines_created);
  printf("statuses:");
  for (int s = 0; s <= 9; ++s) {
    if (g_status_count[s]) printf(" %s %lld", s <= 8 ? status_name(s) : "UNDOCUMENTED", g_status_count[s]);
  }
  printf("\n");
  printf("%d finding(s)\n", g_findings);
  return g_findings == 0 ? 0 : 1;
}
