// One renewable batch transition: validate, stage, solve, then build the next state in the
// scratch buffers and swap it in after the single final synchronisation confirmed success.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_select.cuh>

#include "api_guard.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "kernels.hpp"
#include "meat.hpp"
#include "memory_access.hpp"
#include "solvers.hpp"
#include "update_context.hpp"

namespace rh {

namespace {

// Whether place_batch queues a validation pass: always for host input, and for device input
// unless its checks are deferred (BatchConstants::checks_deferred) and it has no weights.
bool validation_queued(const RhCudaHostBatch& b, BatchLocation location, bool deferred_checks) {
  return location == BatchLocation::Host || !deferred_checks || b.sample_weight != nullptr;
}

}  // namespace

// The batch's rows where the kernels read them, and the validation pass queued over them:
// device input in place, one pass; host input staged into the engine's row buffers, each chunk
// of whole validation tiles checked on the GPU while the host copies the next.
template <class T>
RowView<T> place_batch(Engine& e, const RhCudaHostBatch& b, BatchLocation location,
                       bool deferred_checks) {
  const int64_t cells = b.n_rows * b.n_columns;  // overflow-checked by rh_validate_batch
  RowView<T> rows{static_cast<const T*>(b.x_design),
                  static_cast<const T*>(b.y),
                  static_cast<const T*>(b.sample_weight),
                  b.n_rows,
                  b.n_columns,
                  b.n_columns,
                  e.P};
  double* weight_partials = e.ws.row_partials.as<double>();
  unsigned long long* bad_partials = e.ws.bad_partials.as<unsigned long long>();
  if (location == BatchLocation::Device) {
    if (validation_queued(b, location, deferred_checks)) {
      launch_validate_rows<T>(rows, 0, validation_tiles(rows.n, rows.ncols_x), weight_partials,
                              bad_partials, !deferred_checks, e.stream);
    }
    return rows;
  }
  reserve_elems(e.ws.x_stage, cells, sizeof(T), "staged design");
  reserve_elems(e.ws.y_stage, b.n_rows, sizeof(T), "staged targets");
  if (b.sample_weight != nullptr)
    reserve_elems(e.ws.w_stage, b.n_rows, sizeof(T), "staged weights");
  RowView<T> staged = rows;
  staged.x = e.ws.x_stage.as<T>();
  staged.y = e.ws.y_stage.as<T>();
  staged.w = b.sample_weight != nullptr ? e.ws.w_stage.as<T>() : nullptr;
  const int64_t tile_rows = validation_tile_rows(rows.n, rows.ncols_x);
  const HostRows from{b.x_design,      b.y,
                      b.sample_weight, static_cast<size_t>(b.n_columns) * sizeof(T),
                      sizeof(T),       b.n_rows};
  const DeviceRows to{e.ws.x_stage.data(), e.ws.y_stage.data(),
                      b.sample_weight != nullptr ? e.ws.w_stage.data() : nullptr};
  stage_rows_to_device(e, from, to, tile_rows, [&](int64_t first, int64_t end) {
    // Chunks hold whole tiles; only the batch's last tile may be short.
    launch_validate_rows<T>(staged, static_cast<int>(first / tile_rows),
                            static_cast<int>((end + tile_rows - 1) / tile_rows), weight_partials,
                            bad_partials, true, e.stream);
  });
  return staged;
}

template RowView<float> place_batch<float>(Engine&, const RhCudaHostBatch&, BatchLocation, bool);
template RowView<double> place_batch<double>(Engine&, const RhCudaHostBatch&, BatchLocation, bool);

namespace {

BatchConstants batch_constants(const Engine& e, const RhCudaHostBatch& b,
                               const RhCudaUpdateConfig& c, int fit_intercept,
                               bool checks_deferred) {
  BatchConstants k{};
  k.tau = c.tau;
  k.bandwidth_scale = c.bandwidth_scale;
  k.tolerance = c.tolerance;
  k.ridge = c.ridge;
  k.lambda_scale = c.lambda_scale;
  k.previous_weight = e.committed.weight_sum;
  k.previous_lambda = e.committed.previous_lambda;
  k.claimed_batch_weight = b.batch_weight;
  k.n_rows = b.n_rows;
  k.n_features_in = c.n_features_in;
  k.P = e.P;
  k.has_weights = b.sample_weight != nullptr;
  k.l1 = c.penalty == RH_CUDA_PENALTY_L1;
  k.use_history = k.l1 && e.committed.n_samples_seen > 0;
  k.fit_intercept = fit_intercept;
  k.float_lamm = k.l1 && e.dtype == RH_CUDA_DTYPE_FLOAT32;
  k.max_iter = static_cast<int>(c.max_iter);
  k.dtype_epsilon = e.dtype_epsilon();
  k.ladder_epsilon = rh_ladder_epsilon(
      e.committed.batch_count == 0 && e.committed.information_zero ? 1 : 0, k.dtype_epsilon);
  k.checks_deferred = checks_deferred;
  return k;
}

struct ChunkSizes {
  int64_t first;
  int64_t later;
  // LAMM queues the finish's Gram only once a synchronisation has shown that the solve ended
  // (UpdateContext::gram_after_end).
  bool gram_after_end;
};

// Iterations to queue before the first synchronisation of an update: as many as the engine's
// previous update needed (the batches of one stream tend to need alike), capped where a wasted
// iteration is dear: above Engine::small_dense_max, Newton's cuBLAS Gram cannot skip a wasted
// iteration, nor cuSOLVER's potrf, so there the first chunk is at most 2, and 1 once the Gram
// alone (2 n P^2 flops) outweighs a synchronisation many times over (above kHeavyGramFlops, about
// 50 us on an H200). Later chunks: a few LAMM iterations (launches that return at once are cheap),
// Newton one or two. The cluster Cholesky skips like the one-block kernel, but its range keeps
// the cap: a fixed 1, 2 or 3 iterations per synchronisation was no faster there, nor on the
// reference shape (docs/decisions.md, "The cluster Cholesky").
constexpr double kHeavyGramFlops = 2e9;

bool heavy_gram(const Engine& e, int64_t n_rows) {
  return 2.0 * static_cast<double>(n_rows) * static_cast<double>(e.P) * static_cast<double>(e.P) >
         kHeavyGramFlops;
}

ChunkSizes chunk_sizes(const Engine& e, bool l1, int64_t n_rows) {
  const bool heavy = heavy_gram(e, n_rows);
  if (e.forced_chunk > 0)
    return {e.forced_chunk, e.forced_chunk, l1 && heavy};
  const bool above_one_block = !l1 && e.P > e.small_dense_max;
  const int64_t cap = above_one_block ? (heavy ? 1 : 2) : 8;
  const int64_t hint = e.chunk_hint > 0 ? e.chunk_hint : (above_one_block ? 2 : 4);
  return {std::min(hint, cap), l1 ? 4 : (above_one_block ? 1 : 2), l1 && heavy};
}

template <class T>
void transition(Engine& e, const RhCudaHostBatch& b, BatchLocation location,
                const RhCudaUpdateConfig& c, int fit_intercept, bool checks_deferred,
                RhCudaDiagnostics* diagnostics, RhCudaHostState* out) {
  const int64_t P = e.P;
  reserve_elems(e.ws.residual, b.n_rows, sizeof(double), "residuals");
  reserve_elems(e.ws.score, b.n_rows, sizeof(T), "scores");
  const GramSplit split = gram_split<T>(b.n_rows, P);
  reserve_elems(e.ws.scaled_rows, split.padded_rows() * P, sizeof(T), "scaled design");
  // The row pass's cuBLAS Gram always goes through the partials (UpdateContext::row_pass).
  reserve_elems(e.ws.gram_partials, int64_t{split.chunks} * P * P, sizeof(T), "Gram partials");
  if (P <= e.fused_gram_max) {
    const int64_t pad = fused_gram_padded(P);
    reserve_elems(e.ws.gram_partials, fused_gram_blocks(b.n_rows, P) * pad * pad, sizeof(double),
                  "Gram partials");
  }

  // K only follows unpenalised streams: after L1 selection the intervals are not valid.
  const bool with_meat = e.committed.meat_available && c.penalty != RH_CUDA_PENALTY_L1;
  if (with_meat) {
    reserve_elems(e.ws.meat_rows, split.padded_rows() * P, sizeof(T), "K's scaled design");
    reserve_elems(e.ws.host_meat, P * P + 1, sizeof(double), "exported K");
  }

  const ChunkSizes chunks = chunk_sizes(e, c.penalty == RH_CUDA_PENALTY_L1, b.n_rows);
  UpdateContext<T> ctx{e,
                       place_batch<T>(e, b, location, checks_deferred),
                       batch_constants(e, b, c, fit_intercept, checks_deferred),
                       c.max_iter,
                       location == BatchLocation::Host ? "RhCudaHostBatch" : "RhCudaDeviceBatch",
                       e.committed.information_symmetric,
                       out != nullptr,
                       chunks.first,
                       chunks.later};
  ctx.with_meat = with_meat;
  if (!ctx.fused_gram() && ctx.row_pass_gram_column(true)) {
    reserve_elems(
        e.ws.gram_column_partials,
        int64_t{row_blocks(b.n_rows, ctx.rows.ncols_x)} * appended_column_stride(ctx.rows.ncols_x),
        sizeof(double), "Gram column partials");
  }
  // The fused row pass skips by itself until the solve ended: no readback to wait for.
  ctx.gram_after_end = chunks.gram_after_end && !ctx.fused_gram();
  // Newton's heavy cuBLAS Gram, incrementally (UpdateContext::incremental_gram): not with K,
  // whose rows come from the row pass at the final beta. Up to the one-block limit the changed
  // rows are added on the device, in the chunks of any Newton update; above it the host adds
  // them after every iteration's synchronisation, so not with a chunk size the tests fixed.
  const bool device_flips = e.device_gram_flips && ctx.small_dense();
  ctx.incremental_gram = !ctx.k.l1 && !ctx.fused_gram() && !with_meat && e.incremental_gram &&
                         (device_flips || e.forced_chunk == 0) && heavy_gram(e, b.n_rows);
  if (ctx.incremental_gram) {
    ctx.device_gram_flips = device_flips;
    if (device_flips) {
      reserve_elems(e.ws.gram_flip_partials, int64_t{kGramFlipSlices} * P * P, sizeof(double),
                    "changed-row Gram partials");
    } else {
      ctx.first_chunk = 1;
      ctx.later_chunk = 1;
    }
    reserve_elems(e.ws.curvature, b.n_rows, sizeof(double), "recorded curvature weights");
    reserve_elems(e.ws.curvature_delta, b.n_rows, sizeof(double), "curvature changes");
    reserve_elems(e.ws.flip_flags, b.n_rows, 1, "changed-row flags");
    reserve_elems(e.ws.flip_rows, b.n_rows, sizeof(int), "changed rows");
    size_t select_bytes = 0;
    check_cuda(cub::DeviceSelect::Flagged(nullptr, select_bytes, thrust::counting_iterator<int>(0),
                                          e.ws.flip_flags.as<unsigned char>(),
                                          e.ws.flip_rows.as<int>(), static_cast<int*>(nullptr),
                                          static_cast<int>(b.n_rows), e.stream),
               "cub::DeviceSelect::Flagged (temporary storage)");
    reserve_elems(e.ws.select_temp, static_cast<int64_t>(select_bytes), 1, "changed-row selection");
    // The flags need no clearing here: the solve's first row pass records the weights and
    // clears them (CurvatureTrack). A refused batch skips that pass, and its refusal is reported
    // at the first synchronisation, before any flagged row is added.
  }

  // The row pass writes scaled rows for cuBLAS's Gram unless it forms the Gram itself (the
  // majoriser's pass zeroes the padding then, UpdateContext::majoriser_gram_pass).
  if (!ctx.fused_gram())
    ctx.zero_gram_padding(e.ws.scaled_rows.as<T>());
  if (with_meat)
    ctx.zero_gram_padding(e.ws.meat_rows.as<T>());
  // place_batch queued the validation pass (none for deferred checks without weights). Refused
  // data move the state to kInvalidData: everything queued after returns at once and the first
  // synchronisation reports the reason (UpdateContext::wait_for_status).
  const bool validated = validation_queued(b, location, checks_deferred);
  launch_begin_update<T>(e.ws.row_partials.as<double>(), e.ws.bad_partials.as<unsigned long long>(),
                         validated ? validation_tiles(ctx.rows.n, ctx.rows.ncols_x) : 0, ctx.k,
                         e.committed.coefficients.as<T>(), e.committed.information.as<T>(),
                         ctx.beta0(), ctx.beta(), ctx.information64(), ctx.device_scalars(),
                         e.stream);

  if (ctx.k.l1) {
    solve_lamm(ctx);
  } else {
    solve_newton(ctx);
  }

  const DeviceScalars& s = ctx.status();
  if (s.state == kNonFinite || s.commit_nonfinite) {
    fail(RH_CUDA_NUMERICAL_ERROR,
         "the solve produced non-finite coefficients, objective or information (overflow); "
         "state unchanged");
  }
  e.chunk_hint = s.iterations;
  const bool export_meat =
      with_meat && out != nullptr && rh_state_out_has_meat(out) && out->meat != nullptr;
  if (with_meat) {
    accumulate_meat<T>(e, ctx.rows, e.ws.residual.as<double>(), c.tau, s.meat_rows_final != 0,
                       export_meat);
  }

  if (with_meat)
    e.committed.meat.swap(e.scratch.meat);
  e.committed.meat_available = with_meat;
  e.committed.coefficients.swap(e.scratch.coefficients);
  e.committed.information.swap(e.scratch.information);
  e.committed.n_samples_seen += b.n_rows;
  e.committed.batch_count += 1;
  e.committed.information_zero = false;
  e.committed.previous_lambda = s.lambda;
  e.committed.weight_sum = s.total_weight;

  diagnostics->iterations = s.iterations;
  diagnostics->converged = s.state == kConverged ? 1 : 0;
  diagnostics->used_regularized_fallback = ctx.used_svd ? 1 : 0;
  diagnostics->objective = s.penalised_objective;
  diagnostics->lambda_value = s.lambda;
  diagnostics->bandwidth = s.bandwidth;
  if (out != nullptr) {
    const T* exported = e.ws.host_state.as<T>();
    std::memcpy(out->coefficients, exported, P * sizeof(T));
    copy_export(e, out->information, exported + P, P * P * sizeof(T));
    out->n_samples_seen = e.committed.n_samples_seen;
    out->batch_count = e.committed.batch_count;
    out->previous_lambda = e.committed.previous_lambda;
    out->weight_sum = e.committed.weight_sum;
    if (export_meat)
      copy_export(e, out->meat, e.ws.host_meat.data(), P * P * sizeof(double));
    if (rh_state_out_has_meat(out)) {
      out->meat_available = with_meat ? 1 : 0;
      out->reserved1 = 0;
    }
  }
}

}  // namespace

void run_update(Engine& e, const RhCudaHostBatch* batch, BatchLocation location,
                const RhCudaUpdateConfig* config, RhCudaDiagnostics* diagnostics,
                RhCudaHostState* state) {
  RhErrorBuffer scratch{};
  int fit_intercept = 0;
  int append_intercept = 0;
  const char* name = location == BatchLocation::Host ? "RhCudaHostBatch" : "RhCudaDeviceBatch";
  require(rh_validate_config(config, e.P, &fit_intercept, &scratch), scratch);
  require(rh_validate_batch(batch, name, config, e.P, e.committed.n_samples_seen,
                            e.committed.batch_count, e.committed.weight_sum, e.elem_size,
                            &append_intercept, &scratch),
          scratch);
  require(rh_check_header(diagnostics, "RhCudaDiagnostics", sizeof(RhCudaDiagnostics), &scratch),
          scratch);
  if (state != nullptr)
    require(rh_validate_state_out(state, e.elem_size, &scratch), scratch);
  if (batch->n_rows > 2147483647) {
    fail(RH_CUDA_INVALID_ARGUMENT,
         "%s.n_rows %lld exceeds the CUDA engine's per-batch limit of 2147483647 rows", name,
         static_cast<long long>(batch->n_rows));
  }
  if (location == BatchLocation::Device) {
    require_device_memory(e, batch->x_design, "RhCudaDeviceBatch.x_design");
    require_device_memory(e, batch->y, "RhCudaDeviceBatch.y");
    if (batch->sample_weight != nullptr) {
      require_device_memory(e, batch->sample_weight, "RhCudaDeviceBatch.sample_weight");
    }
  }
  // Device input is checked by the objective at beta0 (BatchConstants::checks_deferred): one
  // pass over X fewer. Where that check fails, the update runs again with the validation pass,
  // so refusals and their messages are those of the pass.
  const bool deferred = location == BatchLocation::Device && e.deferred_device_checks;
  const auto run = [&](bool checks_deferred) {
    if (e.dtype == RH_CUDA_DTYPE_FLOAT32) {
      transition<float>(e, *batch, location, *config, fit_intercept, checks_deferred, diagnostics,
                        state);
    } else {
      transition<double>(e, *batch, location, *config, fit_intercept, checks_deferred, diagnostics,
                         state);
    }
  };
  try {
    try {
      run(deferred);
    } catch (const DeferredChecksFailed&) {
      run(false);
    }
  } catch (...) {
    // Work queued before the failure still writes scratch buffers and pinned chunks; let it
    // drain so the next call starts from an idle stream.
    (void)cudaStreamSynchronize(e.stream);
    throw;
  }
}

}  // namespace rh
