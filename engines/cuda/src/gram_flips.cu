// The incremental Gram's update on the device (docs/decisions.md, "The incremental Gram"):
// gram += sum over the rows the last row pass flagged of d_i x_i x_i', d_i the change of row i's
// curvature weight, with the number of flagged rows read on the device (CUB's select wrote it
// into DeviceScalars.gram_flips), so the update is queued right after its row pass and no
// synchronisation waits for the count.
//
// The upper triangle is cut into 32 x 32 tiles and the flagged rows into kGramFlipSlices equal
// slices; block (tile, slice) sums its slice's rows in row order, 32 rows at a time through
// shared memory, in double (float32 rows widened), and writes its partial tile; a second launch
// adds the slices' partials to the Gram in slice order. The sums' order depends only on the number
// of flagged rows, never on the launch or the chunking.
#include "engine_error.hpp"
#include "huber_math.cuh"
#include "kernel_launch.cuh"
#include "kernels.hpp"
#include "step_common.cuh"

namespace rh {

namespace {

constexpr int kFlipTile = 32;
constexpr int kFlipTileRows = kThreads / kFlipTile;  // thread rows of a tile: 8 (kThreads 256)
constexpr int kFlipRowsPerThread = kFlipTile / kFlipTileRows;

// Column j of row i of the design: X's column, the appended intercept column's one, or zero
// past P (the last tile's padding).
template <class T>
__device__ __forceinline__ double design_value(const RowView<T>& rows, int64_t i, int64_t j) {
  if (j < rows.ncols_x)
    return static_cast<double>(rows.x[i * rows.ldx + j]);
  return j < rows.P ? 1.0 : 0.0;
}

// The update's work, unless the data were refused (the flags are then not the batch's) or no row
// changed.
__device__ __forceinline__ int64_t flips_to_add(const DeviceScalars* sc) {
  if (!should_run(sc, kRunUnlessInvalid))
    return 0;
  return sc->gram_flips;
}

// Block (tile, slice): tile p = tj (tj + 1) / 2 + ti (ti <= tj) of the upper triangle, over the
// flagged rows [count * slice / S, count * (slice + 1) / S). Thread (ty, tx) holds the tile's
// entries (ti * 32 + ty + 8 m, tj * 32 + tx), m < 4. The blocks of tile 0 clear the flags of
// their slice's rows.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gram_flip_partials_kernel(RowView<T> rows, const int* rows_of, const DeviceScalars* sc,
                              CurvatureTrack track, double* partials) {
  enter_stream_order();
  const int64_t count = flips_to_add(sc);
  if (count <= 0)
    return;
  int ti = static_cast<int>(blockIdx.x);
  int tj = 0;
  while (ti > tj) {
    ti -= tj + 1;
    ++tj;
  }
  const int64_t slices = gridDim.y;
  const int64_t begin = count * blockIdx.y / slices;
  const int64_t end = count * (blockIdx.y + 1) / slices;
  const int tx = static_cast<int>(threadIdx.x) % kFlipTile;
  const int ty = static_cast<int>(threadIdx.x) / kFlipTile;

  __shared__ double scaled[kFlipTile][kFlipTile + 1];  // d_i x_i, tile ti's columns
  __shared__ double plain[kFlipTile][kFlipTile + 1];   // x_i, tile tj's columns
  double acc[kFlipRowsPerThread] = {};
  for (int64_t group = begin; group < end; group += kFlipTile) {
    for (int r = ty; r < kFlipTile; r += kFlipTileRows) {
      double a = 0.0;
      double b = 0.0;
      if (group + r < end) {
        const int64_t i = rows_of[group + r];
        a = track.delta[i] * design_value(rows, i, int64_t{ti} * kFlipTile + tx);
        b = design_value(rows, i, int64_t{tj} * kFlipTile + tx);
      }
      scaled[r][tx] = a;
      plain[r][tx] = b;
    }
    __syncthreads();
#pragma unroll 8
    for (int r = 0; r < kFlipTile; ++r) {
      const double b = plain[r][tx];
#pragma unroll
      for (int m = 0; m < kFlipRowsPerThread; ++m)
        acc[m] = fma(scaled[r][ty + kFlipTileRows * m], b, acc[m]);
    }
    __syncthreads();
  }

  const int64_t P = rows.P;
  double* out = partials + static_cast<int64_t>(blockIdx.y) * P * P;
  const int64_t col = int64_t{tj} * kFlipTile + tx;
#pragma unroll
  for (int m = 0; m < kFlipRowsPerThread; ++m) {
    const int64_t row = int64_t{ti} * kFlipTile + ty + kFlipTileRows * m;
    if (row <= col && col < P)
      out[row + col * P] = acc[m];
  }
  if (blockIdx.x == 0) {
    for (int64_t s = begin + threadIdx.x; s < end; s += blockDim.x)
      track.flags[rows_of[s]] = 0;
  }
}

// gram[row, col] += the slices' partials in slice order, row <= col (column-major).
template <class T>
__global__ void gram_flip_sum_kernel(const double* partials, const DeviceScalars* sc, int64_t P,
                                     T* gram) {
  enter_stream_order();
  if (flips_to_add(sc) <= 0)
    return;
  const int64_t PP = P * P;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < PP;
       idx += int64_t{gridDim.x} * blockDim.x) {
    if (idx % P > idx / P)
      continue;
    double sum = 0.0;
    for (int s = 0; s < kGramFlipSlices; ++s)
      sum += partials[s * PP + idx];
    gram[idx] = static_cast<T>(static_cast<double>(gram[idx]) + sum);
  }
}

}  // namespace

template <class T>
void launch_gram_flip_update(const RowView<T>& rows, const int* rows_of, const DeviceScalars* sc,
                             CurvatureTrack track, double* partials, T* gram, cudaStream_t s) {
  const int64_t tiles = (rows.P + kFlipTile - 1) / kFlipTile;
  const LaunchShape shape{dim3(static_cast<unsigned>(tiles * (tiles + 1) / 2), kGramFlipSlices),
                          dim3(kThreads), 0, 0};
  launch_kernel("gram_flip_partials_kernel", gram_flip_partials_kernel<T>, shape, s, rows, rows_of,
                sc, track, partials);
  launch_kernel("gram_flip_sum_kernel", gram_flip_sum_kernel<T>,
                elementwise_blocks(rows.P * rows.P), kThreads, s, partials, sc, rows.P, gram);
}

template void launch_gram_flip_update<float>(const RowView<float>&, const int*,
                                             const DeviceScalars*, CurvatureTrack, double*, float*,
                                             cudaStream_t);
template void launch_gram_flip_update<double>(const RowView<double>&, const int*,
                                              const DeviceScalars*, CurvatureTrack, double*,
                                              double*, cudaStream_t);

}  // namespace rh
