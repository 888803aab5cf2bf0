/*
 * The optional row-statistics extension (abi/rh_cuda_row_statistics.h), version 2: sums over
 * one batch's rows at given coefficients, computed by the same row pass and Gram code an
 * update runs (row_pass.c, gram.c), in the engine's workspace. Version 2's device-row entry
 * point is refused here as the CPU engine's other device entry points are. The committed state is
 * never touched: only the workspace (scratch) and the engine's last error are written.
 *
 * Order: every argument and every data value is checked, and the workspace reserved, before
 * any output is written, so a failed call leaves the caller's outputs untouched.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "allocation.h"
#include "cpu_engine.h"

/* sum_i w_i ||x_i||^2 in double, rows in order (the design holds the intercept column). */
static double weighted_squared_norm(const RhBatchData* d) {
  double total = 0.0;
  for (int64_t i = 0; i < d->n_rows; ++i) {
    double row = 0.0;
    for (int64_t j = 0; j < d->n_columns; ++j) {
      const double x = rh_value_at(d->dtype, d->x, i * d->n_columns + j);
      row += x * x;
    }
    total += (d->weights == NULL ? 1.0 : rh_value_at(d->dtype, d->weights, i)) * row;
  }
  return total;
}

static RhCudaStatus check_coefficients(const RhCudaEngine* engine, const void* coefficients,
                                       RhErrorBuffer* err) {
  const int64_t P = engine->n_parameters;
  const int64_t bad = rh_first_nonfinite(engine->dtype, coefficients, P);
  if (bad >= 0) {
    return rh_refuse_value(err, "RhCudaRowStatistics", "coefficients", bad, -1,
                           rh_value_at(engine->dtype, coefficients, bad), RH_VALUE_FINITE);
  }
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API uint32_t rh_cuda_row_statistics_version(void) {
  return RH_CUDA_ROW_STATISTICS_VERSION;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_row_statistics(RhCudaEngine* engine,
                                                       const RhCudaHostBatch* batch,
                                                       RhCudaRowStatistics* statistics) {
  if (engine == NULL) {
    return rh_fail(rh_thread_error(), RH_CUDA_INVALID_ARGUMENT, "engine is NULL");
  }
  rh_allocation_call_begin();
  rh_error_clear(&engine->error);
  RhErrorBuffer* err = &engine->error;
  const int64_t P = engine->n_parameters;
  RH_TRY(
      rh_validate_row_statistics(batch, "RhCudaHostBatch", statistics, P, engine->elem_size, err));
  const uint64_t bits = statistics->statistics;
  const int rows_needed = (bits & ~RH_CUDA_STATISTIC_NORM) != 0;
  if (rows_needed) {
    RH_TRY(check_coefficients(engine, statistics->coefficients, err));
  }
  RhBatchData data = {engine->dtype, batch->x_design,  batch->y, batch->sample_weight,
                      batch->n_rows, batch->n_columns, P,        0};
  /* y finite, weights finite, >= 0 and summing to batch_weight (a zero sum included), then
   * every x value: these sums have no solver whose first objective would catch a bad x. */
  double weight_sum = 0.0;
  RH_TRY(rh_check_batch_values(&data, batch->batch_weight, 0.0, &weight_sum, err));
  RH_TRY(rh_check_design_values(&data, err));
  RhWorkspace* ws = &engine->workspace;
  RH_TRY(rh_workspace_reserve(ws, batch->n_rows, P, engine->elem_size, err));

  /* Nothing below can fail. */
  RhProblem problem;
  memset(&problem, 0, sizeof problem);
  problem.data = data;
  problem.ws = ws;
  problem.P = P;
  problem.tau = statistics->tau;
  problem.bandwidth = statistics->bandwidth;
  problem.total_weight = weight_sum;
  double loss = 0.0;
  if (rows_needed) {
    for (int64_t j = 0; j < P; ++j) {
      ws->beta[j] = rh_value_at(engine->dtype, statistics->coefficients, j);
    }
    /* One sweep: loss, X'(w psi) and c(r) per row. */
    rh_row_pass(&problem, ws->beta, &loss, ws->gradient, ws->curvature);
    if ((bits & RH_CUDA_STATISTIC_MEAT) != 0) {
      /* The meat shares its sweep with the curvature Gram (kept in ws->gram either way). */
      rh_gram_and_meat(&problem, 0, ws->gram, ws->batch_meat);
    } else if ((bits & RH_CUDA_STATISTIC_CURVATURE) != 0) {
      rh_gram_at_curvature(&problem, 0, ws->gram);
    }
    if ((bits & RH_CUDA_STATISTIC_MAJORISER) != 0) {
      rh_majoriser_row_weights(&problem, ws->beta, ws->curvature, ws->curvature_next);
      rh_gram_at_row_weights(&problem, ws->curvature_next, ws->hessian);
    }
  }
  const size_t square = (size_t)(P * P) * sizeof(double);
  if ((bits & RH_CUDA_STATISTIC_LOSS) != 0) {
    statistics->loss = loss;
  }
  if ((bits & RH_CUDA_STATISTIC_SCORE) != 0) {
    memcpy(statistics->score, ws->gradient, (size_t)P * sizeof(double));
  }
  if ((bits & RH_CUDA_STATISTIC_CURVATURE) != 0) {
    memcpy(statistics->curvature_gram, ws->gram, square);
  }
  if ((bits & RH_CUDA_STATISTIC_MAJORISER) != 0) {
    memcpy(statistics->majoriser_gram, ws->hessian, square);
  }
  if ((bits & RH_CUDA_STATISTIC_MEAT) != 0) {
    memcpy(statistics->meat, ws->batch_meat, square);
  }
  if ((bits & RH_CUDA_STATISTIC_NORM) != 0) {
    statistics->weighted_norm = weighted_squared_norm(&data);
  }
  return RH_CUDA_SUCCESS;
}

RH_CUDA_API RhCudaStatus rh_cuda_engine_row_statistics_device(RhCudaEngine* engine,
                                                              const RhCudaDeviceBatch* batch,
                                                              RhCudaRowStatistics* statistics) {
  if (engine == NULL) {
    return rh_fail(rh_thread_error(), RH_CUDA_INVALID_ARGUMENT, "engine is NULL");
  }
  rh_allocation_call_begin();
  rh_error_clear(&engine->error);
  (void)batch;
  (void)statistics;
  return rh_fail(&engine->error, RH_CUDA_UNAVAILABLE,
                 "rh_cuda_engine_row_statistics_device: the CPU engine (librh_cpu) cannot read "
                 "device memory; pass host arrays to rh_cuda_engine_row_statistics or use "
                 "librh_cuda");
}
