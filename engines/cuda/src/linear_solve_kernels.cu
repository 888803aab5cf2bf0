// The Newton step's linear-solve ladder on the device (docs/decisions.md, "Linear solve
// ladder"; linear_solve.cu orchestrates it): the one-block Cholesky solve of small systems, the
// acceptance tests of cuSOLVER's Cholesky and LU factors (rh_pivot_floor), the SVD's
// minimum-norm solve (rh_rank_cutoff) and the equilibration by powers of two.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <cuda_pipeline.h>

#include "engine_error.hpp"
#include "step_common.cuh"

namespace rh {

namespace {

// Small symmetric systems (P <= Engine::small_dense_max) in one block: assembles H = (G + J) / N
// + ridge I, eliminates it with g carried as an extra column, applies the same acceptance test as
// check_cholesky_kernel and, on the same data, solves H dir = g and forms jdir = J dir for the
// line search. A refused factor moves the state to kNeedsFallback, exactly as
// check_cholesky_kernel does after cuSOLVER's potrf.
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
    inv_pivot[row] = __drcp_rn(value);
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
                                const double* g, double* dir, double* jdir) {
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
        own.value[s] = (static_cast<double>(gram[i + static_cast<int64_t>(j) * P]) +
                        J[static_cast<int64_t>(i) * P + j]) *
                       inv_n;
        if (i == j) {
          own.value[s] += k.ridge;
          diagonal[i] = own.value[s];
        }
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
  // jdir = J dir, one row per warp.
  for (int j = warp; j < P; j += warps) {
    const double acc = warp_matvec_row(J, solution, P, j);
    if (lane == 0)
      jdir[j] = acc;
  }
  if (tid == 0) {
    sc->factor_ok = refused ? 0 : 1;
    if (refused)
      sc->state = kNeedsFallback;
  }
}

// The panel Cholesky (docs/decisions.md, "The panel Cholesky"): for P above the one-block
// kernel's limit, the same factorisation, pivot test and solve for dir by one block,
// left-looking, 32 columns at a time (J dir is left to matvec_kernel). The row g' is carried
// under H as row P of the panels, so its part of the factor is w with L w = g: the forward solve
// comes for free.
// - Panel j0 holds rows j0..P of columns j0..j0+31 in shared memory. The earlier panels' part,
//   L[j0.., :j0] L[j0..j0+31, :j0]', comes from the tensor cores (mma m8n8k4, 8-row strips per
//   warp, accumulated over the whole panel in registers), reading L back from global memory 16
//   columns at a time through two shared-memory buffers: the asynchronous copy of the next
//   chunk overlaps the products of this one.
// - The diagonal 32 x 32 block is factored by one warp, a row per lane, with shuffles and no
//   block barrier; the rows below (and g) are solved against it, a row per thread.
// - Every per-column loop is a loop, not unrolled: a lane keeps its row's columns kk..kk+31 in
//   registers and shifts them down one as column kk is done, so each step runs the same
//   instructions. Fully unrolled, the column steps made ~280 KB of straight-line code that one
//   warp ran once per panel, fetching nearly every instruction from L2.
// - L' dir = w, a panel at a time from the last: the block forms the earlier solution's part,
//   one warp solves the 32 x 32 triangle with shuffles.
constexpr int kPanelWidth = 32;  // columns per panel: one lane per row of its diagonal block
constexpr int kPanelLd = 33;     // doubles per panel row
constexpr int kChunkWidth = 16;  // columns of L per staged chunk
constexpr int kChunkLd = 20;     // = 4 (mod 16) doubles: conflict-free fragment loads
constexpr int kColumnLd = 2 * kPanelWidth;  // the diagonal block's columns, as rows, padded
constexpr int kPanelThreads = 512;
constexpr int kPanelWarps = kPanelThreads / 32;
constexpr int kPanelStrips = 4;  // 8-row strips per warp: at most P + 1 = 512 rows

// Rows of the panel buffers: every row of the first panel, g's included, in whole 8-row strips,
// and at least the 32 rows the diagonal block's fragments read.
__host__ __device__ constexpr int64_t panel_buffer_rows(int64_t P) {
  return (P + 8) / 8 * 8 > kPanelWidth ? (P + 8) / 8 * 8 : kPanelWidth;
}

// Queues chunk `chunk` of L's columns (rows j0.. of the first panel's height) into its buffer:
// rows of H by asynchronous copy, the row of g from `forward`, rows past the panel as zeros.
__device__ __forceinline__ void stage_factor_chunk(double* buffer, const double* factor,
                                                   const double* forward, int P, int j0, int R,
                                                   int filled, int chunk) {
  const int kc0 = chunk * kChunkWidth;
  for (int idx = threadIdx.x; idx < filled * kChunkWidth; idx += kPanelThreads) {
    const int r = idx / kChunkWidth;
    const int kk = idx % kChunkWidth;
    double* dst = buffer + r * kChunkLd + kk;
    const int i = j0 + r;
    if (i < P)
      __pipeline_memcpy_async(dst, factor + static_cast<int64_t>(i) * P + kc0 + kk, sizeof(double));
    else
      *dst = r < R ? forward[kc0 + kk] : 0.0;
  }
  __pipeline_commit();
}

template <class T>
__global__ void __launch_bounds__(kPanelThreads)
    panel_cholesky_solve_kernel(const T* gram, const double* J, BatchConstants k, DeviceScalars* sc,
                                const double* g, double* factor, double* dir) {
  if (sc->state != kRunning)
    return;
  extern __shared__ double smem[];
  const int P = static_cast<int>(k.P);
  const int rows = static_cast<int>(panel_buffer_rows(P));
  double* panel = smem;                                 // rows x kPanelLd
  double* chunks = panel + rows * kPanelLd;             // 2 x rows x kChunkLd
  double* columns = chunks + 2 * rows * kChunkLd;       // kPanelWidth x kColumnLd
  double* forward = columns + kPanelWidth * kColumnLd;  // P: w, the factor's row of g
  double* diagonal = forward + P;                       // P: H's diagonal, for the pivot test
  double* inv_root = diagonal + P;                      // P: 1 / L_kk
  double* solution = inv_root + P;                      // P: dir
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const double inv_n = 1.0 / sc->total_weight;
  const double floor = rh_pivot_floor(P, k.dtype_epsilon);

  for (int j0 = 0; j0 < P; j0 += kPanelWidth) {
    const int nb = min(kPanelWidth, P - j0);
    const int R = P + 1 - j0;  // rows j0..P-1 of H, then g
    const int strips = (R + 7) / 8;
    const int filled = max(strips * 8, kPanelWidth);
    // The panel as assembled: its lower part ((i, j), i >= j), exactly as the cuSOLVER path's
    // assembly forms it; zeros elsewhere.
    for (int idx = tid; idx < R * kPanelWidth; idx += kPanelThreads) {
      const int r = idx / kPanelWidth;
      const int c = idx % kPanelWidth;
      const int i = j0 + r;
      const int j = j0 + c;
      double v = 0.0;
      if (c < nb && i >= j) {
        if (i == P) {
          v = g[j];
        } else {
          const int64_t row = static_cast<int64_t>(i) * P;
          v = (static_cast<double>(gram[j + row]) + J[row + j]) * inv_n;
          if (i == j) {
            v += k.ridge;
            diagonal[j] = v;
          }
        }
      }
      panel[r * kPanelLd + c] = v;
    }

    // The earlier panels' part on the tensor cores.
    const int chunk_count = j0 / kChunkWidth;
    double acc[kPanelStrips][4][2] = {};
    if (chunk_count > 0)
      stage_factor_chunk(chunks, factor, forward, P, j0, R, filled, 0);
    for (int c = 0; c < chunk_count; ++c) {
      __pipeline_wait_prior(0);
      __syncthreads();  // chunk c is in; every warp is done with the other buffer
      if (c + 1 < chunk_count)
        stage_factor_chunk(chunks + ((c + 1) & 1) * rows * kChunkLd, factor, forward, P, j0, R,
                           filled, c + 1);
      const double* buffer = chunks + (c & 1) * rows * kChunkLd;
#pragma unroll
      for (int ks = 0; ks < kChunkWidth / 4; ++ks) {
        const int column = 4 * ks + (lane & 3);
        double b[4];
#pragma unroll
        for (int cg = 0; cg < 4; ++cg)
          b[cg] = buffer[(8 * cg + (lane >> 2)) * kChunkLd + column];
#pragma unroll
        for (int s = 0; s < kPanelStrips; ++s) {
          const int strip = warp + kPanelWarps * s;
          if (strip < strips) {
            const double a = buffer[(8 * strip + (lane >> 2)) * kChunkLd + column];
#pragma unroll
            for (int cg = 0; cg < 4; ++cg)
              mma_8x8x4(acc[s][cg], a, b[cg]);
          }
        }
      }
    }
    if (chunk_count > 0) {
#pragma unroll
      for (int s = 0; s < kPanelStrips; ++s) {
        const int row = 8 * (warp + kPanelWarps * s) + (lane >> 2);
#pragma unroll
        for (int cg = 0; cg < 4; ++cg) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int col = 8 * cg + 2 * (lane & 3) + h;
            if (row < R && col < nb)
              panel[row * kPanelLd + col] -= acc[s][cg][h];
          }
        }
      }
    }
    __syncthreads();

    // The diagonal block in warp 0. Lane r holds a[t] = row r, column kk + t; step kk takes the
    // pivot from lane kk, forms column kk of L (written to the panel, and as row kk of
    // `columns` for the solve below), and updates the later columns while shifting them down.
    // Lanes past the block, and columns past 31, compute values nothing reads.
    int refused = 0;
    if (warp == 0) {
      double a[kPanelWidth];
#pragma unroll
      for (int t = 0; t < kPanelWidth; ++t)
        a[t] = panel[lane * kPanelLd + t];
      for (int kk = 0; kk < nb; ++kk) {
        const double d = __shfl_sync(0xffffffffu, a[0], kk);
        if (!isfinite(d) || !(d > floor * diagonal[j0 + kk]))
          refused = 1;
        const double inv = rsqrt(d);
        const double l = lane == kk ? d * inv : a[0] * inv;
        if (lane >= kk && lane < nb) {
          panel[lane * kPanelLd + kk] = l;
          columns[kk * kColumnLd + lane] = l;
        }
        if (lane == kk)
          inv_root[j0 + kk] = inv;
#pragma unroll
        for (int t = 1; t < kPanelWidth; ++t)
          a[t - 1] = fma(-l, __shfl_sync(0xffffffffu, l, (kk + t) & 31), a[t]);
        a[kPanelWidth - 1] = 0.0;
      }
    }
    if (__syncthreads_or(refused)) {
      if (tid == 0) {
        sc->factor_ok = 0;
        sc->state = kNeedsFallback;
      }
      return;
    }

    // The rows below the diagonal block, and g: x L_jj' = b, a row per thread, x[t] holding
    // column c + t as column c is solved (column c of L_jj is row c of `columns`).
    for (int r = nb + tid; r < R; r += kPanelThreads) {
      double x[kPanelWidth];
#pragma unroll
      for (int t = 0; t < kPanelWidth; ++t)
        x[t] = panel[r * kPanelLd + t];
      for (int c = 0; c < nb; ++c) {
        const double v = x[0] * inv_root[j0 + c];
        panel[r * kPanelLd + c] = v;
        const double* below = columns + c * kColumnLd + c;  // below[t] = L[c + t][c]
#pragma unroll
        for (int t = 1; t < kPanelWidth; ++t)
          x[t - 1] = fma(-v, below[t], x[t]);
        x[kPanelWidth - 1] = 0.0;
      }
    }
    __syncthreads();

    // The panel's part of L to global memory (row-major, lower triangle), g's to `forward`.
    for (int idx = tid; idx < R * kPanelWidth; idx += kPanelThreads) {
      const int r = idx / kPanelWidth;
      const int c = idx % kPanelWidth;
      const int i = j0 + r;
      if (c >= nb || c > r)
        continue;
      const double v = panel[r * kPanelLd + c];
      if (i == P)
        forward[j0 + c] = v;
      else
        factor[static_cast<int64_t>(i) * P + j0 + c] = v;
    }
    __syncthreads();
  }

  // L' dir = w, from the last panel back. partial[w][c]: warp w's share of the earlier
  // solution's part in row c of the panel (rows i = j0 + nb + w, + kPanelWarps, ...); the
  // diagonal block's rows are staged in `columns` (row m at m kColumnLd).
  double* partial = chunks;
  for (int j0 = (P - 1) / kPanelWidth * kPanelWidth; j0 >= 0; j0 -= kPanelWidth) {
    const int nb = min(kPanelWidth, P - j0);
    double part = 0.0;
    if (lane < nb) {
      for (int i = j0 + nb + warp; i < P; i += kPanelWarps)
        part = fma(factor[static_cast<int64_t>(i) * P + j0 + lane], solution[i], part);
      for (int m = warp; m < nb; m += kPanelWarps)
        columns[m * kColumnLd + lane] =
            lane < m ? factor[static_cast<int64_t>(j0 + m) * P + j0 + lane] : 0.0;
    }
    partial[warp * kPanelWidth + lane] = part;
    __syncthreads();
    if (warp == 0) {
      double earlier = 0.0;
      for (int w = 0; w < kPanelWarps; ++w)
        earlier += partial[w * kPanelWidth + lane];
      const double inv = lane < nb ? inv_root[j0 + lane] : 0.0;
      double rhs = lane < nb ? forward[j0 + lane] - earlier : 0.0;
      double solved = 0.0;
      for (int m = nb - 1; m >= 0; --m) {
        const double x = __shfl_sync(0xffffffffu, rhs * inv, m);
        rhs = fma(-columns[m * kColumnLd + lane], x, rhs);
        solved = lane == m ? x : solved;
      }
      if (lane < nb)
        solution[j0 + lane] = solved;
    }
    __syncthreads();
  }

  for (int i = tid; i < P; i += kPanelThreads)
    dir[i] = solution[i];
  if (tid == 0)
    sc->factor_ok = 1;
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
                                 cudaStream_t s) {
  const int64_t elements = augmented_elements(k.P);
  const int64_t threads = (elements + Shape::kOwned - 1) / Shape::kOwned;
  if constexpr (sizeof...(Rest) > 0) {
    if ((k.P + 31) / 32 != Shape::kSlots || threads > kSmallDenseThreads)
      return launch_small_cholesky_shape<T, Rest...>(gram, J, k, sc, g, dir, jdir, s);
  }
  const int block = static_cast<int>((threads + 31) / 32 * 32);
  small_cholesky_solve_kernel<T, Shape::kSlots, Shape::kOwned>
      <<<1, block, small_cholesky_shared_bytes(k.P), s>>>(gram, J, k, sc, g, dir, jdir);
  check_launch("small_cholesky_solve_kernel");
}

template <class T, class... Shapes>
void launch_small_cholesky_from(const T* gram, const double* J, const BatchConstants& k,
                                DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                cudaStream_t s, std::tuple<Shapes...>*) {
  launch_small_cholesky_shape<T, Shapes...>(gram, J, k, sc, g, dir, jdir, s);
}

template <class T>
void launch_small_cholesky_solve(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                 cudaStream_t s) {
  launch_small_cholesky_from<T>(gram, J, k, sc, g, dir, jdir, s,
                                static_cast<SmallDenseShapes*>(nullptr));
}

// The panel, the two chunk buffers, the diagonal block's columns and four P-vectors.
constexpr size_t panel_cholesky_shared_bytes(int64_t P) {
  return static_cast<size_t>(panel_buffer_rows(P) * (kPanelLd + 2 * kChunkLd) +
                             kPanelWidth * kColumnLd + 4 * P) *
         sizeof(double);
}

int64_t configure_panel_dense(int device, int64_t cap) {
  int optin = 0;
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  // At most kPanelStrips strips of 8 rows per warp: P + 1 <= 8 kPanelStrips kPanelWarps.
  cap = std::min<int64_t>(cap, 8 * kPanelStrips * kPanelWarps - 1);
  int64_t limit = 0;
  while (limit < cap && panel_cholesky_shared_bytes(limit + 1) <= static_cast<size_t>(optin))
    ++limit;
  const int bytes = static_cast<int>(panel_cholesky_shared_bytes(limit));
  check_cuda(cudaFuncSetAttribute(panel_cholesky_solve_kernel<float>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute (panel Cholesky)");
  check_cuda(cudaFuncSetAttribute(panel_cholesky_solve_kernel<double>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute (panel Cholesky)");
  return limit;
}

template <class T>
void launch_panel_cholesky_solve(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* factor, double* dir,
                                 cudaStream_t s) {
  panel_cholesky_solve_kernel<T>
      <<<1, kPanelThreads, panel_cholesky_shared_bytes(k.P), s>>>(gram, J, k, sc, g, factor, dir);
  check_launch("panel_cholesky_solve_kernel");
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
  template void launch_panel_cholesky_solve<T>(const T*, const double*, const BatchConstants&,  \
                                               DeviceScalars*, const double*, double*, double*, \
                                               cudaStream_t);                                   \
  template void launch_check_cholesky<T>(const double*, const int*, const T*, const double*,    \
                                         const BatchConstants&, DeviceScalars*, cudaStream_t);

RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(float)
RH_INSTANTIATE_LINEAR_SOLVE_KERNELS(double)

}  // namespace rh
