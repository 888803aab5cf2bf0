// What the step kernels share (step_kernels.cu, linear_solve_kernels.cu, cluster_cholesky.cu,
// newton_kernels.cu, lamm_kernels.cu, commit_kernels.cu; the row pass takes its helpers too):
// kernels on P-sized vectors and P x P matrices that run on a single block or a few warps and
// reduce in a fixed order, so every decision they take is reproducible. Device helpers and the
// launch shapes of those kernels.
#pragma once

#include <cstdint>

#include "huber_math.cuh"
#include "kernels.hpp"

namespace rh {

constexpr int kWarps = kThreads / 32;  // warps of a kThreads block

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

// The largest of an int over the warp, in every lane (the reduction instruction from sm_80).
__device__ __forceinline__ int warp_max(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  for (int offset = 16; offset > 0; offset >>= 1) {
    const int other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
#else
  return __reduce_max_sync(0xffffffffu, v);
#endif
}

// Entry (row, col) of the Newton matrix H = (G + J) / N + ridge I, as every kernel that forms or
// judges it reads it (inv_n = 1 / N): G from its upper triangle (gram[lo + hi P]), J as stored
// (J[row P + col]). The assembly for cuSOLVER, the one-block and cluster kernels and the
// acceptance tests all take it from here.
template <class T>
__device__ __forceinline__ double hessian_entry(const T* gram, const double* J, int64_t P,
                                                int64_t row, int64_t col, double inv_n,
                                                double ridge) {
  const int64_t lo = row < col ? row : col;
  const int64_t hi = row < col ? col : row;
  const double value = (static_cast<double>(gram[lo + hi * P]) + J[row * P + col]) * inv_n;
  return row == col ? value + ridge : value;
}

// The Cholesky acceptance test of one squared pivot (docs/decisions.md, "Linear solve ladder"):
// finite, positive (potrf's own test) and above rh_pivot_floor(P, eps) times H's own diagonal
// entry. The one-block, cluster and verdict-and-solve kernels all judge their factors by it.
__device__ __forceinline__ bool cholesky_pivot_accepted(double pivot, double diagonal,
                                                        double floor) {
  return isfinite(pivot) && pivot > 0.0 && pivot > floor * diagonal;
}

// 1 / d for an elimination's pivot: the hardware's approximate reciprocal (about 23 bits)
// refined by two Newton steps, within an ulp of 1 / d for normal d. The compiler's division (and
// __drcp_rn) adds a range check and a call to a slow path behind a branch, inside the divergent
// region of the one thread or the rows that need it: on a factorisation's dependent chain, once
// per column (docs/decisions.md, "The cluster Cholesky"). A zero, subnormal (flushed to zero) or
// non-finite d gives inf or NaN, and the factorisations refuse such a pivot either way.
__device__ __forceinline__ double pivot_reciprocal(double d) {
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(d));
  double e = fma(-d, r, 1.0);
  r = fma(r, e, r);
  e = fma(-d, r, 1.0);
  return fma(r, e, r);
}

// D += A B for one 8 x 8 x 4 step on the float64 tensor cores: lane l holds A[l / 4][l % 4],
// B[l % 4][l / 4] and D[l / 4][2 (l % 4) + {0, 1}].
// Before sm_80 there are none: the kernels that use them are never launched there
// (has_float64_mma, configure_cluster_cholesky), and the step traps if one were.
__device__ __forceinline__ void mma_8x8x4(double (&d)[2], double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  (void)d;
  (void)a;
  (void)b;
  __trap();
#else
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a), "d"(b));
#endif
}

// The float32 LAMM objective f = fl(fl(fl(fl(L) + 0.5f fl(Q)) / fl(N)) - fl(D)) from double
// reductions L = sum w rho, Q = delta' J delta, D = history . delta, each rounded once.
__device__ __forceinline__ double float_objective(double L, double Q, double N, double D) {
  const float sum = __fadd_rn(static_cast<float>(L), __fmul_rn(0.5f, static_cast<float>(Q)));
  return static_cast<double>(
      __fsub_rn(__fdiv_rn(sum, static_cast<float>(N)), static_cast<float>(D)));
}

// Launch shapes: blocks for one warp per row of a P-row job, and a capped grid over `count`
// elements (the kernels stride over the rest).
inline int warp_rows_blocks(int64_t P) {
  return static_cast<int>((P + kWarps - 1) / kWarps);
}

inline int elementwise_blocks(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxElementwiseBlocks ? wanted : kMaxElementwiseBlocks);
}

}  // namespace rh
