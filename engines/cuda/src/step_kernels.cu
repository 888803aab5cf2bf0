// Kernels on P-sized vectors and P x P matrices: the Newton and LAMM bookkeeping that keeps
// beta, F, phi and the convergence state on the device between iterations. Single-block
// kernels reduce in a fixed order, so every decision they take is reproducible.
#include <cmath>
#include <utility>

#include "engine_error.hpp"
#include "huber_math.cuh"
#include "kernels.hpp"

namespace rh {

namespace {

constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ double mask_of(const BatchConstants& k, int64_t j) {
  return (k.fit_intercept && j == k.P - 1) ? 0.0 : 1.0;
}

// Fixed-order sum of partials[b * stride + column] over b, done by one warp.
__device__ __forceinline__ double warp_column_sum(const double* partials, int blocks, int stride,
                                                  int column) {
  const int lane = threadIdx.x & 31;
  // Every load first (row grids have at most kMaxRowBlocks blocks: one memory latency, not one
  // per load), then the sum in block order.
  constexpr int kPerLane = (kMaxRowBlocks + 31) / 32;
  double loaded[kPerLane];
#pragma unroll
  for (int m = 0; m < kPerLane; ++m) {
    const int b = lane + 32 * m;
    loaded[m] = b < blocks ? partials[b * stride + column] : 0.0;
  }
  double acc = 0.0;
#pragma unroll
  for (int m = 0; m < kPerLane; ++m) {
    if (lane + 32 * m < blocks)
      acc += loaded[m];
  }
  for (int b = lane + 32 * kPerLane; b < blocks; b += 32)
    acc += partials[b * stride + column];
  return warp_sum(acc);
}

// The float32 LAMM objective f = fl(fl(fl(fl(L) + 0.5f fl(Q)) / fl(N)) - fl(D)) from double
// reductions L = sum w rho, Q = delta' J delta, D = history . delta, each rounded once.
__device__ __forceinline__ double float_objective(double L, double Q, double N, double D) {
  const float sum = __fadd_rn(static_cast<float>(L), __fmul_rn(0.5f, static_cast<float>(Q)));
  return static_cast<double>(
      __fsub_rn(__fdiv_rn(sum, static_cast<float>(N)), static_cast<float>(D)));
}

// The start of an update, in one launch. Block 0 finishes the validation pass: sums the batch
// weight in a fixed order, takes the first bad index of each kind, and sets every per-batch
// scalar, with the state kRunning, or kInvalidData when the data are refused. Every block then
// loads the committed state as doubles: beta0 = beta = coefficients, J = information.
template <class T>
__global__ void begin_update_kernel(const double* weight_partials,
                                    const unsigned long long* bad_partials, int blocks,
                                    BatchConstants k, const T* coefficients, const T* information,
                                    double* beta0, double* beta, double* J, DeviceScalars* sc) {
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
    const double batch_weight = block_sum<kThreads>(acc, shared);  // also settles `bad`
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
      out.history_coef = k.use_history ? (k.previous_weight / N) * k.previous_lambda : 0.0;
      out.phi = 1.0;
      out.first_bad_x = bad[0];
      out.first_bad_y = bad[1];
      out.first_bad_w = bad[2];
      out.first_negative_w = bad[3];
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

// Sums the row pass's partials in a fixed order (every block alike; block 0 stores rho_sum,
// score_sum and, with set_objective, F = rho_sum / N at beta0), then g = (-X'u + J delta) / N
// - history term and J delta, one warp per coefficient (X'u from the row pass's per-block
// partials, summed in a fixed order, or from cuBLAS).
template <class T>
__global__ void gradient_kernel(const double* J, const double* beta, const double* beta0,
                                const T* xtu, const double* xtu_partials, int64_t ncols_x,
                                BatchConstants k, const double* partials, int blocks,
                                int set_objective, DeviceScalars* sc, double* g, double* jdelta,
                                int when) {
  if (!should_run(sc, when))
    return;
  __shared__ double sums[2];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (warp < 2) {
    const double total = warp_column_sum(partials, blocks, 2, warp);
    if (lane == 0)
      sums[warp] = total;
  }
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    sc->rho_sum = sums[0];
    sc->score_sum = sums[1];
    if (set_objective) {
      // At beta0: delta = 0, so Q = D = 0.
      sc->objective = k.float_lamm ? float_objective(sums[0], 0.0, sc->total_weight, 0.0)
                                   : sums[0] / sc->total_weight;
    }
  }
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (j >= k.P)
    return;
  double acc = 0.0;
  for (int64_t c = lane; c < k.P; c += 32)
    acc += J[j * k.P + c] * (beta[c] - beta0[c]);
  acc = warp_sum(acc);
  double xtu_j = sums[1];  // the intercept column of an appended intercept is all ones
  if (j < ncols_x) {
    xtu_j = xtu_partials != nullptr
                ? warp_column_sum(xtu_partials, blocks, static_cast<int>(kWideRowColumns),
                                  static_cast<int>(j))
                : static_cast<double>(xtu[j]);
  }
  if (lane != 0)
    return;
  g[j] = (-xtu_j + acc) / sc->total_weight - sc->history_coef * sign_of(beta0[j]) * mask_of(k, j);
  jdelta[j] = acc;
  if (j == 0)
    sc->lamm_accepted = 0;
}

template <class T>
__global__ void assemble_hessian_kernel(const T* gram, const double* J, BatchConstants k,
                                        const DeviceScalars* sc, double* H) {
  if (sc->state != kRunning)
    return;
  const int64_t P = k.P;
  const int64_t total = P * P;
  const double inv_n = 1.0 / sc->total_weight;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    const int64_t row = idx % P;
    const int64_t col = idx / P;
    const int64_t lo = row < col ? row : col;
    const int64_t hi = row < col ? col : row;
    const double value = (static_cast<double>(gram[lo + hi * P]) + J[row * P + col]) * inv_n;
    H[idx] = row == col ? value + k.ridge : value;
  }
}

// Sums the per-chunk partial Grams of a split Gram in chunk order (double accumulation), so the
// result depends only on the batch shape.
template <class T>
__global__ void sum_gram_partials_kernel(const T* partials, int chunks, int64_t PP, T* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < PP;
       idx += stride) {
    double acc = 0.0;
    for (int c = 0; c < chunks; ++c)
      acc += static_cast<double>(partials[c * PP + idx]);
    out[idx] = static_cast<T>(acc);
  }
}

// Many chunks (small P, many rows): one warp per element, lane l summing chunks l, l+32, ...
// and then a fixed shuffle tree, so the sum is still fixed-order and every thread has little
// to walk.
template <class T>
__global__ void sum_gram_partials_warp_kernel(const T* partials, int chunks, int64_t PP, T* out) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t idx = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5; idx < PP;
       idx += warps) {
    double acc = 0.0;
    for (int c = lane; c < chunks; c += 32)
      acc += static_cast<double>(partials[c * PP + idx]);
    acc = warp_sum(acc);
    if (lane == 0)
      out[idx] = static_cast<T>(acc);
  }
}

// Small symmetric systems (P <= Engine::small_dense_max) in one block and shared memory:
// assembles H = (G + J) / N + ridge I, factors H = U'U (upper, row-major), applies the same
// acceptance test as check_cholesky_kernel (every pivot finite and above 64 P eps times its own
// column's diagonal of H; a pivot is the squared diagonal of U) and, on the same data, solves
// H dir = g and forms jdir = J dir for the line search. A refused factor moves the state to
// kNeedsFallback, exactly as check_cholesky_kernel does after cuSOLVER's potrf.
//
// Latency decides the time here, not work: one block barrier per column, and the step that
// makes the next pivot ready is the only chain between two barriers. Row kk of U is formed on
// the fly as A[kk][.] / sqrt(d_kk), with the reciprocal root (rsqrt, within an ulp) made by the
// thread whose update finalises d_kk; the stored row is scaled one column later, when nothing
// reads it. The two triangular solves run in one warp with the right-hand side in registers
// (Slots per lane) and a shuffle per column. Slots = ceil(P / 32): the kernel is instantiated
// for each, so a row costs the instructions of its own width.
constexpr int kSmallDenseSlots = static_cast<int>((kSmallDenseCap + 31) / 32);

// Slot s of a lane holds index lane + 32 s. Constant indices only, so the array stays in
// registers.
template <int Slots>
__device__ __forceinline__ double slot_value(const double (&v)[Slots], int slot) {
  double out = 0.0;
#pragma unroll
  for (int s = 0; s < Slots; ++s)
    out = s == slot ? v[s] : out;
  return out;
}

template <class T, int Slots>
__global__ void small_cholesky_solve_kernel(const T* gram, const double* J, BatchConstants k,
                                            DeviceScalars* sc, const double* g, double* dir,
                                            double* jdir) {
  if (sc->state != kRunning)
    return;
  extern __shared__ double smem[];
  const int P = static_cast<int>(k.P);
  double* A = smem;                 // P x P, row-major; the upper triangle becomes U
  double* pivots = A + P * P;       // P: d_kk, the squared diagonal of U
  double* inv_root = pivots + P;    // P: 1 / sqrt(d_kk)
  double* diagonal = inv_root + P;  // P: H's diagonal, for the pivot test
  double* solution = diagonal + P;  // P: dir, for J dir
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warps = nthreads >> 5;
  const double inv_n = 1.0 / sc->total_weight;
  for (int idx = tid; idx < P * P; idx += nthreads) {
    const int i = idx / P;
    const int j = idx - i * P;
    if (i <= j) {
      const double value = (static_cast<double>(gram[i + static_cast<int64_t>(j) * P]) +
                            J[static_cast<int64_t>(i) * P + j]) *
                           inv_n;
      A[idx] = i == j ? value + k.ridge : value;
      if (i == j)
        diagonal[i] = A[idx];
    }
  }
  __syncthreads();
  if (tid == 0) {
    pivots[0] = A[0];
    inv_root[0] = rsqrt(A[0]);
  }

  for (int kk = 0; kk < P; ++kk) {
    __syncthreads();  // row kk is final and inv_root[kk] is set
    const double ir = inv_root[kk];
    if (kk > 0) {
      const double previous = inv_root[kk - 1];
      for (int j = kk + tid; j < P; j += nthreads)
        A[(kk - 1) * P + j] *= previous;
    }
    const double* pivot_row = A + kk * P;
    for (int i = kk + 1 + warp; i < P; i += warps) {
      // Every load of the row first (stores to A would otherwise order them one by one).
      const double ui = pivot_row[i] * ir;
      double* row = A + i * P;
      double pivot_part[Slots];
      double updated[Slots];
#pragma unroll
      for (int s = 0; s < Slots; ++s) {
        const int j = i + lane + 32 * s;
        pivot_part[s] = j < P ? pivot_row[j] : 0.0;
        updated[s] = j < P ? row[j] : 0.0;
      }
#pragma unroll
      for (int s = 0; s < Slots; ++s) {
        const int j = i + lane + 32 * s;
        updated[s] -= ui * (pivot_part[s] * ir);
        if (j < P)
          row[j] = updated[s];
      }
      if (i == kk + 1 && lane == 0) {  // the next pivot is final: its root for the next column
        pivots[i] = updated[0];
        inv_root[i] = rsqrt(updated[0]);
      }
    }
  }
  __syncthreads();

  // U' z = g (forward), then U dir = z (backward), in warp 0: lane l holds indices l + 32 s.
  if (warp == 0) {
    double r[Slots];
#pragma unroll
    for (int s = 0; s < Slots; ++s) {
      const int i = lane + 32 * s;
      r[s] = i < P ? g[i] : 0.0;
    }
    for (int kk = 0; kk < P; ++kk) {
      const double zk = __shfl_sync(0xffffffffu, slot_value(r, kk >> 5), kk & 31) * inv_root[kk];
#pragma unroll
      for (int s = 0; s < Slots; ++s) {
        const int j = lane + 32 * s;
        if (j > kk && j < P)
          r[s] -= A[kk * P + j] * zk;
        if (j == kk)
          r[s] = zk;
      }
    }
    for (int kk = P - 1; kk >= 0; --kk) {
      const double xk = __shfl_sync(0xffffffffu, slot_value(r, kk >> 5), kk & 31) * inv_root[kk];
#pragma unroll
      for (int s = 0; s < Slots; ++s) {
        const int j = lane + 32 * s;
        if (j < kk)
          r[s] -= A[j * P + kk] * xk;
        if (j == kk)
          r[s] = xk;
      }
    }
#pragma unroll
    for (int s = 0; s < Slots; ++s) {
      const int i = lane + 32 * s;
      if (i < P) {
        dir[i] = r[s];
        solution[i] = r[s];
      }
    }
  }
  int refused = 0;
  const double floor = 64.0 * static_cast<double>(P) * k.dtype_epsilon;
  for (int i = tid; i < P; i += nthreads) {
    const double d = pivots[i];
    if (!isfinite(d) || !(d > floor * diagonal[i]))
      refused = 1;
  }
  refused = __syncthreads_or(refused);  // also publishes the solution to every warp
  // jdir = J dir, one row per warp, in the lane order and shuffle tree of matvec_kernel.
  for (int j = warp; j < P; j += warps) {
    double acc = 0.0;
    for (int c = lane; c < P; c += 32)
      acc += J[static_cast<int64_t>(j) * P + c] * solution[c];
    acc = warp_sum(acc);
    if (lane == 0)
      jdir[j] = acc;
  }
  if (tid == 0) {
    sc->factor_ok = refused ? 0 : 1;
    if (refused)
      sc->state = kNeedsFallback;
  }
}

// Cholesky (cuSOLVER's factor): every squared pivot finite and above 64 P eps times its own
// column's diagonal of H, recomputed from G and J exactly as the assembly formed it (potrf
// overwrote H): the share of the column left after projecting out the earlier ones, a test
// that rescaling a column does not change (docs/decisions.md).
template <class T>
__global__ void check_cholesky_kernel(const double* factor, const int* info, const T* gram,
                                      const double* J, BatchConstants k, DeviceScalars* sc) {
  if (sc->state != kRunning)
    return;
  __shared__ int refused_shared;
  if (threadIdx.x == 0)
    refused_shared = 0;
  __syncthreads();
  const int64_t P = k.P;
  const double inv_n = 1.0 / sc->total_weight;
  const double floor = 64.0 * static_cast<double>(P) * k.dtype_epsilon;
  for (int64_t j = threadIdx.x; j < P; j += kThreads) {
    const double root = factor[j + j * P];
    const double pivot = root * root;
    const double diagonal = (static_cast<double>(gram[j + j * P]) + J[j * P + j]) * inv_n + k.ridge;
    if (!isfinite(pivot) || !(pivot > floor * diagonal))
      refused_shared = 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int accepted = *info == 0 && !refused_shared;
    sc->factor_ok = accepted;
    if (!accepted)
      sc->state = kNeedsFallback;
  }
}

// LU (the host-driven fallback): every pivot finite, min |u_ii| > 64 P eps max |u_ii|.
__global__ void check_factor_kernel(const double* factor, const int* info, int64_t P, double eps,
                                    DeviceScalars* sc) {
  if (sc->state != kRunning)
    return;
  __shared__ double lo_shared[kThreads];
  __shared__ double hi_shared[kThreads];
  __shared__ int finite_shared[kThreads];
  double lo = INFINITY;
  double hi = 0.0;
  int finite = 1;
  for (int64_t i = threadIdx.x; i < P; i += kThreads) {
    const double d = fabs(factor[i + i * P]);
    if (!isfinite(d))
      finite = 0;
    lo = fmin(lo, d);
    hi = fmax(hi, d);
  }
  lo_shared[threadIdx.x] = lo;
  hi_shared[threadIdx.x] = hi;
  finite_shared[threadIdx.x] = finite;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      lo_shared[threadIdx.x] = fmin(lo_shared[threadIdx.x], lo_shared[threadIdx.x + s]);
      hi_shared[threadIdx.x] = fmax(hi_shared[threadIdx.x], hi_shared[threadIdx.x + s]);
      finite_shared[threadIdx.x] &= finite_shared[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const int accepted = *info == 0 && finite_shared[0] &&
                         lo_shared[0] > 64.0 * static_cast<double>(P) * eps * hi_shared[0];
    sc->factor_ok = accepted;
  }
}

__global__ void resume_kernel(DeviceScalars* sc) {
  if (needs_host(sc->state))
    sc->state = kRunning;
}

__global__ void matvec_kernel(const double* A, const double* v, const DeviceScalars* sc,
                              double* out, int64_t P) {
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

// First trial index at which beta - t d rounds back to beta in every component (kLineSearchTrials
// when none does). Rounding is monotone in t, so every later, smaller step vanishes as well.
__device__ int vanishing_trial(const double* beta, const double* dir, int64_t P, int* shared) {
  int first = 0;
  for (int64_t j = threadIdx.x; j < P; j += kThreads) {
    double t = 1.0;
    int trial = 0;
    while (trial < kLineSearchTrials && beta[j] - t * dir[j] != beta[j]) {
      t *= 0.5;
      ++trial;
    }
    first = max(first, trial);
  }
  shared[threadIdx.x] = first;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shared[threadIdx.x] = max(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const int result = shared[0];
  __syncthreads();
  return result;
}

// The line search of docs/algorithm.md ("Unpenalised"). F is the objective at beta evaluated
// like the reference does, from the fresh residual of the last row pass; a trial whose candidate
// equals beta bitwise has objective exactly F and is accepted, as in the reference: the fused
// r + t (x . d) form would otherwise compare F with a rounding-perturbed copy of itself near the
// optimum. All 27 trials rejected: along the Newton direction (majoriser == 0) the iteration
// pauses in kNeedsMajoriser, uncounted, for the host's fallback step; along the majoriser's
// direction it ends the solve, converged when g'd / 2 is within rounding of F.
__global__ void newton_select_kernel(const double* partials, int blocks, const double* dir,
                                     const double* jdelta, const double* jdir, const double* beta0,
                                     const double* g, int majoriser, BatchConstants k,
                                     DeviceScalars* sc, double* beta) {
  __shared__ double shared[kThreads];
  __shared__ int shared_index[kThreads];
  __shared__ double trial_sums[kLineSearchTrials];
  __shared__ double chosen_step;
  __shared__ int zero_step;
  if (sc->state != kRunning) {
    // A step queued after the solve ended: nothing moved, so the row pass after it has
    // nothing to refresh.
    if (threadIdx.x == 0)
      sc->fresh = 0;
    return;
  }
  const int warp = threadIdx.x >> 5;
  for (int t = warp; t < kLineSearchTrials; t += kWarps) {
    // The trials kernel writes trial-major partials: this trial's are contiguous.
    const double total = warp_column_sum(partials + static_cast<int64_t>(t) * blocks, blocks, 1, 0);
    if ((threadIdx.x & 31) == 0)
      trial_sums[t] = total;
  }
  double a = 0.0, b = 0.0, c = 0.0;
  for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
    const double delta = beta[j] - beta0[j];
    a += delta * jdelta[j];
    b += dir[j] * jdelta[j] + delta * jdir[j];
    c += dir[j] * jdir[j];
  }
  a = block_sum<kThreads>(a, shared);
  b = block_sum<kThreads>(b, shared);
  c = block_sum<kThreads>(c, shared);
  const int vanishes_from = vanishing_trial(beta, dir, k.P, shared_index);
  double nonzero = 0.0;
  for (int64_t j = threadIdx.x; j < k.P; j += kThreads)
    nonzero += dir[j] != 0.0 ? 1.0 : 0.0;
  nonzero = block_sum<kThreads>(nonzero, shared);
  // Thread 0's: a step the line search cut short ends the solve only when it also changed f by
  // at most tol |f| (short because of the cut, it says nothing of the distance to the optimum,
  // which a first-order decrease of f reveals).
  bool settled = false;
  if (threadIdx.x == 0) {
    const double N = sc->total_weight;
    const double F = (sc->rho_sum + 0.5 * a) / N;
    // After a zero Newton step the majoriser's step must strictly decrease f.
    const bool strict = majoriser && sc->zero_newton_step;
    double t = 1.0;
    int chosen = -1;
    chosen_step = 0.0;
    sc->objective = F;
    for (int trial = 0; trial < kLineSearchTrials; ++trial) {
      const double f =
          trial >= vanishes_from ? F : (trial_sums[trial] + 0.5 * (a - t * b + t * t * c)) / N;
      if (f < F || (f == F && !strict)) {
        chosen_step = t;
        chosen = trial;
        sc->objective = f;
        break;
      }
      t *= 0.5;
    }
    // A zero Newton direction (a singular H) is no progress: the iteration pauses for the
    // majoriser as if every trial had been rejected.
    zero_step = !majoriser && chosen >= 0 && nonzero == 0.0;
    if (zero_step) {
      chosen_step = 0.0;
      sc->objective = F;
    }
    settled = chosen == 0 || F - sc->objective <= k.tolerance * fabs(sc->objective);
    if (chosen_step != 0.0 || majoriser)
      sc->iterations += 1;
  }
  __syncthreads();
  const double t = chosen_step;
  if (t == 0.0) {
    if (!majoriser) {
      if (threadIdx.x == 0) {
        sc->state = kNeedsMajoriser;
        sc->fresh = 0;
        sc->zero_newton_step = zero_step;
      }
      return;
    }
    if (sc->zero_newton_step) {
      // No strictly decreasing majoriser step: the zero Newton step stands (Delta = 0 passes
      // the step test), beta is optimal to rounding.
      __syncthreads();
      if (threadIdx.x == 0) {
        sc->state = kConverged;
        sc->fresh = 0;
        sc->zero_newton_step = 0;
      }
      return;
    }
    // The decrease the majoriser's quadratic model predicts for the full step.
    double gd = 0.0;
    for (int64_t j = threadIdx.x; j < k.P; j += kThreads)
      gd += g[j] * dir[j];
    gd = block_sum<kThreads>(gd, shared);
    if (threadIdx.x == 0) {
      sc->state =
          rh_within_rounding(0.5 * gd, sc->objective, k.dtype_epsilon) ? kConverged : kStalled;
      sc->fresh = 0;
    }
    return;
  }
  double step2 = 0.0, norm2 = 0.0;
  for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
    const double updated = beta[j] - t * dir[j];
    const double step = updated - beta[j];
    beta[j] = updated;
    step2 += step * step;
    norm2 += updated * updated;
  }
  step2 = block_sum<kThreads>(step2, shared);
  norm2 = block_sum<kThreads>(norm2, shared);
  if (threadIdx.x == 0) {
    sc->fresh = 1;
    sc->zero_newton_step = 0;
    if (!isfinite(norm2) || !isfinite(sc->objective)) {
      sc->state = kNonFinite;
    } else if (settled && sqrt(step2) <= k.tolerance * (1.0 + sqrt(norm2))) {
      sc->state = kConverged;
    }
  }
}

// Minimum-norm solve through A = U S V^T: dir = V S^+ U^T g, small singular values dropped.
__global__ void svd_solve_kernel(const double* U, const double* S, const double* V, const double* g,
                                 int64_t P, double eps, double* scratch, double* dir, int* rank) {
  const double cutoff = eps * static_cast<double>(P) * S[0];
  for (int64_t col = threadIdx.x; col < P; col += kThreads) {
    double acc = 0.0;
    if (S[col] > cutoff) {
      for (int64_t r = 0; r < P; ++r)
        acc += U[r + col * P] * g[r];
      acc /= S[col];
    }
    scratch[col] = acc;
  }
  if (threadIdx.x == 0) {
    int kept = 0;
    for (int64_t col = 0; col < P; ++col)
      kept += S[col] > cutoff;
    *rank = kept;
  }
  __syncthreads();
  for (int64_t r = threadIdx.x; r < P; r += kThreads) {
    double acc = 0.0;
    for (int64_t col = 0; col < P; ++col)
      acc += V[r + col * P] * scratch[col];
    dir[r] = acc;
  }
}

// d_i = rh_equilibration_factor(H_ii) (1 for every i when unit), dg = d * g; marks the
// equilibrated matrix finite until launch_equilibrate_matrix finds otherwise.
__global__ void equilibration_kernel(const double* H, const double* g, int64_t P, int unit,
                                     double* d, double* dg, DeviceScalars* sc) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < P;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double f = unit ? 1.0 : rh_equilibration_factor(H[i + i * P]);
    d[i] = f;
    dg[i] = f * g[i];
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    sc->equilibrated_finite = 1;
}

__global__ void equilibrate_matrix_kernel(double* H, const double* d, int64_t P,
                                          DeviceScalars* sc) {
  const int64_t count = P * P;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = H[idx] * d[idx % P] * d[idx / P];
    H[idx] = v;
    if (!isfinite(v))
      sc->equilibrated_finite = 0;
  }
}

__global__ void scale_vector_kernel(double* v, const double* d, int64_t P) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < P;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    v[i] *= d[i];
  }
}

// One group of LAMM attempts: attempt first_attempt + a (a < count) uses phi 2^(first_attempt + a).
// trial_terms per attempt of the group: [0] the LAMM upper bound U, [1] ||Delta||^2,
// [2] <delta, sign(b0) m>, [3] phi. The three sums of kLammChunk attempts share one block
// reduction (the same shuffle tree and warp order as block_sum, so the same bits).
__global__ void lamm_candidates_kernel(int first_attempt, int count, const double* beta,
                                       const double* beta0, const double* g, BatchConstants k,
                                       const DeviceScalars* sc, double* candidates, double* deltas,
                                       double* trial_terms) {
  if (sc->state != kRunning || sc->lamm_accepted)
    return;
  __shared__ double shared[3 * kLammChunk * kWarps];
  __shared__ double sums[3 * kLammChunk];
  for (int c0 = 0; c0 < count; c0 += kLammChunk) {
    double acc[3 * kLammChunk];
#pragma unroll
    for (int i = 0; i < 3 * kLammChunk; ++i)
      acc[i] = 0.0;
    for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
      const double m = mask_of(k, j);
#pragma unroll
      for (int a = 0; a < kLammChunk; ++a) {
        const double phi = ldexp(sc->phi, first_attempt + c0 + a);
        double cand = soft_threshold(beta[j] - g[j] / phi, m * sc->lambda / phi);
        if (k.float_lamm)
          cand = static_cast<double>(static_cast<float>(cand));
        const double step = cand - beta[j];
        const double delta = cand - beta0[j];
        candidates[(c0 + a) * k.P + j] = cand;
        deltas[(c0 + a) * k.P + j] = delta;
        acc[3 * a + 0] += g[j] * step;
        acc[3 * a + 1] += step * step;
        acc[3 * a + 2] += delta * sign_of(beta0[j]) * m;
      }
    }
    block_sums_to<kThreads>(acc, shared, sums);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int a = 0; a < kLammChunk; ++a) {
        const double phi = ldexp(sc->phi, first_attempt + c0 + a);
        double* terms = trial_terms + (c0 + a) * 4;
        terms[0] = sc->objective + sums[3 * a + 0] + phi * sums[3 * a + 1] / 2.0;
        terms[1] = sums[3 * a + 1];
        terms[2] = sums[3 * a + 2];
        terms[3] = phi;
      }
    }
    __syncthreads();  // the next chunk reuses `shared` and `sums`
  }
}

__global__ void lamm_quadratic_kernel(const double* J, const double* deltas, int count, int64_t P,
                                      const DeviceScalars* sc, double* jdeltas) {
  if (sc->state != kRunning || sc->lamm_accepted)
    return;
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (j >= P)
    return;
  for (int c0 = 0; c0 < count; c0 += kLammChunk) {
    const double* chunk = deltas + c0 * P;
    double acc[kLammChunk];
#pragma unroll
    for (int a = 0; a < kLammChunk; ++a)
      acc[a] = 0.0;
    for (int64_t c = lane; c < P; c += 32) {
      const double Jjc = J[j * P + c];
#pragma unroll
      for (int a = 0; a < kLammChunk; ++a)
        acc[a] += Jjc * chunk[a * P + c];
    }
#pragma unroll
    for (int a = 0; a < kLammChunk; ++a) {
      const double total = warp_sum(acc[a]);
      if (lane == 0)
        jdeltas[(c0 + a) * P + j] = total;
    }
  }
}

// The first acceptable attempt of the group, in order. An iteration ends with the group that
// accepts. Nothing acceptable: after the first group the next one runs; after the 40th attempt
// the iteration pauses in kNeedsLammBound, uncounted, for the host's curvature-bound group;
// after that group the solve ends, converged when the last attempt's phi ||Delta||^2 / 2 is
// within rounding of F (docs/algorithm.md, "Penalised").
__global__ void lamm_pick_kernel(int count, int group, const double* partials, int blocks,
                                 const double* candidates, const double* deltas,
                                 const double* jdeltas, const double* trial_terms, BatchConstants k,
                                 DeviceScalars* sc, double* beta) {
  if (sc->state != kRunning || sc->lamm_accepted)
    return;
  __shared__ double shared[kLammChunk * kWarps];
  __shared__ double rho_sums[kLammMaxGroup];
  __shared__ double quad[kLammMaxGroup];
  __shared__ int chosen;
  const int warp = threadIdx.x >> 5;
  for (int a = warp; a < count; a += kWarps) {
    const double total = warp_column_sum(partials, blocks, count, a);
    if ((threadIdx.x & 31) == 0)
      rho_sums[a] = total;
  }
  for (int c0 = 0; c0 < count; c0 += kLammChunk) {
    double acc[kLammChunk];
#pragma unroll
    for (int a = 0; a < kLammChunk; ++a)
      acc[a] = 0.0;
    for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
#pragma unroll
      for (int a = 0; a < kLammChunk; ++a) {
        acc[a] += deltas[(c0 + a) * k.P + j] * jdeltas[(c0 + a) * k.P + j];
      }
    }
    block_sums_to<kThreads>(acc, shared, quad + c0);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    chosen = -1;
    const double N = sc->total_weight;
    for (int a = 0; a < count; ++a) {
      const double D = sc->history_coef * trial_terms[a * 4 + 2];
      double f = k.float_lamm ? float_objective(rho_sums[a], quad[a], N, D)
                              : (rho_sums[a] + 0.5 * quad[a]) / N - D;
      // A candidate equal to beta bit for bit has objective exactly F ("The line search at
      // the rounding floor"), whatever the row sums' last bits.
      if (trial_terms[a * 4 + 1] == 0.0)
        f = sc->objective;
      if (f <= trial_terms[a * 4 + 0] + RH_LAMM_SLACK) {
        chosen = a;
        sc->objective = f;
        sc->phi = fmax(trial_terms[a * 4 + 3] / 2.0, RH_LAMM_PHI_FLOOR);
        break;
      }
    }
    if (chosen >= 0 || group == kLammGroupBound)
      sc->iterations += 1;
    if (chosen < 0 && group == kLammGroupRest)
      sc->state = kNeedsLammBound;
    if (chosen < 0 && group == kLammGroupBound) {
      const double* last = trial_terms + (count - 1) * 4;
      const double predicted = last[3] * last[1] / 2.0;
      sc->state =
          rh_within_rounding(predicted, sc->objective, k.dtype_epsilon) ? kConverged : kStalled;
    }
  }
  __syncthreads();
  const int a = chosen;
  if (a < 0)
    return;
  double norm2 = 0.0;
  for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
    const double value = candidates[a * k.P + j];
    beta[j] = value;
    norm2 += value * value;
  }
  norm2 = block_sum<kThreads>(norm2, shared);
  if (threadIdx.x == 0) {
    sc->lamm_accepted = 1;
    if (!isfinite(norm2) || !isfinite(sc->objective)) {
      sc->state = kNonFinite;
    } else if (sqrt(trial_terms[a * 4 + 1]) <= k.tolerance * (1.0 + sqrt(norm2))) {
      sc->state = kConverged;
    }
  }
}

// LAMM's curvature-bound start after the 40th rejection (docs/algorithm.md, "Penalised").
// partials (one per block of launch_weighted_square_norms, or null once the bound is kept):
// L = (sum_i w_i ||x_i||^2 + trace J) / N, summed in a fixed order and kept in lamm_bound, which
// the batch fixes for the whole solve. Then phi = max(2^40 phi, L), 2^40 phi being the phi the
// 41st attempt would have had: the group that follows tries phi, 2 phi, ..., 2^7 phi.
__global__ void lamm_bound_kernel(const double* partials, int blocks, const double* J, int64_t P,
                                  DeviceScalars* sc) {
  if (sc->state != kRunning)
    return;
  __shared__ double shared[kThreads];
  if (partials != nullptr) {
    double sum_w_x2 = 0.0;
    for (int b = threadIdx.x; b < blocks; b += kThreads)
      sum_w_x2 += partials[b];
    double trace = 0.0;
    for (int64_t j = threadIdx.x; j < P; j += kThreads)
      trace += J[j * P + j];
    sum_w_x2 = block_sum<kThreads>(sum_w_x2, shared);
    trace = block_sum<kThreads>(trace, shared);
    if (threadIdx.x == 0)
      sc->lamm_bound = rh_lamm_phi_bound(sum_w_x2, trace, sc->total_weight);
  }
  if (threadIdx.x == 0)
    sc->phi = fmax(ldexp(sc->phi, kLammAttempts), sc->lamm_bound);
}

// J_new = J + G (mirrored) into the scratch information and, when exporting, into the pinned
// host buffer (mapped: pinned memory is device-addressable under unified addressing); each block
// flags a non-finite value in block_flags[block]. Only once the solve has ended: the finish of a
// chunk that another chunk follows writes nothing but the status block.
template <class T>
__global__ void commit_information_kernel(const double* J, const T* gram, int64_t P,
                                          const DeviceScalars* sc, T* info_out, T* host_info,
                                          int* block_flags) {
  if (!solve_ended(*sc)) {
    if (threadIdx.x == 0)
      block_flags[blockIdx.x] = 0;
    return;
  }
  const int64_t total = P * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int bad = 0;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    const double added = static_cast<double>(gram[mirrored_upper_index(idx, P)]);
    const T value = static_cast<T>(J[idx] + added);
    info_out[idx] = value;
    if (host_info != nullptr)
      host_info[idx] = value;
    if (!isfinite(static_cast<double>(value)))
      bad = 1;
  }
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0)
    block_flags[blockIdx.x] = bad;
}

// The new coefficients (scratch state and, when exporting, the pinned host buffer), the
// penalised objective, commit_nonfinite from both kernels, and then the whole status block to
// the pinned host copy the host reads after its synchronisation: the last launch of a chunk.
template <class T>
__global__ void commit_coefficients_kernel(const double* beta, BatchConstants k,
                                           const int* block_flags, int flag_blocks,
                                           DeviceScalars* sc, T* coef_out, T* host_coef,
                                           DeviceScalars* host_status) {
  __shared__ double shared[kThreads];
  double l1 = 0.0;
  int bad = 0;
  const bool ended = solve_ended(*sc);
  for (int64_t j = threadIdx.x; ended && j < k.P; j += kThreads) {
    const T value = static_cast<T>(beta[j]);
    coef_out[j] = value;
    if (host_coef != nullptr)
      host_coef[j] = value;
    if (!isfinite(static_cast<double>(value)))
      bad = 1;
    l1 += fabs(beta[j]) * mask_of(k, j);
  }
  for (int b = threadIdx.x; b < flag_blocks; b += kThreads)
    bad |= block_flags[b];
  l1 = block_sum<kThreads>(l1, shared);
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0) {
    sc->penalised_objective = sc->objective + sc->lambda * l1;
    sc->commit_nonfinite = bad;
    *host_status = *sc;
    __threadfence_system();
  }
}

int warp_rows_blocks(int64_t P) {
  return static_cast<int>((P + kWarps - 1) / kWarps);
}

int elementwise_blocks(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxElementwiseBlocks ? wanted : kMaxElementwiseBlocks);
}

}  // namespace

template <class T>
void launch_begin_update(const double* weight_partials, const unsigned long long* bad_partials,
                         int blocks, const BatchConstants& k, const T* coefficients,
                         const T* information, double* beta0, double* beta, double* J,
                         DeviceScalars* sc, cudaStream_t s) {
  begin_update_kernel<T><<<elementwise_blocks(k.P * k.P + k.P), kThreads, 0, s>>>(
      weight_partials, bad_partials, blocks, k, coefficients, information, beta0, beta, J, sc);
  check_launch("begin_update_kernel");
}

template <class T>
void launch_gradient(const double* J, const double* beta, const double* beta0, const T* xtu,
                     const double* xtu_partials, int64_t ncols_x, const BatchConstants& k,
                     const double* partials, int blocks, bool set_objective, DeviceScalars* sc,
                     double* g, double* jdelta, RunWhen when, cudaStream_t s) {
  gradient_kernel<T><<<warp_rows_blocks(k.P), kThreads, 0, s>>>(
      J, beta, beta0, xtu, xtu_partials, ncols_x, k, partials, blocks, set_objective ? 1 : 0, sc, g,
      jdelta, static_cast<int>(when));
  check_launch("gradient_kernel");
}

template <class T>
void launch_assemble_hessian(const T* gram, const double* J, const BatchConstants& k,
                             const DeviceScalars* sc, double* H, cudaStream_t s) {
  assemble_hessian_kernel<T><<<elementwise_blocks(k.P * k.P), kThreads, 0, s>>>(gram, J, k, sc, H);
  check_launch("assemble_hessian_kernel");
}

template <class T>
void launch_sum_gram_partials(const T* partials, int chunks, int64_t P, T* out, cudaStream_t s) {
  if (chunks > 16) {
    sum_gram_partials_warp_kernel<T>
        <<<warp_rows_blocks(P * P), kThreads, 0, s>>>(partials, chunks, P * P, out);
  } else {
    sum_gram_partials_kernel<T>
        <<<elementwise_blocks(P * P), kThreads, 0, s>>>(partials, chunks, P * P, out);
  }
  check_launch("sum_gram_partials_kernel");
}

// A whole block of warps: each column's trailing update is spread one row per warp, so the
// latency of a column is a few shared-memory round trips, not a warp's walk over many rows
// (256 threads measured slower on an H200: 34 vs 27 us at P = 33, 158 vs 95 us at P = 91).
constexpr int kSmallDenseThreads = 1024;

constexpr size_t small_cholesky_shared_bytes(int64_t P) {
  return static_cast<size_t>(P * P + 4 * P) * sizeof(double);
}

template <class T, int Slots>
void allow_small_dense_bytes(int bytes) {
  check_cuda(cudaFuncSetAttribute(small_cholesky_solve_kernel<T, Slots>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute (one-block Cholesky)");
}

template <class T, int... Slots>
void allow_small_dense_bytes_all(int bytes, std::integer_sequence<int, Slots...>) {
  (allow_small_dense_bytes<T, Slots + 1>(bytes), ...);
}

int64_t configure_small_dense(int device, int64_t cap) {
  int optin = 0;
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  int64_t limit = 0;
  while (limit < cap && small_cholesky_shared_bytes(limit + 1) <= static_cast<size_t>(optin)) {
    ++limit;
  }
  // Above the 48 KiB every kernel may use, the kernels opt in to the bytes the limit needs.
  const size_t bytes = small_cholesky_shared_bytes(limit);
  if (bytes > 48 * 1024) {
    const auto slots = std::make_integer_sequence<int, kSmallDenseSlots>{};
    allow_small_dense_bytes_all<float>(static_cast<int>(bytes), slots);
    allow_small_dense_bytes_all<double>(static_cast<int>(bytes), slots);
  }
  return limit;
}

template <class T, int Slots>
void launch_small_cholesky_slots(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                 cudaStream_t s) {
  const size_t bytes = small_cholesky_shared_bytes(k.P);
  small_cholesky_solve_kernel<T, Slots>
      <<<1, kSmallDenseThreads, bytes, s>>>(gram, J, k, sc, g, dir, jdir);
  check_launch("small_cholesky_solve_kernel");
}

template <class T>
void launch_small_cholesky_solve(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                 cudaStream_t s) {
  static_assert(kSmallDenseSlots == 5, "one case per slot count below");
  switch ((k.P + 31) / 32) {
    case 1:
      return launch_small_cholesky_slots<T, 1>(gram, J, k, sc, g, dir, jdir, s);
    case 2:
      return launch_small_cholesky_slots<T, 2>(gram, J, k, sc, g, dir, jdir, s);
    case 3:
      return launch_small_cholesky_slots<T, 3>(gram, J, k, sc, g, dir, jdir, s);
    case 4:
      return launch_small_cholesky_slots<T, 4>(gram, J, k, sc, g, dir, jdir, s);
    default:
      return launch_small_cholesky_slots<T, 5>(gram, J, k, sc, g, dir, jdir, s);
  }
}

template <class T>
void launch_check_cholesky(const double* factor, const int* info, const T* gram, const double* J,
                           const BatchConstants& k, DeviceScalars* sc, cudaStream_t s) {
  check_cholesky_kernel<T><<<1, kThreads, 0, s>>>(factor, info, gram, J, k, sc);
  check_launch("check_cholesky_kernel");
}

void launch_check_factor(const double* factor, const int* info, int64_t P, double eps,
                         DeviceScalars* sc, cudaStream_t s) {
  check_factor_kernel<<<1, kThreads, 0, s>>>(factor, info, P, eps, sc);
  check_launch("check_factor_kernel");
}

void launch_resume(DeviceScalars* sc, cudaStream_t s) {
  resume_kernel<<<1, 1, 0, s>>>(sc);
  check_launch("resume_kernel");
}

void launch_matvec(const double* A, const double* v, const DeviceScalars* sc, double* out,
                   int64_t P, cudaStream_t s) {
  matvec_kernel<<<warp_rows_blocks(P), kThreads, 0, s>>>(A, v, sc, out, P);
  check_launch("matvec_kernel");
}

void launch_newton_select(const double* partials, int blocks, const double* dir,
                          const double* jdelta, const double* jdir, const double* beta0,
                          const double* g, bool majoriser, const BatchConstants& k,
                          DeviceScalars* sc, double* beta, cudaStream_t s) {
  newton_select_kernel<<<1, kThreads, 0, s>>>(partials, blocks, dir, jdelta, jdir, beta0, g,
                                              majoriser ? 1 : 0, k, sc, beta);
  check_launch("newton_select_kernel");
}

void launch_svd_solve(const double* U, const double* S, const double* V, const double* g, int64_t P,
                      double eps, double* scratch, double* dir, int* rank, cudaStream_t s) {
  svd_solve_kernel<<<1, kThreads, 0, s>>>(U, S, V, g, P, eps, scratch, dir, rank);
  check_launch("svd_solve_kernel");
}

void launch_equilibration(const double* H, const double* g, int64_t P, bool unit, double* d,
                          double* dg, DeviceScalars* sc, cudaStream_t s) {
  equilibration_kernel<<<elementwise_blocks(P), kThreads, 0, s>>>(H, g, P, unit ? 1 : 0, d, dg, sc);
  check_launch("equilibration_kernel");
}

void launch_equilibrate_matrix(double* H, const double* d, int64_t P, DeviceScalars* sc,
                               cudaStream_t s) {
  equilibrate_matrix_kernel<<<elementwise_blocks(P * P), kThreads, 0, s>>>(H, d, P, sc);
  check_launch("equilibrate_matrix_kernel");
}

void launch_scale_vector(double* v, const double* d, int64_t P, cudaStream_t s) {
  scale_vector_kernel<<<elementwise_blocks(P), kThreads, 0, s>>>(v, d, P);
  check_launch("scale_vector_kernel");
}

void launch_lamm_candidates(int first_attempt, int count, const double* beta, const double* beta0,
                            const double* g, const BatchConstants& k, const DeviceScalars* sc,
                            double* candidates, double* deltas, double* trial_terms,
                            cudaStream_t s) {
  lamm_candidates_kernel<<<1, kThreads, 0, s>>>(first_attempt, count, beta, beta0, g, k, sc,
                                                candidates, deltas, trial_terms);
  check_launch("lamm_candidates_kernel");
}

void launch_lamm_quadratic(const double* J, const double* deltas, int count, int64_t P,
                           const DeviceScalars* sc, double* jdeltas, cudaStream_t s) {
  lamm_quadratic_kernel<<<warp_rows_blocks(P), kThreads, 0, s>>>(J, deltas, count, P, sc, jdeltas);
  check_launch("lamm_quadratic_kernel");
}

void launch_lamm_pick(int count, LammGroup group, const double* partials, int blocks,
                      const double* candidates, const double* deltas, const double* jdeltas,
                      const double* trial_terms, const BatchConstants& k, DeviceScalars* sc,
                      double* beta, cudaStream_t s) {
  lamm_pick_kernel<<<1, kThreads, 0, s>>>(count, static_cast<int>(group), partials, blocks,
                                          candidates, deltas, jdeltas, trial_terms, k, sc, beta);
  check_launch("lamm_pick_kernel");
}

void launch_lamm_bound(const double* partials, int blocks, const double* J, int64_t P,
                       DeviceScalars* sc, cudaStream_t s) {
  lamm_bound_kernel<<<1, kThreads, 0, s>>>(partials, blocks, J, P, sc);
  check_launch("lamm_bound_kernel");
}

template <class T>
void launch_commit(const double* J, const T* gram, const double* beta, const BatchConstants& k,
                   DeviceScalars* sc, T* info_out, T* coef_out, T* host_state, int* block_flags,
                   DeviceScalars* host_status, cudaStream_t s) {
  const int blocks = elementwise_blocks(k.P * k.P);
  commit_information_kernel<T><<<blocks, kThreads, 0, s>>>(
      J, gram, k.P, sc, info_out, host_state != nullptr ? host_state + k.P : nullptr, block_flags);
  check_launch("commit_information_kernel");
  commit_coefficients_kernel<T>
      <<<1, kThreads, 0, s>>>(beta, k, block_flags, blocks, sc, coef_out, host_state, host_status);
  check_launch("commit_coefficients_kernel");
}

#define RH_INSTANTIATE_STEP_KERNELS(T)                                                            \
  template void launch_begin_update<T>(const double*, const unsigned long long*, int,             \
                                       const BatchConstants&, const T*, const T*, double*,        \
                                       double*, double*, DeviceScalars*, cudaStream_t);           \
  template void launch_gradient<T>(const double*, const double*, const double*, const T*,         \
                                   const double*, int64_t, const BatchConstants&, const double*,  \
                                   int, bool, DeviceScalars*, double*, double*, RunWhen,          \
                                   cudaStream_t);                                                 \
  template void launch_assemble_hessian<T>(const T*, const double*, const BatchConstants&,        \
                                           const DeviceScalars*, double*, cudaStream_t);          \
  template void launch_commit<T>(const double*, const T*, const double*, const BatchConstants&,   \
                                 DeviceScalars*, T*, T*, T*, int*, DeviceScalars*, cudaStream_t); \
  template void launch_sum_gram_partials<T>(const T*, int, int64_t, T*, cudaStream_t);            \
  template void launch_small_cholesky_solve<T>(const T*, const double*, const BatchConstants&,    \
                                               DeviceScalars*, const double*, double*, double*,   \
                                               cudaStream_t);                                     \
  template void launch_check_cholesky<T>(const double*, const int*, const T*, const double*,      \
                                         const BatchConstants&, DeviceScalars*, cudaStream_t);

RH_INSTANTIATE_STEP_KERNELS(float)
RH_INSTANTIATE_STEP_KERNELS(double)

}  // namespace rh
