#include "update_context.hpp"

#include <algorithm>
#include <type_traits>

#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_select.cuh>

#include "engine_error.hpp"
#include "kernels.hpp"
#include "meat.hpp"
#include "memory_access.hpp"
#include "rh_algorithm.h"

namespace rh {

namespace {

// The columns of an n x P Gram its GEMM forms (gram_upper); a gemv forms the rest.
int64_t gram_gemm_columns(int64_t P) {
  return P > 64 && P % 64 == 1 ? P - 1 : P;
}

// A float32 Gram of kGramTriangleColumns to kGramTriangleEnd - 1 GEMM columns: two column
// blocks, the row chunks sized by the first.
template <class T>
bool gram_in_halves(int64_t columns) {
  return std::is_same<T, float>::value && columns >= kGramTriangleColumns &&
         columns < kGramTriangleEnd;
}

// The column blocks of the upper triangle that gram_upper's GEMMs form, of `columns` columns.
template <class T>
int64_t gram_column_blocks(int64_t columns) {
  return gram_in_halves<T>(columns) ? 2 : std::max<int64_t>(1, columns / kGramColumnBlock);
}

// Where column block `block` of `blocks` ends (one past its last column); the bounds between
// blocks are multiples of 64.
int64_t gram_block_end(int64_t columns, int64_t blocks, int64_t block) {
  return block + 1 == blocks ? columns : (block + 1) * columns / blocks / 64 * 64;
}

}  // namespace

template <class T>
GramSplit gram_split(int64_t n_rows, int64_t P) {
  const int64_t columns = gram_gemm_columns(P);
  const int64_t width = gram_in_halves<T>(columns) ? gram_block_end(columns, 2, 0) : columns;
  const int64_t tiles = (width + 63) / 64;
  const int64_t tiles_per_gram = tiles * tiles;
  int64_t chunks = kGramTargetTiles / tiles_per_gram;
  chunks = std::min(chunks, n_rows / kGramChunkRows);
  chunks = std::max<int64_t>(1, std::min(chunks, kGramMaxChunks));
  const int64_t rows = (n_rows + chunks - 1) / chunks;
  return GramSplit{static_cast<int>((n_rows + rows - 1) / rows), rows};
}

template GramSplit gram_split<float>(int64_t, int64_t);
template GramSplit gram_split<double>(int64_t, int64_t);

namespace {

// A Gram's sum of partials: handed to the caller's launch (`deferred`, not null) or launched.
template <class T>
void sum_or_defer(const GramSum<T>& sum, GramSum<T>* deferred, cudaStream_t s) {
  if (deferred != nullptr)
    *deferred = sum;
  else
    launch_gram_sum<T>(sum, s);
}

void gemv_transposed(cublasHandle_t h, const RowView<float>& rows, const float* u, float* out) {
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasSgemv(h, CUBLAS_OP_N, static_cast<int>(rows.ncols_x), static_cast<int>(rows.n),
                           &one, rows.x, static_cast<int>(rows.ldx), u, 1, &zero, out, 1),
               "cublasSgemv (X'u)");
}

void gemv_transposed(cublasHandle_t h, const RowView<double>& rows, const double* u, double* out) {
  const double one = 1.0, zero = 0.0;
  check_cublas(cublasDgemv(h, CUBLAS_OP_N, static_cast<int>(rows.ncols_x), static_cast<int>(rows.n),
                           &one, rows.x, static_cast<int>(rows.ldx), u, 1, &zero, out, 1),
               "cublasDgemv (X'u)");
}

// The row-major n x P scaled design is the column-major P x n matrix A; A A' is the Gram. GEMM,
// not SYRK: cuBLAS's SYRK measured 5-60x slower on these tall-skinny shapes on an H200. A single
// GEMM over all rows ran on one or a few thread blocks (83 us for 4,096 x 17 float64), so the
// rows are split into chunks, one GEMM each in a strided batch, and the partials are summed in
// chunk order. Only the upper triangle is read afterwards (mirrored), so the information stays
// exactly symmetric, and where gram_column_blocks splits it only the upper triangle's column
// blocks are computed: rows 0 .. c1 - 1 of columns c0 .. c1 - 1, one strided batch per block.
cublasStatus_t gemm_chunks(cublasHandle_t h, int m, int n, int rows, int ld, const float* a,
                           const float* b, long long stride_ab, float* c, long long stride_c,
                           int chunks) {
  const float one = 1.0f, zero = 0.0f;
  return cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, rows, &one, a, ld, stride_ab,
                                   b, ld, stride_ab, &zero, c, ld, stride_c, chunks);
}

cublasStatus_t gemm_chunks(cublasHandle_t h, int m, int n, int rows, int ld, const double* a,
                           const double* b, long long stride_ab, double* c, long long stride_c,
                           int chunks) {
  const double one = 1.0, zero = 0.0;
  return cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, rows, &one, a, ld, stride_ab,
                                   b, ld, stride_ab, &zero, c, ld, stride_c, chunks);
}

// The last column of each chunk's product, C[:, P - 1] = A b_{P-1} (A: the chunk's m x rows
// column-major block with leading dimension m = P; b_{P-1}: row P - 1 of B, every P-th value),
// one gemv per chunk in a strided batch.
cublasStatus_t gemv_chunks(cublasHandle_t h, int m, int rows, const float* a, const float* x,
                           long long stride_ax, float* y, long long stride_y, int chunks) {
  const float one = 1.0f, zero = 0.0f;
  return cublasSgemvStridedBatched(h, CUBLAS_OP_N, m, rows, &one, a, m, stride_ax, x, m, stride_ax,
                                   &zero, y, 1, stride_y, chunks);
}

cublasStatus_t gemv_chunks(cublasHandle_t h, int m, int rows, const double* a, const double* x,
                           long long stride_ax, double* y, long long stride_y, int chunks) {
  const double one = 1.0, zero = 0.0;
  return cublasDgemvStridedBatched(h, CUBLAS_OP_N, m, rows, &one, a, m, stride_ax, x, m, stride_ax,
                                   &zero, y, 1, stride_y, chunks);
}

// out = A B' for the row-major n x P designs a and b (the Gram when b is a), upper triangle.
// Where P is one past a whole number of 64-column tiles (gram_gemm_columns: 128 features and
// the intercept), the GEMM takes the first P - 1 columns and a gemv the last: GEMM tiles past
// column P - 1 would cost a whole tile row and column of products for one column.
// gate (null: none): the Gram is the row pass's and lands in `out` only when that pass ran
// (launch_gram_sum), so it always goes through the partials; so does an accumulating
// one (out += A B', the incremental Gram's update).
// deferred (not null): the sum of the partials is described there instead of launched
// (UpdateContext::row_pass_then_gradient); the Gram then always goes through the partials.
// column_partials (not null, where the GEMM leaves the last column out): that column comes from
// the row pass's column_blocks partials (launch_row_pass) instead of the gemv, which would read
// the scaled rows once more; the Gram then goes through the partials too.
template <class T>
void gram_upper(Engine& e, int64_t P, int64_t n, const T* a, const T* b, T* out,
                const DeviceScalars* gate = nullptr, RunWhen when = kRunUnlessInvalid,
                bool accumulate = false, GramSum<T>* deferred = nullptr,
                const double* column_partials = nullptr, int column_blocks = 0) {
  const GramSplit split = gram_split<T>(n, P);
  const int64_t columns = gram_gemm_columns(P);
  if (column_partials != nullptr && columns == P)
    fail(RH_CUDA_INTERNAL_ERROR,
         "Gram: a last column from the row pass, but the GEMM forms all %lld",
         static_cast<long long>(P));
  const bool direct = split.chunks == 1 && gate == nullptr && !accumulate && deferred == nullptr &&
                      column_partials == nullptr;
  T* target = direct ? out : e.ws.gram_partials.as<T>();
  const int64_t blocks = gram_column_blocks<T>(columns);
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block == 0 ? 0 : gram_block_end(columns, blocks, block - 1);
    const int64_t c1 = gram_block_end(columns, blocks, block);
    check_cublas(gemm_chunks(e.blas, static_cast<int>(c1), static_cast<int>(c1 - c0),
                             static_cast<int>(split.rows), static_cast<int>(P), a, b + c0,
                             split.rows * P, target + c0 * P, P * P, split.chunks),
                 "cublasGemmStridedBatched (Gram)");
  }
  if (columns < P && column_partials == nullptr) {
    check_cublas(
        gemv_chunks(e.blas, static_cast<int>(P), static_cast<int>(split.rows), a, b + columns,
                    split.rows * P, target + columns * P, P * P, split.chunks),
        "cublasGemvStridedBatched (Gram's last column)");
  }
  if (direct)
    return;
  GramSum<T> sum;
  sum.kind = GramSum<T>::kChunks;
  sum.chunk_partials = target;
  sum.count = split.chunks;
  sum.P = P;
  sum.gate = gate;
  sum.when = static_cast<int>(when);
  sum.accumulate = accumulate;
  sum.out = out;
  sum.column_partials = column_partials;
  sum.column_blocks = column_blocks;
  sum_or_defer(sum, deferred, e.stream);
}

}  // namespace

template <class T>
void gram_of_scaled_rows(Engine& e, int64_t P, int64_t n, const T* scaled, T* out) {
  gram_upper<T>(e, P, n, scaled, scaled, out);
}

template void gram_of_scaled_rows<float>(Engine&, int64_t, int64_t, const float*, float*);
template void gram_of_scaled_rows<double>(Engine&, int64_t, int64_t, const double*, double*);

template <class T>
bool UpdateContext<T>::row_pass_gram_column(bool with_xtu) const {
  // Beside X'u only in float64: the float32 pass holding both ran slower than the float32 gemv
  // it saves (docs/decisions.md, "The row pass at 128 columns and the Gram's last column").
  return rows.ncols_x + 1 == rows.P && gram_gemm_columns(rows.P) == rows.P - 1 &&
         rows.P <= kRowPassXtuMaxColumns &&
         (!with_xtu ||
          (std::is_same<T, double>::value && rows.ncols_x <= kRowPassColumnWithXtuMaxColumns));
}

template <class T>
void UpdateContext<T>::row_pass(bool with_gram, RunWhen when, bool with_xtu, GramSum<T>* gram_sum,
                                const double* at) {
  const double* point = at != nullptr ? at : beta();
  const bool fused = with_gram && fused_gram();
  // After the first, an incremental Gram's row pass only flags the rows whose weight changed.
  const bool leaves_gram = with_gram && incremental_gram && gram_recorded;
  if (with_xtu)
    xtu_in_partials = row_pass_xtu(fused);
  double* xtu_partials = with_xtu && xtu_in_partials ? e.ws.xtu_partials.as<double>() : nullptr;
  T* scaled = with_gram && !fused && !leaves_gram ? e.ws.scaled_rows.as<T>() : nullptr;
  // The Gram's last column from this pass (row_pass_gram_column): beside X'u in its own
  // buffer, or in the X'u partials' memory, which a pass without X'u leaves free (the gradient
  // reads X'u only after a pass that formed it, xtu_in_partials; LAMM's pass for the finish is
  // the only one without X'u).
  double* column_partials = nullptr;
  if (scaled != nullptr && row_pass_gram_column(with_xtu)) {
    column_partials =
        with_xtu ? e.ws.gram_column_partials.as<double>() : e.ws.xtu_partials.as<double>();
  }
  if (fused) {
    launch_row_pass_gram<T>(rows, point, k.tau, device_scalars(), e.ws.residual.as<double>(),
                            e.ws.score.as<T>(), e.ws.row_partials.as<double>(), xtu_partials,
                            e.ws.gram_partials.as<double>(), when, e.stream);
    row_partial_blocks = fused_gram_blocks(rows.n, rows.P);
  } else {
    T* meat_scaled = with_gram && with_meat ? e.ws.meat_rows.as<T>() : nullptr;
    launch_row_pass<T>(rows, point, k.tau, device_scalars(), e.ws.residual.as<double>(),
                       e.ws.score.as<T>(), scaled, meat_scaled, e.ws.row_partials.as<double>(),
                       xtu_partials, column_partials, curvature_track(with_gram), when, e.stream);
    row_partial_blocks = row_blocks(rows.n, rows.ncols_x);
  }
  // cuBLAS cannot skip: queued past the end of a solve it recomputes X'u from unchanged scores,
  // bit for bit the same. Its Gram below is recomputed too, from scaled rows the majoriser's
  // pass may have overwritten, but only the sum that skips with the row pass writes gram().
  if (with_xtu && !xtu_in_partials)
    gemv_transposed(e.blas, rows, e.ws.score.as<T>(), xtu());
  if (fused) {
    GramSum<T> sum;
    sum.kind = GramSum<T>::kFused;
    sum.fused_partials = e.ws.gram_partials.as<double>();
    sum.count = row_partial_blocks;
    sum.P = rows.P;
    sum.pad = fused_gram_padded(rows.P);
    sum.gate = device_scalars();
    sum.when = static_cast<int>(when);
    sum.out = gram();
    sum_or_defer(sum, gram_sum, e.stream);
  } else if (with_gram && !leaves_gram) {
    gram_upper<T>(e, rows.P, rows.n, scaled, scaled, gram(), device_scalars(), when, false,
                  gram_sum, column_partials, row_partial_blocks);
  }
  if (leaves_gram) {
    // The rows whose weight changed, in row order, and their count: read by the update queued
    // next, or carried to the host by the finish's status readback. A pass that did not run left
    // no flag set (each update clears the flags it added), so the select then finds none.
    int items = static_cast<int>(rows.n);
    size_t bytes = e.ws.select_temp.capacity();
    check_cuda(cub::DeviceSelect::Flagged(
                   e.ws.select_temp.data(), bytes, thrust::counting_iterator<int>(0),
                   e.ws.flip_flags.as<unsigned char>(), e.ws.flip_rows.as<int>(),
                   &device_scalars()->gram_flips, items, e.stream),
               "cub::DeviceSelect::Flagged (rows whose curvature changed)");
    if (device_gram_flips) {
      launch_gram_flip_update<T>(rows, e.ws.flip_rows.as<int>(), device_scalars(),
                                 curvature_track(true), e.ws.gram_flip_partials.as<double>(),
                                 gram(), e.stream);
    }
  }
  if (with_gram && incremental_gram)
    gram_recorded = true;
}

template <class T>
CurvatureTrack UpdateContext<T>::curvature_track(bool with_gram) const {
  CurvatureTrack track;
  if (!with_gram || !incremental_gram)
    return track;
  track.value = e.ws.curvature.as<double>();
  track.delta = e.ws.curvature_delta.as<double>();
  track.flags = e.ws.flip_flags.as<unsigned char>();
  track.recorded = gram_recorded;
  return track;
}

template <class T>
bool UpdateContext<T>::apply_gram_flips() {
  const int64_t count = status().gram_flips;
  if (!incremental_gram || device_gram_flips || count <= 0)
    return false;
  T* scaled = e.ws.scaled_rows.as<T>();
  const CurvatureTrack track = curvature_track(true);
  const GramSplit split = gram_split<T>(count, rows.P);
  // U and V share the scaled rows' buffer (the full Gram's rows are not needed again).
  const bool delta = count <= e.gram_flip_max &&
                     2 * split.padded_rows() <= gram_split<T>(rows.n, rows.P).padded_rows();
  if (delta) {
    T* u = scaled;
    T* v = scaled + split.padded_rows() * rows.P;
    launch_flipped_rows<T>(rows, e.ws.flip_rows.as<int>(), count, split.padded_rows(), track, u, v,
                           e.stream);
    gram_upper<T>(e, rows.P, count, u, v, gram(), nullptr, kRunUnlessInvalid, true);
  } else {
    launch_recorded_scaled_rows<T>(rows, track, scaled, e.stream);
    zero_gram_padding(scaled);
    gram_upper<T>(e, rows.P, rows.n, scaled, scaled, gram());
  }
  return true;
}

template <class T>
void UpdateContext<T>::zero_gram_padding(T* scaled) {
  const int64_t padded = gram_split<T>(rows.n, rows.P).padded_rows();
  if (padded > rows.n) {
    check_cuda(cudaMemsetAsync(scaled + rows.n * rows.P, 0, (padded - rows.n) * rows.P * sizeof(T),
                               e.stream),
               "cudaMemsetAsync (Gram padding)");
  }
}

template <class T>
void UpdateContext<T>::majoriser_gram_pass() {
  T* scaled = e.ws.scaled_rows.as<T>();
  if (fused_gram() || incremental_gram)
    zero_gram_padding(scaled);  // the row passes wrote none of these rows, or U and V did
  launch_majoriser_rows<T>(rows, e.ws.residual.as<double>(), k.tau, device_scalars(), scaled,
                           e.stream);
  gram_upper<T>(e, rows.P, rows.n, scaled, scaled, majoriser_gram());
}

template <class T>
void UpdateContext<T>::row_pass_then_gradient(RunWhen pass_when, RunWhen gradient_when,
                                              bool set_objective, const double* at,
                                              const NewtonAccept& accept) {
  GramSum<T> gram_sum;
  row_pass(true, pass_when, true, &gram_sum, at);
  gradient(gradient_when, set_objective, gram_sum, at, accept);
}

template <class T>
void UpdateContext<T>::gradient(RunWhen when, bool set_objective, const GramSum<T>& gram_sum,
                                const double* at, const NewtonAccept& accept,
                                const LammTrialsXtu& trials_xtu) {
  launch_gradient<T>(information64(), at != nullptr ? at : beta(), beta0(), xtu(),
                     xtu_in_partials ? e.ws.xtu_partials.as<double>() : nullptr, rows.ncols_x, k,
                     e.ws.row_partials.as<double>(), row_partial_blocks, set_objective,
                     device_scalars(), grad(), jdelta(), when, gram_sum, accept, trials_xtu,
                     e.stream);
}

template <class T>
void UpdateContext<T>::enqueue_finish() {
  // The commit kernels write the export and the status block straight into pinned host memory
  // (device-addressable under unified addressing): no copies to queue.
  launch_commit<T>(information64(), gram(), beta(), k, device_scalars(),
                   e.scratch.information.as<T>(), e.scratch.coefficients.as<T>(),
                   export_state ? e.ws.host_state.as<T>() : nullptr, e.ws.commit_flags.as<int>(),
                   e.ws.host_scalars.as<DeviceScalars>(), e.stream);
}

template <class T>
void UpdateContext<T>::enqueue_readback() {
  check_cuda(cudaMemcpyAsync(e.ws.host_scalars.as<DeviceScalars>(), device_scalars(),
                             sizeof(DeviceScalars), cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (status)");
}

template <class T>
void UpdateContext<T>::wait_for_status() {
  // Any synchronisation may be the solve's last, which the state's export follows at once.
  if (export_state)
    expect_export(e, with_meat);
  e.synchronize();
  if (data_checked)
    return;
  data_checked = true;
  const DeviceScalars& s = status();
  // Deferred checks name nothing: the validation pass does, when the update runs again.
  if (k.checks_deferred && s.state == kInvalidData)
    throw DeferredChecksFailed{};
  // The kernels record where the first bad value is; the value itself (for its kind in the
  // message) is read back from the rows they checked, which hold the caller's values (device
  // input in place, host input staged unchanged).
  refuse_bad_value(rows, batch_name, kBadX, s.first_bad_x);
  refuse_bad_value(rows, batch_name, kBadY, s.first_bad_y);
  refuse_bad_value(rows, batch_name, kBadWeight, s.first_bad_w);
  refuse_bad_value(rows, batch_name, kNegativeWeight, s.first_negative_w);
  if (s.weight_mismatch)
    refuse_weight_sum(batch_name, k.claimed_batch_weight, s.batch_weight, k.previous_weight);
}

template <class T>
void refuse_bad_value(const RowView<T>& rows, const char* batch_name, BadKind kind,
                      unsigned long long index) {
  if (index == kNoIndex)
    return;
  const auto at = static_cast<int64_t>(index);
  switch (kind) {
    case kBadX:
      refuse_value(batch_name, "x_design", at / rows.ncols_x, at % rows.ncols_x,
                   device_element(rows.x, at, sizeof(T)), RH_VALUE_FINITE);
    case kBadY:
      refuse_value(batch_name, "y", at, -1, device_element(rows.y, at, sizeof(T)), RH_VALUE_FINITE);
    case kBadWeight:
    case kNegativeWeight:
      refuse_value(batch_name, "sample_weight", at, -1, device_element(rows.w, at, sizeof(T)),
                   kind == kBadWeight ? RH_VALUE_FINITE : RH_VALUE_NONNEGATIVE);
  }
}

template struct UpdateContext<float>;
template struct UpdateContext<double>;
template void refuse_bad_value<float>(const RowView<float>&, const char*, BadKind,
                                      unsigned long long);
template void refuse_bad_value<double>(const RowView<double>&, const char*, BadKind,
                                       unsigned long long);

}  // namespace rh
