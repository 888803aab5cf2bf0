/* rh_refuse_value, the one writer of refused data values for both engines (rh_common.h): every
 * kind, both index shapes, the status, and a value that breaks no rule; and
 * rh_refuse_weight_sum, the one wording of a batch weight its weights disagree with. The expected
 * texts are the grammar of docs/abi.md ("Refused data values") written out by hand. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rh_common.h"

static int failures = 0;

/* rh_refuse_value(owner, field, index_or_row, column, value, rule) must return want_status
 * with exactly want_text. */
static void expect(const char* owner, const char* field, int64_t index_or_row, int64_t column,
                   double value, RhValueRule rule, RhCudaStatus want_status, const char* want_text,
                   int line) {
  RhErrorBuffer err;
  rh_error_clear(&err);
  RhCudaStatus status = rh_refuse_value(&err, owner, field, index_or_row, column, value, rule);
  if (status != want_status || strcmp(err.text, want_text) != 0) {
    fprintf(stderr, "line %d: got status %d and \"%s\", expected %d and \"%s\"\n", line,
            (int)status, err.text, (int)want_status, want_text);
    ++failures;
  }
}

#define INVALID RH_CUDA_INVALID_ARGUMENT
#define INTERNAL RH_CUDA_INTERNAL_ERROR

int main(void) {
  expect("RhCudaHostBatch", "x_design", 3, 1, NAN, RH_VALUE_FINITE, INVALID,
         "RhCudaHostBatch.x_design[3, 1] is nan: values must be finite", __LINE__);
  expect("RhCudaDeviceBatch", "y", 5, -1, (double)-NAN, RH_VALUE_FINITE, INVALID,
         "RhCudaDeviceBatch.y[5] is nan: values must be finite", __LINE__);
  expect("RhCudaHostBatch", "y", 0, -1, (double)INFINITY, RH_VALUE_FINITE, INVALID,
         "RhCudaHostBatch.y[0] is inf: values must be finite", __LINE__);
  expect("RhCudaPrediction", "x_design", INT64_MAX, INT64_MAX, (double)-INFINITY, RH_VALUE_FINITE,
         INVALID,
         "RhCudaPrediction.x_design[9223372036854775807, 9223372036854775807] is -inf: values "
         "must be finite",
         __LINE__);
  /* a non-finite weight is reported as such under the non-negativity rule too */
  expect("RhCudaHostBatch", "sample_weight", 7, -1, NAN, RH_VALUE_NONNEGATIVE, INVALID,
         "RhCudaHostBatch.sample_weight[7] is nan: values must be finite", __LINE__);
  expect("RhCudaHostBatch", "sample_weight", 7, -1, -0.1, RH_VALUE_NONNEGATIVE, INVALID,
         "RhCudaHostBatch.sample_weight[7] is negative: values must be >= 0 (this one is "
         "-0.10000000000000001)",
         __LINE__);
  expect("RhCudaHostStateView", "meat", 2, 2, -1.5, RH_VALUE_NONNEGATIVE_DIAGONAL, INVALID,
         "RhCudaHostStateView.meat[2, 2] is negative: diagonal entries must be >= 0 (this one "
         "is -1.5)",
         __LINE__);
  /* values that break no rule are the caller's bug, reported as such */
  expect("RhCudaHostBatch", "y", 1, -1, 2.5, RH_VALUE_FINITE, INTERNAL,
         "RhCudaHostBatch.y[1] holds 2.5, which breaks no rule it was refused for (engine bug)",
         __LINE__);
  expect("RhCudaHostBatch", "sample_weight", 1, -1, -0.0, RH_VALUE_NONNEGATIVE, INTERNAL,
         "RhCudaHostBatch.sample_weight[1] holds -0, which breaks no rule it was refused for "
         "(engine bug)",
         __LINE__);
  /* a NULL buffer is allowed (status only) */
  if (rh_refuse_value(NULL, "RhCudaHostBatch", "y", 0, -1, NAN, RH_VALUE_FINITE) != INVALID) {
    fprintf(stderr, "NULL buffer: wrong status\n");
    ++failures;
  }
  /* rh_refuse_weight_sum: the one wording of a batch_weight that disagrees with its weights */
  {
    RhErrorBuffer err;
    rh_error_clear(&err);
    const char* want =
        "RhCudaDeviceBatch.batch_weight is 3 but sample_weight sums to 4.5 (within a relative "
        "difference of 1e-06, the sum and the cumulative weight 10 plus it must be finite)";
    if (rh_refuse_weight_sum(&err, "RhCudaDeviceBatch", 3.0, 4.5, 10.0) != INVALID ||
        strcmp(err.text, want) != 0) {
      fprintf(stderr, "rh_refuse_weight_sum: got \"%s\", expected \"%s\"\n", err.text, want);
      ++failures;
    }
  }
  if (failures == 0) {
    printf("PASS rh_refuse_value\n");
  }
  return failures == 0 ? 0 : 1;
}
