#include <inttypes.h>
#include <math.h>

#include "cpu_engine.h"
#include "rh_algorithm.h"

/* Sums in double in a fixed order; negative weights are reported at their first index. */
static RhCudaStatus sum_weights(const RhBatchData* data, double* sum, RhErrorBuffer* err) {
  double total = 0.0;
  for (int64_t i = 0; i < data->n_rows; ++i) {
    double w = rh_value_at(data->dtype, data->weights, i);
    if (w < 0.0) {
      return rh_refuse_value(err, "RhCudaHostBatch", "sample_weight", i, -1, w,
                             RH_VALUE_NONNEGATIVE);
    }
    total += w;
  }
  *sum = total;
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_check_design_values(const RhBatchData* data, RhErrorBuffer* err) {
  int64_t count = data->n_rows * data->n_columns; /* overflow-checked by rh_validate_batch */
  int64_t bad = rh_first_nonfinite(data->dtype, data->x, count);
  if (bad >= 0) {
    return rh_refuse_value(err, "RhCudaHostBatch", "x_design", bad / data->n_columns,
                           bad % data->n_columns, rh_value_at(data->dtype, data->x, bad),
                           RH_VALUE_FINITE);
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_check_batch_values(const RhBatchData* data, double declared_weight,
                                   double previous_weight, double* batch_weight,
                                   RhErrorBuffer* err) {
  int64_t bad = rh_first_nonfinite(data->dtype, data->y, data->n_rows);
  if (bad >= 0) {
    return rh_refuse_value(err, "RhCudaHostBatch", "y", bad, -1,
                           rh_value_at(data->dtype, data->y, bad), RH_VALUE_FINITE);
  }
  if (data->weights == NULL) {
    /* rh_validate_batch refused a batch_weight other than n_rows. */
    *batch_weight = (double)data->n_rows;
    return RH_CUDA_SUCCESS;
  }
  bad = rh_first_nonfinite(data->dtype, data->weights, data->n_rows);
  if (bad >= 0) {
    return rh_refuse_value(err, "RhCudaHostBatch", "sample_weight", bad, -1,
                           rh_value_at(data->dtype, data->weights, bad), RH_VALUE_FINITE);
  }
  double sum = 0.0;
  RH_TRY(sum_weights(data, &sum, err));
  if (!rh_weight_sum_matches(sum, declared_weight, previous_weight)) {
    return rh_refuse_weight_sum(err, "RhCudaHostBatch", declared_weight, sum, previous_weight);
  }
  *batch_weight = sum;
  return RH_CUDA_SUCCESS;
}
