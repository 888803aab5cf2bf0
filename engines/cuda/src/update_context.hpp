// Everything one update works with, and the pieces both solvers queue: the row pass (residual,
// score, objective, X'u and optionally the weighted Gram), the gradient, and the finish (commit
// into the scratch state, export, status readback) that ends every chunk of iterations. The
// synchronisation after a chunk is the only one a solve needs unless a Cholesky attempt fails.
#pragma once

#include "engine.hpp"
#include "engine_operations.hpp"
#include "solver_types.hpp"

namespace rh {

// The batch's rows where the kernels read them (device input in place; host input staged into
// ws.x_stage / y_stage / w_stage through the pinned chunks), with the validation pass queued
// over them: per validation tile the weight sum in ws.row_partials and the first bad index of
// each kind in ws.bad_partials (validation_tiles of each). update_pipeline.cu; the
// row-statistics extension uses it too. The update's and the extension's callers check n_rows
// and device pointers first. deferred_checks (device input only, BatchConstants::checks_deferred):
// the pass leaves X to the objective at beta0 and reads only y and the weights, and without
// weights it is not queued at all.
template <class T>
RowView<T> place_batch(Engine& e, const RhCudaHostBatch& b, BatchLocation location,
                       bool deferred_checks = false);

// Thrown by UpdateContext::wait_for_status when an update whose checks were deferred finds its
// data refused or its objective at beta0 not finite: run_update repeats the update with the
// validation pass, which names what was wrong (or finds nothing, for finite data whose objective
// overflows). Nothing was committed.
struct DeferredChecksFailed {};

// INVALID_ARGUMENT naming the value of `rows` at `index` (row-major for kBadX) that broke rule
// `kind`, read back from the rows the validation pass checked (device input in place, host input
// staged unchanged); returns when index is kNoIndex. Callers decide the order of the kinds.
template <class T>
void refuse_bad_value(const RowView<T>& rows, const char* batch_name, BadKind kind,
                      unsigned long long index);

// How the Gram of an n x P batch of T is split over rows: `chunks` strided GEMMs of `rows` rows
// each (the scaled design is zero-padded to chunks * rows rows). Depends only on the shape and T.
struct GramSplit {
  int chunks;
  int64_t rows;
  int64_t padded_rows() const {
    return chunks * rows;
  }
};
template <class T>
GramSplit gram_split(int64_t n_rows, int64_t P);

template <class T>
struct UpdateContext {
  Engine& e;
  RowView<T> rows;
  BatchConstants k;
  int64_t max_iter;
  const char* batch_name;
  bool information_symmetric;
  bool export_state;  // the finish copies the new state to the pinned host_state buffer
  // Iterations queued before the first synchronisation, and before each later one: kernels
  // queued past the end of the solve return at once, so these only trade wasted launches
  // against synchronisations and never change a result.
  int64_t first_chunk;
  int64_t later_chunk;
  // The stream keeps K (unpenalised, meat available): the row passes at the final beta also
  // write K's scaled rows into ws.meat_rows.
  bool with_meat = false;
  // LAMM (which needs the Gram only at the solution): the finish's row pass and Gram are queued
  // after a synchronisation has shown the solve ended, instead of after every chunk, where
  // cuBLAS's GEMM cannot skip. Chosen when that Gram (not the fused row pass's, which skips)
  // costs more than a synchronisation many times over (update_pipeline.cu, kHeavyGramFlops);
  // never changes a result.
  bool gram_after_end = false;
  // Newton with a heavy cuBLAS Gram (docs/decisions.md, "The incremental Gram"): after the
  // first row pass of the batch, which forms the Gram in full and records every row's curvature
  // weight, a row pass only flags the rows whose weight changed. device_gram_flips (up to the
  // one-block limit): their update is queued right after the pass that flagged them
  // (launch_gram_flip_update), the chunks as without the incremental Gram. Otherwise the host
  // adds it after the synchronisation that ends the chunk (apply_gram_flips), before the next
  // chunk's Cholesky attempt or the final commit, in chunks of one iteration.
  bool incremental_gram = false;
  bool device_gram_flips = false;
  bool gram_recorded = false;  // the batch's first Gram has been queued, its weights recorded
  // Blocks of the last row pass queued, whose partials the next gradient sums, and whether the
  // last one that formed X'u left it in the partials (row_pass_xtu) or to cuBLAS's gemv.
  int row_partial_blocks = 0;
  bool xtu_in_partials = false;
  bool used_svd = false;
  // The first synchronisation has looked at the data checks' verdict (wait_for_status).
  bool data_checked = false;
  // LAMM's curvature bound is in DeviceScalars.lamm_bound (computed at the first 40-rejection
  // of the solve; the batch fixes it).
  bool lamm_bound_ready = false;

  DeviceScalars* device_scalars() const {
    return e.ws.scalars.as<DeviceScalars>();
  }
  const DeviceScalars& status() const {
    return *e.ws.host_scalars.as<DeviceScalars>();
  }
  double* beta() const {
    return e.ws.beta.as<double>();
  }
  double* beta0() const {
    return e.ws.beta0.as<double>();
  }
  double* grad() const {
    return e.ws.grad.as<double>();
  }
  double* jdelta() const {
    return e.ws.jdelta.as<double>();
  }
  double* information64() const {
    return e.ws.information64.as<double>();
  }
  T* gram() const {
    return e.ws.gram.as<T>();
  }
  T* majoriser_gram() const {
    return e.ws.majoriser_gram.as<T>();
  }
  T* xtu() const {
    return e.ws.xtu.as<T>();
  }

  // The Newton system is small enough for the one-block Cholesky (launch_small_cholesky_solve).
  bool small_dense() const {
    return k.P <= e.small_dense_max;
  }
  // The row pass forms X'u itself instead of cuBLAS's gemv over the scores: the fused row pass
  // (fused_pass) always, the others for rows of at most kRowPassXtuMaxColumns stored columns.
  bool row_pass_xtu(bool fused_pass) const {
    return fused_pass || rows.ncols_x <= kRowPassXtuMaxColumns;
  }
  // A row pass that writes scaled rows forms the Gram's last column itself (the appended
  // intercept's, sum_i w_i c_i (x_i, 1)) where the GEMM leaves that column to a gemv
  // (gram_gemm_columns: P one past whole 64-column tiles): without X'u up to
  // kRowPassXtuMaxColumns parameters (its partials in the X'u partials' memory), with X'u in
  // float64 up to kRowPassColumnWithXtuMaxColumns stored columns (in gram_column_partials).
  bool row_pass_gram_column(bool with_xtu) const;
  // The row passes that form the Gram do it themselves (launch_row_pass_gram) instead of writing
  // scaled rows for cuBLAS: narrow enough, no K to keep (its rows come from the same pass), and
  // not FAST_MATH (whose float32 Gram is cuBLAS's on TF32 tensor cores).
  bool fused_gram() const {
    return k.P <= e.fused_gram_max && !with_meat &&
           (e.enabled_flags & RH_CUDA_ENGINE_FLAG_FAST_MATH) == 0;
  }

  // Newton's speculative step (newton_solver.cu): the row pass and gradient run at the candidate
  // beta - dir before the whole step is judged, so an iteration that accepts it needs no
  // line-search pass. Only from a fitted beta0 (a stream's later batches, or after a restore):
  // from the zero start of a stream the first steps are often cut, and a rejected candidate
  // costs a synchronisation and a row pass more than the line search alone. Not with K, whose
  // rows a row pass at a rejected candidate would leave behind. The incremental Gram's pass at
  // the candidate records its weights; the pass at beta after a rejection flags them back
  // (newton_solver.cu, enqueue_line_search_iteration).
  bool speculative_newton() const {
    return e.newton_speculation && k.previous_weight > 0.0 && !with_meat;
  }

  // Residual, score and the objective partials at the current beta (or at `at`, not null), then
  // (with_xtu) X'u; with_gram also forms X' diag(w c) X there (the Newton Hessian, and the
  // information increment at the end).
  // gram_sum not null: the partial Grams' sum is not launched but described there, for the
  // launch that follows (row_pass_then_gradient).
  void row_pass(bool with_gram, RunWhen when, bool with_xtu = true, GramSum<T>* gram_sum = nullptr,
                const double* at = nullptr);
  // row_pass(true, pass_when) then gradient(gradient_when, set_objective), the pass's Gram summed
  // by the gradient's launch: one launch fewer per Newton iteration. At beta, or at `at`, with
  // `accept` the speculative step's verdict in the gradient's launch (launch_gradient).
  void row_pass_then_gradient(RunWhen pass_when, RunWhen gradient_when, bool set_objective,
                              const double* at = nullptr, const NewtonAccept& accept = {});
  // The curvature bookkeeping of a row pass (CurvatureTrack): none unless incremental_gram and
  // with_gram; `recorded` once the batch's first Gram was queued (the pass then flags changes).
  CurvatureTrack curvature_track(bool with_gram) const;
  // After a synchronisation, with the incremental Gram added by the host (not
  // device_gram_flips): gram() += the update for the rows the last row pass flagged
  // (status().gram_flips of them, at most the rows the scaled-rows buffer holds twice over, and
  // Engine::gram_flip_max), else gram() formed again in full from the recorded weights. Whether it
  // queued anything (none without the incremental Gram or a flagged row).
  bool apply_gram_flips();
  // Zeroes the rows of `scaled` (a scaled design of this batch) past n up to the last Gram
  // chunk's end: cuBLAS's Gram reads them.
  void zero_gram_padding(T* scaled);
  // While running: X' diag(w m(r)) X into majoriser_gram(), m the majoriser weight at the
  // residuals of the last row pass (Newton's fallback step); the Gram at beta stays in gram().
  void majoriser_gram_pass();
  // The row pass's sums (with set_objective also F at beta0) and the gradient at beta (or at
  // `at`, not null: the point of that row pass).
  void gradient(RunWhen when, bool set_objective = false, const GramSum<T>& gram_sum = {},
                const double* at = nullptr, const NewtonAccept& accept = {},
                const LammTrialsXtu& trials_xtu = {});
  void enqueue_readback();
  // The new state from beta and the Gram at beta into the engine's scratch state (and the
  // pinned export buffer), then the status readback. Queued after every chunk of iterations;
  // only the one after the last chunk is kept.
  void enqueue_finish();
  // Waits for the stream and, on the first call, refuses the batch if its data were bad.
  void wait_for_status();
};

}  // namespace rh
