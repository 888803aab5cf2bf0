// The Newton step's linear-solve ladder on the device (docs/decisions.md, "Linear solve
// ladder"; linear_solve.cu orchestrates it): the one-block Cholesky solve of small systems, the
// acceptance tests of cuSOLVER's Cholesky and LU factors (rh_pivot_floor), the SVD's
// minimum-norm solve (rh_rank_cutoff) and the equilibration by powers of two.
#include <cmath>
#include <tuple>

#include "engine_error.hpp"
#include "kernel_launch.cuh"
#include "step_common.cuh"

namespace rh {

namespace {

// Small symmetric systems (P <= Engine::small_dense_max) in one block: assembles H = (G + J) / N
// + ridge I, eliminates it with g carried as an extra column, applies the same acceptance test as
// cholesky_verdict_solve_kernel and, on the same data, solves H dir = g and forms jdir = J dir for
// the line search (and, with `candidate`, the speculative Newton step's beta - dir). A refused
// factor moves the state to kNeedsFallback, exactly as cholesky_verdict_solve_kernel does after
// cuSOLVER's potrf.
//
// Latency and instruction issue decide the time here, not arithmetic (docs/decisions.md, "The
// one-block Cholesky"):
// - Each thread owns up to Owned elements of the upper triangle of [H | g] and keeps them in
//   registers from the assembly to the end. Slot s of thread t holds element e = t + s T (T
//   threads) of the row-major enumeration (row i holds columns i..P), so slot s covers a
//   contiguous range of rows for the whole block, and the rows of later slots are later.
// - Symmetric Gaussian elimination, one block barrier per column: at step kk every element below
//   the pivot row takes a_ij -= (a_ki / d_kk) a_kj, reading row kk from shared memory. The owners
//   of row kk + 1 publish it as it becomes final, and the owner of its pivot d = a_kk also forms
//   1 / d, so the next step starts after one barrier. With R the eliminated rows and D their
//   pivots, H = R' D^-1 R (the Cholesky factor is D^-1/2 R, and d_kk its squared diagonal), and
//   the carried column has become w with R dir = w: the forward solve is done.
// - The steps run in phases: once every row of slot s is final, no thread visits slot s again
//   (the phase's range of slots is a compile-time constant), so a step costs the instructions of
//   the elements still being updated, not of all of them.
// - Back substitution in one warp: dir_kk = (w_kk - t_kk) / d_kk, t_i += R[i][kk] dir_kk, with
//   t in registers (Slots per lane) and a shuffle per column.
constexpr int kSmallDenseSlots = static_cast<int>((kSmallDenseCap + 31) / 32);
constexpr int kSmallDenseThreads = 1024;

__host__ __device__ constexpr int64_t augmented_elements(int64_t P) {
  return P * (P + 3) / 2;
}

// First element index of row i in the row-major enumeration of the upper triangle of [H | g].
__device__ __forceinline__ int augmented_row_start(int P, int i) {
  return i * (2 * P + 3 - i) / 2;
}

// The row of element e: the root of augmented_row_start(P, i) = e, then exact corrections.
__device__ __forceinline__ int augmented_row(int P, int e) {
  const float b = 2.0f * P + 3.0f;
  int i = static_cast<int>((b - sqrtf(b * b - 8.0f * e)) * 0.5f);
  i = i < 0 ? 0 : (i > P - 1 ? P - 1 : i);
  while (i > 0 && augmented_row_start(P, i) > e)
    --i;
  while (i < P - 1 && augmented_row_start(P, i + 1) <= e)
    ++i;
  return i;
}

// What a thread owns: its elements' values, and the byte offsets of their row and column in a
// row of [H | g]. Up to 5 elements per thread the offsets sit in two registers each; above, in
// one (16 bits each), as the 64 registers a thread of a 1,024-thread block has allow.
template <int Owned>
struct OwnedElements {
  static constexpr bool kPacked = Owned > 5;
  double value[Owned];
  int row_bytes_or_both[Owned];
  int col_bytes_only[kPacked ? 1 : Owned];
  int pending_row_bytes;  // the row of the next element to publish (rows grow with the slot)

  __device__ __forceinline__ void place(int s, int row_bytes, int col_bytes) {
    if constexpr (kPacked) {
      row_bytes_or_both[s] = row_bytes | (col_bytes << 16);
    } else {
      row_bytes_or_both[s] = row_bytes;
      col_bytes_only[s] = col_bytes;
    }
  }
  __device__ __forceinline__ int row_bytes(int s) const {
    if constexpr (kPacked)
      return row_bytes_or_both[s] & 0xffff;
    else
      return row_bytes_or_both[s];
  }
  __device__ __forceinline__ int col_bytes(int s) const {
    if constexpr (kPacked)
      return row_bytes_or_both[s] >> 16;
    else
      return col_bytes_only[s];
  }
};

// Row `row` is final: the threads that own one of its elements publish it, to the pivot row
// buffer of its parity and to R (or w); the pivot's owner also forms 1 / d. A thread owns at most
// one element of a row (its slots lie blockDim.x > P + 1 elements apart) and its slots reach
// their rows in slot order, so one comparison with the row it publishes next tells; that element
// is in slot First or later, the earlier slots being final.
template <int Owned, int First>
__device__ __forceinline__ void publish_pending(OwnedElements<Owned>& own, int row,
                                                double* pivot_rows, double* factor, double* pivots,
                                                double* inv_pivot, double* rhs, int P) {
  if (own.pending_row_bytes != row * static_cast<int>(sizeof(double)))
    return;
  // Selects keyed on the row, not an index: an indexed read would move the values to local
  // memory.
  const int row_bytes = own.pending_row_bytes;
  double value = 0.0;
  int col_bytes = 0;
  int later_row_bytes = -1;  // the next pending row: the first later slot's
#pragma unroll
  for (int s = Owned - 1; s >= First; --s) {
    const bool here = own.row_bytes(s) == row_bytes;
    value = here ? own.value[s] : value;
    col_bytes = here ? own.col_bytes(s) : col_bytes;
    later_row_bytes = own.row_bytes(s) > row_bytes ? own.row_bytes(s) : later_row_bytes;
  }
  const int j = col_bytes / static_cast<int>(sizeof(double));
  pivot_rows[(row & 1) * (P + 1) + j] = value;
  if (j == P) {
    rhs[row] = value;
  } else if (j > row) {
    factor[j * P + row] = value;
  } else {
    pivots[row] = value;
    inv_pivot[row] = pivot_reciprocal(value);
  }
  own.pending_row_bytes = later_row_bytes;
}

// Step kk of the elimination over slots First..Owned-1 (the earlier slots are final). Slots
// after First are wholly below the pivot row; First only partly.
template <int Owned, int First>
__device__ __forceinline__ void eliminate_step(OwnedElements<Owned>& own, int kk,
                                               const char* pivot_row, double* inv_pivot,
                                               double* pivot_rows, double* factor, double* pivots,
                                               double* rhs, int P) {
  const double inv = inv_pivot[kk];
  const int kk_bytes = kk * static_cast<int>(sizeof(double));
  // The loads of a group of elements first, then their updates, and every store after all of
  // them (a store to shared memory would otherwise order the loads behind it). Groups bound the
  // registers the loads in flight hold.
  constexpr int kGroup = OwnedElements<Owned>::kPacked ? 3 : Owned;
#pragma unroll
  for (int group = First; group < Owned; group += kGroup) {
    double left[kGroup];
    double right[kGroup];
#pragma unroll
    for (int s = group; s < group + kGroup && s < Owned; ++s) {
      if (s > First || own.row_bytes(s) > kk_bytes) {
        left[s - group] = *reinterpret_cast<const double*>(pivot_row + own.row_bytes(s));
        right[s - group] = *reinterpret_cast<const double*>(pivot_row + own.col_bytes(s));
      }
    }
#pragma unroll
    for (int s = group; s < group + kGroup && s < Owned; ++s) {
      if (s > First || own.row_bytes(s) > kk_bytes)
        own.value[s] = fma(-(left[s - group] * inv), right[s - group], own.value[s]);
    }
  }
  // Row kk + 1 is final: its owners publish it.
  publish_pending<Owned, First>(own, kk + 1, pivot_rows, factor, pivots, inv_pivot, rhs, P);
}

// The steps of phase First and of every later phase: phase First runs while some row of slot
// First is not final (kk below the last row of its elements, for every thread alike).
template <int Owned, int First>
__device__ __forceinline__ void eliminate_phases(OwnedElements<Owned>& own, int& kk, int count,
                                                 double* pivot_rows, double* inv_pivot,
                                                 double* factor, double* pivots, double* rhs,
                                                 int P) {
  if constexpr (First < Owned) {
    const int first_element = First * static_cast<int>(blockDim.x);
    const int end =
        first_element < count
            ? augmented_row(P, min(first_element + static_cast<int>(blockDim.x), count) - 1)
            : 0;
    for (; kk < end; ++kk) {
      __syncthreads();  // row kk and 1 / d_kk are published
      const char* pivot_row = reinterpret_cast<const char*>(pivot_rows + (kk & 1) * (P + 1));
      eliminate_step<Owned, First>(own, kk, pivot_row, inv_pivot, pivot_rows, factor, pivots, rhs,
                                   P);
    }
    eliminate_phases<Owned, First + 1>(own, kk, count, pivot_rows, inv_pivot, factor, pivots, rhs,
                                       P);
  }
}

template <class T, int Slots, int Owned>
__global__ void __launch_bounds__(kSmallDenseThreads)
    small_cholesky_solve_kernel(const T* gram, const double* J, BatchConstants k, DeviceScalars* sc,
                                const double* g, double* dir, double* jdir, const double* beta,
                                double* candidate) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  extern __shared__ double smem[];
  const int P = static_cast<int>(k.P);
  const int width = P + 1;              // a row of [H | g]
  double* factor = smem;                // P x P, column-major: factor[j P + i] = R[i][j], i < j
  double* pivot_rows = factor + P * P;  // 2 x width: row kk of R at (kk & 1) * width
  double* inv_pivot = pivot_rows + 2 * width;  // P: 1 / d_kk
  double* pivots = inv_pivot + P;              // P: d_kk
  double* diagonal = pivots + P;               // P: H's diagonal, for the pivot test
  double* rhs = diagonal + P;                  // P: w
  double* solution = rhs + P;                  // P: dir, for J dir
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warps = nthreads >> 5;
  const int count = static_cast<int>(augmented_elements(P));
  const double inv_n = 1.0 / sc->total_weight;

  OwnedElements<Owned> own;
#pragma unroll
  for (int s = 0; s < Owned; ++s) {
    const int e = tid + s * nthreads;
    own.value[s] = 0.0;
    // Below every pivot row kk < P - 1.
    own.place(s, P * static_cast<int>(sizeof(double)), P * static_cast<int>(sizeof(double)));
    if (e < count) {
      const int i = augmented_row(P, e);
      const int j = i + (e - augmented_row_start(P, i));
      own.place(s, i * static_cast<int>(sizeof(double)), j * static_cast<int>(sizeof(double)));
      if (j == P) {
        own.value[s] = g[i];
      } else {
        own.value[s] = hessian_entry(gram, J, P, i, j, inv_n, k.ridge);
        if (i == j)
          diagonal[i] = own.value[s];
      }
    }
  }
  // Row 0 is final as assembled.
  own.pending_row_bytes = own.row_bytes(0);
  publish_pending<Owned, 0>(own, 0, pivot_rows, factor, pivots, inv_pivot, rhs, P);
  // Elements past the end sit in row P, "below" every pivot: their updates read row P of the
  // pivot buffer (its column P, in bounds) and are never published; no step reaches kk = P - 1.
  int kk = 0;
  eliminate_phases<Owned, 0>(own, kk, count, pivot_rows, inv_pivot, factor, pivots, rhs, P);
  __syncthreads();

  // R dir = w, backward, in warp 0: lane l holds indices l + 32 s; t becomes dir as it is solved.
  if (warp == 0) {
    double w[Slots];
    double invd[Slots];
    double t[Slots];
#pragma unroll
    for (int s = 0; s < Slots; ++s) {
      const int i = lane + 32 * s;
      w[s] = i < P ? rhs[i] : 0.0;
      invd[s] = i < P ? inv_pivot[i] : 0.0;
      t[s] = 0.0;
    }
#pragma unroll
    for (int slot = Slots - 1; slot >= 0; --slot) {
      for (int l = min(P - 1 - 32 * slot, 31); l >= 0; --l) {
        const int kk_solve = 32 * slot + l;
        const double x = __shfl_sync(0xffffffffu, (w[slot] - t[slot]) * invd[slot], l);
        const double* column = factor + kk_solve * P;
#pragma unroll
        for (int s = 0; s <= slot; ++s) {
          const int i = lane + 32 * s;
          if (i < kk_solve)
            t[s] = fma(column[i], x, t[s]);
        }
        if (lane == l)
          t[slot] = x;
      }
    }
#pragma unroll
    for (int s = 0; s < Slots; ++s) {
      const int i = lane + 32 * s;
      if (i < P) {
        dir[i] = t[s];
        solution[i] = t[s];
        if (candidate != nullptr)
          candidate[i] = beta[i] - t[s];
      }
    }
  }
  int refused = 0;
  const double floor = rh_pivot_floor(P, k.ladder_epsilon);
  for (int i = tid; i < P; i += nthreads) {
    const double d = pivots[i];
    if (!cholesky_pivot_accepted(d, diagonal[i], floor))
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

// Cholesky (cuSOLVER's factor L, lower, column-major): every squared pivot finite and above
// rh_pivot_floor(P, eps) times its own column's diagonal of H, recomputed from G and J exactly as
// the assembly formed it (potrf overwrote H): the share of the column left after projecting out
// the earlier ones, a test that rescaling a column does not change (docs/decisions.md). An
// accepted factor is then solved with in the same block, L L' dir = g, by blocked substitution
// over 32-row tiles (docs/decisions.md, "The triangular solves"):
// - The right-hand side and the inverses of L's 32 x 32 diagonal blocks live in shared memory
//   where they fit (P up to about 800 on an H200), else in global memory (the same code through
//   generic pointers; the right-hand side then in dir itself, which only this block touches).
// - First every warp inverts diagonal blocks, all at once: the block staged with one load per
//   element, then a lane per column of the inverse, column-oriented (invert_diagonal_block). So
//   no step of the sweeps below waits on a chain of 32 divisions or shuffles.
// - Then tile by tile, forward and backward: warp 0 multiplies the tile's right-hand side by the
//   block's inverse (its transpose going backward); the other warps, two threads per row (column
//   going backward), update the later rows (earlier ones) with that solution. Their entries of L
//   for the next tile are loaded as soon as the current tile's update is done, so the load
//   overlaps two barriers and warp 0's product. Two barriers per tile.
constexpr int kTriangularThreads = 512;
constexpr int kTile = 32;
constexpr int kTileStride = kTile + 1;  // rows and columns of a tile both conflict-free
constexpr int kTileElems = kTile * kTileStride;
constexpr int kHalfTile = kTile / 2;
constexpr int kUpdaterPairs = (kTriangularThreads - kTile) / 2;  // warps 1.. update the rest

__host__ __device__ constexpr int64_t triangular_tiles(int64_t P) {
  return (P + kTile - 1) / kTile;
}

// Diagonal block t of L (rows and columns t * 32 .. t * 32 + 31, the identity beyond P) replaced
// by its inverse in D (row i, column j at D[i * kTileStride + j]), by one warp.
__device__ __forceinline__ void invert_diagonal_block(const double* L, int64_t P, int64_t t,
                                                      double* D) {
  const int lane = threadIdx.x & 31;
  const int64_t r0 = t * kTile;
  const int m = static_cast<int>(P - r0 < kTile ? P - r0 : kTile);
  {
    double row[kTile];  // every load in flight at once: one memory latency
    const double* element = L + (r0 + lane) + r0 * P;
#pragma unroll
    for (int j = 0; j < kTile; ++j, element += P)
      row[j] = lane < m && j <= lane ? *element : 0.0;
#pragma unroll
    for (int j = 0; j < kTile; ++j)
      D[lane * kTileStride + j] = row[j];
  }
  __syncwarp();
  // Lane c solves D z = e_c (rows beyond m are the identity's) column by column: step j
  // finishes z_j and takes its multiple from every later row, so the steps' 31 - j updates are
  // independent of each other and the dependent chain is two operations per step, not one per
  // element of the block.
  const int c = lane;
  const double reciprocal = lane < m ? 1.0 / D[lane * kTileStride + lane] : 1.0;
  double z[kTile];
#pragma unroll
  for (int i = 0; i < kTile; ++i)
    z[i] = i == c ? 1.0 : 0.0;
#pragma unroll
  for (int j = 0; j < kTile; ++j) {
    z[j] *= __shfl_sync(0xffffffffu, reciprocal, j);
#pragma unroll
    for (int i = j + 1; i < kTile; ++i)
      z[i] = fma(-D[i * kTileStride + j], z[j], z[i]);
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kTile; ++i)
    D[i * kTileStride + c] = z[i];
}

// held[c] = p[c * stride] for c < count, else 0; the pointer is stepped rather than indexed, so
// the loads in flight need one address register, not one each.
__device__ __forceinline__ void load_tile_line(const double* p, int64_t stride, int64_t count,
                                               double (&held)[kHalfTile]) {
#pragma unroll
  for (int c = 0; c < kHalfTile; ++c, p += stride)
    held[c] = c < count ? *p : 0.0;
}

template <class T>
__global__ void __launch_bounds__(kTriangularThreads)
    cholesky_verdict_solve_kernel(const double* L, const int* info, const T* gram, const double* J,
                                  BatchConstants k, DeviceScalars* sc, const double* g, double* dir,
                                  double* global_inverses, int rhs_shared, int inverses_shared) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  extern __shared__ double dynamic_shared[];
  __shared__ double solved[kTile];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int64_t P = k.P;
  double* y = rhs_shared ? dynamic_shared : dir;
  double* inverses = inverses_shared ? dynamic_shared + P : global_inverses;
  const double inv_n = 1.0 / sc->total_weight;
  const double floor = rh_pivot_floor(P, k.ladder_epsilon);
  int refused = 0;
  for (int64_t j = tid; j < P; j += kTriangularThreads) {
    const double root = L[j + j * P];
    const double pivot = root * root;
    const double diagonal = hessian_entry(gram, J, P, j, j, inv_n, k.ridge);
    if (!cholesky_pivot_accepted(pivot, diagonal, floor))
      refused = 1;
    y[j] = g[j];
  }
  refused = __syncthreads_or(refused) || *info != 0;
  if (tid == 0) {
    sc->factor_ok = refused ? 0 : 1;
    if (refused)
      sc->state = kNeedsFallback;
  }
  if (refused)
    return;
  const int64_t tiles = triangular_tiles(P);
  for (int64_t t = warp; t < tiles; t += kTriangularThreads / 32)
    invert_diagonal_block(L, P, t, inverses + t * kTileElems);

  // Warp 0: the tile's solution from its right-hand side, into y and `solved`.
  auto solve_tile = [&](int64_t t, bool forward) {
    const int64_t r0 = t * kTile;
    const double* D = inverses + t * kTileElems;
    const bool inside = r0 + lane < P;
    const double b = inside ? y[r0 + lane] : 0.0;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
    for (int c = 0; c < kTile; ++c) {
      const double entry = forward ? D[lane * kTileStride + c] : D[c * kTileStride + lane];
      acc[c & 3] = fma(entry, __shfl_sync(0xffffffffu, b, c), acc[c & 3]);
    }
    const double solution = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    if (inside)
      y[r0 + lane] = solution;
    solved[lane] = solution;
  };
  // The updaters: thread pairs, a row (column) each, half of the tile's 32 entries per thread.
  const int pair = (tid - kTile) >> 1;
  const int half = tid & 1;
  double held[kHalfTile];
  auto pair_dot = [&] {
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
    for (int c = 0; c < kHalfTile; ++c)
      acc[c & 3] = fma(held[c], solved[half * kHalfTile + c], acc[c & 3]);
    const double mine = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    return mine + __shfl_xor_sync(0xffffffffu, mine, 1);
  };
  auto tile_end = [&](int64_t t) { return (t + 1) * kTile < P ? (t + 1) * kTile : P; };
  // Forward: row end + base + pair of L, its columns of tile t.
  auto load_row = [&](int64_t t, int64_t base) {
    const int64_t r0 = t * kTile;
    const int64_t end = tile_end(t);
    const bool active = base + pair < P - end;
    load_tile_line(L + (end + base + pair) + (r0 + half * kHalfTile) * P, P,
                   active ? end - r0 - half * kHalfTile : 0, held);
  };
  // Backward: column base + pair of L, its rows of tile t (contiguous).
  auto load_column = [&](int64_t t, int64_t base) {
    const int64_t r0 = t * kTile;
    const bool active = base + pair < r0;
    load_tile_line(L + (r0 + half * kHalfTile) + (base + pair) * P, 1,
                   active ? tile_end(t) - r0 - half * kHalfTile : 0, held);
  };

  if (warp != 0)
    load_row(0, 0);
  __syncthreads();  // the inverses are in place
  for (int64_t t = 0; t < tiles; ++t) {
    if (warp == 0)
      solve_tile(t, true);
    __syncthreads();
    if (warp != 0) {
      const int64_t end = tile_end(t);
      for (int64_t base = 0; base < P - end; base += kUpdaterPairs) {
        if (base != 0)
          load_row(t, base);
        const double sum = pair_dot();
        if (base + pair < P - end && half == 0)
          y[end + base + pair] -= sum;
      }
      if (t + 1 < tiles)
        load_row(t + 1, 0);
      else
        load_column(t, 0);
    }
    __syncthreads();
  }
  for (int64_t t = tiles - 1; t >= 0; --t) {
    if (warp == 0)
      solve_tile(t, false);
    __syncthreads();
    if (warp != 0) {
      const int64_t r0 = t * kTile;
      for (int64_t base = 0; base < r0; base += kUpdaterPairs) {
        if (base != 0)
          load_column(t, base);
        const double sum = pair_dot();
        if (base + pair < r0 && half == 0)
          y[base + pair] -= sum;
      }
      if (t > 0)
        load_column(t - 1, 0);
    }
    __syncthreads();
  }
  if (rhs_shared) {
    for (int64_t j = tid; j < P; j += kTriangularThreads)
      dir[j] = y[j];
  }
}

// LU (the host-driven fallback): every pivot finite, min |u_ii| > rh_pivot_floor(P, eps) max
// |u_ii|.
__global__ void check_factor_kernel(const double* factor, const int* info, int64_t P, double eps,
                                    DeviceScalars* sc) {
  enter_stream_order();
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
  enter_stream_order();
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
  enter_stream_order();
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
  enter_stream_order();
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
  enter_stream_order();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < P;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    v[i] *= d[i];
  }
}

}  // namespace

int64_t cholesky_tile_inverse_elems(int64_t P) {
  return triangular_tiles(P) * kTileElems;
}

// P x P doubles for R, two pivot rows of P + 1 and five P-vectors.
constexpr size_t small_cholesky_shared_bytes(int64_t P) {
  return static_cast<size_t>(P * P + 2 * (P + 1) + 5 * P) * sizeof(double);
}

// The kernel's instances: Slots = ceil(P / 32) for the back substitution, and for each the
// element counts per thread that its P range needs with at most kSmallDenseThreads threads (an
// instance of fewer elements runs more threads, up to that cap).
template <int S, int O>
struct SmallDenseShape {
  static constexpr int kSlots = S;
  static constexpr int kOwned = O;
};

using SmallDenseShapes =
    std::tuple<SmallDenseShape<1, 1>, SmallDenseShape<2, 1>, SmallDenseShape<2, 2>,
               SmallDenseShape<2, 3>, SmallDenseShape<3, 3>, SmallDenseShape<3, 4>,
               SmallDenseShape<3, 5>, SmallDenseShape<4, 5>, SmallDenseShape<4, 7>,
               SmallDenseShape<4, 9>, SmallDenseShape<5, 9>, SmallDenseShape<5, 13>>;
static_assert(kSmallDenseSlots == 5, "SmallDenseShapes covers P up to 160");

template <class T, class Shape>
void allow_small_dense_bytes(int bytes) {
  check_cuda(cudaFuncSetAttribute(small_cholesky_solve_kernel<T, Shape::kSlots, Shape::kOwned>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute (one-block Cholesky)");
}

template <class T, class... Shapes>
void allow_small_dense_bytes_all(int bytes, std::tuple<Shapes...>*) {
  (allow_small_dense_bytes<T, Shapes>(bytes), ...);
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
    allow_small_dense_bytes_all<float>(static_cast<int>(bytes),
                                       static_cast<SmallDenseShapes*>(nullptr));
    allow_small_dense_bytes_all<double>(static_cast<int>(bytes),
                                        static_cast<SmallDenseShapes*>(nullptr));
  }
  return limit;
}

// The first instance whose slots match P and whose elements per thread cover [H | g] with at
// most kSmallDenseThreads threads; it runs just enough whole warps for that.
template <class T, class Shape, class... Rest>
void launch_small_cholesky_shape(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                 const double* beta, double* candidate, cudaStream_t s) {
  const int64_t elements = augmented_elements(k.P);
  const int64_t threads = (elements + Shape::kOwned - 1) / Shape::kOwned;
  if constexpr (sizeof...(Rest) > 0) {
    if ((k.P + 31) / 32 != Shape::kSlots || threads > kSmallDenseThreads)
      return launch_small_cholesky_shape<T, Rest...>(gram, J, k, sc, g, dir, jdir, beta, candidate,
                                                     s);
  }
  const int block = static_cast<int>((threads + 31) / 32 * 32);
  launch_kernel("small_cholesky_solve_kernel",
                small_cholesky_solve_kernel<T, Shape::kSlots, Shape::kOwned>,
                LaunchShape{dim3(1), dim3(block), small_cholesky_shared_bytes(k.P)}, s, gram, J, k,
                sc, g, dir, jdir, beta, candidate);
}

template <class T, class... Shapes>
void launch_small_cholesky_from(const T* gram, const double* J, const BatchConstants& k,
                                DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                const double* beta, double* candidate, cudaStream_t s,
                                std::tuple<Shapes...>*) {
  launch_small_cholesky_shape<T, Shapes...>(gram, J, k, sc, g, dir, jdir, beta, candidate, s);
}

template <class T>
void launch_small_cholesky_solve(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                 const double* beta, double* candidate, cudaStream_t s) {
  launch_small_cholesky_from<T>(gram, J, k, sc, g, dir, jdir, beta, candidate, s,
                                static_cast<SmallDenseShapes*>(nullptr));
}

template <class T>
void launch_cholesky_verdict_solve(const double* factor, const int* info, const T* gram,
                                   const double* J, const BatchConstants& k, DeviceScalars* sc,
                                   const double* g, double* dir, double* tile_inverses,
                                   int shared_limit, cudaStream_t s) {
  // The right-hand side, then the inverses, in shared memory as far as they fit.
  const size_t rhs_bytes = static_cast<size_t>(k.P) * sizeof(double);
  const size_t inverse_bytes =
      static_cast<size_t>(cholesky_tile_inverse_elems(k.P)) * sizeof(double);
  const size_t limit = static_cast<size_t>(shared_limit);
  const bool rhs_shared = rhs_bytes <= limit;
  const bool inverses_shared = rhs_bytes + inverse_bytes <= limit;
  const size_t bytes = (rhs_shared ? rhs_bytes : 0) + (inverses_shared ? inverse_bytes : 0);
  launch_kernel("cholesky_verdict_solve_kernel", cholesky_verdict_solve_kernel<T>,
                LaunchShape{dim3(1), dim3(kTriangularThreads), bytes}, s, factor, info, gram, J, k,
                sc, g, dir, tile_inverses, rhs_shared, inverses_shared);
}

int configure_cholesky_solve(int device) {
  int optin = 0;
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, cholesky_verdict_solve_kernel<double>),
             "cudaFuncGetAttributes (Cholesky solve)");
  const int limit = optin - static_cast<int>(attributes.sharedSizeBytes);
  check_cuda(cudaFuncSetAttribute(cholesky_verdict_solve_kernel<float>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, limit),
             "cudaFuncSetAttribute (Cholesky solve)");
  check_cuda(cudaFuncSetAttribute(cholesky_verdict_solve_kernel<double>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, limit),
             "cudaFuncSetAttribute (Cholesky solve)");
  return limit;
}

void launch_check_factor(const double* factor, const int* info, int64_t P, double eps,
                         DeviceScalars* sc, cudaStream_t s) {
  launch_kernel("check_factor_kernel", check_factor_kernel, 1, kThreads, s, factor, info, P, eps,
                sc);
}

void launch_svd_solve(const double* U, const double* S, const double* V, const double* g, int64_t P,
                      double eps, double* scratch, double* dir, int* rank, cudaStream_t s) {
  launch_kernel("svd_solve_kernel", svd_solve_kernel, 1, kThreads, s, U, S, V, g, P, eps, scratch,
                dir, rank);
}

void launch_equilibration(const double* H, const double* g, int64_t P, bool unit, double* d,
                          double* dg, DeviceScalars* sc, cudaStream_t s) {
  launch_kernel("equilibration_kernel", equilibration_kernel, elementwise_blocks(P), kThreads, s, H,
                g, P, unit ? 1 : 0, d, dg, sc);
}

void launch_equilibrate_matrix(double* H, const double* d, int64_t P, DeviceScalars* sc,
                               cudaStream_t s) {
  launch_kernel("equilibrate_matrix_kernel", equilibrate_matrix_kernel, elementwise_blocks(P * P),
                kThreads, s, H, d, P, sc);
}

void launch_scale_vector(double* v, const double* d, int64_t P, cudaStream_t s) {
  launch_kernel("scale_vector_kernel", scale_vector_kernel, elementwise_blocks(P), kThreads, s, v,
                d, P);
}

#define RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(T)                                                   \
  template void launch_small_cholesky_solve<T>(const T*, const double*, const BatchConstants&,   \
                                               DeviceScalars*, const double*, double*, double*,  \
                                               const double*, double*, cudaStream_t);            \
  template void launch_cholesky_verdict_solve<T>(                                                \
      const double*, const int*, const T*, const double*, const BatchConstants&, DeviceScalars*, \
      const double*, double*, double*, int, cudaStream_t);

RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(float)
RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(double)

}  // namespace rh
