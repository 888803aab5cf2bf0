/*
 * rh_abi_layout -- prints the ABI as this compiler lays it out: every struct's size, every
 * field's offset and width, every constant, as JSON shaped like rh_cuda_contract.json (minus
 * the C type names). pytest and the ctest compare it with the manifest and with the ctypes
 * mirror, so the field lists below are checked against the manifest, not trusted.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "rh_cuda.h"

#define FIELD_WIDTH(type, field) sizeof(((type*)0)->field)

static int g_first_item;

static void begin_object(const char* key) {
  printf("%s\n    \"%s\": {", g_first_item ? "" : ",", key);
  g_first_item = 1;
}

static void print_constant(const char* name, uint64_t value) {
  printf("%s\n      \"%s\": %" PRIu64, g_first_item ? "" : ",", name, value);
  g_first_item = 0;
}

static void print_struct_begin(const char* name, size_t size) {
  printf("%s\n    \"%s\": {\"size\": %zu, \"fields\": [", g_first_item ? "" : ",", name, size);
  g_first_item = 1;
}

static void print_field(const char* name, size_t offset, size_t width) {
  printf("%s\n      {\"name\": \"%s\", \"offset\": %zu, \"width\": %zu}", g_first_item ? "" : ",",
         name, offset, width);
  g_first_item = 0;
}

#define CONSTANT(name) print_constant(#name, (uint64_t)(name))
#define STRUCT(type) print_struct_begin(#type, sizeof(type))
#define FIELD(type, field) print_field(#field, offsetof(type, field), FIELD_WIDTH(type, field))
#define END_STRUCT()    \
  do {                  \
    printf("\n    ]}"); \
    g_first_item = 0;   \
  } while (0)
#define END_OBJECT()   \
  do {                 \
    printf("\n    }"); \
    g_first_item = 0;  \
  } while (0)

static void print_constants(void) {
  g_first_item = 1;
  begin_object("status");
  CONSTANT(RH_CUDA_SUCCESS);
  CONSTANT(RH_CUDA_INVALID_ARGUMENT);
  CONSTANT(RH_CUDA_UNAVAILABLE);
  CONSTANT(RH_CUDA_ALLOCATION_FAILED);
  CONSTANT(RH_CUDA_CUDA_ERROR);
  CONSTANT(RH_CUDA_CUBLAS_ERROR);
  CONSTANT(RH_CUDA_CUSOLVER_ERROR);
  CONSTANT(RH_CUDA_NUMERICAL_ERROR);
  CONSTANT(RH_CUDA_INTERNAL_ERROR);
  END_OBJECT();
  begin_object("dtype");
  CONSTANT(RH_CUDA_DTYPE_FLOAT32);
  CONSTANT(RH_CUDA_DTYPE_FLOAT64);
  END_OBJECT();
  begin_object("penalty");
  CONSTANT(RH_CUDA_PENALTY_NONE);
  CONSTANT(RH_CUDA_PENALTY_L1);
  END_OBJECT();
  begin_object("memory_location");
  CONSTANT(RH_CUDA_MEMORY_HOST);
  CONSTANT(RH_CUDA_MEMORY_DEVICE);
  END_OBJECT();
  begin_object("engine_flag");
  CONSTANT(RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS);
  CONSTANT(RH_CUDA_ENGINE_FLAG_FAST_MATH);
  END_OBJECT();
}

/* A state view and a state share one layout but differ in pointer constness; both are listed so
 * that a drift in either one is caught. The same holds for the host and device batches. */
#define STATE_FIELDS(type)      \
  FIELD(type, abi_version);     \
  FIELD(type, struct_size);     \
  FIELD(type, coefficients);    \
  FIELD(type, information);     \
  FIELD(type, n_samples_seen);  \
  FIELD(type, batch_count);     \
  FIELD(type, previous_lambda); \
  FIELD(type, weight_sum)

#define BATCH_FIELDS(type)    \
  FIELD(type, abi_version);   \
  FIELD(type, struct_size);   \
  FIELD(type, x_design);      \
  FIELD(type, y);             \
  FIELD(type, sample_weight); \
  FIELD(type, n_rows);        \
  FIELD(type, n_columns);     \
  FIELD(type, batch_weight)

static void print_structs(void) {
  g_first_item = 1;
  STRUCT(RhCudaEngineOptions);
  FIELD(RhCudaEngineOptions, abi_version);
  FIELD(RhCudaEngineOptions, struct_size);
  FIELD(RhCudaEngineOptions, dtype);
  FIELD(RhCudaEngineOptions, device_id);
  FIELD(RhCudaEngineOptions, n_parameters);
  FIELD(RhCudaEngineOptions, reserved0);
  END_STRUCT();

  STRUCT(RhCudaHostStateView);
  STATE_FIELDS(RhCudaHostStateView);
  FIELD(RhCudaHostStateView, meat);
  END_STRUCT();

  STRUCT(RhCudaHostState);
  STATE_FIELDS(RhCudaHostState);
  FIELD(RhCudaHostState, meat);
  FIELD(RhCudaHostState, meat_available);
  FIELD(RhCudaHostState, reserved1);
  END_STRUCT();

  STRUCT(RhCudaUpdateConfig);
  FIELD(RhCudaUpdateConfig, abi_version);
  FIELD(RhCudaUpdateConfig, struct_size);
  FIELD(RhCudaUpdateConfig, n_features_in);
  FIELD(RhCudaUpdateConfig, max_iter);
  FIELD(RhCudaUpdateConfig, tau);
  FIELD(RhCudaUpdateConfig, bandwidth_scale);
  FIELD(RhCudaUpdateConfig, tolerance);
  FIELD(RhCudaUpdateConfig, ridge);
  FIELD(RhCudaUpdateConfig, penalty);
  FIELD(RhCudaUpdateConfig, reserved0);
  FIELD(RhCudaUpdateConfig, lambda_scale);
  END_STRUCT();

  STRUCT(RhCudaHostBatch);
  BATCH_FIELDS(RhCudaHostBatch);
  END_STRUCT();

  STRUCT(RhCudaDeviceBatch);
  BATCH_FIELDS(RhCudaDeviceBatch);
  END_STRUCT();

  STRUCT(RhCudaPrediction);
  FIELD(RhCudaPrediction, abi_version);
  FIELD(RhCudaPrediction, struct_size);
  FIELD(RhCudaPrediction, x_design);
  FIELD(RhCudaPrediction, prediction);
  FIELD(RhCudaPrediction, n_rows);
  FIELD(RhCudaPrediction, n_columns);
  FIELD(RhCudaPrediction, n_features_in);
  FIELD(RhCudaPrediction, input_location);
  FIELD(RhCudaPrediction, reserved0);
  END_STRUCT();

  STRUCT(RhCudaDiagnostics);
  FIELD(RhCudaDiagnostics, abi_version);
  FIELD(RhCudaDiagnostics, struct_size);
  FIELD(RhCudaDiagnostics, iterations);
  FIELD(RhCudaDiagnostics, converged);
  FIELD(RhCudaDiagnostics, used_regularized_fallback);
  FIELD(RhCudaDiagnostics, objective);
  FIELD(RhCudaDiagnostics, lambda_value);
  FIELD(RhCudaDiagnostics, bandwidth);
  END_STRUCT();

  STRUCT(RhCudaRuntimeInfo);
  FIELD(RhCudaRuntimeInfo, abi_version);
  FIELD(RhCudaRuntimeInfo, struct_size);
  FIELD(RhCudaRuntimeInfo, runtime_version);
  FIELD(RhCudaRuntimeInfo, driver_version);
  FIELD(RhCudaRuntimeInfo, device_count);
  FIELD(RhCudaRuntimeInfo, reserved0);
  END_STRUCT();

  STRUCT(RhCudaEngineFeatures);
  FIELD(RhCudaEngineFeatures, abi_version);
  FIELD(RhCudaEngineFeatures, struct_size);
  FIELD(RhCudaEngineFeatures, requested_flags);
  FIELD(RhCudaEngineFeatures, enabled_flags);
  FIELD(RhCudaEngineFeatures, graph_captures);
  FIELD(RhCudaEngineFeatures, graph_replays);
  FIELD(RhCudaEngineFeatures, graph_fallbacks);
  END_STRUCT();
}

int main(void) {
  printf("{\n  \"abi_version\": %u,\n  \"pointer_size\": %zu,\n  \"constants\": {",
         (unsigned)RH_CUDA_ABI_VERSION, sizeof(void*));
  print_constants();
  printf("\n  },\n  \"structs\": {");
  print_structs();
  printf("\n  }\n}\n");
  return 0;
}
