// The optional row-statistics extension (abi/rh_cuda_row_statistics.h), version 2: sums over
// one batch's rows at given coefficients, rows in host memory (staged as an update stages them)
// or in device memory (read in place), always in double whatever the engine dtype.
//
// Order, as in librh_cpu: the request and the batch struct (the shared rules of engines/common),
// the CUDA engine's row limit and device pointers, the coefficients (host memory), then the
// rows' values on the device (the update's validation pass), reported y, sample_weight
// (non-finite, then negative), the weight sum, x_design. Only then are sums formed. The outputs
// are written once every sum is in host memory; the committed state is neither read nor
// written, and only the workspace and the engine's last error change.
//
// The sums run over chunks of rows, so the double-precision scratch stays bounded whatever the
// batch: per chunk one row kernel (r = y - X beta, the per-row weights w psi, w c, w m, w psi^2,
// and per-block partials of sum w rho and sum w ||x||^2), cuBLAS's DGEMV for X'(w psi), and per
// requested Gram the rows scaled by sqrt(row weight) in double, their Gram by the update's
// strided-batched GEMM (gram_of_scaled_rows), added into a P x P double accumulator from its
// upper triangle (so every accumulator is exactly symmetric). Chunks are summed in order: the
// result depends on the batch and the chunk size only.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "api_guard.hpp"
#include "engine.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "huber_math.cuh"
#include "kernel_launch.cuh"
#include "kernels.hpp"
#include "meat.hpp"
#include "memory_access.hpp"
#include "rh_algorithm.h"
#include "rh_cuda_row_statistics.h"
#include "step_common.cuh"
#include "update_context.hpp"

namespace rh {

namespace {

// Doubles of scaled rows per chunk (32 MiB): the chunk has max(kGramChunkRows, this / P) rows.
constexpr int64_t kStatisticsChunkElems = int64_t{1} << 22;

// out[i P + j] = sqrt(row_weight[i]) x[i P + j] (row_weight null: x itself) as doubles for the
// n rows of a chunk; rows n .. padded_rows - 1 are zero (the padding of the Gram's last split).
template <class T>
__global__ void statistics_scaled_rows_kernel(const T* x, int64_t n, int64_t padded_rows, int64_t P,
                                              const double* row_weight, double* out) {
  enter_stream_order();
  const int64_t used = n * P;
  const int64_t total = padded_rows * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    if (idx >= used) {
      out[idx] = 0.0;
      continue;
    }
    const double v = static_cast<double>(x[idx]);
    out[idx] = row_weight != nullptr ? sqrt(row_weight[idx / P]) * v : v;
  }
}

// acc (P x P, row-major, full) = (first ? 0 : acc) + the Gram whose upper triangle cuBLAS wrote
// (column-major); entries (j, k) and (k, j) read the same element, so acc stays exactly
// symmetric.
__global__ void accumulate_gram_kernel(const double* gram, int64_t P, int first, double* acc) {
  enter_stream_order();
  const int64_t total = P * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    const double add = gram[mirrored_upper_index(idx, P)];
    acc[idx] = first ? add : acc[idx] + add;
  }
}

// totals[q] = (first ? 0 : totals[q]) + sum over blocks, in block order, of partials[2 b + q],
// q = 0 (loss), 1 (weighted norm).
__global__ void accumulate_totals_kernel(const double* partials, int blocks, int first,
                                         double* totals) {
  enter_stream_order();
  const int q = static_cast<int>(threadIdx.x);
  if (q >= 2)
    return;
  double sum = 0.0;
  for (int b = 0; b < blocks; ++b)
    sum += partials[2 * b + q];
  totals[q] = first ? sum : totals[q] + sum;
}

// Where the sums accumulate on the device: workspace buffers that the update only uses as
// scratch inside its own call (statistics_of names them). In the pinned readback buffer they
// follow one another: loss, weighted norm, score, then the three Grams.
struct Sums {
  double* totals;    // 2: loss, weighted norm
  double* score;     // P
  double* grams[3];  // curvature, majoriser, meat: P x P each
  double* gram_tmp;  // P x P: one chunk's Gram
};

constexpr uint64_t kGramBits[3] = {RH_CUDA_STATISTIC_CURVATURE, RH_CUDA_STATISTIC_MAJORISER,
                                   RH_CUDA_STATISTIC_MEAT};

void score_gemv(Engine& e, int64_t P, int64_t n, const double* rows, const double* u, bool first,
                double* score) {
  const double one = 1.0;
  const double keep = first ? 0.0 : 1.0;
  check_cublas(cublasDgemv(e.blas, CUBLAS_OP_N, static_cast<int>(P), static_cast<int>(n), &one,
                           rows, static_cast<int>(P), u, 1, &keep, score, 1),
               "cublasDgemv (row statistics score)");
}

int64_t chunk_rows(const Engine& e, int64_t n_rows) {
  const int64_t rows = e.statistics_chunk_rows > 0
                           ? e.statistics_chunk_rows
                           : std::max<int64_t>(kGramChunkRows, kStatisticsChunkElems / e.P);
  return std::min(rows, n_rows);
}

// The Gram split's padded rows and partial Grams for a chunk of n rows.
void grow_for_chunk(int64_t n, int64_t P, int64_t& padded_rows, int& splits) {
  const GramSplit split = gram_split<double>(n, P);  // the statistics' Grams are float64
  padded_rows = std::max(padded_rows, split.padded_rows());
  splits = std::max(splits, split.chunks);
}

template <class T>
void sums_over_chunks(Engine& e, const RowView<T>& rows, const double* beta, uint64_t bits,
                      double tau, double h, const Sums& out) {
  const int64_t P = rows.P;
  const int64_t chunk = chunk_rows(e, rows.n);
  const int64_t last = rows.n - (rows.n - 1) / chunk * chunk;  // rows of the last chunk
  const bool any_gram = (bits & (RH_CUDA_STATISTIC_CURVATURE | RH_CUDA_STATISTIC_MAJORISER |
                                 RH_CUDA_STATISTIC_MEAT)) != 0;
  const bool score = (bits & RH_CUDA_STATISTIC_SCORE) != 0;
  // Everything is reserved before the first launch.
  int64_t padded_rows = chunk;
  int splits = 1;
  if (any_gram) {
    grow_for_chunk(chunk, P, padded_rows, splits);
    grow_for_chunk(last, P, padded_rows, splits);
  }
  if (any_gram || (score && !std::is_same<T, double>::value)) {
    reserve_elems(e.ws.scaled_rows, padded_rows * P, sizeof(double), "row-statistics scaled rows");
  }
  if (any_gram && splits > 1) {
    reserve_elems(e.ws.gram_partials, int64_t{splits} * P * P, sizeof(double),
                  "row-statistics Gram partials");
  }
  if (beta != nullptr)
    reserve_elems(e.ws.residual, 4 * chunk, sizeof(double), "row-statistics row weights");
  double* row_weights = beta != nullptr ? e.ws.residual.as<double>() : nullptr;
  double* partials = e.ws.row_partials.as<double>();  // 2 kMaxRowBlocks doubles
  double* scaled = e.ws.scaled_rows.as<double>();

  for (int64_t first = 0; first < rows.n; first += chunk) {
    const int64_t n = std::min(chunk, rows.n - first);
    const int is_first = first == 0 ? 1 : 0;
    RowView<T> part = rows;
    part.x = rows.x + first * rows.ldx;
    part.y = rows.y + first;
    part.w = rows.w != nullptr ? rows.w + first : nullptr;
    part.n = n;
    launch_statistics_rows<T>(part, beta, tau, h, row_weights, partials, e.stream);
    launch_kernel("accumulate_totals_kernel", accumulate_totals_kernel, 1, 32, e.stream, partials,
                  row_blocks(n, part.ncols_x), is_first, out.totals);
    if (score) {
      const double* x64 = nullptr;
      if constexpr (std::is_same<T, double>::value) {
        x64 = part.x;
      } else {
        launch_kernel("statistics_scaled_rows_kernel", statistics_scaled_rows_kernel<T>,
                      elementwise_blocks(n * P), kThreads, e.stream, part.x, n, n, P, nullptr,
                      scaled);
        x64 = scaled;
      }
      score_gemv(e, P, n, x64, row_weights, first == 0, out.score);
    }
    if (!any_gram)
      continue;
    const GramSplit split = gram_split<double>(n, P);
    for (int g = 0; g < 3; ++g) {
      if ((bits & kGramBits[g]) == 0)
        continue;
      launch_kernel("statistics_scaled_rows_kernel", statistics_scaled_rows_kernel<T>,
                    elementwise_blocks(split.padded_rows() * P), kThreads, e.stream, part.x, n,
                    split.padded_rows(), P, row_weights + (g + 1) * n, scaled);
      gram_of_scaled_rows<double>(e, P, n, scaled, out.gram_tmp);
      launch_kernel("accumulate_gram_kernel", accumulate_gram_kernel, elementwise_blocks(P * P),
                    kThreads, e.stream, out.gram_tmp, P, is_first, out.grams[g]);
    }
  }
}

// What the validation pass found: the per-tile partials copied to pinned memory and reduced in
// tile order (the order of one pass over the batch).
struct ScanResult {
  double weight_sum = 0.0;
  unsigned long long first_bad[kBadKinds] = {kNoIndex, kNoIndex, kNoIndex, kNoIndex};
};

ScanResult read_scan(Engine& e, int tiles) {
  const size_t weight_bytes = static_cast<size_t>(tiles) * sizeof(double);
  const size_t bad_bytes = static_cast<size_t>(tiles) * kBadKinds * sizeof(unsigned long long);
  reserve_elems(e.ws.host_statistics, static_cast<int64_t>(weight_bytes + bad_bytes), 1,
                "row-statistics readback");
  auto* host = static_cast<unsigned char*>(e.ws.host_statistics.data());
  check_cuda(cudaMemcpyAsync(host, e.ws.row_partials.data(), weight_bytes, cudaMemcpyDeviceToHost,
                             e.stream),
             "cudaMemcpyAsync (row-statistics weight partials)");
  check_cuda(cudaMemcpyAsync(host + weight_bytes, e.ws.bad_partials.data(), bad_bytes,
                             cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (row-statistics validation partials)");
  e.synchronize();
  ScanResult scan;
  const auto* weights = reinterpret_cast<const double*>(host);
  const auto* bad = reinterpret_cast<const unsigned long long*>(host + weight_bytes);
  for (int t = 0; t < tiles; ++t) {
    scan.weight_sum += weights[t];
    for (int k = 0; k < kBadKinds; ++k)
      scan.first_bad[k] = std::min(scan.first_bad[k], bad[t * kBadKinds + k]);
  }
  return scan;
}

// librh_cpu's order and wording (row_statistics.c): y, sample_weight non-finite, sample_weight
// negative, the weight sum (with weights only), x_design.
template <class T>
void refuse_bad_values(const RowView<T>& rows, const RhCudaHostBatch& b, const char* name,
                       const ScanResult& scan) {
  refuse_bad_value(rows, name, kBadY, scan.first_bad[kBadY]);
  refuse_bad_value(rows, name, kBadWeight, scan.first_bad[kBadWeight]);
  refuse_bad_value(rows, name, kNegativeWeight, scan.first_bad[kNegativeWeight]);
  if (b.sample_weight != nullptr && !rh_weight_sum_matches(scan.weight_sum, b.batch_weight, 0.0))
    refuse_weight_sum(name, b.batch_weight, scan.weight_sum, 0.0);
  refuse_bad_value(rows, name, kBadX, scan.first_bad[kBadX]);
}

template <class T>
void statistics_of(Engine& e, const RhCudaHostBatch& b, BatchLocation location, const char* name,
                   RhCudaRowStatistics& s) {
  const int64_t P = e.P;
  const uint64_t bits = s.statistics;
  const bool rows_needed = (bits & ~RH_CUDA_STATISTIC_NORM) != 0;

  // The rows' values: the update's validation pass (staging host rows first), read back.
  const RowView<T> rows = place_batch<T>(e, b, location);
  const ScanResult scan = read_scan(e, validation_tiles(rows.n, rows.ncols_x));
  refuse_bad_values<T>(rows, b, name, scan);

  // Every buffer the sums and their readback need, before anything is queued.
  const int64_t PP = P * P;
  const int64_t out_elems = 2 + P + 3 * PP;
  reserve_elems(e.ws.host_statistics, out_elems, sizeof(double), "row-statistics outputs");
  // P x P double accumulators (reserved at creation): the update's scratch, unused between its
  // calls; the score in grad, the totals in trial_terms (>= 2 doubles).
  Sums sums{
      e.ws.trial_terms.as<double>(),
      e.ws.grad.as<double>(),
      {e.ws.information64.as<double>(), e.ws.hessian.as<double>(), e.ws.left_vectors.as<double>()},
      e.ws.right_vectors.as<double>()};
  double* beta = nullptr;
  if (rows_needed) {
    beta = e.ws.beta.as<double>();
    double* host_beta = e.ws.host_statistics.as<double>();
    for (int64_t j = 0; j < P; ++j)
      host_beta[j] = rh_value_at(e.dtype, s.coefficients, j);
    check_cuda(
        cudaMemcpyAsync(beta, host_beta, P * sizeof(double), cudaMemcpyHostToDevice, e.stream),
        "cudaMemcpyAsync (row-statistics coefficients)");
    // The readback below lands in the same pinned buffer: stream-ordered after this copy.
  }
  sums_over_chunks<T>(e, rows, beta, bits, s.tau, s.bandwidth, sums);

  // Readback: loss, weighted norm, score, the three Grams, each only when requested.
  double* host = e.ws.host_statistics.as<double>();
  check_cuda(
      cudaMemcpyAsync(host, sums.totals, 2 * sizeof(double), cudaMemcpyDeviceToHost, e.stream),
      "cudaMemcpyAsync (row-statistics totals)");
  if ((bits & RH_CUDA_STATISTIC_SCORE) != 0) {
    check_cuda(
        cudaMemcpyAsync(host + 2, sums.score, P * sizeof(double), cudaMemcpyDeviceToHost, e.stream),
        "cudaMemcpyAsync (row-statistics score)");
  }
  for (int g = 0; g < 3; ++g) {
    if ((bits & kGramBits[g]) == 0)
      continue;
    check_cuda(cudaMemcpyAsync(host + 2 + P + g * PP, sums.grams[g], PP * sizeof(double),
                               cudaMemcpyDeviceToHost, e.stream),
               "cudaMemcpyAsync (row-statistics Gram)");
  }
  e.synchronize();

  // Nothing below can fail.
  if ((bits & RH_CUDA_STATISTIC_LOSS) != 0)
    s.loss = host[0];
  if ((bits & RH_CUDA_STATISTIC_NORM) != 0)
    s.weighted_norm = host[1];
  if ((bits & RH_CUDA_STATISTIC_SCORE) != 0)
    std::memcpy(s.score, host + 2, P * sizeof(double));
  double* const targets[3] = {s.curvature_gram, s.majoriser_gram, s.meat};
  for (int g = 0; g < 3; ++g) {
    if ((bits & kGramBits[g]) != 0)
      std::memcpy(targets[g], host + 2 + P + g * PP, PP * sizeof(double));
  }
}

}  // namespace

void row_statistics(Engine& e, const RhCudaHostBatch* batch, BatchLocation location,
                    RhCudaRowStatistics* statistics) {
  const char* name = location == BatchLocation::Host ? "RhCudaHostBatch" : "RhCudaDeviceBatch";
  RhErrorBuffer scratch{};
  require(rh_validate_row_statistics(batch, name, statistics, e.P, e.elem_size, &scratch), scratch);
  if (batch->n_rows > 2147483647) {
    fail(RH_CUDA_INVALID_ARGUMENT,
         "%s.n_rows %lld exceeds the CUDA engine's per-batch limit of 2147483647 rows", name,
         static_cast<long long>(batch->n_rows));
  }
  if (location == BatchLocation::Device) {
    const char* host_entry = "rh_cuda_engine_row_statistics";
    require_device_memory(e, batch->x_design, "RhCudaDeviceBatch.x_design", host_entry);
    require_device_memory(e, batch->y, "RhCudaDeviceBatch.y", host_entry);
    if (batch->sample_weight != nullptr) {
      require_device_memory(e, batch->sample_weight, "RhCudaDeviceBatch.sample_weight", host_entry);
    }
  }
  // The coefficients live in host memory: checked as librh_cpu checks them, before the rows.
  if ((statistics->statistics & ~RH_CUDA_STATISTIC_NORM) != 0) {
    const int64_t bad = rh_first_nonfinite(e.dtype, statistics->coefficients, e.P);
    if (bad >= 0) {
      refuse_value("RhCudaRowStatistics", "coefficients", bad, -1,
                   rh_value_at(e.dtype, statistics->coefficients, bad), RH_VALUE_FINITE);
    }
  }
  try {
    if (e.dtype == RH_CUDA_DTYPE_FLOAT32) {
      statistics_of<float>(e, *batch, location, name, *statistics);
    } else {
      statistics_of<double>(e, *batch, location, name, *statistics);
    }
  } catch (...) {
    // Work queued before the failure may still read the pinned chunks; let it drain so the
    // next call starts from an idle stream.
    (void)cudaStreamSynchronize(e.stream);
    throw;
  }
}

}  // namespace rh
