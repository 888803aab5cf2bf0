// The pieces of spec/ALGORITHM.md evaluated per row, always in double.
#pragma once

#include <cuda_runtime.h>

namespace rh {

__device__ __forceinline__ double huber_rho(double r, double tau) {
  const double a = fabs(r);
  return a <= tau ? 0.5 * r * r : tau * a - 0.5 * tau * tau;
}

__device__ __forceinline__ double huber_psi(double r, double tau) {
  return fmin(fmax(r, -tau), tau);
}

// Derivative of the paper's quadratic-transition score: a trapezoid with ramps of half-width h
// around +-tau.
__device__ __forceinline__ double smoothed_curvature(double r, double tau, double h) {
  if (r < -tau - h || r > tau + h) return 0.0;
  if (r <= -tau + h) return 0.5 + (r + tau) / (2.0 * h);
  if (r >= tau - h) return 0.5 - (r - tau) / (2.0 * h);
  return 1.0;
}

__device__ __forceinline__ double soft_threshold(double v, double t) {
  const double m = fabs(v) - t;
  if (m <= 0.0) return 0.0;
  return v > 0.0 ? m : -m;
}

__device__ __forceinline__ double sign_of(double v) { return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0); }

// Deterministic block sum over blockDim.x == kThreads threads; every thread gets the result.
template <int Threads>
__device__ __forceinline__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = Threads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

}  // namespace rh
