// The Cholesky factor of Newton systems above the one-block limit, up to a few hundred
// parameters (Engine::small_dense_max < P <= Engine::cluster_cholesky_max), by one cluster of
// thread blocks (docs/decisions.md, "The cluster Cholesky"). It takes the place of the assembly
// and cuSOLVER's potrf: it assembles H = (G + J) / N + ridge I from the Gram and J as potrf's
// input would be, factors H = L L' and leaves L (lower, column-major) and potrf's info where
// launch_cholesky_verdict_solve reads them.
//
// cuSOLVER's potrf at P = 257 runs one kernel of about 190 us on an H200: a chain of column
// steps on few multiprocessors. Here the chain is of 32-column tiles, and the work between two
// steps is spread over the cluster:
// - The lower triangle's 32 x 32 tiles (the identity beyond P) are dealt out cyclically to the
//   cluster's blocks (tile (i, j), j <= i, number q = i (i + 1) / 2 + j, goes to block q mod C,
//   slot q / C) and stay in their owner's shared memory from the assembly to the final store.
// - Step k (right-looking): the owner of the diagonal tile (k, k) has factored it; every block
//   with a tile (i, k) below it copies that factor from the owner's shared memory (distributed
//   shared memory) and solves its tiles L_ik = A_ik L_kk^-T, a warp per tile; then every block
//   copies the panel tiles its trailing tiles need and updates them, A_ij -= L_ik L_jk', a warp
//   per tile on the float64 tensor cores. The owner of tile (k + 1, k + 1) updates that one
//   first, in warp 0, and factors it at once, while its other warps update the rest. Two cluster
//   barriers per step.
// - The diagonal factor is one warp's symmetric elimination with a lane per row in registers: one
//   shared-memory broadcast of the pivot column per step, the pivots' square roots applied at the
//   end, so each of the 32 steps waits on a division, not on a square root. 1 / L_rr travels in
//   the tile's padding column to the panel solves.
// - A pivot that is not finite and positive is recorded (the first, potrf's info) and the
//   factorisation goes on in NaNs; launch_cholesky_verdict_solve refuses such a factor.
#include <cooperative_groups.h>

#include <climits>

#include "engine_error.hpp"
#include "step_common.cuh"

namespace rh {

namespace {

namespace cg = cooperative_groups;

constexpr int kClusterThreads = 256;
constexpr int kClusterWarps = kClusterThreads / 32;
constexpr int kTile = 32;
// Row stride of a tile in shared memory: the mma fragments' loads (lane l at row l / 4, column
// l % 4) are conflict-free with 36; column 32 of a diagonal tile carries 1 / L_rr.
constexpr int kLd = 36;
constexpr int kInverseColumn = kTile;
constexpr int kTileElems = kTile * kLd;
// The copy of a tile between blocks: its 32 rows of columns 0..33 as 17 double2 each.
constexpr int kCopyPairs = (kInverseColumn + 2) / 2;
constexpr int kCopyElems = kTile * kCopyPairs;
// Tile rows are bits of a 32-bit mask; 16 tile rows keep every shape within the shared memory of
// a 16-block cluster.
constexpr int kMaxTiles = 16;
constexpr int kMaxLowerTiles = kMaxTiles * (kMaxTiles + 1) / 2;
constexpr int kClusterSizes[] = {8, 16};  // the portable size first

__host__ __device__ constexpr int tile_count(int64_t P) {
  return static_cast<int>((P + kTile - 1) / kTile);
}

__host__ __device__ constexpr int lower_tiles(int T) {
  return T * (T + 1) / 2;
}

__host__ __device__ constexpr int tile_number(int i, int j) {
  return i * (i + 1) / 2 + j;
}

// Each block's owned tiles, then the panel copies (one slot per tile row).
size_t cluster_cholesky_bytes(int64_t P, int C) {
  const int T = tile_count(P);
  const int slots = (lower_tiles(T) + C - 1) / C;
  return static_cast<size_t>(slots + T) * kTileElems * sizeof(double);
}

// The smallest cluster whose blocks' tiles fit `shared_limit` bytes (0: none).
int cluster_size_for(int64_t P, int shared_limit) {
  if (P <= 0 || tile_count(P) > kMaxTiles)
    return 0;
  for (int C : kClusterSizes) {
    if (cluster_cholesky_bytes(P, C) <= static_cast<size_t>(shared_limit))
      return C;
  }
  return 0;
}

// The diagonal tile D (tile t) replaced by its Cholesky factor, lower, by one warp; 1 / L_rr in
// column kInverseColumn. Lane r holds row r; step j broadcasts column j through `column` (two
// buffers, so one __syncwarp per step) and every later row takes a_rc -= (a_rj / d_j) a_cj. The
// rows' entries then hold R with H = R' D^-1 R (d_j the pivots), so L = R D^-1/2. The first
// column below P whose pivot is not finite and positive goes to *bad (an atomicMin).
__device__ __forceinline__ void factor_diagonal_tile(double* D, int t, int64_t P,
                                                     double (*column)[kTile], double* inverse_root,
                                                     int* bad) {
  const int lane = threadIdx.x & 31;
  double a[kTile];
#pragma unroll
  for (int c = 0; c < kTile; ++c)
    a[c] = c <= lane ? D[lane * kLd + c] : 0.0;
  double pivot_mine = 1.0;
#pragma unroll
  for (int j = 0; j < kTile; ++j) {
    double* buffer = column[j & 1];
    buffer[lane] = a[j];
    __syncwarp();
    const double pivot = buffer[j];
    if (lane == j)
      pivot_mine = pivot;
    const double multiplier = lane > j ? a[j] * (1.0 / pivot) : 0.0;
#pragma unroll
    for (int c = j + 1; c < kTile; ++c)
      a[c] = fma(-multiplier, buffer[c], a[c]);
  }
  const int64_t global = static_cast<int64_t>(t) * kTile + lane;
  const bool refused = global < P && !(isfinite(pivot_mine) && pivot_mine > 0.0);
  const unsigned refusals = __ballot_sync(0xffffffffu, refused);
  if (refusals != 0 && lane == 0)
    atomicMin(bad, t * kTile + __ffs(refusals) - 1);
  const double root = sqrt(pivot_mine);
  const double inverse = 1.0 / root;
  inverse_root[lane] = inverse;
  __syncwarp();
#pragma unroll
  for (int c = 0; c < kTile; ++c)
    D[lane * kLd + c] = c < lane ? a[c] * inverse_root[c] : (c == lane ? root : 0.0);
  D[lane * kLd + kInverseColumn] = inverse;
  __syncwarp();
}

// X = A_ik replaced by L_ik = A_ik L_kk^-T (Lkk a factored diagonal tile), by one warp: lane r
// solves row r forward, x_c = (a_c - sum_{m < c} x_m L_cm) / L_cc, column by column.
__device__ __forceinline__ void solve_panel_tile(double* X, const double* Lkk) {
  const int lane = threadIdx.x & 31;
  double x[kTile];
#pragma unroll
  for (int c = 0; c < kTile; ++c)
    x[c] = X[lane * kLd + c];
#pragma unroll
  for (int c = 0; c < kTile; ++c) {
    x[c] *= Lkk[c * kLd + kInverseColumn];
#pragma unroll
    for (int m = c + 1; m < kTile; ++m)
      x[m] = fma(-Lkk[m * kLd + c], x[c], x[m]);
  }
#pragma unroll
  for (int c = 0; c < kTile; ++c)
    X[lane * kLd + c] = x[c];
}

// A -= Li Lj' on the tensor cores, by one warp: 4 x 4 blocks of 8 x 8, eight steps of 4 columns.
// A diagonal tile (Li == Lj) skips the blocks wholly above its diagonal, which nothing reads.
template <bool kDiagonal>
__device__ __forceinline__ void update_tile(double* A, const double* Li, const double* Lj) {
  const int lane = threadIdx.x & 31;
  const int row = lane >> 2;
  const int quad = lane & 3;
  double acc[4][4][2];
#pragma unroll
  for (int rb = 0; rb < 4; ++rb) {
#pragma unroll
    for (int cb = 0; cb < 4; ++cb) {
      if (kDiagonal && cb > rb)
        continue;
      acc[rb][cb][0] = A[(8 * rb + row) * kLd + 8 * cb + 2 * quad];
      acc[rb][cb][1] = A[(8 * rb + row) * kLd + 8 * cb + 2 * quad + 1];
    }
  }
#pragma unroll
  for (int step = 0; step < kTile / 4; ++step) {
    double a[4], b[4];
#pragma unroll
    for (int blk = 0; blk < 4; ++blk) {
      a[blk] = -Li[(8 * blk + row) * kLd + 4 * step + quad];
      b[blk] = Lj[(8 * blk + row) * kLd + 4 * step + quad];
    }
#pragma unroll
    for (int rb = 0; rb < 4; ++rb) {
#pragma unroll
      for (int cb = 0; cb < 4; ++cb) {
        if (kDiagonal && cb > rb)
          continue;
        mma_8x8x4(acc[rb][cb], a[rb], b[cb]);
      }
    }
  }
#pragma unroll
  for (int rb = 0; rb < 4; ++rb) {
#pragma unroll
    for (int cb = 0; cb < 4; ++cb) {
      if (kDiagonal && cb > rb)
        continue;
      A[(8 * rb + row) * kLd + 8 * cb + 2 * quad] = acc[rb][cb][0];
      A[(8 * rb + row) * kLd + 8 * cb + 2 * quad + 1] = acc[rb][cb][1];
    }
  }
  __syncwarp();
}

// The panel tiles (i, k) for every tile row i in `rows`, from their owners' shared memory into
// panel slot i, by the whole block.
__device__ __forceinline__ void copy_panel(const cg::cluster_group& cluster, double* owned,
                                           double* panel, unsigned rows, int k, int C) {
  const int count = __popc(rows);
  for (int e = threadIdx.x; e < count * kCopyElems; e += kClusterThreads) {
    const int n = e / kCopyElems;
    const int within = e - n * kCopyElems;
    const int r = within / kCopyPairs;
    const int pair = within - r * kCopyPairs;
    unsigned later = rows;  // drop the n lowest rows: row i is the next one
    for (int m = 0; m < n; ++m)
      later &= later - 1;
    const int i = __ffs(static_cast<int>(later)) - 1;
    const int q = tile_number(i, k);
    const double* source =
        cluster.map_shared_rank(owned + (q / C) * kTileElems, static_cast<unsigned>(q % C));
    const double2 value = reinterpret_cast<const double2*>(source + r * kLd)[pair];
    reinterpret_cast<double2*>(panel + i * kTileElems + r * kLd)[pair] = value;
  }
  __syncthreads();
}

template <class T>
__global__ void __launch_bounds__(kClusterThreads, 1)
    cluster_cholesky_kernel(const T* gram, const double* J, BatchConstants k,
                            const DeviceScalars* sc, double* L, int* info) {
  if (sc->state != kRunning)
    return;
  extern __shared__ __align__(16) double cluster_shared[];
  __shared__ unsigned char tile_row[kMaxLowerTiles], tile_column[kMaxLowerTiles];
  __shared__ double column[2][kTile];
  __shared__ double inverse_root[kTile];
  __shared__ int bad;          // this block's first refused pivot
  __shared__ int cluster_bad;  // block 0: the cluster's
  const cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int64_t P = k.P;
  const int tiles = tile_count(P);
  const int slots = (lower_tiles(tiles) + C - 1) / C;
  const int mine = (lower_tiles(tiles) - rank + C - 1) / C;  // tiles q = rank + s C
  double* owned = cluster_shared;
  double* panel = cluster_shared + slots * kTileElems;
  if (tid == 0) {
    int s = 0;
    for (int i = 0; i < tiles; ++i) {
      for (int j = 0; j <= i; ++j) {
        if (tile_number(i, j) % C == rank) {
          tile_row[s] = static_cast<unsigned char>(i);
          tile_column[s] = static_cast<unsigned char>(j);
          ++s;
        }
      }
    }
    bad = INT_MAX;
    cluster_bad = INT_MAX;
  }
  __syncthreads();
  // H's lower triangle as potrf would read it (assemble_hessian_kernel's formula); the identity
  // beyond P, zeros above the diagonal and in the padding columns.
  const double inv_n = 1.0 / sc->total_weight;
  for (int e = tid; e < mine * kTileElems; e += kClusterThreads) {
    const int s = e / kTileElems;
    const int rr = (e / kLd) % kTile;
    const int cc = e % kLd;
    const int64_t r = static_cast<int64_t>(tile_row[s]) * kTile + rr;
    const int64_t c = static_cast<int64_t>(tile_column[s]) * kTile + cc;
    double value = r == c ? 1.0 : 0.0;
    if (cc >= kTile) {
      value = 0.0;
    } else if (r < P && c < P && r >= c) {
      value = (static_cast<double>(gram[c + r * P]) + J[r * P + c]) * inv_n;
      if (r == c)
        value += k.ridge;
    }
    owned[e] = value;
  }
  __syncthreads();
  if (rank == 0 && warp == 0)  // tile 0 is (0, 0), block 0's slot 0
    factor_diagonal_tile(owned, 0, P, column, inverse_root, &bad);

  for (int step = 0;; ++step) {
    cluster.sync();  // the diagonal tile (step, step) is factored
    if (step == tiles - 1)
      break;
    // The panel solves.
    bool any_panel = false;
    for (int s = 0; s < mine; ++s)
      any_panel |= tile_column[s] == step && tile_row[s] > step;
    if (any_panel) {
      copy_panel(cluster, owned, panel, 1u << step, step, C);
      int n = 0;
      for (int s = 0; s < mine; ++s) {
        if (tile_column[s] == step && tile_row[s] > step) {
          if (n % kClusterWarps == warp)
            solve_panel_tile(owned + s * kTileElems, panel + step * kTileElems);
          ++n;
        }
      }
    }
    cluster.sync();  // the panel (i, step), i > step, is solved
    // The trailing update, and the next diagonal tile's factor.
    unsigned rows = 0;
    int next_diagonal = -1;
    for (int s = 0; s < mine; ++s) {
      if (tile_column[s] > step) {
        rows |= (1u << tile_row[s]) | (1u << tile_column[s]);
        if (tile_row[s] == step + 1 && tile_column[s] == step + 1)
          next_diagonal = s;
      }
    }
    if (rows == 0)
      continue;
    copy_panel(cluster, owned, panel, rows, step, C);
    const int first = next_diagonal >= 0 ? 1 : 0;  // warp 0 takes the diagonal tile
    if (next_diagonal >= 0 && warp == 0) {
      double* D = owned + next_diagonal * kTileElems;
      const double* Li = panel + (step + 1) * kTileElems;
      update_tile<true>(D, Li, Li);
      factor_diagonal_tile(D, step + 1, P, column, inverse_root, &bad);
    }
    int n = 0;
    for (int s = 0; s < mine; ++s) {
      if (tile_column[s] > step && s != next_diagonal) {
        if (warp >= first && n % (kClusterWarps - first) == warp - first) {
          double* A = owned + s * kTileElems;
          const double* Li = panel + tile_row[s] * kTileElems;
          const double* Lj = panel + tile_column[s] * kTileElems;
          if (tile_row[s] == tile_column[s])
            update_tile<true>(A, Li, Lj);
          else
            update_tile<false>(A, Li, Lj);
        }
        ++n;
      }
    }
  }

  // L's lower triangle below P, column-major, where potrf leaves it.
  for (int e = tid; e < mine * kTile * kTile; e += kClusterThreads) {
    const int s = e / (kTile * kTile);
    const int cc = (e / kTile) % kTile;
    const int rr = e % kTile;
    const int64_t r = static_cast<int64_t>(tile_row[s]) * kTile + rr;
    const int64_t c = static_cast<int64_t>(tile_column[s]) * kTile + cc;
    if (r < P && c < P && r >= c)
      L[r + c * P] = owned[s * kTileElems + rr * kLd + cc];
  }
  if (tid == 0 && bad != INT_MAX)
    atomicMin(cluster.map_shared_rank(&cluster_bad, 0u), bad);
  cluster.sync();
  if (rank == 0 && tid == 0)
    *info = cluster_bad == INT_MAX ? 0 : cluster_bad + 1;
}

template <class T>
void allow_cluster_cholesky(int shared_limit) {
  check_cuda(cudaFuncSetAttribute(cluster_cholesky_kernel<T>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, shared_limit),
             "cudaFuncSetAttribute (cluster Cholesky shared memory)");
  check_cuda(cudaFuncSetAttribute(cluster_cholesky_kernel<T>,
                                  cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
             "cudaFuncSetAttribute (cluster Cholesky cluster size)");
}

// One cluster of C blocks with `bytes` of dynamic shared memory each.
struct ClusterLaunch {
  cudaLaunchAttribute attribute{};
  cudaLaunchConfig_t config{};
  ClusterLaunch(int C, size_t bytes, cudaStream_t s) {
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(C);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.gridDim = dim3(static_cast<unsigned>(C));
    config.blockDim = dim3(kClusterThreads);
    config.dynamicSmemBytes = bytes;
    config.stream = s;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Whether such a cluster can run on the device at all.
bool cluster_fits(int C, size_t bytes) {
  const ClusterLaunch launch(C, bytes, nullptr);
  int clusters = 0;
  check_cuda(
      cudaOccupancyMaxActiveClusters(&clusters, cluster_cholesky_kernel<double>, &launch.config),
      "cudaOccupancyMaxActiveClusters (cluster Cholesky)");
  return clusters >= 1;
}

}  // namespace

ClusterCholeskyLimits configure_cluster_cholesky(int device) {
  int cluster_launch = 0;
  check_cuda(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device),
             "cudaDeviceGetAttribute (cluster launch)");
  if (cluster_launch == 0)
    return {};
  int optin = 0;
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, cluster_cholesky_kernel<double>),
             "cudaFuncGetAttributes (cluster Cholesky)");
  int shared_limit = optin - static_cast<int>(attributes.sharedSizeBytes);
  allow_cluster_cholesky<float>(shared_limit);
  allow_cluster_cholesky<double>(shared_limit);
  // The sizes the device runs; a size it cannot (a partition with few multiprocessors) is never
  // asked for, its shapes going to cuSOLVER.
  ClusterCholeskyLimits limits;
  limits.shared_bytes = shared_limit;
  for (int64_t P = 1; P <= int64_t{kMaxTiles} * kTile; ++P) {
    const int C = cluster_size_for(P, shared_limit);
    if (C == 0 || !cluster_fits(C, cluster_cholesky_bytes(P, C)))
      break;
    limits.max_p = P;
  }
  return limits;
}

template <class T>
void launch_cluster_cholesky(const T* gram, const double* J, const BatchConstants& k,
                             const DeviceScalars* sc, double* factor, int* info, int shared_limit,
                             cudaStream_t s) {
  const int C = cluster_size_for(k.P, shared_limit);
  if (C == 0)
    fail(RH_CUDA_INTERNAL_ERROR, "cluster Cholesky: no cluster fits P = %lld",
         static_cast<long long>(k.P));
  const ClusterLaunch launch(C, cluster_cholesky_bytes(k.P, C), s);
  check_cuda(
      cudaLaunchKernelEx(&launch.config, cluster_cholesky_kernel<T>, gram, J, k, sc, factor, info),
      "cudaLaunchKernelEx (cluster Cholesky)");
  check_launch("cluster_cholesky_kernel");
}

template void launch_cluster_cholesky<float>(const float*, const double*, const BatchConstants&,
                                             const DeviceScalars*, double*, int*, int,
                                             cudaStream_t);
template void launch_cluster_cholesky<double>(const double*, const double*, const BatchConstants&,
                                              const DeviceScalars*, double*, int*, int,
                                              cudaStream_t);

}  // namespace rh
