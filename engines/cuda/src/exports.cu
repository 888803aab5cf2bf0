// The 17 exported functions, and the 3 of the optional row-statistics extension
// (rh_cuda_row_statistics.h, version 2). Each runs through guarded(): calls without an engine
// report into the thread's buffer, calls on an engine into the engine's own.
#include <cstdint>
#include <memory>

#include "api_guard.hpp"
#include "engine.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "rh_common.h"

namespace {

int count_devices() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return 0;
  }
  rh::check_cuda(rc, "cudaGetDeviceCount");
  return count;
}

template <class Body>
RhCudaStatus on_engine(RhCudaEngine* engine, Body&& body) noexcept {
  if (engine == nullptr) {
    return rh_fail(rh_thread_error(), RH_CUDA_INVALID_ARGUMENT, "engine is null");
  }
  return rh::guarded(&engine->error, [&] {
    rh::DeviceScope scope(engine->impl.device);
    body(engine->impl);
  });
}

void require_out(const void* ptr, const char* name) {
  if (ptr == nullptr)
    rh::fail(RH_CUDA_INVALID_ARGUMENT, "%s is null", name);
}

}  // namespace

extern "C" {

RH_CUDA_API uint32_t rh_cuda_abi_version(void) {
  return RH_CUDA_ABI_VERSION;
}

RH_CUDA_API const char* rh_cuda_last_error(void) {
  return rh_thread_error()->text;
}

RH_CUDA_API RhCudaStatus rh_cuda_is_available(int32_t* available) {
  return rh::guarded(rh_thread_error(), [&] {
    require_out(available, "available");
    *available = count_devices() > 0 ? 1 : 0;
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_device_count(int32_t* count) {
  return rh::guarded(rh_thread_error(), [&] {
    require_out(count, "count");
    *count = count_devices();
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_runtime_info(RhCudaRuntimeInfo* info) {
  return rh::guarded(rh_thread_error(), [&] {
    RhErrorBuffer scratch{};
    rh::require(rh_check_header(info, "RhCudaRuntimeInfo", sizeof(RhCudaRuntimeInfo), &scratch),
                scratch);
    int runtime = 0, driver = 0;
    rh::check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    rh::check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    info->runtime_version = runtime;
    info->driver_version = driver;
    info->device_count = count_devices();
    info->reserved0 = 0;
  });
}

// Create and destroy may run on several threads at once: the engine's stream, handles and pinned
// buffers come from (and go back to) a mutex-guarded pool of idle per-device sets (engine.cu).
RH_CUDA_API RhCudaStatus rh_cuda_engine_create(const RhCudaEngineOptions* options,
                                               RhCudaEngine** out_engine) {
  if (out_engine != nullptr)
    *out_engine = nullptr;
  return rh::guarded(rh_thread_error(), [&] {
    require_out(out_engine, "out_engine");
    RhErrorBuffer scratch{};
    rh::require(rh_validate_options(options, &scratch), scratch);
    const int devices = count_devices();
    if (devices == 0) {
      rh::fail(RH_CUDA_UNAVAILABLE, "no CUDA device is available to create an engine on");
    }
    if (options->device_id < 0 || options->device_id >= devices) {
      rh::fail(RH_CUDA_INVALID_ARGUMENT,
               "RhCudaEngineOptions.device_id %d is out of range (0 <= device_id < %d)",
               options->device_id, devices);
    }
    rh::DeviceScope scope(options->device_id);
    auto engine = std::make_unique<RhCudaEngine>();
    engine->error.text[0] = '\0';
    try {
      engine->impl.create(*options);
    } catch (...) {
      engine->impl.release();
      throw;
    }
    *out_engine = engine.release();
  });
}

// Waits for the engine's stream (not the device), then returns its resource set to the pool.
RH_CUDA_API RhCudaStatus rh_cuda_engine_destroy(RhCudaEngine* engine) {
  if (engine == nullptr)
    return RH_CUDA_SUCCESS;
  return rh::guarded(rh_thread_error(), [&] {
    rh::DeviceScope scope(engine->impl.device);
    engine->impl.release();
    delete engine;
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_restore(RhCudaEngine* engine,
                                                const RhCudaHostStateView* state) {
  return on_engine(engine, [&](rh::Engine& e) { rh::restore_state(e, state); });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_copy_state(RhCudaEngine* engine, RhCudaHostState* state) {
  return on_engine(engine, [&](rh::Engine& e) { rh::copy_state(e, state); });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host(RhCudaEngine* engine,
                                                    const RhCudaHostBatch* batch,
                                                    const RhCudaUpdateConfig* config,
                                                    RhCudaDiagnostics* diagnostics) {
  return on_engine(engine, [&](rh::Engine& e) {
    rh::run_update(e, batch, rh::BatchLocation::Host, config, diagnostics, nullptr);
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host_with_state(RhCudaEngine* engine,
                                                               const RhCudaHostBatch* batch,
                                                               const RhCudaUpdateConfig* config,
                                                               RhCudaDiagnostics* diagnostics,
                                                               RhCudaHostState* state) {
  return on_engine(engine, [&](rh::Engine& e) {
    require_out(state, "state");
    rh::run_update(e, batch, rh::BatchLocation::Host, config, diagnostics, state);
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_stream(RhCudaEngine* engine, uintptr_t* stream) {
  return on_engine(engine, [&](rh::Engine& e) {
    require_out(stream, "stream");
    *stream = reinterpret_cast<uintptr_t>(e.stream);
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_update_device_with_state(RhCudaEngine* engine,
                                                                 const RhCudaDeviceBatch* batch,
                                                                 const RhCudaUpdateConfig* config,
                                                                 RhCudaDiagnostics* diagnostics,
                                                                 RhCudaHostState* state) {
  static_assert(sizeof(RhCudaDeviceBatch) == sizeof(RhCudaHostBatch),
                "device and host batches share one layout");
  return on_engine(engine, [&](rh::Engine& e) {
    require_out(state, "state");
    rh::run_update(e, reinterpret_cast<const RhCudaHostBatch*>(batch), rh::BatchLocation::Device,
                   config, diagnostics, state);
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_predict(RhCudaEngine* engine,
                                                const RhCudaPrediction* prediction) {
  return on_engine(engine, [&](rh::Engine& e) { rh::predict(e, prediction); });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_synchronize(RhCudaEngine* engine) {
  return on_engine(engine, [&](rh::Engine& e) { e.synchronize(); });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_features(RhCudaEngine* engine,
                                                 RhCudaEngineFeatures* features) {
  return on_engine(engine, [&](rh::Engine& e) {
    RhErrorBuffer scratch{};
    rh::require(
        rh_check_header(features, "RhCudaEngineFeatures", sizeof(RhCudaEngineFeatures), &scratch),
        scratch);
    features->requested_flags = e.requested_flags;
    features->enabled_flags = e.enabled_flags;
    features->graph_captures = e.graphs.captures;
    features->graph_replays = e.graphs.replays;
    features->graph_fallbacks = e.graphs.fallbacks;
  });
}

RH_CUDA_API const char* rh_cuda_engine_last_error(const RhCudaEngine* engine) {
  return engine == nullptr ? "engine is null" : engine->error.text;
}

RH_CUDA_API uint32_t rh_cuda_row_statistics_version(void) {
  return RH_CUDA_ROW_STATISTICS_VERSION;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_row_statistics(RhCudaEngine* engine,
                                                       const RhCudaHostBatch* batch,
                                                       RhCudaRowStatistics* statistics) {
  return on_engine(engine, [&](rh::Engine& e) {
    rh::row_statistics(e, batch, rh::BatchLocation::Host, statistics);
  });
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_row_statistics_device(RhCudaEngine* engine,
                                                              const RhCudaDeviceBatch* batch,
                                                              RhCudaRowStatistics* statistics) {
  return on_engine(engine, [&](rh::Engine& e) {
    rh::row_statistics(e, reinterpret_cast<const RhCudaHostBatch*>(batch),
                       rh::BatchLocation::Device, statistics);
  });
}

}  // extern "C"
