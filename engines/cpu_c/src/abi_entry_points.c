/*
 * The 17 exported symbols of librh_cpu. Each one enters through a guard macro: calls on an
 * engine check the handle and clear its last error; calls without one clear the thread's last
 * error. Everything else is delegated to the internal functions, which return a status and
 * write their message into the right buffer.
 */
#include <inttypes.h>

#include "allocation.h"
#include "cpu_engine.h"

#define RH_LIBRARY_ENTRY()             \
  do {                                 \
    rh_allocation_call_begin();        \
    rh_error_clear(rh_thread_error()); \
  } while (0)

#define RH_ENGINE_ENTRY(engine)                                                      \
  do {                                                                               \
    if ((engine) == NULL) {                                                          \
      return rh_fail(rh_thread_error(), RH_CUDA_INVALID_ARGUMENT, "engine is NULL"); \
    }                                                                                \
    rh_allocation_call_begin();                                                      \
    rh_error_clear(&(engine)->error);                                                \
  } while (0)

#define RH_REQUIRE_OUT(pointer, err, name)                                   \
  do {                                                                       \
    if ((pointer) == NULL) {                                                 \
      return rh_fail((err), RH_CUDA_INVALID_ARGUMENT, "%s is NULL", (name)); \
    }                                                                        \
  } while (0)

RH_CUDA_API uint32_t rh_cuda_abi_version(void) {
  return RH_CUDA_ABI_VERSION;
}

RH_CUDA_API const char* rh_cuda_last_error(void) {
  return rh_thread_error()->text;
}

RH_CUDA_API RhCudaStatus rh_cuda_is_available(int32_t* available) {
  RH_LIBRARY_ENTRY();
  RH_REQUIRE_OUT(available, rh_thread_error(), "available");
  *available = 1;
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_device_count(int32_t* count) {
  RH_LIBRARY_ENTRY();
  RH_REQUIRE_OUT(count, rh_thread_error(), "count");
  *count = 0;
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_runtime_info(RhCudaRuntimeInfo* info) {
  RH_LIBRARY_ENTRY();
  RH_TRY(rh_check_header(info, "RhCudaRuntimeInfo", (uint32_t)sizeof(RhCudaRuntimeInfo),
                         rh_thread_error()));
  info->runtime_version = 0;
  info->driver_version = 0;
  info->device_count = 0;
  info->reserved0 = 0;
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_create(const RhCudaEngineOptions* options,
                                               RhCudaEngine** out_engine) {
  RH_LIBRARY_ENTRY();
  RH_REQUIRE_OUT(out_engine, rh_thread_error(), "out_engine");
  *out_engine = NULL;
  return rh_engine_new(options, out_engine, rh_thread_error());
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_destroy(RhCudaEngine* engine) {
  rh_engine_free(engine);
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_restore(RhCudaEngine* engine,
                                                const RhCudaHostStateView* state) {
  RH_ENGINE_ENTRY(engine);
  return rh_engine_restore_state(engine, state);
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_copy_state(RhCudaEngine* engine, RhCudaHostState* state) {
  RH_ENGINE_ENTRY(engine);
  return rh_engine_export_state(engine, state);
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host(RhCudaEngine* engine,
                                                    const RhCudaHostBatch* batch,
                                                    const RhCudaUpdateConfig* config,
                                                    RhCudaDiagnostics* diagnostics) {
  RH_ENGINE_ENTRY(engine);
  return rh_engine_update(engine, batch, config, diagnostics, NULL);
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host_with_state(RhCudaEngine* engine,
                                                               const RhCudaHostBatch* batch,
                                                               const RhCudaUpdateConfig* config,
                                                               RhCudaDiagnostics* diagnostics,
                                                               RhCudaHostState* state) {
  RH_ENGINE_ENTRY(engine);
  RH_REQUIRE_OUT(state, &engine->error, "RhCudaHostState pointer");
  return rh_engine_update(engine, batch, config, diagnostics, state);
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_stream(RhCudaEngine* engine, uintptr_t* stream) {
  RH_ENGINE_ENTRY(engine);
  RH_REQUIRE_OUT(stream, &engine->error, "stream");
  *stream = 0;
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_update_device_with_state(RhCudaEngine* engine,
                                                                 const RhCudaDeviceBatch* batch,
                                                                 const RhCudaUpdateConfig* config,
                                                                 RhCudaDiagnostics* diagnostics,
                                                                 RhCudaHostState* state) {
  RH_ENGINE_ENTRY(engine);
  (void)batch;
  (void)config;
  (void)diagnostics;
  (void)state;
  return rh_fail(&engine->error, RH_CUDA_UNAVAILABLE,
                 "rh_cuda_engine_update_device_with_state: the CPU engine (librh_cpu) cannot read "
                 "device memory; pass host arrays to rh_cuda_engine_update_host or use librh_cuda");
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_predict(RhCudaEngine* engine,
                                                const RhCudaPrediction* prediction) {
  RH_ENGINE_ENTRY(engine);
  RhErrorBuffer* err = &engine->error;
  int append_intercept = 0;
  RH_TRY(rh_validate_prediction(prediction, engine->n_parameters, engine->elem_size,
                                &append_intercept, err));
  if (prediction->input_location == RH_CUDA_MEMORY_DEVICE) {
    return rh_fail(err, RH_CUDA_UNAVAILABLE,
                   "RhCudaPrediction.input_location is DEVICE: the CPU engine (librh_cpu) reads "
                   "host memory only");
  }
  const int64_t count = prediction->n_rows * prediction->n_columns;
  int64_t bad = rh_first_nonfinite(engine->dtype, prediction->x_design, count);
  if (bad >= 0) {
    const double value = rh_value_at(engine->dtype, prediction->x_design, bad);
    return rh_refuse_value(err, "RhCudaPrediction", "x_design", bad / prediction->n_columns,
                           bad % prediction->n_columns, value, RH_VALUE_FINITE);
  }
  rh_widen(engine->dtype, engine->coefficients, engine->n_parameters, engine->coefficients_f64);
  rh_predict_rows(engine->dtype, prediction->x_design, prediction->n_rows, prediction->n_columns,
                  append_intercept, engine->coefficients_f64, prediction->prediction);
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_synchronize(RhCudaEngine* engine) {
  RH_ENGINE_ENTRY(engine);
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_features(RhCudaEngine* engine,
                                                 RhCudaEngineFeatures* features) {
  RH_ENGINE_ENTRY(engine);
  RH_TRY(rh_check_header(features, "RhCudaEngineFeatures", (uint32_t)sizeof(RhCudaEngineFeatures),
                         &engine->error));
  /* Both known flags are accepted for compatibility and never enabled on the host. */
  features->requested_flags = engine->requested_flags;
  features->enabled_flags = 0;
  features->graph_captures = 0;
  features->graph_replays = 0;
  features->graph_fallbacks = 0;
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API const char* rh_cuda_engine_last_error(const RhCudaEngine* engine) {
  if (engine == NULL) {
    return "engine is null";
  }
  return engine->error.text;
}
