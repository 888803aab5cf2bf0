/*
 * rh_fault_shim -- the fuzzer's own test: an engine that forwards the 17 symbols to the real
 * librh_cpu (dlopen'ed from RH_FAULT_LIBRARY) and breaks one documented rule, chosen by the
 * environment variable RH_FUZZ_FAULT. Linked into rh_abi_fuzz_selftest instead of librh_cpu; each
 * ctest fuzz.selftest.<fault> requires the fuzzer to report the matching finding, so a fuzzer
 * whose checks were weakened or broken fails its own tests.
 *
 *   empty-message       a refused update leaves the engine's message empty
 *   dirty-failure       a refused update changes the committed state (n_samples_seen + 1)
 *   accept-invalid      a prediction with reserved0 != 0 is accepted
 *   undocumented-status NUMERICAL_ERROR is returned as 42
 *   diverge             every 13th successful host update nudges coefficient 0 by one ulp, so
 *                       two engines given the same calls drift apart
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_structs.h"
#include "rh_cuda.h"

#ifndef RH_FAULT_LIBRARY
#error "RH_FAULT_LIBRARY must name the real engine library"
#endif

typedef uint32_t (*fn_version)(void);
typedef const char* (*fn_text)(void);
typedef RhCudaStatus (*fn_i32)(int32_t*);
typedef RhCudaStatus (*fn_info)(RhCudaRuntimeInfo*);
typedef RhCudaStatus (*fn_create)(const RhCudaEngineOptions*, RhCudaEngine**);
typedef RhCudaStatus (*fn_engine)(RhCudaEngine*);
typedef RhCudaStatus (*fn_restore)(RhCudaEngine*, const RhCudaHostStateView*);
typedef RhCudaStatus (*fn_copy)(RhCudaEngine*, RhCudaHostState*);
typedef RhCudaStatus (*fn_update)(RhCudaEngine*, const RhCudaHostBatch*, const RhCudaUpdateConfig*,
                                  RhCudaDiagnostics*);
typedef RhCudaStatus (*fn_update_state)(RhCudaEngine*, const RhCudaHostBatch*,
                                        const RhCudaUpdateConfig*, RhCudaDiagnostics*,
                                        RhCudaHostState*);
typedef RhCudaStatus (*fn_stream)(RhCudaEngine*, uintptr_t*);
typedef RhCudaStatus (*fn_device)(RhCudaEngine*, const RhCudaDeviceBatch*,
                                  const RhCudaUpdateConfig*, RhCudaDiagnostics*, RhCudaHostState*);
typedef RhCudaStatus (*fn_predict)(RhCudaEngine*, const RhCudaPrediction*);
typedef RhCudaStatus (*fn_features)(RhCudaEngine*, RhCudaEngineFeatures*);
typedef const char* (*fn_engine_text)(const RhCudaEngine*);

static struct {
  int loaded;
  const char* fault;
  fn_version abi_version;
  fn_text last_error;
  fn_i32 is_available, device_count;
  fn_info runtime_info;
  fn_create create;
  fn_engine destroy, synchronize;
  fn_restore restore;
  fn_copy copy_state;
  fn_update update_host;
  fn_update_state update_host_with_state;
  fn_stream stream;
  fn_device update_device;
  fn_predict predict;
  fn_features features;
  fn_engine_text engine_last_error;
} real;

static const RhCudaEngine* blank_engine; /* empty-message: the engine whose text is hidden */
static long long successful_updates;     /* diverge */

static void* must(void* handle, const char* name) {
  void* f = dlsym(handle, name);
  if (f == NULL) {
    fprintf(stderr, "rh_fault_shim: %s missing from %s\n", name, RH_FAULT_LIBRARY);
    exit(2);
  }
  return f;
}

static void load(void) {
  if (real.loaded) return;
  void* h = dlopen(RH_FAULT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "rh_fault_shim: %s\n", dlerror());
    exit(2);
  }
  /* object pointers to function pointers: the POSIX dlsym idiom, through memcpy */
#define LOAD(field, name)                 \
  do {                                    \
    void* p_ = must(h, name);             \
    memcpy(&real.field, &p_, sizeof p_);  \
  } while (0)
  LOAD(abi_version, "rh_cuda_abi_version");
  LOAD(last_error, "rh_cuda_last_error");
  LOAD(is_available, "rh_cuda_is_available");
  LOAD(device_count, "rh_cuda_device_count");
  LOAD(runtime_info, "rh_cuda_runtime_info");
  LOAD(create, "rh_cuda_engine_create");
  LOAD(destroy, "rh_cuda_engine_destroy");
  LOAD(synchronize, "rh_cuda_engine_synchronize");
  LOAD(restore, "rh_cuda_engine_restore");
  LOAD(copy_state, "rh_cuda_engine_copy_state");
  LOAD(update_host, "rh_cuda_engine_update_host");
  LOAD(update_host_with_state, "rh_cuda_engine_update_host_with_state");
  LOAD(stream, "rh_cuda_engine_stream");
  LOAD(update_device, "rh_cuda_engine_update_device_with_state");
  LOAD(predict, "rh_cuda_engine_predict");
  LOAD(features, "rh_cuda_engine_features");
  LOAD(engine_last_error, "rh_cuda_engine_last_error");
#undef LOAD
  const char* f = getenv("RH_FUZZ_FAULT");
  real.fault = f ? f : "";
  real.loaded = 1;
}

static int fault(const char* name) { return strcmp(real.fault, name) == 0; }

static void touch(const RhCudaEngine* e) {
  load();
  if (e == blank_engine) blank_engine = NULL;
}

/* e's committed state into coef (<= 16) and info (<= 256 values, enough for the fuzzer's
 * largest engines, P <= 12); 1 on success. */
static int export_state(RhCudaEngine* e, double* coef, double* info, RhCudaHostState* st) {
  *st = rh_state_out(coef, info);
  return real.copy_state(e, st) == RH_CUDA_SUCCESS;
}

/* Restores coef and info with st's counters, n_samples_seen replaced: a state changed behind
 * the caller's back. */
static void restore_state(RhCudaEngine* e, const double* coef, const double* info,
                          const RhCudaHostState* st, int64_t n_samples_seen) {
  RhCudaHostStateView v = rh_state_view(coef, info);
  v.n_samples_seen = n_samples_seen;
  v.batch_count = st->batch_count;
  v.previous_lambda = st->previous_lambda;
  v.weight_sum = st->weight_sum;
  (void)real.restore(e, &v);
}

/* A refused update: apply the failure faults. */
static RhCudaStatus after_update(RhCudaEngine* e, RhCudaStatus s) {
  if (s == RH_CUDA_INVALID_ARGUMENT && e != NULL && fault("empty-message")) blank_engine = e;
  if (s == RH_CUDA_INVALID_ARGUMENT && e != NULL && fault("dirty-failure")) {
    /* big enough for the fuzzer's largest engines (P <= 12) */
    double coef[16], info[256];
    RhCudaHostState st;
    if (export_state(e, coef, info, &st) && st.n_samples_seen > 0 &&
        st.n_samples_seen < INT64_MAX) {
      restore_state(e, coef, info, &st, st.n_samples_seen + 1);
    }
  }
  if (s == RH_CUDA_NUMERICAL_ERROR && fault("undocumented-status")) return 42;
  if (s == RH_CUDA_SUCCESS && e != NULL && fault("diverge") && ++successful_updates % 13 == 0) {
    double coef[16], info[256];
    RhCudaHostState st;
    if (export_state(e, coef, info, &st)) {
      /* one ulp in either dtype: the low bit of the first element's representation */
      unsigned char* bytes = (unsigned char*)coef;
      bytes[0] ^= 1;
      restore_state(e, coef, info, &st, st.n_samples_seen);
    }
  }
  return s;
}

RH_CUDA_API uint32_t rh_cuda_abi_version(void) {
  load();
  return real.abi_version();
}
RH_CUDA_API const char* rh_cuda_last_error(void) {
  load();
  return real.last_error();
}
RH_CUDA_API RhCudaStatus rh_cuda_is_available(int32_t* a) {
  load();
  return real.is_available(a);
}
RH_CUDA_API RhCudaStatus rh_cuda_device_count(int32_t* c) {
  load();
  return real.device_count(c);
}
RH_CUDA_API RhCudaStatus rh_cuda_runtime_info(RhCudaRuntimeInfo* i) {
  load();
  return real.runtime_info(i);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_create(const RhCudaEngineOptions* o, RhCudaEngine** e) {
  load();
  return real.create(o, e);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_destroy(RhCudaEngine* e) {
  touch(e);
  return real.destroy(e);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_restore(RhCudaEngine* e, const RhCudaHostStateView* v) {
  touch(e);
  return real.restore(e, v);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_copy_state(RhCudaEngine* e, RhCudaHostState* s) {
  touch(e);
  return real.copy_state(e, s);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host(RhCudaEngine* e, const RhCudaHostBatch* b,
                                                    const RhCudaUpdateConfig* c,
                                                    RhCudaDiagnostics* d) {
  touch(e);
  return after_update(e, real.update_host(e, b, c, d));
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host_with_state(RhCudaEngine* e,
                                                               const RhCudaHostBatch* b,
                                                               const RhCudaUpdateConfig* c,
                                                               RhCudaDiagnostics* d,
                                                               RhCudaHostState* s) {
  touch(e);
  return after_update(e, real.update_host_with_state(e, b, c, d, s));
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_stream(RhCudaEngine* e, uintptr_t* s) {
  touch(e);
  return real.stream(e, s);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_update_device_with_state(RhCudaEngine* e,
                                                                 const RhCudaDeviceBatch* b,
                                                                 const RhCudaUpdateConfig* c,
                                                                 RhCudaDiagnostics* d,
                                                                 RhCudaHostState* s) {
  touch(e);
  return real.update_device(e, b, c, d, s);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_predict(RhCudaEngine* e, const RhCudaPrediction* p) {
  touch(e);
  if (fault("accept-invalid") && p != NULL && p->abi_version == RH_CUDA_ABI_VERSION &&
      p->struct_size >= sizeof *p && p->reserved0 != 0) {
    RhCudaPrediction fixed = *p;
    fixed.reserved0 = 0;
    return real.predict(e, &fixed);
  }
  return real.predict(e, p);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_synchronize(RhCudaEngine* e) {
  touch(e);
  return real.synchronize(e);
}
RH_CUDA_API RhCudaStatus rh_cuda_engine_features(RhCudaEngine* e, RhCudaEngineFeatures* f) {
  touch(e);
  return real.features(e, f);
}
RH_CUDA_API const char* rh_cuda_engine_last_error(const RhCudaEngine* e) {
  load();
  if (e != NULL && e == blank_engine) return "";
  return real.engine_last_error(e);
}
