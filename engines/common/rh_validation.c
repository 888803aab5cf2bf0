#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "rh_algorithm.h"
#include "rh_common.h"

RhCudaStatus rh_check_header(const void* ptr, const char* name, uint32_t known_size,
                             RhErrorBuffer* err) {
  if (ptr == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s pointer is NULL", name);
  }
  const uint32_t* header = (const uint32_t*)ptr;
  if (header[0] != RH_CUDA_ABI_VERSION) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.abi_version is %" PRIu32 ", expected %u",
                   name, header[0], (unsigned)RH_CUDA_ABI_VERSION);
  }
  if (header[1] < known_size) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.struct_size is %" PRIu32 ", smaller than the %" PRIu32
                   " bytes this engine knows",
                   name, header[1], known_size);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_check_aligned(const void* ptr, const char* name, const char* field,
                              size_t elem_size, RhErrorBuffer* err) {
  if (ptr != NULL && elem_size > 1 && (uintptr_t)ptr % elem_size != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.%s (%p) is not aligned to its %zu-byte elements", name, field, ptr,
                   elem_size);
  }
  return RH_CUDA_SUCCESS;
}

/* x_design, y and sample_weight of a batch whose arrays hold elem_size-byte elements. */
static RhCudaStatus check_batch_alignment(const RhCudaHostBatch* batch, const char* name,
                                          size_t elem_size, RhErrorBuffer* err) {
  RH_TRY(rh_check_aligned(batch->x_design, name, "x_design", elem_size, err));
  RH_TRY(rh_check_aligned(batch->y, name, "y", elem_size, err));
  return rh_check_aligned(batch->sample_weight, name, "sample_weight", elem_size, err);
}

static RhCudaStatus require_positive_finite(double value, const char* field, RhErrorBuffer* err) {
  if (!isfinite(value) || !(value > 0.0)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s is %.17g: must be finite and > 0", field,
                   value);
  }
  return RH_CUDA_SUCCESS;
}

static RhCudaStatus require_nonnegative_finite(double value, const char* field,
                                               RhErrorBuffer* err) {
  if (!isfinite(value) || !(value >= 0.0)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s is %.17g: must be finite and >= 0", field,
                   value);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_options(const RhCudaEngineOptions* options, RhErrorBuffer* err) {
  RH_TRY(
      rh_check_header(options, "RhCudaEngineOptions", (uint32_t)sizeof(RhCudaEngineOptions), err));
  size_t elem_size = rh_dtype_size(options->dtype);
  if (elem_size == 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaEngineOptions.dtype is %" PRId32
                   ": expected %d (FLOAT32) or %d (FLOAT64)",
                   options->dtype, RH_CUDA_DTYPE_FLOAT32, RH_CUDA_DTYPE_FLOAT64);
  }
  int64_t p = options->n_parameters;
  int64_t square = 0;
  size_t bytes = 0;
  if (p < 1) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaEngineOptions.n_parameters is %" PRId64 ": must be >= 1", p);
  }
  if (rh_mul_i64(p, p, &square) != 0 || rh_bytes(square, sizeof(double), &bytes) != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaEngineOptions.n_parameters is %" PRId64
                   ": n_parameters * n_parameters overflows",
                   p);
  }
  const uint64_t known = RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS | RH_CUDA_ENGINE_FLAG_FAST_MATH;
  if ((options->reserved0 & ~known) != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaEngineOptions.reserved0 (flags) is 0x%" PRIx64
                   ": unknown bits 0x%" PRIx64,
                   options->reserved0, options->reserved0 & ~known);
  }
  if ((options->reserved0 & RH_CUDA_ENGINE_FLAG_FAST_MATH) != 0 &&
      options->dtype != RH_CUDA_DTYPE_FLOAT32) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaEngineOptions.reserved0 sets FAST_MATH with dtype %" PRId32
                   ": FAST_MATH is valid with FLOAT32 only",
                   options->dtype);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_config(const RhCudaUpdateConfig* config, int64_t n_parameters,
                                int* fit_intercept, RhErrorBuffer* err) {
  RH_TRY(rh_check_header(config, "RhCudaUpdateConfig", (uint32_t)sizeof(RhCudaUpdateConfig), err));
  int64_t p = config->n_features_in;
  if (p <= 0 || !(n_parameters - p == 0 || n_parameters - p == 1)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaUpdateConfig.n_features_in is %" PRId64
                   ": must be > 0 and n_parameters (%" PRId64 ") or n_parameters - 1",
                   p, n_parameters);
  }
  if (config->max_iter < 1 || config->max_iter > INT32_MAX) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaUpdateConfig.max_iter is %" PRId64 ": must be in [1, %d]",
                   config->max_iter, INT32_MAX);
  }
  RH_TRY(require_positive_finite(config->tau, "RhCudaUpdateConfig.tau", err));
  RH_TRY(
      require_positive_finite(config->bandwidth_scale, "RhCudaUpdateConfig.bandwidth_scale", err));
  RH_TRY(require_positive_finite(config->tolerance, "RhCudaUpdateConfig.tolerance", err));
  RH_TRY(require_nonnegative_finite(config->ridge, "RhCudaUpdateConfig.ridge", err));
  if (config->penalty != RH_CUDA_PENALTY_NONE && config->penalty != RH_CUDA_PENALTY_L1) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaUpdateConfig.penalty is %" PRId32 ": expected %d (NONE) or %d (L1)",
                   config->penalty, RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1);
  }
  if (config->reserved0 != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaUpdateConfig.reserved0 is %" PRId32 ": must be 0", config->reserved0);
  }
  RH_TRY(require_nonnegative_finite(config->lambda_scale, "RhCudaUpdateConfig.lambda_scale", err));
  if (fit_intercept != NULL) {
    *fit_intercept = n_parameters == p + 1;
  }
  return RH_CUDA_SUCCESS;
}

/* n_columns is n_parameters (expanded design) or n_features_in (engine appends the ones). */
static RhCudaStatus check_columns(const char* name, int64_t n_rows, int64_t n_columns,
                                  int64_t n_features_in, int64_t n_parameters, size_t elem_size,
                                  int* append_intercept, RhErrorBuffer* err) {
  if (n_rows < 1) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.n_rows is %" PRId64 ": must be >= 1", name,
                   n_rows);
  }
  if (n_columns != n_parameters && n_columns != n_features_in) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.n_columns is %" PRId64 ": expected n_parameters (%" PRId64
                   ") or n_features_in (%" PRId64 ")",
                   name, n_columns, n_parameters, n_features_in);
  }
  int64_t count = 0;
  size_t bytes = 0;
  if (rh_mul_i64(n_rows, n_columns, &count) != 0 || rh_bytes(count, elem_size, &bytes) != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.n_rows (%" PRId64 ") * n_columns (%" PRId64 ") overflows", name, n_rows,
                   n_columns);
  }
  if (rh_bytes(n_rows, elem_size, &bytes) != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.n_rows is %" PRId64 ": byte count overflows",
                   name, n_rows);
  }
  *append_intercept = n_columns != n_parameters;
  return RH_CUDA_SUCCESS;
}

/* The arrays every batch names (update and row statistics): its header, x_design and y
 * non-NULL. */
static RhCudaStatus check_batch_arrays(const RhCudaHostBatch* batch, const char* name,
                                       RhErrorBuffer* err) {
  RH_TRY(rh_check_header(batch, name, (uint32_t)sizeof(RhCudaHostBatch), err));
  if (batch->x_design == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.x_design is NULL", name);
  }
  if (batch->y == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.y is NULL", name);
  }
  return RH_CUDA_SUCCESS;
}

/* batch_weight: finite and > 0 (>= 0 when zero_allowed: row statistics of a partition whose
 * weights are all zero), and exactly n_rows without sample_weight. */
static RhCudaStatus check_batch_weight(const RhCudaHostBatch* batch, const char* name,
                                       int zero_allowed, RhErrorBuffer* err) {
  char field[96];
  snprintf(field, sizeof field, "%s.batch_weight", name);
  RH_TRY(zero_allowed ? require_nonnegative_finite(batch->batch_weight, field, err)
                      : require_positive_finite(batch->batch_weight, field, err));
  if (batch->sample_weight == NULL && batch->batch_weight != (double)batch->n_rows) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.batch_weight is %.17g: without sample_weight it must equal n_rows "
                   "(%" PRId64 ")",
                   name, batch->batch_weight, batch->n_rows);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_batch(const RhCudaHostBatch* batch, const char* name,
                               const RhCudaUpdateConfig* config, int64_t n_parameters,
                               int64_t n_samples_seen, int64_t batch_count, double weight_sum,
                               size_t elem_size, int* append_intercept, RhErrorBuffer* err) {
  RH_TRY(check_batch_arrays(batch, name, err));
  RH_TRY(check_batch_alignment(batch, name, elem_size, err));
  RH_TRY(check_columns(name, batch->n_rows, batch->n_columns, config->n_features_in, n_parameters,
                       elem_size, append_intercept, err));
  RH_TRY(check_batch_weight(batch, name, 0, err));
  if (n_samples_seen > INT64_MAX - batch->n_rows) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.n_rows (%" PRId64 ") overflows n_samples_seen (%" PRId64 ")", name,
                   batch->n_rows, n_samples_seen);
  }
  if (batch_count == INT64_MAX) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "batch_count (%" PRId64 ") would overflow",
                   batch_count);
  }
  double cumulative = weight_sum + batch->batch_weight;
  if (!isfinite(cumulative) || !(cumulative > 0.0)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "cumulative weight weight_sum (%.17g) + %s.batch_weight (%.17g) is %.17g: "
                   "must be finite and > 0",
                   weight_sum, name, batch->batch_weight, cumulative);
  }
  const double h =
      rh_bandwidth(config->bandwidth_scale, cumulative, config->n_features_in, config->tau);
  if (!rh_bandwidth_is_usable(h)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "bandwidth h = min(bandwidth_scale / (sqrt(N) ln(max(p, 2))), tau) is %.17g "
                   "for RhCudaUpdateConfig.bandwidth_scale %.17g, tau %.17g and cumulative "
                   "weight N %.17g: must be a positive normal number (>= %.17g); raise "
                   "bandwidth_scale",
                   h, config->bandwidth_scale, config->tau, cumulative, RH_MIN_BANDWIDTH);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_prediction(const RhCudaPrediction* prediction, int64_t n_parameters,
                                    size_t elem_size, int* append_intercept, RhErrorBuffer* err) {
  const char* name = "RhCudaPrediction";
  RH_TRY(rh_check_header(prediction, name, (uint32_t)sizeof(RhCudaPrediction), err));
  if (prediction->x_design == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.x_design is NULL", name);
  }
  if (prediction->prediction == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.prediction is NULL", name);
  }
  RH_TRY(rh_check_aligned(prediction->x_design, name, "x_design", elem_size, err));
  RH_TRY(rh_check_aligned(prediction->prediction, name, "prediction", elem_size, err));
  int64_t p = prediction->n_features_in;
  if (p <= 0 || !(n_parameters - p == 0 || n_parameters - p == 1)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.n_features_in is %" PRId64 ": must be > 0 and n_parameters (%" PRId64
                   ") or n_parameters - 1",
                   name, p, n_parameters);
  }
  if (prediction->input_location != RH_CUDA_MEMORY_HOST &&
      prediction->input_location != RH_CUDA_MEMORY_DEVICE) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.input_location is %" PRId32 ": expected %d (HOST) or %d (DEVICE)", name,
                   prediction->input_location, RH_CUDA_MEMORY_HOST, RH_CUDA_MEMORY_DEVICE);
  }
  if (prediction->reserved0 != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.reserved0 is %" PRId32 ": must be 0", name,
                   prediction->reserved0);
  }
  return check_columns(name, prediction->n_rows, prediction->n_columns, p, n_parameters, elem_size,
                       append_intercept, err);
}

/* struct_size is the size before K (an older ABI 2 caller) or at least the full size. */
static RhCudaStatus check_state_header(const void* state, const char* name, uint32_t full_size,
                                       RhErrorBuffer* err) {
  RH_TRY(rh_check_header(state, name, RH_STATE_SIZE_WITHOUT_MEAT, err));
  const uint32_t size = ((const uint32_t*)state)[1];
  if (size != RH_STATE_SIZE_WITHOUT_MEAT && size < full_size) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.struct_size is %" PRIu32 ": must be %" PRIu32
                   " (without the meat matrix K) or at least %" PRIu32,
                   name, size, RH_STATE_SIZE_WITHOUT_MEAT, full_size);
  }
  return RH_CUDA_SUCCESS;
}

int rh_state_view_has_meat(const RhCudaHostStateView* state) {
  return state->struct_size >= (uint32_t)sizeof(RhCudaHostStateView);
}

int rh_state_out_has_meat(const RhCudaHostState* state) {
  return state->struct_size >= (uint32_t)sizeof(RhCudaHostState);
}

RhCudaStatus rh_validate_state_view(const RhCudaHostStateView* state, size_t elem_size,
                                    RhErrorBuffer* err) {
  const char* name = "RhCudaHostStateView";
  RH_TRY(check_state_header(state, name, (uint32_t)sizeof(RhCudaHostStateView), err));
  if (state->coefficients == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.coefficients is NULL", name);
  }
  if (state->information == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.information is NULL", name);
  }
  RH_TRY(rh_check_aligned(state->coefficients, name, "coefficients", elem_size, err));
  RH_TRY(rh_check_aligned(state->information, name, "information", elem_size, err));
  if (state->n_samples_seen < 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.n_samples_seen is %" PRId64 ": must be >= 0",
                   name, state->n_samples_seen);
  }
  if (state->batch_count < 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.batch_count is %" PRId64 ": must be >= 0",
                   name, state->batch_count);
  }
  if ((state->batch_count == 0) != (state->n_samples_seen == 0) ||
      state->batch_count > state->n_samples_seen) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.batch_count is %" PRId64 " with n_samples_seen %" PRId64
                   ": batch_count must be 0 exactly when n_samples_seen is 0, and at most "
                   "n_samples_seen",
                   name, state->batch_count, state->n_samples_seen);
  }
  RH_TRY(require_nonnegative_finite(state->previous_lambda, "RhCudaHostStateView.previous_lambda",
                                    err));
  RH_TRY(require_nonnegative_finite(state->weight_sum, "RhCudaHostStateView.weight_sum", err));
  /* Every batch adds a weight > 0, so a state without one has weight 0 exactly: a positive
   * weight there would silently shrink the first batch's share of every scale (h, lambda, 1/N). */
  if ((state->batch_count > 0) != (state->weight_sum > 0.0)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.weight_sum is %.17g with batch_count %" PRId64
                   ": must be > 0 once a batch was seen and 0 before",
                   name, state->weight_sum, state->batch_count);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_state_meat(const RhCudaHostStateView* state, int64_t n_parameters,
                                    int* with_meat, RhErrorBuffer* err) {
  *with_meat = rh_state_view_has_meat(state) && state->meat != NULL;
  if (!*with_meat) {
    return RH_CUDA_SUCCESS;
  }
  RH_TRY(rh_check_aligned(state->meat, "RhCudaHostStateView", "meat", sizeof(double), err));
  const int64_t P = n_parameters;
  const double* meat = (const double*)state->meat;
  int64_t bad = rh_first_nonfinite_f64(meat, P * P);
  if (bad >= 0) {
    return rh_refuse_value(err, "RhCudaHostStateView", "meat", bad / P, bad % P, meat[bad],
                           RH_VALUE_FINITE);
  }
  for (int64_t j = 0; j < P; ++j) {
    if (meat[j * P + j] < 0.0) {
      return rh_refuse_value(err, "RhCudaHostStateView", "meat", j, j, meat[j * P + j],
                             RH_VALUE_NONNEGATIVE_DIAGONAL);
    }
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_state_out(const RhCudaHostState* state, size_t elem_size,
                                   RhErrorBuffer* err) {
  const char* name = "RhCudaHostState";
  RH_TRY(check_state_header(state, name, (uint32_t)sizeof(RhCudaHostState), err));
  if (state->coefficients == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.coefficients is NULL", name);
  }
  if (state->information == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT, "%s.information is NULL", name);
  }
  RH_TRY(rh_check_aligned(state->coefficients, name, "coefficients", elem_size, err));
  RH_TRY(rh_check_aligned(state->information, name, "information", elem_size, err));
  return rh_state_out_has_meat(state)
             ? rh_check_aligned(state->meat, name, "meat", sizeof(double), err)
             : RH_CUDA_SUCCESS;
}

/* One output of a row-statistics request: non-NULL exactly when its bit is requested. */
static RhCudaStatus check_statistic_output(const void* output, uint64_t statistics, uint64_t bit,
                                           const char* field, const char* bit_name,
                                           RhErrorBuffer* err) {
  const int requested = (statistics & bit) != 0;
  if (requested && output == NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaRowStatistics.%s is NULL: statistics requests %s", field, bit_name);
  }
  if (!requested && output != NULL) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaRowStatistics.%s is set but statistics (0x%" PRIx64
                   ") does not request %s: pass NULL",
                   field, statistics, bit_name);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_validate_row_statistics(const RhCudaHostBatch* batch, const char* batch_name,
                                        const RhCudaRowStatistics* statistics, int64_t n_parameters,
                                        size_t elem_size, RhErrorBuffer* err) {
  const char* name = "RhCudaRowStatistics";
  RH_TRY(rh_check_header(statistics, name, (uint32_t)sizeof(RhCudaRowStatistics), err));
  const uint64_t bits = statistics->statistics;
  if (bits == 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.statistics is 0: request at least one RH_CUDA_STATISTIC_* bit", name);
  }
  if ((bits & ~RH_CUDA_STATISTIC_ALL) != 0) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.statistics is 0x%" PRIx64 ": unknown bits 0x%" PRIx64, name, bits,
                   bits & ~RH_CUDA_STATISTIC_ALL);
  }
  if (statistics->coefficients == NULL && bits != RH_CUDA_STATISTIC_NORM) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.coefficients is NULL: every statistic but NORM needs them", name);
  }
  RH_TRY(require_positive_finite(statistics->tau, "RhCudaRowStatistics.tau", err));
  if (!isfinite(statistics->bandwidth) || !rh_bandwidth_is_usable(statistics->bandwidth)) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.bandwidth is %.17g: must be a finite positive normal number (>= %.17g)",
                   name, statistics->bandwidth, RH_MIN_BANDWIDTH);
  }
  RH_TRY(check_statistic_output(statistics->score, bits, RH_CUDA_STATISTIC_SCORE, "score", "SCORE",
                                err));
  RH_TRY(check_statistic_output(statistics->curvature_gram, bits, RH_CUDA_STATISTIC_CURVATURE,
                                "curvature_gram", "CURVATURE", err));
  RH_TRY(check_statistic_output(statistics->majoriser_gram, bits, RH_CUDA_STATISTIC_MAJORISER,
                                "majoriser_gram", "MAJORISER", err));
  RH_TRY(
      check_statistic_output(statistics->meat, bits, RH_CUDA_STATISTIC_MEAT, "meat", "MEAT", err));
  RH_TRY(rh_check_aligned(statistics->coefficients, name, "coefficients", elem_size, err));
  RH_TRY(rh_check_aligned(statistics->score, name, "score", sizeof(double), err));
  RH_TRY(rh_check_aligned(statistics->curvature_gram, name, "curvature_gram", sizeof(double), err));
  RH_TRY(rh_check_aligned(statistics->majoriser_gram, name, "majoriser_gram", sizeof(double), err));
  RH_TRY(rh_check_aligned(statistics->meat, name, "meat", sizeof(double), err));

  RH_TRY(check_batch_arrays(batch, batch_name, err));
  RH_TRY(check_batch_alignment(batch, batch_name, elem_size, err));
  if (batch->n_columns != n_parameters) {
    return rh_fail(err, RH_CUDA_INVALID_ARGUMENT,
                   "%s.n_columns is %" PRId64
                   ": row statistics need the full design, "
                   "n_parameters (%" PRId64 ") columns",
                   batch_name, batch->n_columns, n_parameters);
  }
  int append_intercept = 0;
  RH_TRY(check_columns(batch_name, batch->n_rows, batch->n_columns, n_parameters, n_parameters,
                       elem_size, &append_intercept, err));
  return check_batch_weight(batch, batch_name, 1, err);
}
