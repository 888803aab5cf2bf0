// The pieces of docs/algorithm.md evaluated per row, always in double.
#pragma once

#include <cuda_runtime.h>

#include "solver_types.hpp"

namespace rh {

__device__ __forceinline__ bool should_run(const DeviceScalars* sc, int when) {
  const int state = sc->state;
  if (when == kRunWhileRunning)
    return state == kRunning;
  if (when == kRunWhileFresh)
    return state == kRunning || sc->fresh;
  if (when == kRunWhenEnded)
    return solve_ended(*sc);
  if (when == kRunWhileConfirming)
    return state == kRunning || sc->confirming;
  if (when == kRunUnlessTrialsGradient)
    return state == kRunning && sc->lamm_trials_gradient == 0;
  return state != kInvalidData;
}

__device__ __forceinline__ double huber_psi(double r, double tau) {
  return fmin(fmax(r, -tau), tau);
}

// Derivative of the paper's quadratic-transition score: a trapezoid with ramps of half-width h
// around +-tau.
__device__ __forceinline__ double smoothed_curvature(double r, double tau, double h) {
  if (r < -tau - h || r > tau + h)
    return 0.0;
  if (r <= -tau + h)
    return 0.5 + (r + tau) / (2.0 * h);
  if (r >= tau - h)
    return 0.5 - (r - tau) / (2.0 * h);
  return 1.0;
}

__device__ __forceinline__ double soft_threshold(double v, double t) {
  const double m = fabs(v) - t;
  if (m <= 0.0)
    return 0.0;
  return v > 0.0 ? m : -m;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

// Deterministic block sum over blockDim.x == Threads threads; every thread gets the result.
// A fixed shuffle tree per warp, then the warp totals in warp order: two barriers, whatever
// the block size. `shared` holds at least Threads / 32 doubles.
template <int Threads>
__device__ __forceinline__ double block_sum(double v, double* shared) {
  constexpr int kBlockWarps = Threads / 32;
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0)
    shared[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int w = 0; w < kBlockWarps; ++w)
    total += shared[w];
  __syncthreads();
  return total;
}

// After the warps wrote their totals of N values to shared[warp * N + k]: one barrier, then
// thread k adds value k's totals in warp order and writes the sum to out[k].
template <int Threads, int N>
__device__ __forceinline__ void add_warp_totals(const double* shared, double* out) {
  constexpr int kBlockWarps = Threads / 32;
  __syncthreads();
  if (threadIdx.x < N) {
    double total = 0.0;
#pragma unroll
    for (int w = 0; w < kBlockWarps; ++w)
      total += shared[w * N + threadIdx.x];
    out[threadIdx.x] = total;
  }
}

// N block sums at once (the line-search trials, the LAMM attempts): each warp reduces its N
// values with the fixed shuffle tree, then add_warp_totals. `shared` holds at least
// N * Threads / 32 doubles.
template <int Threads, int N>
__device__ __forceinline__ void block_sums_to(const double (&acc)[N], double* shared, double* out) {
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const double v = warp_sum(acc[k]);
    if ((threadIdx.x & 31) == 0)
      shared[warp * N + k] = v;
  }
  add_warp_totals<Threads, N>(shared, out);
}

// Entry idx (row-major, idx = row P + col) of the symmetric matrix whose upper triangle cuBLAS's
// syrk wrote in column-major order: element (min, max) of the pair, read from that triangle.
__device__ inline int64_t mirrored_upper_index(int64_t idx, int64_t P) {
  const int64_t row = idx / P;
  const int64_t col = idx % P;
  return row < col ? row + col * P : col + row * P;
}

}  // namespace rh
