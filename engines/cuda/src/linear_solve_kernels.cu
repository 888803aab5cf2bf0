// The Newton step's linear-solve ladder on the device (docs/decisions.md, "Linear solve
// ladder"; linear_solve.cu orchestrates it): the one-block Cholesky solve of small systems, the
// acceptance tests of cuSOLVER's Cholesky and LU factors (rh_pivot_floor), the SVD's
// minimum-norm solve (rh_rank_cutoff) and the equilibration by powers of two.
#include <cmath>
#include <utility>

#include "engine_error.hpp"
#include "step_common.cuh"

namespace rh {

namespace {

// Small symmetric systems (P <= Engine::small_dense_max) in one block and shared memory:
// assembles H = (G + J) / N + ridge I, factors H = U'U (upper, row-major), applies the same
// acceptance test as check_cholesky_kernel (every pivot finite and above rh_pivot_floor(P, eps)
// times its own column's diagonal of H; a pivot is the squared diagonal of U) and, on the same
// data, solves H dir = g and forms jdir = J dir for the line search. A refused factor moves the
// state to kNeedsFallback, exactly as check_cholesky_kernel does after cuSOLVER's potrf.
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
  const double floor = rh_pivot_floor(P, k.dtype_epsilon);
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

// Cholesky (cuSOLVER's factor): every squared pivot finite and above rh_pivot_floor(P, eps) times
// its own column's diagonal of H, recomputed from G and J exactly as the assembly formed it (potrf
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
  const double floor = rh_pivot_floor(P, k.dtype_epsilon);
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

// LU (the host-driven fallback): every pivot finite, min |u_ii| > rh_pivot_floor(P, eps) max
// |u_ii|.
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
    const int accepted =
        *info == 0 && finite_shared[0] && lo_shared[0] > rh_pivot_floor(P, eps) * hi_shared[0];
    sc->factor_ok = accepted;
  }
}

// Minimum-norm solve through A = U S V^T: dir = V S^+ U^T g, small singular values dropped.
__global__ void svd_solve_kernel(const double* U, const double* S, const double* V, const double* g,
                                 int64_t P, double eps, double* scratch, double* dir, int* rank) {
  const double cutoff = rh_rank_cutoff(P, eps, S[0]);
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

}  // namespace

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

#define RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(T)                                                  \
  template void launch_small_cholesky_solve<T>(const T*, const double*, const BatchConstants&,  \
                                               DeviceScalars*, const double*, double*, double*, \
                                               cudaStream_t);                                   \
  template void launch_check_cholesky<T>(const double*, const int*, const T*, const double*,    \
                                         const BatchConstants&, DeviceScalars*, cudaStream_t);

RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(float)
RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(double)

}  // namespace rh
