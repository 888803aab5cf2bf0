// The step kernels every solver runs (step_common.cuh): the start of an update (validation's
// finish, the state loaded as doubles), the gradient and J delta from a row pass's sums, the
// Hessian's assembly and the split Gram's sum, resuming a paused iteration, J v and the
// speculative Newton step's candidate.
#include <algorithm>
#include <cmath>

#include <cuda/atomic>

#include "engine_error.hpp"
#include "kernel_launch.cuh"
#include "newton_step.cuh"

namespace rh {

namespace {

// The start of an update, in one launch. Block 0 finishes the validation pass: sums the batch
// weight in a fixed order, takes the first bad index of each kind, and sets every per-batch
// scalar, with the state kRunning, or kInvalidData when the data are refused. Without a pass
// (blocks 0: deferred checks of an unweighted batch) the weight is n_rows, the pass's sum of
// ones to the bit. Every block then loads the committed state as doubles: beta0 = beta =
// coefficients, J = information.
template <class T>
__global__ void begin_update_kernel(const double* weight_partials,
                                    const unsigned long long* bad_partials, int blocks,
                                    BatchConstants k, const T* coefficients, const T* information,
                                    double* beta0, double* beta, double* J, DeviceScalars* sc) {
  enter_stream_order();
  if (blockIdx.x == 0) {
    __shared__ double shared[kThreads];
    __shared__ unsigned long long bad[kBadKinds];
    if (threadIdx.x < kBadKinds)
      bad[threadIdx.x] = kNoIndex;
    __syncthreads();
    double acc = 0.0;
    unsigned long long first[kBadKinds] = {kNoIndex, kNoIndex, kNoIndex, kNoIndex};
    for (int b = threadIdx.x; b < blocks; b += kThreads) {
      acc += weight_partials[b];
      for (int kind = 0; kind < kBadKinds; ++kind) {
        first[kind] = min(first[kind], bad_partials[kBadKinds * b + kind]);
      }
    }
    for (int kind = 0; kind < kBadKinds; ++kind) {
      if (first[kind] != kNoIndex)
        atomicMin(&bad[kind], first[kind]);
    }
    const double weight_sum = block_sum<kThreads>(acc, shared);  // also settles `bad`
    const double batch_weight = blocks > 0 ? weight_sum : static_cast<double>(k.n_rows);
    if (threadIdx.x == 0) {
      DeviceScalars out{};
      out.batch_weight = batch_weight;
      out.weight_mismatch =
          k.has_weights &&
          !rh_weight_sum_matches(batch_weight, k.claimed_batch_weight, k.previous_weight);
      const double N = k.previous_weight + batch_weight;
      out.total_weight = N;
      out.bandwidth = rh_bandwidth(k.bandwidth_scale, N, k.n_features_in, k.tau);
      out.lambda = rh_lambda(k.l1, k.lambda_scale, k.tau, N, k.n_features_in);
      out.history_coef =
          k.use_history ? rh_history_scale(k.previous_weight, N, k.previous_lambda) : 0.0;
      out.phi = RH_LAMM_INITIAL_PHI;
      out.first_bad_x = bad[kBadX];
      out.first_bad_y = bad[kBadY];
      out.first_bad_w = bad[kBadWeight];
      out.first_negative_w = bad[kNegativeWeight];
      const bool refused = bad[0] != kNoIndex || bad[1] != kNoIndex || bad[2] != kNoIndex ||
                           bad[3] != kNoIndex || out.weight_mismatch;
      out.state = refused ? kInvalidData : kRunning;
      out.max_iter = k.max_iter;
      *sc = out;
    }
  }
  const int64_t P = k.P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < P * P + P;
       i += stride) {
    if (i < P) {
      beta0[i] = beta[i] = static_cast<double>(coefficients[i]);
    } else {
      J[i - P] = static_cast<double>(information[i - P]);
    }
  }
}

// The sums of the partial Grams run unless a gate (the state of the row pass that wrote the
// partials, as that pass tested it) says that pass did not.
__device__ __forceinline__ bool gram_sum_runs(const DeviceScalars* gate, int when) {
  return gate == nullptr || should_run(gate, when);
}

// The sums below as block `block` of a grid of `grid` blocks: their own launches, or the blocks
// a gradient launch runs after its own (GramSum).

// Sums the per-chunk partial Grams of a split Gram in chunk order (double accumulation), so the
// result depends only on the batch shape. Only the upper triangle (row <= column, column-major):
// the GEMMs may leave the rest unwritten (gram_upper's column blocks).
// `columns`: the columns the GEMMs formed (the last one, where it is left out, is summed by
// sum_gram_column).
template <class T>
__device__ void sum_gram_chunks(const T* partials, int chunks, int64_t P, int64_t columns,
                                bool accumulate, T* out, int64_t block, int64_t grid) {
  const int64_t PP = P * P;  // a chunk's partial Gram (its last columns unused without them)
  const int64_t entries = P * columns;
  const int64_t stride = grid * blockDim.x;
  for (int64_t idx = block * blockDim.x + threadIdx.x; idx < entries; idx += stride) {
    if (idx % P > idx / P)
      continue;
    double acc = accumulate ? static_cast<double>(out[idx]) : 0.0;
    for (int c = 0; c < chunks; ++c)
      acc += static_cast<double>(partials[c * PP + idx]);
    out[idx] = static_cast<T>(acc);
  }
}

// Many chunks (small P, many rows): one warp per element, lane l summing chunks l, l+32, ...
// and then a fixed shuffle tree, so the sum is still fixed-order and every thread has little
// to walk.
template <class T>
__device__ void sum_gram_chunks_by_warps(const T* partials, int chunks, int64_t P, int64_t columns,
                                         bool accumulate, T* out, int64_t block, int64_t grid) {
  const int64_t PP = P * P;  // a chunk's partial Gram (its last columns unused without them)
  const int64_t entries = P * columns;
  const int lane = threadIdx.x & 31;
  const int64_t warps = grid * (blockDim.x >> 5);
  for (int64_t idx = (block * blockDim.x + threadIdx.x) >> 5; idx < entries; idx += warps) {
    if (idx % P > idx / P)
      continue;
    double acc = 0.0;
    for (int c = lane; c < chunks; c += 32)
      acc += static_cast<double>(partials[c * PP + idx]);
    acc = warp_sum(acc);
    if (lane == 0)
      out[idx] = static_cast<T>(accumulate ? static_cast<double>(out[idx]) + acc : acc);
  }
}

// Above this many chunks a warp sums each element (sum_gram_chunks_by_warps).
constexpr int kChunksByThread = 16;

// The Gram's last column from the row pass's per-block partials (GramSum.column_partials): a
// warp per entry (warp_column_sum); entry P - 1 is the corner the pass stored after the
// ncols_x = P - 1 column sums.
template <class T>
__device__ void sum_gram_column(const double* partials, int blocks, int64_t P, bool accumulate,
                                T* out, int64_t block, int64_t grid) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = grid * (blockDim.x >> 5);
  const int stride = static_cast<int>(appended_column_stride(P - 1));
  for (int64_t row = (block * blockDim.x + threadIdx.x) >> 5; row < P; row += warps) {
    const double acc = warp_column_sum(partials, blocks, stride, static_cast<int>(row));
    if (lane == 0) {
      T* entry = out + row + (P - 1) * P;
      *entry = static_cast<T>(accumulate ? static_cast<double>(*entry) + acc : acc);
    }
  }
}

// The fused row pass's partial Grams (at most kFusedGramMaxBlocks, padded column-major, pad a
// multiple of 8): one warp per four entries of a column, rows 4 q .. 4 q + 3, those on or above
// the diagonal kept. Lane l adds blocks l, l + 32, ... of each entry in block order, then the
// fixed shuffle tree, as one warp per entry did (the same bits); the entry is written to both
// triangles. A lane reads a block's four entries as one 32-byte sector (two 16-byte loads), and
// every block's loads are written before the additions, so several are in flight at once.
constexpr int kFusedSumRows = 4;

template <class T>
__device__ void sum_fused_gram(const double* partials, int blocks, int64_t P, int64_t pad, T* out,
                               int64_t block, int64_t grid) {
  constexpr int kPerLane = (kFusedGramMaxBlocks + 31) / 32;
  const int lane = threadIdx.x & 31;
  const int64_t warps = grid * (blockDim.x >> 5);
  const int64_t groups = (P + kFusedSumRows - 1) / kFusedSumRows;
  const int64_t stride = pad * pad;
  for (int64_t idx = (block * blockDim.x + threadIdx.x) >> 5; idx < groups * P; idx += warps) {
    const int64_t first_row = kFusedSumRows * (idx % groups);
    const int64_t col = idx / groups;
    if (first_row > col)
      continue;
    const double* entry = partials + first_row + col * pad;
    double2 loaded[kPerLane][kFusedSumRows / 2];
#pragma unroll
    for (int m = 0; m < kPerLane; ++m) {
      // Past the last block a lane reloads the last block's entries, added nowhere.
      const int b = min(lane + 32 * m, blocks - 1);
#pragma unroll
      for (int h = 0; h < kFusedSumRows / 2; ++h)
        loaded[m][h] = reinterpret_cast<const double2*>(entry + b * stride)[h];
    }
    double acc[kFusedSumRows];
#pragma unroll
    for (int r = 0; r < kFusedSumRows; ++r)
      acc[r] = 0.0;
#pragma unroll
    for (int m = 0; m < kPerLane; ++m) {
      if (lane + 32 * m < blocks) {
#pragma unroll
        for (int h = 0; h < kFusedSumRows / 2; ++h) {
          acc[2 * h] += loaded[m][h].x;
          acc[2 * h + 1] += loaded[m][h].y;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kFusedSumRows; ++r) {
      const double total = warp_sum(acc[r]);
      const int64_t row = first_row + r;
      if (lane == 0 && row <= col) {
        out[row + col * P] = static_cast<T>(total);
        out[col + row * P] = static_cast<T>(total);
      }
    }
  }
}

// The blocks a GramSum's sum takes (those its own launch would have).
template <class T>
int gram_sum_blocks(const GramSum<T>& sum) {
  if (sum.kind == GramSum<T>::kNone)
    return 0;
  if (sum.kind == GramSum<T>::kFused) {
    if (sum.count > kFusedGramMaxBlocks)  // sum_fused_gram reads that many at most
      fail(RH_CUDA_INTERNAL_ERROR, "the fused row pass wrote %d partial Grams, more than %d",
           sum.count, kFusedGramMaxBlocks);
    return warp_rows_blocks(sum.P * ((sum.P + kFusedSumRows - 1) / kFusedSumRows));
  }
  // Either way at least P warps, one per entry of a last column summed from the row pass.
  if (sum.count > kChunksByThread)
    return warp_rows_blocks(sum.P * sum.P);
  return std::max(elementwise_blocks(sum.P * sum.P), warp_rows_blocks(sum.P));
}

template <class T>
__device__ void run_gram_sum(const GramSum<T>& sum, int64_t block, int64_t grid) {
  if (!gram_sum_runs(sum.gate, sum.when))
    return;
  if (sum.kind == GramSum<T>::kFused) {
    sum_fused_gram(sum.fused_partials, sum.count, sum.P, sum.pad, sum.out, block, grid);
    return;
  }
  const int64_t columns = sum.column_partials != nullptr ? sum.P - 1 : sum.P;
  if (sum.count > kChunksByThread)
    sum_gram_chunks_by_warps(sum.chunk_partials, sum.count, sum.P, columns, sum.accumulate, sum.out,
                             block, grid);
  else
    sum_gram_chunks(sum.chunk_partials, sum.count, sum.P, columns, sum.accumulate, sum.out, block,
                    grid);
  if (sum.column_partials != nullptr)
    sum_gram_column(sum.column_partials, sum.column_blocks, sum.P, sum.accumulate, sum.out, block,
                    grid);
}

template <class T>
__global__ void gram_sum_kernel(GramSum<T> sum) {
  enter_stream_order();
  run_gram_sum(sum, blockIdx.x, gridDim.x);
}

// The speculative Newton step's verdict in the gradient's launch (NewtonAccept): every block
// that ran arrives once its writes are done; the last to arrive judges the whole step from the
// sums, g and J delta the launch formed at the candidate and moves beta (newton_choose_step), so
// the verdict costs no launch of its own. Arrivals are counted in DeviceScalars.accept_arrivals,
// which begin_update_kernel zeroes and the last block zeroes again for the next launch. The
// release of each arrival and the acquire of the last one order every block's writes before
// the verdict's reads; the barrier after it carries them to the whole block.
__device__ void accept_after_last_arrival(const NewtonAccept& accept, const double* jdelta,
                                          const double* beta0, const BatchConstants& k,
                                          DeviceScalars* sc) {
  __shared__ int last;
  __syncthreads();  // this block's writes come before its arrival
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned int, cuda::thread_scope_device> arrivals(sc->accept_arrivals);
    last = arrivals.fetch_add(1u, cuda::memory_order_acq_rel) == gridDim.x - 1;
    if (last)
      arrivals.store(0u, cuda::memory_order_relaxed);
  }
  __syncthreads();
  if (!last)
    return;
  newton_choose_step<kThreads>(nullptr, 0, accept.dir, jdelta, nullptr, beta0, nullptr, 0, 1, k, sc,
                               accept.beta);
}

// Sums the row pass's partials in a fixed order (every block alike; block 0 stores rho_sum,
// score_sum and, with set_objective, F = rho_sum / N at beta0, refusing the batch there when its
// checks were deferred and rho_sum is not finite), then g = (-X'u + J delta) / N
// - history term and J delta, one warp per coefficient (X'u from the row pass's per-block
// partials, summed in a fixed order, or from cuBLAS).
// Blocks from gradient_grid on run `gram_sum` instead (GramSum; kind kNone: there are none).
// accept.dir not null: the speculative step's verdict after all of it (accept_after_last_arrival).
template <class T>
__global__ void gradient_kernel(const double* J, const double* beta, const double* beta0,
                                const T* xtu, const double* xtu_partials, int64_t ncols_x,
                                BatchConstants k, const double* partials, int blocks,
                                int set_objective, DeviceScalars* sc, double* g, double* jdelta,
                                int when, GramSum<T> gram_sum, int gradient_grid,
                                NewtonAccept accept, LammTrialsXtu trials_xtu) {
  enter_stream_order();
  const bool runs = should_run(sc, when);
  if (static_cast<int>(blockIdx.x) >= gradient_grid) {
    run_gram_sum(gram_sum, blockIdx.x - gradient_grid, gridDim.x - gradient_grid);
  } else if (runs) {
    // X'u (and sum psi, after the ncols_x columns) of the candidate the trials formed it for
    // and the pick accepted: the iteration's row pass returned at once.
    const int trials_candidate = trials_xtu.partials != nullptr ? sc->lamm_trials_gradient - 1 : -1;
    const int64_t trials_stride = appended_column_stride(ncols_x);
    const double* from_trials =
        trials_candidate >= 0
            ? trials_xtu.partials + int64_t{trials_candidate} * trials_xtu.blocks * trials_stride
            : nullptr;
    __shared__ double sums[2];
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    if (warp < 2 && from_trials == nullptr) {
      const double total = warp_column_sum(partials, blocks, 2, warp);
      if (lane == 0)
        sums[warp] = total;
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0 && from_trials == nullptr) {
      sc->rho_sum = sums[0];
      sc->score_sum = sums[1];
      if (set_objective) {
        // At beta0: delta = 0, so Q = D = 0.
        sc->objective = k.float_lamm ? float_objective(sums[0], 0.0, sc->total_weight, 0.0)
                                     : sums[0] / sc->total_weight;
        // A non-finite x or y makes its residual, rho and so the sum non-finite (the weights,
        // finite and >= 0, were checked): BatchConstants::checks_deferred.
        if (k.checks_deferred && !isfinite(sums[0]))
          sc->state = kInvalidData;
      }
    }
    const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    if (j < k.P) {
      double acc = 0.0;
      for (int64_t c = lane; c < k.P; c += 32)
        acc += J[j * k.P + c] * (beta[c] - beta0[c]);
      acc = warp_sum(acc);
      double xtu_j;
      if (from_trials != nullptr) {
        // Column j, or for the appended intercept (j = ncols_x) the sum of psi.
        xtu_j = warp_column_sum(from_trials, trials_xtu.blocks, static_cast<int>(trials_stride),
                                static_cast<int>(j));
      } else if (j < ncols_x) {
        xtu_j = xtu_partials != nullptr
                    ? warp_column_sum(xtu_partials, blocks,
                                      static_cast<int>(xtu_partials_stride(ncols_x)),
                                      static_cast<int>(j))
                    : static_cast<double>(xtu[j]);
      } else {
        xtu_j = sums[1];  // the intercept column of an appended intercept is all ones
      }
      if (lane == 0) {
        g[j] = (-xtu_j + acc) / sc->total_weight -
               sc->history_coef * rh_sign(beta0[j]) * mask_of(k, j);
        jdelta[j] = acc;
        if (j == 0)
          sc->lamm_accepted = 0;
      }
    }
  }
  if (accept.dir != nullptr && runs)
    accept_after_last_arrival(accept, jdelta, beta0, k, sc);
}

template <class T>
__global__ void assemble_hessian_kernel(const T* gram, const double* J, BatchConstants k,
                                        const DeviceScalars* sc, double* H) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  const int64_t P = k.P;
  const int64_t total = P * P;
  const double inv_n = 1.0 / sc->total_weight;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    H[idx] = hessian_entry(gram, J, P, idx % P, idx / P, inv_n, k.ridge);
  }
}

__global__ void resume_kernel(DeviceScalars* sc) {
  enter_stream_order();
  if (needs_host(sc->state))
    sc->state = kRunning;
}

__global__ void matvec_kernel(const double* A, const double* v, const DeviceScalars* sc,
                              double* out, int64_t P) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (j >= P)
    return;
  double acc = 0.0;
  for (int64_t c = lane; c < P; c += 32)
    acc += A[j * P + c] * v[c];
  acc = warp_sum(acc);
  if (lane == 0)
    out[j] = acc;
}

__global__ void newton_candidate_kernel(const double* beta, const double* dir,
                                        const DeviceScalars* sc, double* out, int64_t P) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < P;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[j] = beta[j] - dir[j];
}

}  // namespace

template <class T>
void launch_begin_update(const double* weight_partials, const unsigned long long* bad_partials,
                         int blocks, const BatchConstants& k, const T* coefficients,
                         const T* information, double* beta0, double* beta, double* J,
                         DeviceScalars* sc, cudaStream_t s) {
  launch_kernel("begin_update_kernel", begin_update_kernel<T>, elementwise_blocks(k.P * k.P + k.P),
                kThreads, s, weight_partials, bad_partials, blocks, k, coefficients, information,
                beta0, beta, J, sc);
}

template <class T>
void launch_gradient(const double* J, const double* beta, const double* beta0, const T* xtu,
                     const double* xtu_partials, int64_t ncols_x, const BatchConstants& k,
                     const double* partials, int blocks, bool set_objective, DeviceScalars* sc,
                     double* g, double* jdelta, RunWhen when, const GramSum<T>& gram_sum,
                     const NewtonAccept& accept, const LammTrialsXtu& trials_xtu, cudaStream_t s) {
  const int gradient_grid = warp_rows_blocks(k.P);
  launch_kernel("gradient_kernel", gradient_kernel<T>, gradient_grid + gram_sum_blocks(gram_sum),
                kThreads, s, J, beta, beta0, xtu, xtu_partials, ncols_x, k, partials, blocks,
                set_objective ? 1 : 0, sc, g, jdelta, static_cast<int>(when), gram_sum,
                gradient_grid, accept, trials_xtu);
}

template <class T>
void launch_assemble_hessian(const T* gram, const double* J, const BatchConstants& k,
                             const DeviceScalars* sc, double* H, cudaStream_t s) {
  launch_kernel("assemble_hessian_kernel", assemble_hessian_kernel<T>,
                elementwise_blocks(k.P * k.P), kThreads, s, gram, J, k, sc, H);
}

template <class T>
void launch_gram_sum(const GramSum<T>& sum, cudaStream_t s) {
  launch_kernel("gram_sum_kernel", gram_sum_kernel<T>, gram_sum_blocks(sum), kThreads, s, sum);
}

void launch_resume(DeviceScalars* sc, cudaStream_t s) {
  launch_kernel("resume_kernel", resume_kernel, 1, 1, s, sc);
}

void launch_matvec(const double* A, const double* v, const DeviceScalars* sc, double* out,
                   int64_t P, cudaStream_t s) {
  launch_kernel("matvec_kernel", matvec_kernel, warp_rows_blocks(P), kThreads, s, A, v, sc, out, P);
}

void launch_newton_candidate(const double* beta, const double* dir, const DeviceScalars* sc,
                             double* out, int64_t P, cudaStream_t s) {
  launch_kernel("newton_candidate_kernel", newton_candidate_kernel, elementwise_blocks(P), kThreads,
                s, beta, dir, sc, out, P);
}

#define RH_INSTANTIATE_STEP_KERNELS(T)                                                            \
  template void launch_begin_update<T>(const double*, const unsigned long long*, int,             \
                                       const BatchConstants&, const T*, const T*, double*,        \
                                       double*, double*, DeviceScalars*, cudaStream_t);           \
  template void launch_gradient<T>(                                                               \
      const double*, const double*, const double*, const T*, const double*, int64_t,              \
      const BatchConstants&, const double*, int, bool, DeviceScalars*, double*, double*, RunWhen, \
      const GramSum<T>&, const NewtonAccept&, const LammTrialsXtu&, cudaStream_t);                \
  template void launch_assemble_hessian<T>(const T*, const double*, const BatchConstants&,        \
                                           const DeviceScalars*, double*, cudaStream_t);          \
  template void launch_gram_sum<T>(const GramSum<T>&, cudaStream_t);

RH_INSTANTIATE_STEP_KERNELS(float)
RH_INSTANTIATE_STEP_KERNELS(double)

}  // namespace rh
