/* One renewable batch transition: validate everything, solve in the workspace, commit only
 * when every new value is finite. Nothing in the engine's committed state is written before
 * rh_engine_commit. */
#include <inttypes.h>
#include <math.h>

#include "rh_algorithm.h"
#include "solver_common.h"

static void set_up_problem(RhCudaEngine* engine, const RhCudaUpdateConfig* config,
                           const RhBatchData* data, double batch_weight, int fit_intercept,
                           RhProblem* problem) {
  RhWorkspace* ws = &engine->workspace;
  const int64_t P = engine->n_parameters;
  const double total = engine->weight_sum + batch_weight;
  problem->data = *data;
  problem->ws = ws;
  problem->P = P;
  problem->penalty = config->penalty;
  problem->max_iter = config->max_iter;
  problem->tau = config->tau;
  problem->bandwidth =
      rh_bandwidth(config->bandwidth_scale, total, config->n_features_in, config->tau);
  problem->lambda = rh_lambda(config->penalty == RH_CUDA_PENALTY_L1, config->lambda_scale,
                              config->tau, total, config->n_features_in);
  problem->ridge = config->ridge;
  problem->tolerance = config->tolerance;
  problem->total_weight = total;
  problem->machine_eps = rh_dtype_epsilon(engine->dtype);
  problem->used_fallback = 0;

  rh_widen(engine->dtype, engine->coefficients, P, ws->beta0);
  rh_widen(engine->dtype, engine->information, P * P, ws->information);
  problem->ladder_eps = rh_ladder_epsilon(
      engine->batch_count == 0 && rh_all_values_zero(engine->dtype, engine->information, P * P),
      problem->machine_eps);
  /* The historical L1 subgradient (W0/N) lambda0 sign(beta0) m enters only for L1 after a
   * first batch. RH_TEST_SKIP_HISTORY builds the conformance kit's deliberately broken
   * engine, which must be caught by the golden corpora. */
#ifdef RH_TEST_SKIP_HISTORY
  const int with_history = 0;
#else
  const int with_history = config->penalty == RH_CUDA_PENALTY_L1 && engine->n_samples_seen > 0;
#endif
  const double history_scale = rh_history_scale(engine->weight_sum, total, engine->previous_lambda);
  for (int64_t j = 0; j < P; ++j) {
    ws->mask[j] = fit_intercept && j == P - 1 ? 0.0 : 1.0;
    ws->history[j] = with_history ? history_scale * rh_sign(ws->beta0[j]) * ws->mask[j] : 0.0;
  }
}

/* Stages beta and J + G in the engine dtype; NUMERICAL_ERROR when anything is not finite
 * after rounding (float32 can overflow where double did not). */
static RhCudaStatus stage_state(RhCudaEngine* engine, const RhProblem* problem,
                                RhErrorBuffer* err) {
  RhWorkspace* ws = &engine->workspace;
  const int64_t P = problem->P;
  const int is_f32 = engine->dtype == RH_CUDA_DTYPE_FLOAT32;
  for (int64_t j = 0; j < P; ++j) {
    double v = ws->beta[j];
    if (is_f32) {
      ((float*)ws->staged_coefficients)[j] = (float)v;
      v = (double)(float)v;
    } else {
      ((double*)ws->staged_coefficients)[j] = v;
    }
    if (!isfinite(v)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR, "new coefficients[%" PRId64 "] is %g", j, v);
    }
  }
  for (int64_t k = 0; k < P * P; ++k) {
    double v = ws->information[k] + ws->gram[k];
    if (is_f32) {
      ((float*)ws->staged_information)[k] = (float)v;
      v = (double)(float)v;
    } else {
      ((double*)ws->staged_information)[k] = v;
    }
    if (!isfinite(v)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR,
                     "new information[%" PRId64 ", %" PRId64 "] is %g", k / P, k % P, v);
    }
  }
  return RH_CUDA_SUCCESS;
}

/* Stages K + the batch's meat Gram; NUMERICAL_ERROR when a value is not finite. */
static RhCudaStatus stage_meat(RhCudaEngine* engine, RhErrorBuffer* err) {
  RhWorkspace* ws = &engine->workspace;
  const int64_t P = engine->n_parameters;
  for (int64_t k = 0; k < P * P; ++k) {
    double v = engine->meat[k] + ws->batch_meat[k];
    ws->staged_meat[k] = v;
    if (!isfinite(v)) {
      return rh_fail(err, RH_CUDA_NUMERICAL_ERROR, "new meat[%" PRId64 ", %" PRId64 "] is %g",
                     k / P, k % P, v);
    }
  }
  return RH_CUDA_SUCCESS;
}

RhCudaStatus rh_engine_update(RhCudaEngine* engine, const RhCudaHostBatch* batch,
                              const RhCudaUpdateConfig* config, RhCudaDiagnostics* diagnostics,
                              RhCudaHostState* state_out) {
  RhErrorBuffer* err = &engine->error;
  const int64_t P = engine->n_parameters;
  int fit_intercept = 0, append_intercept = 0;
  RH_TRY(rh_validate_config(config, P, &fit_intercept, err));
  RH_TRY(rh_validate_batch(batch, "RhCudaHostBatch", config, P, engine->n_samples_seen,
                           engine->batch_count, engine->weight_sum, engine->elem_size,
                           &append_intercept, err));
  RH_TRY(
      rh_check_header(diagnostics, "RhCudaDiagnostics", (uint32_t)sizeof(RhCudaDiagnostics), err));
  if (state_out != NULL) {
    RH_TRY(rh_validate_state_out(state_out, engine->elem_size, err));
  }
  RhBatchData data = {engine->dtype, batch->x_design,  batch->y, batch->sample_weight,
                      batch->n_rows, batch->n_columns, P,        append_intercept};
  double batch_weight = 0.0;
  RH_TRY(rh_check_batch_values(&data, batch->batch_weight, engine->weight_sum, &batch_weight, err));
  RH_TRY(rh_workspace_reserve(&engine->workspace, batch->n_rows, P, engine->elem_size, err));

  RhProblem problem;
  set_up_problem(engine, config, &data, batch_weight, fit_intercept, &problem);
  RhSolveResult result = {0, 0, 0.0};
  if (config->penalty == RH_CUDA_PENALTY_L1) {
    RH_TRY(rh_solve_lamm(&problem, &result, err));
  } else {
    RH_TRY(rh_solve_newton(&problem, &result, err));
  }
  /* K only follows unpenalised streams: after L1 selection the intervals are not valid. */
  const int with_meat = engine->meat_available && config->penalty == RH_CUDA_PENALTY_NONE;
  if (with_meat) {
    rh_gram_and_meat(&problem, engine->workspace.gram_weighted_ready, engine->workspace.gram,
                     engine->workspace.batch_meat);
  } else {
    rh_gram_at_curvature(&problem, engine->workspace.gram_weighted_ready, engine->workspace.gram);
  }
  RH_TRY(stage_state(engine, &problem, err));
  if (with_meat) {
    RH_TRY(stage_meat(engine, err));
  }

  double objective = result.objective;
  if (config->penalty == RH_CUDA_PENALTY_L1) {
    double l1 = 0.0;
    for (int64_t j = 0; j < P; ++j) {
      l1 += fabs(engine->workspace.beta[j]) * engine->workspace.mask[j];
    }
    objective += problem.lambda * l1;
  }
  if (!isfinite(objective)) {
    return rh_fail(err, RH_CUDA_NUMERICAL_ERROR, "objective is %g", objective);
  }

  rh_engine_commit(engine, batch->n_rows, problem.lambda, problem.total_weight, with_meat);
  diagnostics->iterations = result.iterations;
  diagnostics->converged = result.converged;
  diagnostics->used_regularized_fallback = problem.used_fallback;
  diagnostics->objective = objective;
  diagnostics->lambda_value = problem.lambda;
  diagnostics->bandwidth = problem.bandwidth;
  if (state_out != NULL) {
    return rh_engine_export_state(engine, state_out);
  }
  return RH_CUDA_SUCCESS;
}
