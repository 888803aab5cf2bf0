/* Engine lifetime and the committed state: create, destroy, restore, export, commit. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "allocation.h"
#include "cpu_engine.h"

RhCudaStatus rh_engine_new(const RhCudaEngineOptions* options, RhCudaEngine** out,
                           RhErrorBuffer* err) {
  RH_TRY(rh_validate_options(options, err));
  if (options->device_id != -1) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaEngineOptions.device_id is %" PRId32
                   ": the CPU engine runs on the host and requires -1",
                   options->device_id);
  }
  const int64_t P = options->n_parameters;
  const size_t elem_size = rh_dtype_size(options->dtype);
  size_t coefficient_bytes = 0, information_bytes = 0, widened_bytes = 0, meat_bytes = 0;
  /* P * P * 8 was overflow-checked by rh_validate_options. */
  (void)rh_bytes(P, elem_size, &coefficient_bytes);
  (void)rh_bytes(P * P, elem_size, &information_bytes);
  (void)rh_bytes(P * P, sizeof(double), &meat_bytes);
  (void)rh_bytes(P, sizeof(double), &widened_bytes);
  RhCudaEngine* engine = (RhCudaEngine*)rh_allocate_zeroed(sizeof *engine);
  if (engine == NULL) {
    return rh_fail(err, RH_CUDA_ALLOCATION_FAILED, "allocating the engine failed");
  }
  engine->coefficients = rh_allocate_zeroed(coefficient_bytes);
  engine->information = rh_allocate_zeroed(information_bytes);
  engine->coefficients_f64 = (double*)rh_allocate_zeroed(widened_bytes);
  engine->meat = (double*)rh_allocate_zeroed(meat_bytes);
  if (engine->coefficients == NULL || engine->information == NULL ||
      engine->coefficients_f64 == NULL || engine->meat == NULL) {
    rh_engine_free(engine);
    return rh_fail(err, RH_CUDA_ALLOCATION_FAILED,
                   "allocating the state for n_parameters %" PRId64 " (%zu bytes) failed", P,
                   information_bytes);
  }
  engine->dtype = options->dtype;
  engine->elem_size = elem_size;
  engine->n_parameters = P;
  engine->requested_flags = options->reserved0;
  engine->meat_available = 1; /* the empty stream's K is zero */
  *out = engine;
  return RH_CUDA_SUCCESS;
}

void rh_engine_free(RhCudaEngine* engine) {
  if (engine == NULL) {
    return;
  }
  rh_workspace_release(&engine->workspace);
  rh_release(engine->coefficients);
  rh_release(engine->information);
  rh_release(engine->coefficients_f64);
  rh_release(engine->meat);
  rh_release(engine);
}

static RhCudaStatus check_finite_array(const RhCudaEngine* engine, const void* data, int64_t count,
                                       const char* field, int as_matrix, RhErrorBuffer* err) {
  int64_t bad = rh_first_nonfinite(engine->dtype, data, count);
  if (bad < 0) {
    return RH_CUDA_SUCCESS;
  }
  double value = rh_value_at(engine->dtype, data, bad);
  if (as_matrix) {
    return rh_refuse_value(err, "RhCudaHostStateView", field, bad / engine->n_parameters,
                           bad % engine->n_parameters, value, RH_VALUE_FINITE);
  }
  return rh_refuse_value(err, "RhCudaHostStateView", field, bad, -1, value, RH_VALUE_FINITE);
}

RhCudaStatus rh_engine_restore_state(RhCudaEngine* engine, const RhCudaHostStateView* view) {
  RhErrorBuffer* err = &engine->error;
  const int64_t P = engine->n_parameters;
  RH_TRY(rh_validate_state_view(view, engine->elem_size, err));
  RH_TRY(check_finite_array(engine, view->coefficients, P, "coefficients", 0, err));
  RH_TRY(check_finite_array(engine, view->information, P * P, "information", 1, err));
  int with_meat = 0;
  RH_TRY(rh_validate_state_meat(view, P, &with_meat, err));
  if (with_meat) {
    memcpy(engine->meat, view->meat, (size_t)(P * P) * sizeof(double));
  }
  engine->meat_available = with_meat;
  memcpy(engine->coefficients, view->coefficients, (size_t)P * engine->elem_size);
  memcpy(engine->information, view->information, (size_t)(P * P) * engine->elem_size);
  engine->n_samples_seen = view->n_samples_seen;
  engine->batch_count = view->batch_count;
  engine->previous_lambda = view->previous_lambda;
  engine->weight_sum = view->weight_sum;
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_engine_export_state(RhCudaEngine* engine, RhCudaHostState* state) {
  const int64_t P = engine->n_parameters;
  RH_TRY(rh_validate_state_out(state, engine->elem_size, &engine->error));
  memcpy(state->coefficients, engine->coefficients, (size_t)P * engine->elem_size);
  memcpy(state->information, engine->information, (size_t)(P * P) * engine->elem_size);
  state->n_samples_seen = engine->n_samples_seen;
  state->batch_count = engine->batch_count;
  state->previous_lambda = engine->previous_lambda;
  state->weight_sum = engine->weight_sum;
  if (rh_state_out_has_meat(state)) {
    state->meat_available = engine->meat_available;
    state->reserved1 = 0;
    if (state->meat != NULL && engine->meat_available) {
      memcpy(state->meat, engine->meat, (size_t)(P * P) * sizeof(double));
    }
  }
  return RH_CUDA_SUCCESS;
}

void rh_engine_commit(RhCudaEngine* engine, int64_t n_rows, double lambda, double weight_sum,
                      int with_meat) {
  RhWorkspace* ws = &engine->workspace;
  if (with_meat) {
    double* old_meat = engine->meat;
    engine->meat = ws->staged_meat;
    ws->staged_meat = old_meat;
  }
  engine->meat_available = with_meat;
  void* old_coefficients = engine->coefficients;
  void* old_information = engine->information;
  engine->coefficients = ws->staged_coefficients;
  engine->information = ws->staged_information;
  ws->staged_coefficients = old_coefficients;
  ws->staged_information = old_information;
  engine->n_samples_seen += n_rows;
  engine->batch_count += 1;
  engine->previous_lambda = lambda;
  engine->weight_sum = weight_sum;
}
