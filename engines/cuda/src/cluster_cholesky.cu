// The Newton step's solve for systems above the one-block limit, up to a few hundred parameters
// (Engine::small_dense_max < P <= Engine::cluster_cholesky.max_p, 383 on an H200), by one cluster
// of thread blocks (docs/decisions.md, "The cluster Cholesky"). It takes the place of the
// assembly, cuSOLVER's potrf and the verdict-and-solve kernel: it assembles the bordered matrix
// [H 0; g' 1], H = (G + J) / N + ridge I as potrf's input would be, factors it (row P of the
// factor is y' with L y = g: the forward solve), applies the acceptance test of
// cholesky_verdict_solve_kernel to the pivots and, on an accepted factor, solves L' dir = y.
//
// cuSOLVER's potrf at P = 257 runs one kernel of about 190 us on an H200. Here:
// - The lower triangle's 32 x 32 tiles (g' in row P, the identity beyond) stay in shared memory
//   from the assembly to the solve: tile row i in block i mod C (C = the number of tile rows up to
//   8, then 8 or more as shared memory requires).
// - Step k (right-looking): every block with rows below k copies the diagonal factor L_kk from
//   its owner (distributed shared memory) and solves its tiles L_ik = A_ik L_kk^-T, a warp per
//   tile. After a cluster barrier (column k solved), the owner of row k + 1 updates the diagonal
//   tile (k + 1, k + 1) with its own L_k+1,k in warp 0 and factors it, while every block copies
//   the panel tiles of other blocks' rows and updates its trailing tiles, A_ij -= L_ik L_jk', a
//   warp per tile on the float64 tensor cores. A second barrier (factor k + 1 out) ends the step.
// - Barriers split into arrive and wait, so that warp 0's factor overlapped the wait for the
//   other blocks' panel solves, measured 151.0 us per factor at P = 257 against 157.4 us with
//   whole barriers (Nsight Compute, H200), but compute-sanitizer's racecheck reported hazards
//   between the panel solves' stores and the copies that follow the wait; with whole barriers it
//   reports none, so the kernel takes whole ones (docs/decisions.md).
// - The diagonal factor is one warp's symmetric elimination with a lane per row in registers, the
//   pivots' square roots applied at the end, so each of the 32 steps waits on shuffles and a
//   refined approximate reciprocal, not on a square root or a division. 1 / L_rr travels in the
//   tile's padding column to the panel solves.
// - A pivot that fails the acceptance test (not finite, or not above rh_pivot_floor times H's own
//   diagonal entry) is recorded and the factorisation goes on in NaNs; at the end a refused factor
//   moves the state to kNeedsFallback (the host's LU) and leaves dir alone.
// - The back substitution runs a tile row at a time in the block owning it, on its own tiles
//   (the factor never goes to global memory): with x_t known, the owner of tile row t sends the
//   owner of each earlier row j its share L_tj' x_t through distributed shared memory (st.async,
//   counted on the receiver's mbarrier), and a step waits for its own shares, not on a cluster
//   barrier (back_substitute_step). Each diagonal tile but the last is inverted by its owner in
//   the trailing-update phase of its step, behind the next diagonal tile's factor, so a
//   back-substitution step multiplies by the inverse instead of waiting on a chain of 32
//   shuffles.
#include <cooperative_groups.h>

#include <climits>

#include "engine_error.hpp"
#include "kernel_launch.cuh"
#include "step_common.cuh"

namespace rh {

namespace {

namespace cg = cooperative_groups;

constexpr int kClusterThreads = 256;
constexpr int kTile = 32;
// Row stride of a tile in shared memory: the mma fragments' loads (lane l at row l / 4, column
// l % 4) are conflict-free with 36; column kInverseColumn (32) of a diagonal tile carries
// 1 / L_rr.
constexpr int kLd = 36;
constexpr int kTileElems = kTile * kLd;
// Tile rows are bits of 32-bit masks, and a cluster has at most 16 blocks; shared memory limits
// the rows further (12, P + 1 <= 384, on an H200: cluster_cholesky_bytes).
constexpr int kMaxTiles = 16;
constexpr int kClusterSizes[] = {8, 16};  // the portable size first

// The tiles of the bordered matrix [H 0; g' 1] of P + 1 rows (the identity beyond): its factor's
// last row is y' with L y = g, the forward solve.
__host__ __device__ constexpr int tile_count(int64_t P) {
  return static_cast<int>((P + kTile) / kTile);
}

// Tile row i belongs to block i mod C; a block holds its rows' tiles (i, 0..i) one after the
// other: row i starts at slot row_start_of(i, C) in its owner's shared memory.
__host__ __device__ constexpr int row_start_of(int i, int C) {
  const int owner = i % C;
  const int earlier = (i - owner) / C;  // the owner's rows before i: owner + m C, m < earlier
  return earlier * (owner + 1) + C * earlier * (earlier - 1) / 2;
}

// The most tiles a block holds: that of the block with the longest rows.
__host__ __device__ inline int most_owned_tiles(int T, int C) {
  int most = 0;
  for (int rank = 0; rank < C && rank < T; ++rank) {
    const int last = rank + (T - 1 - rank) / C * C;
    const int owned = row_start_of(last, C) + last + 1;
    most = owned > most ? owned : most;
  }
  return most;
}

// The blocks' shared memory: its own tiles, a copy slot per tile row for the panel tiles of other
// blocks, and one for the diagonal factor.
size_t cluster_cholesky_bytes(int64_t P, int C) {
  const int T = tile_count(P);
  return static_cast<size_t>(most_owned_tiles(T, C) + T + 1) * kTileElems * sizeof(double);
}

// The cluster size for P: one block per tile row up to 8, then the smallest size whose blocks'
// tiles fit `shared_limit` bytes (0: none).
int cluster_size_for(int64_t P, int shared_limit) {
  const int T = tile_count(P);
  if (P <= 0 || T > kMaxTiles)
    return 0;
  for (int size : kClusterSizes) {
    const int C = size < T ? size : T;
    if (cluster_cholesky_bytes(P, C) <= static_cast<size_t>(shared_limit))
      return C;
  }
  return 0;
}

// Thread-block clusters begin with sm_90: before it the kernel traps, and
// configure_cluster_cholesky never launches it there (no cluster launch on those devices).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define RH_CLUSTER_CODE 1
#else
#define RH_CLUSTER_CODE 0
#endif

#if RH_CLUSTER_CODE
constexpr int kInverseColumn = kTile;
constexpr int kClusterWarps = kClusterThreads / 32;
// The copy of a tile between blocks, as pairs of doubles: a diagonal factor's 32 rows of columns
// 0..33 (1 / L_rr in column kInverseColumn), a panel tile's columns 0..31.
constexpr int kDiagonalPairs = (kInverseColumn + 2) / 2;
constexpr int kPanelPairs = kTile / 2;
constexpr int kCopyTiles = 3;

// The diagonal tile D (tile t) replaced by its Cholesky factor, lower, by one warp; 1 / L_rr in
// column kInverseColumn. Lane r holds row r; at step j every later row takes a_rc -= (a_rj / d_j)
// a_cj. The pivot d_j comes by a shuffle and the column through `column` (two buffers, so one
// __syncwarp per step); lane j + 1 updates its own pivot from its own a_{j+1,j}. The rows' entries
// then hold R with H = R' D^-1 R (d_j the pivots), so L = R D^-1/2. Each column below P takes
// the acceptance test (cholesky_pivot_accepted, with `diagonal` H's own entry on this lane's
// row); the first column that fails goes to *bad (an atomicMin).
__device__ __forceinline__ void factor_diagonal_tile(double* D, int t, int64_t P, double diagonal,
                                                     double floor, double (*column)[kTile],
                                                     double* inverse_root, int* bad) {
  const int lane = threadIdx.x & 31;
  double a[kTile];
  // Rows go through shared memory in 16-byte pairs: with the row stride kLd, a quarter warp's
  // pairs meet two to a bank where single doubles met eight.
#pragma unroll
  for (int c = 0; c < kTile; c += 2) {
    const double2 pair = *reinterpret_cast<const double2*>(D + lane * kLd + c);
    a[c] = c <= lane ? pair.x : 0.0;
    a[c + 1] = c + 1 <= lane ? pair.y : 0.0;
  }
  double pivot_mine = 1.0;
  // Lane j's reciprocal of its pivot, formed as soon as the pivot is final (step j - 1) and
  // shuffled with it at step j. Every lane forms one (no divergent region); the others' are never
  // read. (Measured: the factor takes as long as with the reciprocal formed after the shuffle;
  // docs/decisions.md, "The cluster Cholesky".)
  double next_inverse = pivot_reciprocal(a[0]);
#pragma unroll
  for (int j = 0; j < kTile; ++j) {
    const double pivot = __shfl_sync(0xffffffffu, a[j], j);
    const double inverse_pivot = __shfl_sync(0xffffffffu, next_inverse, j);
    double* buffer = column[j & 1];
    buffer[lane] = a[j];
    __syncwarp();
    if (lane == j)
      pivot_mine = pivot;
    const double multiplier = lane > j ? a[j] * inverse_pivot : 0.0;
    if (j + 1 < kTile) {
      a[j + 1] = fma(-multiplier, lane == j + 1 ? a[j] : buffer[j + 1], a[j + 1]);
      next_inverse = pivot_reciprocal(a[j + 1]);
    }
    // The rest of the pivot row in pairs (one 16-byte load each), the odd one first.
    if ((j & 1) == 1 && j + 2 < kTile)
      a[j + 2] = fma(-multiplier, buffer[j + 2], a[j + 2]);
#pragma unroll
    for (int c = (j + 3) & ~1; c < kTile; c += 2) {
      const double2 pair = reinterpret_cast<const double2*>(buffer)[c / 2];
      a[c] = fma(-multiplier, pair.x, a[c]);
      a[c + 1] = fma(-multiplier, pair.y, a[c + 1]);
    }
  }
  const int64_t global = static_cast<int64_t>(t) * kTile + lane;
  const bool refused = global < P && !cholesky_pivot_accepted(pivot_mine, diagonal, floor);
  const unsigned refusals = __ballot_sync(0xffffffffu, refused);
  if (refusals != 0 && lane == 0)
    atomicMin(bad, t * kTile + __ffs(refusals) - 1);
  const double root = sqrt(pivot_mine);
  const double inverse = 1.0 / root;
  inverse_root[lane] = inverse;
  __syncwarp();
#pragma unroll
  for (int c = 0; c < kTile; c += 2) {
    const double2 scale = reinterpret_cast<const double2*>(inverse_root)[c / 2];
    double2 pair;
    pair.x = c < lane ? a[c] * scale.x : (c == lane ? root : 0.0);
    pair.y = c + 1 < lane ? a[c + 1] * scale.y : (c + 1 == lane ? root : 0.0);
    *reinterpret_cast<double2*>(D + lane * kLd + c) = pair;
  }
  D[lane * kLd + kInverseColumn] = inverse;
  __syncwarp();
}

// x = a L_kk^-T for the row a of one lane in registers (Lkk a factored diagonal tile):
// x_c = (a_c - sum_{m < c} x_m L_cm) / L_cc, column by column.
__device__ __forceinline__ void forward_row(double (&x)[kTile], const double* Lkk) {
  // Two columns at a time, so each later row's two entries come in one 16-byte load; every
  // x_m still takes column c's term before column c + 1's.
#pragma unroll
  for (int c = 0; c < kTile; c += 2) {
    x[c] *= Lkk[c * kLd + kInverseColumn];
    x[c + 1] = fma(-Lkk[(c + 1) * kLd + c], x[c], x[c + 1]);
    x[c + 1] *= Lkk[(c + 1) * kLd + kInverseColumn];
#pragma unroll
    for (int m = c + 2; m < kTile; ++m) {
      const double2 pair = *reinterpret_cast<const double2*>(Lkk + m * kLd + c);
      x[m] = fma(-pair.x, x[c], x[m]);
      x[m] = fma(-pair.y, x[c + 1], x[m]);
    }
  }
}

__device__ __forceinline__ void store_rows(double* X, const double (&x)[kTile]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < kTile; c += 2)
    *reinterpret_cast<double2*>(X + lane * kLd + c) = make_double2(x[c], x[c + 1]);
}

// X = A_ik replaced by L_ik = A_ik L_kk^-T (Lkk a factored diagonal tile), by one warp: lane r
// solves row r forward.
__device__ __forceinline__ void solve_panel_tile(double* X, const double* Lkk) {
  const int lane = threadIdx.x & 31;
  double x[kTile];
#pragma unroll
  for (int c = 0; c < kTile; c += 2) {  // in pairs, as factor_diagonal_tile reads its rows
    const double2 pair = *reinterpret_cast<const double2*>(X + lane * kLd + c);
    x[c] = pair.x;
    x[c + 1] = pair.y;
  }
  forward_row(x, Lkk);
  store_rows(X, x);
}

// Z = L_kk^-T into the tile Z, by one warp: the panel solve of the identity (lane r: row r of
// Z, column r of L_kk^-1), for the back substitution (back_substitute_step). Not inlined: inside
// the step loop its 32 registers a lane raised the kernel's spill from 56 to 100 bytes (68 so).
__device__ __noinline__ void invert_diagonal_tile(double* Z, const double* Lkk) {
  const int lane = threadIdx.x & 31;
  double x[kTile];
#pragma unroll
  for (int c = 0; c < kTile; ++c)
    x[c] = c == lane ? 1.0 : 0.0;
  forward_row(x, Lkk);
  store_rows(Z, x);
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

// The cluster barrier's two halves (barrier.cluster): arrive releases this thread's writes to the
// cluster, wait acquires every other thread's. A step ends with an arrive and the next begins
// with the matching wait.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// Tile (i, k) for each tile row i in `rows` (a bit mask), its rows' first kPairs pairs of
// doubles, from its owner's shared memory into slots[i] (or slots[0] when `single`), by the
// block's threads from `first` on (0 or 32). A thread copies the same few pairs of every tile,
// so their places in a tile are worked out once; the tiles go kCopyTiles at a time, their loads
// all in flight before the stores. (Distributed shared memory's bandwidth, not these
// instructions, bounds a copy of several tiles.)
template <int kPairs>
__device__ __forceinline__ void copy_tiles(const cg::cluster_group& cluster, double* owned,
                                           unsigned rows, int k, int C, double* slots, bool single,
                                           int first = 0) {
  constexpr int kElems = kTile * kPairs;
  constexpr int kPerThread = (kElems + kClusterThreads - 32 - 1) / (kClusterThreads - 32);
  const int threads = kClusterThreads - first;
  const int t = static_cast<int>(threadIdx.x) - first;
  int offset[kPerThread];  // in doubles, from a tile's start; -1: none
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int e = t + u * threads;
    const int r = e / kPairs;
    offset[u] = e < kElems ? r * kLd + 2 * (e - r * kPairs) : -1;
  }
  unsigned left = rows;
  while (left != 0) {
    const double* source[kCopyTiles];
    double* target[kCopyTiles];
#pragma unroll
    for (int q = 0; q < kCopyTiles; ++q) {
      source[q] = nullptr;
      target[q] = nullptr;
      if (left != 0) {
        const int i = __ffs(static_cast<int>(left)) - 1;
        left &= left - 1;
        source[q] = cluster.map_shared_rank(owned + (row_start_of(i, C) + k) * kTileElems,
                                            static_cast<unsigned>(i % C));
        target[q] = slots + (single ? 0 : i) * kTileElems;
      }
    }
    double2 value[kCopyTiles][kPerThread];
#pragma unroll
    for (int q = 0; q < kCopyTiles; ++q) {
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        if (source[q] != nullptr && offset[u] >= 0)
          value[q][u] = *reinterpret_cast<const double2*>(source[q] + offset[u]);
      }
    }
#pragma unroll
    for (int q = 0; q < kCopyTiles; ++q) {
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        if (target[q] != nullptr && offset[u] >= 0)
          *reinterpret_cast<double2*>(target[q] + offset[u]) = value[q][u];
      }
    }
  }
}

// The back substitution's state in a block's `diagonal` slot (free once the factor is done), for
// its tile rows t (m = t / C: a block holds at most kMaxOwnedRows, C being T or at least the
// smallest cluster size): the shares of r_t, 32 doubles from the owner of each later tile row s
// (L_st' x_s) at slot s and y_t at slot t; x_t (`solved`); r_t for the product by the inverse.
constexpr int kMaxOwnedRows = 2;
static_assert((kMaxTiles + kClusterSizes[0] - 1) / kClusterSizes[0] <= kMaxOwnedRows,
              "no block of the smallest cluster holds more tile rows than the state has room for");
constexpr int kSolvedAt = kMaxOwnedRows * kMaxTiles * kTile;
constexpr int kRemainderAt = kSolvedAt + kMaxOwnedRows * kTile;
static_assert(kRemainderAt + kMaxOwnedRows * kTile <= kTileElems,
              "the back substitution's state fits the diagonal slot");
__device__ __forceinline__ double* share_slot(double* state, int t, int C, int s) {
  return state + ((t / C) * kMaxTiles + s) * kTile;
}

// mbarrier `barrier` (this block's shared memory) completing once `bytes` have been stored into
// this block by st.async (send_share): one arrival, this thread's, which also sets the
// transaction count it waits for. The fence makes the initialisation visible to the other
// blocks' stores (PTX ISA, fence.mbarrier_init).
__device__ __forceinline__ void init_share_barrier(unsigned long long* barrier, unsigned bytes) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(barrier));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(address) : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(address), "r"(bytes)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// `value` stored at `target`'s place in block `rank`'s shared memory by st.async, which counts
// its 8 bytes against the mbarrier at `barrier`'s place there: the receiver's wait on that
// mbarrier sees the store, and the sender needs no release fence (a cluster-scope release is a
// GPU-scope memory barrier on sm_90, which would also wait for this block's global stores).
__device__ __forceinline__ void send_share(double* target, unsigned long long* barrier,
                                           unsigned rank, double value) {
  const unsigned local_target = static_cast<unsigned>(__cvta_generic_to_shared(target));
  const unsigned local_barrier = static_cast<unsigned>(__cvta_generic_to_shared(barrier));
  unsigned remote_target = 0;
  unsigned remote_barrier = 0;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_target)
               : "r"(local_target), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_barrier)
               : "r"(local_barrier), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f64 [%0], %1, [%2];\n" ::"r"(
                   remote_target),
               "d"(value), "r"(remote_barrier)
               : "memory");
}

// Waits for phase 0 of this block's mbarrier to complete: every byte it expects stored (the
// shares' st.async), and visible to this thread.
__device__ __forceinline__ void wait_share_barrier(unsigned long long* barrier) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(barrier));
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(address)
        : "memory");
  } while (done == 0);
}

// One step of the back substitution L' dir = y, by the block owning tile row t, on its own
// tiles (`row`: tiles (t, 0..t), one after the other). Warp 0 waits until the owners of the
// later tile rows have delivered their shares of r_t (barriers[t / C]), sums them in the order of
// those rows from the last (r_t = y_t - the shares), and forms x_t with L_tt' x_t = r_t, a lane
// per row of x_t, into dir and `solved`:
// - with `inverse` (Z = L_tt^-T, invert_diagonal_tile; whole tiles only), as x_t = Z r_t, lane l
//   summing row l of Z times r_t, so the step waits on no chain of 32 shuffles;
// - without (the last tile, which may hold row P and the identity's rows), by substitution:
//   lane l keeps column l of L_tt and 1 / L_ll, x_c = r_c / L_cc and r_l -= L_cl x_c, one
//   shuffle per row. Rows of the tile at or beyond P (row P is y, the rows after it the
//   identity's, in NaNs where y' y > 1) are skipped, not multiplied by zero.
// After a block barrier warp w takes the shares L_tj' x_t of the tile rows j = t - 1 - w,
// t - 1 - w - 8, .. (lane l: column l; warp 0 the next step's), each stored into its owner's
// share slot by st.async, which counts its bytes against that owner's barrier. No cluster
// barrier between steps: a step waits on the shares it needs, not on every block.
__device__ __noinline__ void back_substitute_step(const double* row, int t, int last, int C,
                                                  int64_t P, double* state,
                                                  unsigned long long* barriers, double* dir,
                                                  const double* inverse) {
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int rows =
      P - int64_t{t} * kTile < kTile ? static_cast<int>(P - int64_t{t} * kTile) : kTile;
  const int m = t / C;
  double* solved = state + kSolvedAt + m * kTile;
  if (warp == 0) {
    if (t < last)
      wait_share_barrier(barriers + m);
    const double* shares = share_slot(state, t, C, 0);
    double remainder = 0.0;
    if (lane < rows) {
      remainder = shares[t * kTile + lane];
      for (int s = last; s > t; --s)
        remainder -= shares[s * kTile + lane];
    }
    double x = 0.0;
    if (inverse != nullptr) {
      double* rt = state + kRemainderAt + m * kTile;
      rt[lane] = remainder;
      __syncwarp();
      const double* z = inverse + lane * kLd;
      double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
      for (int c = 0; c < kTile; c += 2) {
        const double2 zc = *reinterpret_cast<const double2*>(z + c);
        const double2 rc = *reinterpret_cast<const double2*>(rt + c);
        acc[c & 3] = fma(zc.x, rc.x, acc[c & 3]);
        acc[(c + 1) & 3] = fma(zc.y, rc.y, acc[(c + 1) & 3]);
      }
      x = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    } else {
      const double* D = row + t * kTileElems;
      double column[kTile];
#pragma unroll
      for (int c = 0; c < kTile; ++c)
        column[c] = D[c * kLd + lane];
      const double reciprocal = D[lane * kLd + kInverseColumn];
#pragma unroll
      for (int c = kTile - 1; c >= 0; --c) {
        if (c >= rows)
          continue;
        const double xc = __shfl_sync(0xffffffffu, remainder * reciprocal, c);
        x = lane == c ? xc : x;
        remainder = fma(-column[c], xc, remainder);  // L_cl = 0 for l > c
      }
    }
    solved[lane] = lane < rows ? x : 0.0;
    if (lane < rows)
      dir[int64_t{t} * kTile + lane] = x;
  }
  __syncthreads();  // x_t in `solved`
  for (int j = t - 1 - warp; j >= 0; j -= kClusterWarps) {
    const double* tile = row + j * kTileElems;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
    for (int c = 0; c < kTile; ++c) {
      if (c < rows)
        acc[c & 3] = fma(tile[c * kLd + lane], solved[c], acc[c & 3]);
    }
    send_share(share_slot(state, j, C, t) + lane, barriers + j / C, static_cast<unsigned>(j % C),
               (acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
}

#endif  // RH_CLUSTER_CODE

// Phase stamps, in a diagnostic build only (CMake RH_CUDA_CLUSTER_PHASES=ON; read by
// benchmarks/micro/cluster_cholesky_phases.py): thread 0 of every block takes clock64() at each
// phase boundary and prints the stamps, as cycles since its block began, when the kernel ends.
// Stamp kPhaseStep + 5 s + {0..4} ends step s's wait for the diagonal factor, its panel solves,
// the barrier after them, the copies and the updates (the next owner's: its factor); the back
// substitution's tile row t ends at kPhaseBack + last - t, stamped by its owner alone. (Before
// sm_90 the kernel's body is a trap, and these go unused.)
[[maybe_unused]] constexpr int kPhaseAssembled = 1;
[[maybe_unused]] constexpr int kPhaseFirstFactor = 2;
[[maybe_unused]] constexpr int kPhaseStep = 3;
[[maybe_unused]] constexpr int kPhaseLoopEnd = kPhaseStep + 5 * (kMaxTiles - 1);
[[maybe_unused]] constexpr int kPhaseVerdict = kPhaseLoopEnd + 1;
[[maybe_unused]] constexpr int kPhaseBack = kPhaseVerdict + 1;
#if defined(RH_CUDA_CLUSTER_PHASES)
[[maybe_unused]] constexpr int kPhaseEnd = kPhaseBack + kMaxTiles;
[[maybe_unused]] constexpr int kPhases = kPhaseEnd + 1;
[[maybe_unused]] constexpr int kPhasesPerLine = 8;
// Blocks that printed so far: launch = count / C.
[[maybe_unused]] __device__ unsigned cluster_phase_blocks;
#define RH_CLUSTER_PHASE(e)        \
  do {                             \
    if (threadIdx.x == 0)          \
      phase_stamps[e] = clock64(); \
  } while (0)
#else
#define RH_CLUSTER_PHASE(e) ((void)(e))
#endif

template <class T>
__global__ void __launch_bounds__(kClusterThreads, 1)
    cluster_cholesky_kernel(const T* gram, const double* J, const double* g, BatchConstants k,
                            DeviceScalars* sc, double* dir) {
  enter_stream_order();
#if !RH_CLUSTER_CODE
  (void)gram;
  (void)J;
  (void)g;
  (void)k;
  (void)sc;
  (void)dir;
  __trap();
#else
  if (sc->state != kRunning)
    return;
  extern __shared__ __align__(16) double cluster_shared[];
  __shared__ __align__(16) double column[2][kTile];
  __shared__ __align__(16) double inverse_root[kTile];
  __shared__ int bad;          // this block's first refused pivot
  __shared__ int cluster_bad;  // every block: the cluster's
  // The back substitution's mbarriers, one per tile row of this block's: its shares delivered.
  __shared__ __align__(8) unsigned long long share_barriers[kMaxOwnedRows];
#if defined(RH_CUDA_CLUSTER_PHASES)
  __shared__ long long phase_stamps[kPhases];
  for (int e = threadIdx.x; e < kPhases; e += kClusterThreads)
    phase_stamps[e] = -1;
  __syncthreads();
  RH_CLUSTER_PHASE(0);
#endif
  const cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int64_t P = k.P;
  const int tiles = tile_count(P);
  const int last = static_cast<int>((P - 1) / kTile);  // the last tile row of H
  int owned_count = 0;  // this block's rows rank, rank + C, ...: tiles (i, 0..i) each
  for (int i = rank; i < tiles; i += C)
    owned_count += i + 1;
  double* owned = cluster_shared;
  double* panel = owned + most_owned_tiles(tiles, C) * kTileElems;  // slot per tile row
  double* diagonal = panel + tiles * kTileElems;                    // the current diagonal factor
  auto own_tile = [&](int i, int j) { return owned + (row_start_of(i, C) + j) * kTileElems; };
  if (tid == 0) {
    bad = INT_MAX;
    cluster_bad = INT_MAX;
    // Tile row t < last waits on the 32 doubles of each later tile row's share.
    for (int t = rank; t < last; t += C)
      init_share_barrier(share_barriers + t / C,
                         static_cast<unsigned>(kTile * sizeof(double) * (last - t)));
  }
  // H's lower triangle as potrf would read it (hessian_entry), g' as row P,
  // the identity beyond, zeros above the diagonal and in the padding columns. Every thread works on
  // the same tiles at a time, two of a tile row at once: a warp per 8 of their rows, a lane per
  // column, so the loads of G and J run along rows (coalesced) and 16 are in flight per thread.
  const double inv_n = 1.0 / sc->total_weight;
  {
    const int lane = tid & 31;
    constexpr int kRowsPerWarp = kTile / kClusterWarps;
    for (int i = rank; i < tiles; i += C) {
      for (int j = 0; j <= i; j += 2) {
        double value[2][kRowsPerWarp];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
          for (int m = 0; m < kRowsPerWarp; ++m) {
            const int64_t r = int64_t{i} * kTile + warp + kClusterWarps * m;
            const int64_t c = int64_t{j + t} * kTile + lane;
            double v = r == c ? 1.0 : 0.0;
            if (j + t <= i && r < P && c < P && r >= c)
              v = hessian_entry(gram, J, P, r, c, inv_n, k.ridge);
            else if (j + t <= i && r == P && c < P)
              v = g[c];
            value[t][m] = v;
          }
        }
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          if (j + t > i)
            continue;
          double* tile = own_tile(i, j + t);
#pragma unroll
          for (int m = 0; m < kRowsPerWarp; ++m)
            tile[(warp + kClusterWarps * m) * kLd + lane] = value[t][m];
        }
      }
    }
    constexpr int kPadding = kLd - kTile;
    for (int e = tid; e < owned_count * kTile * kPadding; e += kClusterThreads) {
      const int slot = e / (kTile * kPadding);
      const int within = e - slot * kTile * kPadding;
      owned[slot * kTileElems + (within / kPadding) * kLd + kTile + within % kPadding] = 0.0;
    }
  }
  // The acceptance test's terms: its floor, and H's diagonal entry on the rows of tile t (read
  // again: the tile holds the trailing update by then), as the assembly forms it.
  const double floor = rh_pivot_floor(P, k.ladder_epsilon);
  auto diagonal_of = [&](int t) {
    const int64_t r = int64_t{t} * kTile + (tid & 31);
    return r < P ? hessian_entry(gram, J, P, r, r, inv_n, k.ridge) : 1.0;
  };
  __syncthreads();
  RH_CLUSTER_PHASE(kPhaseAssembled);
  if (rank == 0 && warp == 0)  // row 0 is block 0's
    factor_diagonal_tile(owned, 0, P, diagonal_of(0), floor, column, inverse_root, &bad);
  RH_CLUSTER_PHASE(kPhaseFirstFactor);
  cluster_arrive();

  // Step `step`: the diagonal factor (step, step) is out once every thread has arrived.
  for (int step = 0; step + 1 < tiles; ++step) {
    const int next = step + 1;
    const bool owns_next = next % C == rank;
    unsigned below = 0;  // this block's rows below the diagonal tile
    for (int i = rank; i < tiles; i += C)
      below |= i > step ? 1u << i : 0u;
    cluster_wait();
    // The cluster barrier orders this block's shared memory too, but compute-sanitizer's racecheck
    // sees only block barriers; one (every thread is here already) shows it the order.
    __syncthreads();
    RH_CLUSTER_PHASE(kPhaseStep + 5 * step);
    // The panel solves L_i,step = A_i,step L_step,step^-T; warp 0 takes the next row's.
    if (below != 0) {
      copy_tiles<kDiagonalPairs>(cluster, owned, 1u << step, step, C, diagonal, true);
      __syncthreads();
      int n = 0;
      for (int i = rank; i < tiles; i += C) {
        if (i <= step)
          continue;
        const int w = i == next ? 0 : (owns_next ? 1 + n % (kClusterWarps - 1) : n % kClusterWarps);
        if (i != next)
          ++n;
        if (w == warp)
          solve_panel_tile(own_tile(i, step), diagonal);
      }
    }
    RH_CLUSTER_PHASE(kPhaseStep + 5 * step + 1);
    cluster_arrive();
    cluster_wait();  // every panel tile of column `step` is solved
    RH_CLUSTER_PHASE(kPhaseStep + 5 * step + 2);
    // The next diagonal tile: its owner's warp 0 updates it with the panel tile it has just
    // solved and factors it, while its other warps (and the other blocks) do the trailing
    // update. The panel tiles of other blocks' rows are copied first (by warps 1.. on the
    // owner), behind one block barrier of every thread, so the overlap needs no named barrier.
    unsigned wanted = 0;
    int last = -1;
    for (int i = rank; i < tiles; i += C)
      last = i > step ? i : last;
    for (int j = next; j <= last; ++j)
      wanted |= j % C != rank ? 1u << j : 0u;
    const int first_warp = owns_next ? 1 : 0;
    if (wanted != 0 && warp >= first_warp)
      copy_tiles<kPanelPairs>(cluster, owned, wanted, step, C, panel, false, 32 * first_warp);
    __syncthreads();
    RH_CLUSTER_PHASE(kPhaseStep + 5 * step + 3);
    // Meanwhile the owner of this step's diagonal tile (never the next one's: C >= 2 here)
    // inverts it in its last warp for the back substitution, into its panel slot of that row
    // (only other blocks' rows are ever copied to a slot). The phase waits on the next owner's
    // update and factor, which take longer, and this block has at most one row of trailing
    // tiles for its other warps. (Inverted during the panel solves instead, it slowed them.)
    const bool owns_step = step % C == rank;
    if (owns_next && warp == 0) {
      double* D = own_tile(next, next);
      const double* Li = own_tile(next, step);
      const double diagonal = diagonal_of(next);
      update_tile<true>(D, Li, Li);
      factor_diagonal_tile(D, next, P, diagonal, floor, column, inverse_root, &bad);
    } else if (owns_step && warp == kClusterWarps - 1) {
      invert_diagonal_tile(panel + step * kTileElems, own_tile(step, step));
    } else {
      const int warps = kClusterWarps - first_warp - (owns_step ? 1 : 0);
      int n = 0;
      for (int i = rank; i < tiles; i += C) {
        if (i <= step)
          continue;
        const double* Li = own_tile(i, step);
        for (int j = next; j <= i; ++j) {
          if (i == next && j == next)
            continue;
          if (first_warp + n % warps == warp) {
            const double* Lj = j % C == rank ? own_tile(j, step) : panel + j * kTileElems;
            if (i == j)
              update_tile<true>(own_tile(i, j), Li, Lj);
            else
              update_tile<false>(own_tile(i, j), Li, Lj);
          }
          ++n;
        }
      }
    }
    RH_CLUSTER_PHASE(kPhaseStep + 5 * step + 4);
    cluster_arrive();  // the next step waits on this: the next diagonal factor is out
  }
  cluster_wait();
  __syncthreads();  // as at the top of each step
  RH_CLUSTER_PHASE(kPhaseLoopEnd);

  // y (row P of the factor) into its share slots, before the verdict's barrier orders it: y_t in
  // slot t of tile row t's owner.
  const int bordered = static_cast<int>(P / kTile);
  if (rank == bordered % C) {
    const int y_row = static_cast<int>(P % kTile);
    for (int64_t c = tid; c < P; c += kClusterThreads) {
      const int t = static_cast<int>(c / kTile);
      *cluster.map_shared_rank(share_slot(diagonal, t, C, t) + c % kTile,
                               static_cast<unsigned>(t % C)) =
          own_tile(bordered, t)[y_row * kLd + c % kTile];
    }
  }
  // The verdict, in every block: a refused factor leaves dir alone and the state to the host's
  // LU (kNeedsFallback), as cholesky_verdict_solve_kernel does after cuSOLVER's.
  if (tid == 0 && bad != INT_MAX) {
    for (int b = 0; b < C; ++b)
      atomicMin(cluster.map_shared_rank(&cluster_bad, static_cast<unsigned>(b)), bad);
  }
  cluster.sync();
  RH_CLUSTER_PHASE(kPhaseVerdict);
  if (cluster_bad != INT_MAX) {
    if (rank == 0 && tid == 0) {
      sc->factor_ok = 0;
      sc->state = kNeedsFallback;
    }
    return;
  }
  // Back substitution L' dir = y, a tile row at a time by its owner on its own tiles (its own
  // shared memory), the shares of r sent from owner to owner into their `diagonal` slots (free
  // now: the panel slots of a block's own rows hold the inverses of its diagonal tiles), each
  // step waiting on its own shares only: the tiles of L never cross blocks. Every tile but the
  // last was inverted at its step.
  if (rank == 0 && tid == 0)
    sc->factor_ok = 1;
  for (int t = last; t >= 0; --t) {
    if (rank == t % C) {
      const double* inverse = t + 1 < tiles ? panel + t * kTileElems : nullptr;
      back_substitute_step(own_tile(t, 0), t, last, C, P, diagonal, share_barriers, dir, inverse);
      RH_CLUSTER_PHASE(kPhaseBack + last - t);
    }
  }
  // A block leaves only after this cluster barrier, which every block reaches once its own
  // shares have all arrived (each step waits on its mbarrier's full byte count): no st.async into
  // a block is outstanding when it leaves.
  cluster.sync();
#if defined(RH_CUDA_CLUSTER_PHASES)
  RH_CLUSTER_PHASE(kPhaseEnd);
  if (threadIdx.x == 0) {
    const unsigned launch = atomicAdd(&cluster_phase_blocks, 1u) / static_cast<unsigned>(C);
    for (int first = 0; first < kPhases; first += kPhasesPerLine) {
      long long cycles[kPhasesPerLine];
      for (int q = 0; q < kPhasesPerLine; ++q) {
        const int e = first + q;
        cycles[q] = e < kPhases && phase_stamps[e] >= 0 ? phase_stamps[e] - phase_stamps[0] : -1;
      }
      printf(
          "RH_CLUSTER_PHASES launch %u P %lld blocks %d rank %d first %d: %lld %lld %lld %lld "
          "%lld %lld %lld %lld\n",
          launch, static_cast<long long>(P), C, rank, first, cycles[0], cycles[1], cycles[2],
          cycles[3], cycles[4], cycles[5], cycles[6], cycles[7]);
    }
  }
#endif
#endif  // RH_CLUSTER_CODE
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
LaunchShape cluster_shape(int C, size_t bytes) {
  return LaunchShape{dim3(static_cast<unsigned>(C)), dim3(kClusterThreads), bytes,
                     static_cast<unsigned>(C)};
}

// Whether such a cluster can run on the device at all.
bool cluster_fits(int C, size_t bytes) {
  const LaunchConfig launch(cluster_shape(C, bytes), nullptr, false);
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
  // The shapes the device runs; one it cannot (a partition with few multiprocessors) is never
  // asked for, its P going to cuSOLVER. A shape (cluster size, shared memory) depends on the
  // tile count alone, so one question per tile count.
  ClusterCholeskyLimits limits;
  limits.shared_bytes = shared_limit;
  for (int tiles = 1; tiles <= kMaxTiles; ++tiles) {
    const int64_t P = int64_t{tiles} * kTile - 1;  // the largest P of this many tiles
    const int C = cluster_size_for(P, shared_limit);
    if (C == 0 || !cluster_fits(C, cluster_cholesky_bytes(P, C)))
      break;
    limits.max_p = P;
  }
  return limits;
}

template <class T>
void launch_cluster_cholesky_solve(const T* gram, const double* J, const double* g,
                                   const BatchConstants& k, DeviceScalars* sc, double* dir,
                                   int shared_limit, cudaStream_t s) {
  const int C = cluster_size_for(k.P, shared_limit);
  if (C == 0)
    fail(RH_CUDA_INTERNAL_ERROR, "cluster Cholesky: no cluster fits P = %lld",
         static_cast<long long>(k.P));
  launch_kernel("cluster_cholesky_kernel", cluster_cholesky_kernel<T>,
                cluster_shape(C, cluster_cholesky_bytes(k.P, C)), s, gram, J, g, k, sc, dir);
}

#define RH_INSTANTIATE_CLUSTER_CHOLESKY(T)                                                       \
  template void launch_cluster_cholesky_solve<T>(const T*, const double*, const double*,         \
                                                 const BatchConstants&, DeviceScalars*, double*, \
                                                 int, cudaStream_t);

RH_INSTANTIATE_CLUSTER_CHOLESKY(float)
RH_INSTANTIATE_CLUSTER_CHOLESKY(double)

}  // namespace rh
