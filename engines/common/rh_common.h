/*
 * rh_common.h -- small C shared by both engines (librh_cpu and librh_cuda): status names,
 * last-error buffers, struct header checks, overflow-checked sizes, and the validation of
 * options, configs, batches, predictions and restored states that the ABI requires.
 *
 * Internal: never installed, never exported (the engines link it as a static, hidden-visibility
 * library). Compiles as C11 and as C++17 (the CUDA engine includes it from .cu/.cpp files).
 * Every validator writes a message naming the offending field and its value into `err` and
 * returns an RhCudaStatus; none of them touches engine state.
 */
#ifndef RH_COMMON_H
#define RH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "rh_cuda.h"
#include "rh_cuda_row_statistics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ status and errors */

#define RH_ERROR_CAPACITY 512

typedef struct RhErrorBuffer {
  char text[RH_ERROR_CAPACITY];
} RhErrorBuffer;

/* "SUCCESS", "INVALID_ARGUMENT", ... ; "UNKNOWN_STATUS" otherwise. */
const char* rh_status_name(RhCudaStatus status);

/* printf-style; truncates safely. Returns `status` so callers can `return rh_fail(...)`. */
RhCudaStatus rh_fail(RhErrorBuffer* err, RhCudaStatus status, const char* fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

void rh_error_clear(RhErrorBuffer* err);

/* Returns from the calling function with the status of `expr` when it is not SUCCESS. */
#define RH_TRY(expr)                         \
  do {                                       \
    RhCudaStatus rh_try_status_ = (expr);    \
    if (rh_try_status_ != RH_CUDA_SUCCESS) { \
      return rh_try_status_;                 \
    }                                        \
  } while (0)

/* The calling thread's buffer behind rh_cuda_last_error(). */
RhErrorBuffer* rh_thread_error(void);

/* ------------------------------------------------------------------- refused data values */

/* The rule a refused array value breaks; it picks the prose after the message's prefix. */
typedef enum RhValueRule {
  RH_VALUE_FINITE = 0,              /* "values must be finite" */
  RH_VALUE_NONNEGATIVE = 1,         /* "values must be >= 0 (this one is <v>)" */
  RH_VALUE_NONNEGATIVE_DIAGONAL = 2 /* "diagonal entries must be >= 0 (this one is <v>)" */
} RhValueRule;

/* The one writer of every refusal of an array's value, in both engines (the ABI guide's
 * "Refused data values" states the grammar as part of the contract):
 *
 *   <owner>.<field>[<index>] is <kind>: <prose>             (a vector; column < 0)
 *   <owner>.<field>[<row>, <column>] is <kind>: <prose>     (a row-major matrix)
 *
 * <kind> follows from `value`: "nan", "inf" or "-inf" when it is not finite, otherwise
 * "negative" (value < 0, for the two NONNEGATIVE rules). The indices are printed in decimal.
 * Returns RH_CUDA_INVALID_ARGUMENT; a value that breaks no rule (a caller's bug) gives
 * RH_CUDA_INTERNAL_ERROR with a message saying so. */
RhCudaStatus rh_refuse_value(RhErrorBuffer* err, const char* owner, const char* field,
                             int64_t index_or_row, int64_t column, double value, RhValueRule rule);

/* A batch_weight that disagrees with the sum of sample_weight (rh_weight_sum_matches false),
 * in both engines' words:
 *   <batch>.batch_weight is <declared> but sample_weight sums to <sum> (within a relative
 *   difference of 1e-06, the sum and the cumulative weight <previous> plus it must be finite)
 * Returns RH_CUDA_INVALID_ARGUMENT. */
RhCudaStatus rh_refuse_weight_sum(RhErrorBuffer* err, const char* batch, double declared,
                                  double sum, double previous_weight);

/* ------------------------------------------------------------------------- struct headers */

/* Checks ptr != NULL, abi_version == RH_CUDA_ABI_VERSION and struct_size >= known_size.
 * The struct must begin with the two uint32_t header fields. `name` is the struct's type name,
 * used in the message (e.g. "RhCudaUpdateConfig"). */
RhCudaStatus rh_check_header(const void* ptr, const char* name, uint32_t known_size,
                             RhErrorBuffer* err);

/* ------------------------------------------------------------------ overflow-checked sizes */

/* *out = a * b; returns 0 on success, 1 when either is negative or the product overflows
 * int64_t. */
int rh_mul_i64(int64_t a, int64_t b, int64_t* out);

/* *out = count * elem_size in bytes; returns 0 on success, 1 on overflow of size_t/int64_t or a
 * negative count. */
int rh_bytes(int64_t count, size_t elem_size, size_t* out);

/* Element size of an RH_CUDA_DTYPE_* code; 0 for an unknown code. */
size_t rh_dtype_size(int32_t dtype);
/* The machine epsilon of an ABI dtype's working precision (FLT_EPSILON for float32, else
 * DBL_EPSILON): the eps of every rounding rule in rh_algorithm.h. */
double rh_dtype_epsilon(int32_t dtype);

/* ----------------------------------------------------------------------------- validation */

/* Engine options: header, dtype known, n_parameters >= 1 with n_parameters * n_parameters
 * overflow-free, flags only known bits, FAST_MATH only with float32. The device_id rule is the
 * engine's own (CPU: -1; CUDA: 0 <= id < count) and is not checked here. */
RhCudaStatus rh_validate_options(const RhCudaEngineOptions* options, RhErrorBuffer* err);

/* Update config against an engine of n_parameters: header; n_features_in > 0 with
 * n_parameters - n_features_in in {0, 1}; 1 <= max_iter <= INT32_MAX; tau, bandwidth_scale,
 * tolerance finite > 0; ridge finite >= 0; penalty known; reserved0 == 0; lambda_scale finite
 * >= 0. On success *fit_intercept is set to 1 when n_parameters == n_features_in + 1. */
RhCudaStatus rh_validate_config(const RhCudaUpdateConfig* config, int64_t n_parameters,
                                int* fit_intercept, RhErrorBuffer* err);

/* Shape and scalar checks shared by host and device batches (both structs have the same
 * layout): header (checked against `name`), x_design and y non-NULL, n_rows >= 1, n_columns is
 * n_parameters or n_features_in (the engine then appends the intercept), n_rows * n_columns
 * and byte counts overflow-free, batch_weight finite > 0, counters after the update do not
 * overflow (n_samples_seen + n_rows, batch_count + 1), the cumulative weight
 * weight_sum + batch_weight is finite > 0 and the bandwidth at it is a positive normal number
 * (rh_bandwidth_is_usable), and x_design, y and sample_weight aligned to elem_size
 * (rh_check_aligned). On success *append_intercept is 1 when the engine
 * must append the all-ones column. Data values (NaN/Inf, negative weights) are the engine's
 * to check, on its own memory. */
RhCudaStatus rh_validate_batch(const RhCudaHostBatch* batch, const char* name,
                               const RhCudaUpdateConfig* config, int64_t n_parameters,
                               int64_t n_samples_seen, int64_t batch_count, double weight_sum,
                               size_t elem_size, int* append_intercept, RhErrorBuffer* err);

/* A pointer an engine reads or writes elem_size-byte elements through must be aligned to them:
 * "<name>.<field> (<ptr>) is not aligned to its <elem_size>-byte elements" otherwise (NULL
 * passes; the callers check NULL first). A misaligned pointer is undefined behaviour in C and
 * C++, vector loads may fault on it, and a CUDA kernel's misaligned access poisons the whole
 * context. */
RhCudaStatus rh_check_aligned(const void* ptr, const char* name, const char* field,
                              size_t elem_size, RhErrorBuffer* err);

/* Prediction request: header, x_design and prediction non-NULL and aligned to elem_size,
 * n_rows >= 1, n_features_in
 * consistent with n_parameters (gap 0 or 1), n_columns is n_parameters or n_features_in,
 * input_location HOST or DEVICE, reserved0 == 0, sizes overflow-free. On success
 * *append_intercept is 1 when n_columns == n_features_in != n_parameters. */
RhCudaStatus rh_validate_prediction(const RhCudaPrediction* prediction, int64_t n_parameters,
                                    size_t elem_size, int* append_intercept, RhErrorBuffer* err);

/* Both state structs as ABI 2 callers built before the meat matrix K lay them out: they end where
 * `meat` begins (56 bytes). Such a struct is valid and carries no K. */
#define RH_STATE_SIZE_WITHOUT_MEAT ((uint32_t)offsetof(RhCudaHostState, meat))

/* 1 when the (validated) state struct has the K fields, 0 for an older caller's struct. */
int rh_state_view_has_meat(const RhCudaHostStateView* state);
int rh_state_out_has_meat(const RhCudaHostState* state);

/* Restored state scalars: header (struct_size RH_STATE_SIZE_WITHOUT_MEAT or at least the full
 * size), coefficients and information non-NULL, n_samples_seen >= 0,
 * batch_count >= 0, batch_count == 0 exactly when n_samples_seen == 0, batch_count <=
 * n_samples_seen, previous_lambda finite >= 0, weight_sum finite >= 0 and > 0 exactly when
 * batch_count > 0, coefficients and information aligned to elem_size. Array finiteness is the
 * engine's to check. */
RhCudaStatus rh_validate_state_view(const RhCudaHostStateView* state, size_t elem_size,
                                    RhErrorBuffer* err);

/* The restored meat matrix K: *with_meat = 1 when the view has the K fields and a non-NULL
 * meat, which must then be P x P finite doubles (aligned) with a non-negative diagonal. */
RhCudaStatus rh_validate_state_meat(const RhCudaHostStateView* state, int64_t n_parameters,
                                    int* with_meat, RhErrorBuffer* err);

/* Export target: header (as for the view), coefficients and information non-NULL and aligned to
 * elem_size, meat (when the struct has it and it is not NULL) to doubles. */
RhCudaStatus rh_validate_state_out(const RhCudaHostState* state, size_t elem_size,
                                   RhErrorBuffer* err);

/* The row-statistics extension (rh_cuda_row_statistics.h): the request's header, statistic
 * bits (non-zero, known), output pointers non-NULL exactly for the requested bits, coefficients
 * non-NULL unless NORM alone, tau finite > 0, bandwidth a finite positive normal number; the
 * batch's header, x_design and y non-NULL, n_rows >= 1, n_columns == n_parameters, sizes
 * overflow-free, batch_weight finite >= 0 and n_rows without sample_weight; every array
 * aligned (the batch's and the coefficients to elem_size, the outputs to doubles). Data values are
 * the engine's to check. batch_name: "RhCudaHostBatch" or "RhCudaDeviceBatch" (same layout; version
 * 2's device rows), the owner the messages name. */
RhCudaStatus rh_validate_row_statistics(const RhCudaHostBatch* batch, const char* batch_name,
                                        const RhCudaRowStatistics* statistics, int64_t n_parameters,
                                        size_t elem_size, RhErrorBuffer* err);

/* --------------------------------------------------- array values (rh_array_values.c) */

/* Returns the index of the first non-finite value in data[0..count), or -1 when all are
 * finite. */
int64_t rh_first_nonfinite_f32(const float* data, int64_t count);
int64_t rh_first_nonfinite_f64(const double* data, int64_t count);
/* The same for an array of an ABI dtype (RH_CUDA_DTYPE_FLOAT32, else float64). */
int64_t rh_first_nonfinite(int32_t dtype, const void* data, int64_t count);
/* 1 when every one of data[0..bytes) is zero (an array of +0.0 values, as an empty state
 * holds), else 0; bytes == 0 gives 1. */
int rh_all_bytes_zero(const void* data, size_t bytes);
/* 1 when every value of data[0..count) (an array of an ABI dtype) equals zero, -0.0 included
 * (an information matrix that makes the next batch a stream's first: rh_ladder_epsilon), else
 * 0; count == 0 gives 1. */
int rh_all_values_zero(int32_t dtype, const void* data, int64_t count);
/* dst[0..count) = src's values as doubles (exact). */
void rh_widen(int32_t dtype, const void* src, int64_t count, double* dst);
/* data[index] of an array of an ABI dtype, as a double (exact: float widens exactly). Inline:
 * it also serves per-element loops. */
static inline double rh_value_at(int32_t dtype, const void* data, int64_t index) {
  return dtype == RH_CUDA_DTYPE_FLOAT32 ? (double)((const float*)data)[index]
                                        : ((const double*)data)[index];
}

#ifdef __cplusplus
}
#endif

#endif /* RH_COMMON_H */
