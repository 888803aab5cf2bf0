// Passes over the rows of a batch. Each thread owns a fixed set of rows (grid-stride over a
// grid that depends only on n_rows), keeps its sums in registers and the block writes one
// partial per quantity, so every reduction is reproducible run to run.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine_error.hpp"
#include "huber_math.cuh"
#include "kernel_launch.cuh"
#include "kernels.hpp"
#include "step_common.cuh"

namespace rh {

int row_team(int64_t ncols_x) {
  if (ncols_x > kWideRowColumns)
    return 32;
  return ncols_x > kNarrowRowColumns ? 8 : 1;
}

int row_blocks(int64_t n_rows, int64_t ncols_x) {
  const int64_t wanted = (n_rows * row_team(ncols_x) + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxRowBlocks ? wanted : kMaxRowBlocks);
}

namespace {

// The tensor-core trials' widest instance: 32 steps of 4 columns, rows of up to 128 columns.
constexpr int kLammMmaMaxSteps = 32;
// The fewest 8-row groups a warp of the tensor-core trials takes, where the batch has them.
constexpr int64_t kLammMmaGroupsPerWarp = 4;

}  // namespace

bool lamm_trials_on_mma(int64_t ncols_x, bool float64_mma) {
  return float64_mma && ncols_x > kNarrowRowColumns && ncols_x <= 4 * int64_t{kLammMmaMaxSteps};
}

int lamm_trial_blocks(int64_t n_rows, int64_t ncols_x, bool float64_mma) {
  if (!lamm_trials_on_mma(ncols_x, float64_mma))
    return row_blocks(n_rows, ncols_x);
  const int64_t groups = (n_rows + 7) / 8;
  const int64_t per_block = int64_t{kWarps} * kLammMmaGroupsPerWarp;
  const int64_t blocks = (groups + per_block - 1) / per_block;
  return static_cast<int>(blocks < kFusedGramMaxBlocks ? blocks : kFusedGramMaxBlocks);
}

bool lamm_trials_with_quadratic(int64_t n_rows, int64_t ncols_x) {
  return n_rows * ncols_x <= kLammMergedTrialsMaxValues;
}

int64_t validation_tile_rows(int64_t n_rows, int64_t ncols_x) {
  const int64_t blocks = row_blocks(n_rows, ncols_x);
  return (n_rows + blocks - 1) / blocks;
}

int validation_tiles(int64_t n_rows, int64_t ncols_x) {
  const int64_t tile = validation_tile_rows(n_rows, ncols_x);
  return static_cast<int>((n_rows + tile - 1) / tile);
}

// The fused row pass's shapes: 8-column blocks per padded row; P takes the first that holds it.
constexpr int kFusedSlotCounts[] = {2, 3, 5, 8, 12, 16};

int fused_gram_slots(int64_t P) {
  for (int slots : kFusedSlotCounts) {
    if (P <= 8 * slots)
      return slots;
  }
  return 0;
}

// Slots 0 .. fused_sure_slots(kSlots) - 1 of a padded row hold columns of X for every P that
// kSlots serves: P > 8 times the shape before it, so ncols_x >= P - 1 reaches past them.
constexpr int fused_sure_slots(int slots) {
  int before = 0;
  for (int count : kFusedSlotCounts) {
    if (count == slots)
      return before;
    before = count;
  }
  return 0;
}

int64_t fused_gram_padded(int64_t P) {
  return 8 * int64_t{fused_gram_slots(P)};
}

// Rows each team of the fused row pass holds per tile: two where the tile (kFusedTeams * 2 rows
// of 8 kSlots + 4 doubles) still fits the 48 KiB of static shared memory, so twice the loads
// are in flight while the tile's products run; one above.
constexpr int fused_rows_per_team(int slots) {
  return slots <= 8 ? 2 : 1;
}

int64_t fused_gram_rows_per_block(int64_t n_rows, int64_t P) {
  // About two blocks per SM of an H200 while the per-block partial Grams stay small next to the
  // rows; one block per SM above 64 columns. Whole tiles.
  const int64_t target = fused_gram_padded(P) <= 64 ? kFusedGramMaxBlocks : kFusedGramMaxBlocks / 2;
  const int64_t tile = int64_t{kFusedTeams} * fused_rows_per_team(fused_gram_slots(P));
  const int64_t rows = (n_rows + target - 1) / target;
  return (rows + tile - 1) / tile * tile;
}

int fused_gram_blocks(int64_t n_rows, int64_t P) {
  const int64_t per_block = fused_gram_rows_per_block(n_rows, P);
  return static_cast<int>((n_rows + per_block - 1) / per_block);
}

namespace {

// Rows are shared out to teams of Team consecutive lanes: one lane per row for narrow batches,
// a whole warp per row for wide ones, so the loads of a row are coalesced and a few thousand
// wide rows still fill every SM. The team assignment depends only on n_rows and the columns.
template <int Team>
struct RowTeam {
  int64_t first;
  int64_t stride;
  int lane;
  __device__ RowTeam() : RowTeam(gridDim.x) {}
  // The teams of the first `grid` blocks of the launch (the others have other work).
  __device__ explicit RowTeam(int64_t grid)
      : first((blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / Team),
        stride(grid * blockDim.x / Team),
        lane(static_cast<int>(threadIdx.x % Team)) {}
};

// The shuffle mask of the calling lane's team: its lanes only, since teams of one warp may leave
// the row loop at different times. team_sum: the butterfly sum over the team; every lane ends
// with the same bits, since each pairwise add sees the same two operands on both lanes.
template <int Team>
__device__ __forceinline__ unsigned team_mask() {
  return Team == 32 ? 0xffffffffu : ((1u << Team) - 1u) << ((threadIdx.x & 31) & ~(Team - 1));
}

template <int Team>
__device__ __forceinline__ double team_sum(double v) {
  const unsigned mask = team_mask<Team>();
#pragma unroll
  for (int offset = Team / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(mask, v, offset);
  return v;
}

template <int Team, class T, class V>
__device__ __forceinline__ double row_dot(const RowView<T>& rows, int64_t i, int lane, const V* v) {
  const T* xi = rows.x + i * rows.ldx;
  double dot = 0.0;
  for (int64_t j = lane; j < rows.ncols_x; j += Team) {
    dot += static_cast<double>(xi[j]) * static_cast<double>(v[j]);
  }
  dot = team_sum<Team>(dot);
  if (rows.ncols_x < rows.P)
    dot += static_cast<double>(v[rows.P - 1]);
  return dot;
}

template <class T>
__device__ __forceinline__ double row_weight(const RowView<T>& rows, int64_t i) {
  return rows.w ? static_cast<double>(rows.w[i]) : 1.0;
}

// ||x_i||^2 of design row i, the appended intercept column counted as a one; the same on every
// lane of the team.
template <int Team, class T>
__device__ __forceinline__ double design_squares(const RowView<T>& rows, int64_t i, int lane) {
  const T* xi = rows.x + i * rows.ldx;
  double squares = 0.0;
  for (int64_t j = lane; j < rows.ncols_x; j += Team) {
    const double v = static_cast<double>(xi[j]);
    squares += v * v;
  }
  squares = team_sum<Team>(squares);
  return rows.ncols_x < rows.P ? squares + 1.0 : squares;
}

// 16 bytes of T: the vector the validation pass loads.
template <class T>
struct Vector16;
template <>
struct Vector16<double> {
  using Type = double2;
  __device__ static bool all_finite(const double2& v) {
    return isfinite(v.x) && isfinite(v.y);
  }
  __device__ static double at(const double2& v, int c) {
    return c == 0 ? v.x : v.y;
  }
};
template <>
struct Vector16<float> {
  using Type = float4;
  __device__ static bool all_finite(const float4& v) {
    return isfinite(v.x) && isfinite(v.y) && isfinite(v.z) && isfinite(v.w);
  }
  __device__ static float at(const float4& v, int c) {
    return c == 0 ? v.x : (c == 1 ? v.y : (c == 2 ? v.z : v.w));
  }
};

// The offset from x of the first non-finite value among this thread's share of x[first, last)
// (kNoIndex when none), the block's threads sharing it out. Validation only asks whether each
// value is finite, so the range is read as 16-byte vectors, kInFlight of them per thread loaded
// before any is tested (a row-by-row walk waits on one load at a time); only a group holding a
// non-finite value is looked at value by value. The values before the range's first 16-byte
// boundary and after its last whole vector go to one thread each.
template <class T>
__device__ unsigned long long first_nonfinite_share(const T* x, int64_t first, int64_t last) {
  using V = Vector16<T>;
  using Vec = typename V::Type;
  constexpr int kPer = 16 / sizeof(T);
  constexpr int kInFlight = 4;
  const int64_t t = threadIdx.x;
  const int64_t threads = blockDim.x;
  unsigned long long found = kNoIndex;
  // x is aligned to T (the ABI's rule for device input; staging buffers are allocations).
  const auto lead = reinterpret_cast<uintptr_t>(x + first) & 15u;
  const int64_t head = min(last - first, static_cast<int64_t>(((16u - lead) & 15u) / sizeof(T)));
  const int64_t body = first + head;
  const int64_t vectors = (last - body) / kPer;
  const int64_t tail = body + vectors * kPer;
  if (t < head && !isfinite(static_cast<double>(x[first + t])))
    found = static_cast<unsigned long long>(first + t);
  if (t < last - tail && !isfinite(static_cast<double>(x[tail + t])))
    found = min(found, static_cast<unsigned long long>(tail + t));
  const Vec* v = reinterpret_cast<const Vec*>(x + body);
  for (int64_t base = t; base < vectors; base += kInFlight * threads) {
    Vec held[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t k = base + u * threads;
      held[u] = k < vectors ? v[k] : Vec{};
    }
    bool finite = true;
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      finite = finite && V::all_finite(held[u]);
    if (finite)
      continue;
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      for (int c = 0; c < kPer; ++c) {
        const int64_t k = base + u * threads;
        if (k < vectors && !isfinite(static_cast<double>(V::at(held[u], c))))
          found = min(found, static_cast<unsigned long long>(body + k * kPer + c));
      }
    }
  }
  return found;
}

// Per tile of tile_rows consecutive rows (one block each, tile = first_tile + blockIdx.x): the
// weight sum (weight_partials[tile]) and the first bad index of each kind (bad_partials[4 tile +
// kind]: non-finite x, non-finite y, non-finite w, negative w; kNoIndex when none). The minimum
// over tiles is taken by begin_update_kernel. A tile's partials depend only on its rows, so a
// staged chunk of whole tiles is checked as soon as it lands, with the bits of a single pass.
// The tile's rows of X are one contiguous range (rows.ldx == rows.ncols_x: the batch as given,
// or its staged copy), read as such (first_nonfinite_share), unless scan_x is 0 (deferred
// checks: BatchConstants::checks_deferred); y and w row by row, by the first lane of each team
// of Team lanes, which fixes the order of the weight sum.
template <class T, int Team>
__global__ void validate_rows_kernel(RowView<T> rows, int64_t tile_rows, int first_tile, int scan_x,
                                     double* weight_partials, unsigned long long* bad_partials) {
  enter_stream_order();
  __shared__ double shared[kThreads];
  __shared__ unsigned long long bad[kBadKinds];
  if (threadIdx.x < kBadKinds)
    bad[threadIdx.x] = kNoIndex;
  __syncthreads();
  const int tile = first_tile + static_cast<int>(blockIdx.x);
  const int64_t begin = tile * tile_rows;
  const int64_t end = begin + tile_rows < rows.n ? begin + tile_rows : rows.n;
  if (scan_x) {
    const unsigned long long bad_x =
        first_nonfinite_share(rows.x, begin * rows.ncols_x, end * rows.ncols_x);
    if (bad_x != kNoIndex)
      atomicMin(&bad[kBadX], bad_x);
  }
  double wsum = 0.0;
  if (threadIdx.x % Team == 0) {
    for (int64_t i = begin + threadIdx.x / Team; i < end; i += kThreads / Team) {
      if (!isfinite(static_cast<double>(rows.y[i]))) {
        atomicMin(&bad[kBadY], static_cast<unsigned long long>(i));
      }
      const double w = row_weight(rows, i);
      if (!isfinite(w)) {
        atomicMin(&bad[kBadWeight], static_cast<unsigned long long>(i));
      } else if (w < 0.0) {
        atomicMin(&bad[kNegativeWeight], static_cast<unsigned long long>(i));
      }
      wsum += w;
    }
  }
  const double total = block_sum<kThreads>(wsum, shared);  // its barriers also settle `bad`
  if (threadIdx.x == 0)
    weight_partials[tile] = total;
  if (threadIdx.x < kBadKinds)
    bad_partials[kBadKinds * tile + threadIdx.x] = bad[threadIdx.x];
}

// Columns of X'u one lane accumulates when the row pass forms X'u itself: lane l of a team of
// Team lanes owns columns l, l + Team, ... Narrow teams (WideSlots 1) take rows of at most
// kWideRowColumns columns; the split teams of 8 lanes (kSplitRowTeam, below) rows of at most
// WideSlots x kWideRowColumns; a warp per row gives each lane WideSlots columns. The launcher
// chooses WideSlots for the row's width.
template <int Team, int WideSlots>
constexpr int xtu_slots() {
  if (Team == 1)
    return static_cast<int>(kNarrowRowColumns);
  return Team >= kWideRowColumns ? WideSlots : WideSlots * static_cast<int>(kWideRowColumns) / Team;
}

// Per-block column sums from each lane's kSlots sums (lane l of a team of Team lanes owns columns
// l, l + Team, ...): the lanes that own the same columns summed with a fixed butterfly, then the
// warps in order, column j at out[block * stride + j], kWideRowColumns columns a round. With
// `corner` (the Gram column's sums, appended_column_stride) the block's sum of `corner_value` goes
// to out[block * stride + ncols_x]. Every thread of the block calls it; `shared` holds kThreads
// doubles, which the block may still be reading from an earlier use only behind a barrier.
template <int Team, int kSlots>
__device__ void write_column_sums(const double (&sums)[kSlots], int64_t ncols_x, double* shared,
                                  double* out, int64_t stride, bool corner, double corner_value) {
  if (corner) {
    const double corner_total = block_sum<kThreads>(corner_value, shared);
    if (threadIdx.x == 0)
      out[blockIdx.x * stride + ncols_x] = corner_total;
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  // Round r takes columns 32 r .. 32 r + 31: the slots k of the round (kRound of them: one for a
  // warp per row, four for teams of 8 lanes, all 8 for a lane per row) hold columns 32 r +
  // (k mod kRound) Team + l. The lanes that own the same columns are summed with the butterfly
  // (none for a warp per row), then the warps in order.
  constexpr int kRound = static_cast<int>(kWideRowColumns) / Team;
#pragma unroll
  for (int round = 0; round * kRound < kSlots; ++round) {
    if (round * kWideRowColumns >= ncols_x)
      break;
    if (round > 0)
      __syncthreads();  // the last round's sums are read
#pragma unroll
    for (int k = round * kRound; k < kSlots && k < (round + 1) * kRound; ++k) {
      double v = sums[k];
#pragma unroll
      for (int offset = Team; offset < 32; offset <<= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane < Team)
        shared[warp * kWideRowColumns + lane + (k - round * kRound) * Team] = v;
    }
    __syncthreads();
    const int64_t j = round * kWideRowColumns + threadIdx.x;
    if (threadIdx.x < kWideRowColumns && j < ncols_x) {
      double total = 0.0;
      for (int w = 0; w < kWarps; ++w)
        total += shared[w * kWideRowColumns + threadIdx.x];
      out[blockIdx.x * stride + j] = total;
    }
  }
}

// A row pass block's partials: sum w rho and sum w psi at partials[2 block] and [2 block + 1]
// and, when xtu_partials is not null, the column sums xtu (X'u, or the Gram's last column with
// `corner`) by write_column_sums.
template <int Team, int kSlots>
__device__ void write_row_partials(double rho, double score, const double (&xtu)[kSlots],
                                   int64_t ncols_x, double* shared, double* partials,
                                   double* xtu_partials, int64_t stride, bool corner = false,
                                   double corner_value = 0.0) {
  const double rho_total = block_sum<kThreads>(rho, shared);
  const double score_total = block_sum<kThreads>(score, shared);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = rho_total;
    partials[2 * blockIdx.x + 1] = score_total;
  }
  if (xtu_partials != nullptr)
    write_column_sums<Team, kSlots>(xtu, ncols_x, shared, xtu_partials, stride, corner,
                                    corner_value);
}

// Row i of a scaled design for a Gram GEMM: root x_i, the appended intercept column as root.
template <int Team, class T>
__device__ __forceinline__ void write_scaled_row(const RowView<T>& rows, int64_t i, int lane,
                                                 double root, T* scaled) {
  const T* xi = rows.x + i * rows.ldx;
  T* out = scaled + i * rows.P;
  for (int64_t j = lane; j < rows.ncols_x; j += Team)
    out[j] = static_cast<T>(root * static_cast<double>(xi[j]));
  if (rows.ncols_x < rows.P && lane == 0)
    out[rows.P - 1] = static_cast<T>(root);
}

// Row i of `rows` scaled by root into `out`: root x_i from `column(k)` (column lane + k Team;
// every column of the row is among a lane's kSlots), the appended intercept column as root.
template <int Team, int kSlots, class T, class Column>
__device__ __forceinline__ void write_scaled_slots(const RowView<T>& rows, int64_t i, int lane,
                                                   double root, Column column, T* out_rows) {
  T* out = out_rows + i * rows.P;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int64_t j = lane + k * Team;
    if (j < rows.ncols_x)
      out[j] = static_cast<T>(root * column(k));
  }
  if (rows.ncols_x < rows.P && lane == 0)
    out[rows.P - 1] = static_cast<T>(root);
}

// What a row pass instance sums per column besides rho and psi: X'u (kXtuSums), the Gram's last
// column sum_i w_i c_i (x_i, 1) (kColumnSums: LAMM's pass for the finish, which forms no X'u), or
// both (kBothSums: Newton's row passes that write the scaled rows for a full Gram, at 33 to 128
// columns, where the lanes hold their columns in registers). Each has its own instance, so that
// the instances forming one kind keep their registers.
enum RowPassColumnSums { kXtuSums, kColumnSums, kBothSums };

// The sums and row outputs of the row pass that accumulate over a thread's rows. xtu holds X'u,
// or with kColumnSums sum_i w_i c_i x_i; with kBothSums `column` holds the latter beside X'u.
// `curvature` is sum_i w_i c_i wherever the column is formed.
template <int kSlots, bool kBoth = false>
struct RowPassSums {
  double rho = 0.0;
  double score = 0.0;
  double curvature = 0.0;
  double xtu[kSlots] = {};
  double column[kBoth ? kSlots : 1] = {};
};

// The row pass's work on row i once its residual r is known (every lane of the team has the same
// r). InSlots: `column(k)` gives column lane + k Team, and every column of the row is among a
// lane's kSlots (the scaled rows are then written from them); otherwise the scaled rows are read
// from X again, column by column.
template <bool InSlots, int Team, int kSlots, class T, class Column, bool kBoth>
__device__ __forceinline__ void row_pass_row(const RowView<T>& rows, int64_t i, int lane, double r,
                                             double tau, double h, Column column, double* residual,
                                             T* score, T* scaled, T* meat_scaled, bool meat_here,
                                             bool with_xtu, bool with_column,
                                             const CurvatureTrack& track,
                                             RowPassSums<kSlots, kBoth>& sums) {
  const double w = row_weight(rows, i);
  const double psi = huber_psi(r, tau);
  const double u = w * psi;
  const double wc = w * smoothed_curvature(r, tau, h);
  const auto write_scaled = [&](double root, T* out) {
    if constexpr (InSlots)
      write_scaled_slots<Team, kSlots>(rows, i, lane, root, column, out);
    else
      write_scaled_row<Team>(rows, i, lane, root, out);
  };
  // sqrt(w c) X feeds the Gram GEMM, which then forms X' diag(w c) X.
  if (scaled != nullptr)
    write_scaled(sqrt(wc), scaled);
  if (meat_here)
    write_scaled(sqrt(w) * fabs(psi), meat_scaled);
  // The Gram's last column (the appended intercept's) is sum_i (w c)_i x_i: the scaled row
  // times its last entry, root.
  if (with_xtu || with_column) {
    const double v = with_xtu ? u : wc;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t j = lane + k * Team;
      if (j < rows.ncols_x) {
        const double x = column(k);
        sums.xtu[k] += x * v;
        if constexpr (kBoth)
          sums.column[k] += x * wc;
      }
    }
  }
  if (lane != 0)
    return;
  sums.rho += w * rh_huber_rho(r, tau);
  sums.score += u;
  if (with_column)
    sums.curvature += wc;
  residual[i] = r;
  if (!with_xtu)
    score[i] = static_cast<T>(u);
  if (track.value != nullptr) {
    if (track.recorded) {
      const double change = wc - track.value[i];
      track.flags[i] = change != 0.0 ? 1 : 0;
      if (change != 0.0) {
        track.delta[i] = change;
        track.value[i] = wc;
      }
    } else {
      track.value[i] = wc;
      track.flags[i] = 0;
    }
  }
}

// Rows of 33 to 128 columns forming X'u are read by teams of kSplitRowTeam lanes (16 slots a
// lane), not by a warp each: what a row costs besides its columns (the team's dot product sum,
// the Huber functions, the sums and the stores) is paid by 8 lanes instead of 32, four rows to a
// warp instruction. Each lane loads its row's 16 values before it uses any. A pass over
// 262,144 x 128 rows on an H200 (Nsight Compute, locked clocks, mean of a large-stream stream's
// 52-54 passes): a warp per row holding two rows 161.2 us (float64) and 160.6 us (float32), at
// 37% and 18% of the DRAM bandwidth and about 227 warp instructions a row; teams of 16 lanes
// 125.9 and 111.1 us, holding two rows 124.9 and 125.5 us; teams of 8 lanes 115.5 and 101.0 us.
constexpr int kSplitRowTeam = 8;
constexpr int kSplitRowSlots = 4;  // WideSlots of the split teams: 128 columns

template <int Team, int WideSlots>
constexpr bool row_pass_in_slots() {
  return Team == kSplitRowTeam && WideSlots == kSplitRowSlots;
}

// Blocks per multiprocessor each row pass instance is bounded to: as many as the plain loop's
// registers allowed (64-72 a thread for the narrow teams and for a warp per row without X'u
// slots, 80 for 256 columns, 123-125 for 512). The split teams' 16 slots and 16 X'u sums take
// 128 registers (two blocks); bounded to three blocks (80) they spilled 334 bytes (float64).
// The 32 X'u sums of 1,024 columns fit two blocks' 128 registers without spilling (bounded to
// three, 366 bytes spilled).
// One bound expression serves every instance: left unbounded, the 8-slot instance's registers
// rose from 80 to 82 (two blocks instead of three) once its body was shared with an in-slots
// path.
constexpr int row_pass_blocks_per_sm(int team, int wide_slots, int sums = kXtuSums) {
  // X'u and the Gram's column together: 192 registers in float64, no spills. Bounded to two
  // blocks it spilled 168 bytes and ran slower (docs/decisions.md).
  if (sums == kBothSums)
    return 1;
  if (team < 32)
    return wide_slots == kSplitRowSlots ? 2 : 3;
  return wide_slots >= 16 ? 2 : (wide_slots == 1 ? 4 : 3);
}

// kSums: what the instance sums per column (RowPassColumnSums; X'u where xtu_partials is not
// null, the Gram's last column into column_partials).
template <class T, int Team, int WideSlots = 1, int kSums = kXtuSums>
__global__ void __launch_bounds__(kThreads, row_pass_blocks_per_sm(Team, WideSlots, kSums))
    row_pass_kernel(RowView<T> rows, const double* beta, double tau, DeviceScalars* sc,
                    double* residual, T* score, T* scaled, T* meat_scaled, double* partials,
                    double* xtu_partials, double* column_partials, CurvatureTrack track, int when) {
  enter_stream_order();
  if (!should_run(sc, when))
    return;
  // The row pass at the beta the solve ended on (the step that ended it moved beta, or max_iter
  // was reached) also writes sqrt(w) |psi(r)| x for K's Gram (meat.cu), so K costs no pass of
  // its own over the batch. Every block sees the same state; one thread records the answer.
  const bool meat_here = meat_scaled != nullptr && solve_ended(*sc);
  if (meat_scaled != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
    sc->meat_rows_final = meat_here ? 1 : 0;
  constexpr int kSlots = xtu_slots<Team, WideSlots>();
  __shared__ double shared[kThreads];
  const RowTeam<Team> team;
  const double h = sc->bandwidth;
  static_assert(kSums != kBothSums || row_pass_in_slots<Team, WideSlots>(),
                "X'u and the Gram's column together only where the lanes hold their columns");
  const bool with_xtu = kSums != kColumnSums && xtu_partials != nullptr;
  constexpr bool with_column = kSums != kXtuSums;
  RowPassSums<kSlots, kSums == kBothSums> sums;
  if constexpr (row_pass_in_slots<Team, WideSlots>()) {
    // The rows in the order of the plain loop, with row_dot's products and sums.
    for (int64_t i = team.first; i < rows.n; i += team.stride) {
      const T* xi = rows.x + i * rows.ldx;
      T x[kSlots];
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        const int64_t j = team.lane + k * Team;
        x[k] = j < rows.ncols_x ? xi[j] : T(0);
      }
      const double y = static_cast<double>(rows.y[i]);
      double dot = 0.0;
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        const int64_t j = team.lane + k * Team;
        if (j < rows.ncols_x)
          dot += static_cast<double>(x[k]) * beta[j];
      }
      dot = team_sum<Team>(dot);
      if (rows.ncols_x < rows.P)
        dot += beta[rows.P - 1];
      const auto column = [&](int k) { return static_cast<double>(x[k]); };
      row_pass_row<true, Team, kSlots>(rows, i, team.lane, y - dot, tau, h, column, residual, score,
                                       scaled, meat_scaled, meat_here, with_xtu, with_column, track,
                                       sums);
    }
  } else {
    for (int64_t i = team.first; i < rows.n; i += team.stride) {
      const double r = static_cast<double>(rows.y[i]) - row_dot<Team>(rows, i, team.lane, beta);
      const T* xi = rows.x + i * rows.ldx + team.lane;
      const auto column = [&](int k) { return static_cast<double>(xi[k * Team]); };
      row_pass_row<false, Team, kSlots>(rows, i, team.lane, r, tau, h, column, residual, score,
                                        scaled, meat_scaled, meat_here, with_xtu, with_column,
                                        track, sums);
    }
  }
  if constexpr (kSums == kColumnSums) {
    write_row_partials<Team, kSlots>(sums.rho, sums.score, sums.xtu, rows.ncols_x, shared, partials,
                                     column_partials, appended_column_stride(rows.ncols_x), true,
                                     sums.curvature);
  } else {
    write_row_partials<Team, kSlots>(sums.rho, sums.score, sums.xtu, rows.ncols_x, shared, partials,
                                     xtu_partials, xtu_partials_stride(rows.ncols_x));
    if constexpr (kSums == kBothSums) {
      __syncthreads();  // the X'u round's last reads of `shared`
      write_column_sums<Team, kSlots>(sums.column, rows.ncols_x, shared, column_partials,
                                      appended_column_stride(rows.ncols_x), true, sums.curvature);
    }
  }
}

// launch_flipped_rows: row s of U and V from flipped row rows_of[s], a team per row.
template <class T, int Team>
__global__ void flipped_rows_kernel(RowView<T> rows, const int* rows_of, int64_t count,
                                    int64_t padded, CurvatureTrack track, T* u, T* v) {
  enter_stream_order();
  const RowTeam<Team> team;
  for (int64_t s = team.first; s < padded; s += team.stride) {
    T* us = u + s * rows.P;
    T* vs = v + s * rows.P;
    if (s >= count) {
      for (int64_t j = team.lane; j < rows.P; j += Team) {
        us[j] = T(0);
        vs[j] = T(0);
      }
      continue;
    }
    const int64_t i = rows_of[s];
    const double change = track.delta[i];
    const double root = sqrt(fabs(change));
    const double signed_root = change < 0.0 ? -root : root;
    const T* xi = rows.x + i * rows.ldx;
    for (int64_t j = team.lane; j < rows.ncols_x; j += Team) {
      const double x = static_cast<double>(xi[j]);
      us[j] = static_cast<T>(signed_root * x);
      vs[j] = static_cast<T>(root * x);
    }
    if (team.lane == 0) {
      if (rows.ncols_x < rows.P) {
        us[rows.P - 1] = static_cast<T>(signed_root);
        vs[rows.P - 1] = static_cast<T>(root);
      }
      track.flags[i] = 0;
    }
  }
}

// launch_recorded_scaled_rows: sqrt(w c) x from the recorded weights, a team per row.
template <class T, int Team>
__global__ void recorded_scaled_rows_kernel(RowView<T> rows, CurvatureTrack track, T* scaled) {
  enter_stream_order();
  const RowTeam<Team> team;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    write_scaled_row<Team>(rows, i, team.lane, sqrt(track.value[i]), scaled);
    if (team.lane == 0)
      track.flags[i] = 0;
  }
}

// The row pass with the Gram fused in (P <= kFusedGramMaxP; docs/decisions.md, "The fused
// row pass"): the same residuals, scores, objective partials and X'u as row_pass_kernel, and
// per block the Gram of its rows, sum_i w_i c(r_i) x_i x_i', on the float64 tensor cores
// (mma m8n8k4), so the scaled rows never go through HBM. Each block owns one contiguous range
// of rows (whole tiles, from the shape alone) and walks it a tile at a time: the 8 lanes of a
// team read one or two rows (fused_rows_per_team) into registers (kSlots columns each, the appended
// intercept column as a one, padding columns as zeros), form r, and write sqrt(w c) x into the
// tile in shared memory; warp w then adds the tile's 8 x 8 output blocks (ta, tb), ta <= tb,
// numbered p = tb (tb + 1) / 2 + ta with p = w (mod 8), into its accumulators, while the next
// tile's rows load. float32 rows are widened to double, so the Gram is formed from exact
// products and summed in double. The block's upper 8 x 8 blocks go to
// gram_partials[block * kPad^2 + row + col * kPad]; launch_gram_sum adds the blocks in
// block order.
template <int kSlots>
struct FusedGramShape {
  static constexpr int kPad = 8 * kSlots;  // padded P: kSlots 8-column blocks
  static constexpr int kLd = kPad + 4;     // row stride of the tile: conflict-free mma loads
  static constexpr int kPairs = kSlots * (kSlots + 1) / 2;
  static constexpr int kPairsPerWarp = (kPairs + kWarps - 1) / kWarps;
  static constexpr int kRowsPerThread = fused_rows_per_team(kSlots);
  static constexpr int kTileRows = kFusedTeams * kRowsPerThread;
};

// Which of a lane's slots past the sure ones hold a column of X (bit k of `take`) or the
// appended intercept column (bit k of `one`); the rest are padding, zeros. Fixed per thread.
struct FusedColumns {
  unsigned take = 0;
  unsigned one = 0;
};

template <int kSlots>
__device__ __forceinline__ FusedColumns fused_columns(int64_t ncols_x, int64_t P, int lane) {
  FusedColumns columns;
#pragma unroll
  for (int k = fused_sure_slots(kSlots); k < kSlots; ++k) {
    const int64_t j = lane + 8 * k;
    if (j < ncols_x)
      columns.take |= 1u << k;
    else if (j == ncols_x && j < P)
      columns.one |= 1u << k;
  }
  return columns;
}

// Row i of `rows` as the kSlots columns lane `lane` of its team reads (j = lane + 8 k), with y
// and w. A row at or past the block's `last` reads `last` instead (every block holds a row: a
// batch has at least one, rh_validate_batch): its values stay finite (the validation pass
// refused any other batch), and the caller neither stores nor sums anything of such a row (its
// root, hence its tile row, is zero). The sure slots load without a test.
template <class T, int kSlots>
__device__ __forceinline__ void load_fused_row(const RowView<T>& rows, int64_t i, int64_t last,
                                               int lane, FusedColumns columns, double (&x)[kSlots],
                                               double& y, double& w) {
  const int64_t row = i < last ? i : last;
  const T* xi = rows.x + row * rows.ldx + lane;
  constexpr int kSure = fused_sure_slots(kSlots);
#pragma unroll
  for (int k = 0; k < kSure; ++k)
    x[k] = static_cast<double>(xi[8 * k]);
#pragma unroll
  for (int k = kSure; k < kSlots; ++k) {
    double v = (columns.one >> k) & 1u ? 1.0 : 0.0;
    if ((columns.take >> k) & 1u)
      v = static_cast<double>(xi[8 * k]);
    x[k] = v;
  }
  y = static_cast<double>(rows.y[row]);
  w = row_weight(rows, row);
}

template <class T, int kSlots>
__global__ void __launch_bounds__(kThreads)
    row_gram_kernel(RowView<T> rows, const double* beta, double tau, DeviceScalars* sc,
                    double* residual, T* score, double* partials, double* xtu_partials,
                    double* gram_partials, int64_t rows_per_block, int when) {
  enter_stream_order();
  if (!should_run(sc, when))
    return;
  using Shape = FusedGramShape<kSlots>;
  constexpr int kLd = Shape::kLd;
  constexpr int kRows = Shape::kRowsPerThread;
  constexpr int kTileRows = Shape::kTileRows;
  __shared__ double tile[kTileRows * kLd];
  __shared__ double beta_s[Shape::kPad];
  __shared__ double shared[kThreads];
  for (int j = threadIdx.x; j < Shape::kPad; j += kThreads)
    beta_s[j] = j < rows.P ? beta[j] : 0.0;

  const int lane = threadIdx.x & 31;
  // Masked so the compiler knows warp < kWarps: the tests of the output blocks every warp has
  // fold away, and their products run unpredicated.
  const int warp = (threadIdx.x >> 5) & (kWarps - 1);
  const int team_lane = threadIdx.x & 7;
  const int team = threadIdx.x >> 3;  // this team's rows of a tile: team, team + 32, ...
  // This warp's output blocks p = warp + kWarps s < kPairs, as the tile offsets (in doubles) of
  // this lane's A and B fragments at step 0, packed as a | b << 16: a product costs two shared
  // loads at offsets from them (and, for 12 and 16 blocks, their unpacking); the write at the
  // end recovers the blocks' first row and column from them. Kept as row and column offsets
  // instead, the wider shapes' went to local memory, with about ten instructions per product.
  static_assert(Shape::kTileRows * kLd < (1 << 15), "tile offsets fit in 15 bits");
  int fragments[Shape::kPairsPerWarp];
  double acc[Shape::kPairsPerWarp][2];
  const int lane_offset = (lane & 3) * kLd + (lane >> 2);
#pragma unroll
  for (int s = 0; s < Shape::kPairsPerWarp; ++s) {
    const int p = warp + kWarps * s;
    int tb = 0;
    while ((tb + 1) * (tb + 2) / 2 <= p)
      ++tb;
    const int row_at = 8 * (p - tb * (tb + 1) / 2);
    fragments[s] = (lane_offset + row_at) | ((lane_offset + 8 * tb) << 16);
    acc[s][0] = 0.0;
    acc[s][1] = 0.0;
  }

  const int64_t begin = blockIdx.x * rows_per_block;
  const int64_t end = begin + rows_per_block < rows.n ? begin + rows_per_block : rows.n;
  const double h = sc->bandwidth;
  const bool with_xtu = xtu_partials != nullptr;
  double rho_acc = 0.0;
  double score_acc = 0.0;
  double xtu_acc[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
    xtu_acc[k] = 0.0;
  const FusedColumns columns = fused_columns<kSlots>(rows.ncols_x, rows.P, team_lane);
  double x[kRows][kSlots];
  double y[kRows];
  double w[kRows];
#pragma unroll
  for (int q = 0; q < kRows; ++q)
    load_fused_row<T, kSlots>(rows, begin + team + 32 * q, end - 1, team_lane, columns, x[q], y[q],
                              w[q]);
  __syncthreads();  // beta_s
  for (int64_t first = begin; first < end; first += kTileRows) {
#pragma unroll
    for (int q = 0; q < kRows; ++q) {
      const int64_t i = first + team + 32 * q;
      double dot = 0.0;
#pragma unroll
      for (int k = 0; k < kSlots; ++k)
        dot += x[q][k] * beta_s[team_lane + 8 * k];
      dot = team_sum<8>(dot);
      double root = 0.0;
      if (i < end) {
        const double r = y[q] - dot;
        const double psi = huber_psi(r, tau);
        const double u = w[q] * psi;
        root = sqrt(w[q] * smoothed_curvature(r, tau, h));
        if (with_xtu) {
#pragma unroll
          for (int k = 0; k < kSlots; ++k)
            xtu_acc[k] += x[q][k] * u;
        }
        if (team_lane == 0) {
          rho_acc += w[q] * rh_huber_rho(r, tau);
          score_acc += u;
          residual[i] = r;
          if (!with_xtu)
            score[i] = static_cast<T>(u);
        }
      }
#pragma unroll
      for (int k = 0; k < kSlots; ++k)
        tile[(team + 32 * q) * kLd + team_lane + 8 * k] = root * x[q][k];
    }
    __syncthreads();
    if (first + kTileRows < end) {
#pragma unroll
      for (int q = 0; q < kRows; ++q) {
        load_fused_row<T, kSlots>(rows, first + kTileRows + team + 32 * q, end - 1, team_lane,
                                  columns, x[q], y[q], w[q]);
      }
    }
    if (Shape::kPairsPerWarp > 1 || warp < Shape::kPairs) {  // one test per tile for one block
#pragma unroll
      for (int step = 0; step < kTileRows / 4; ++step) {
        const double* z = tile + 4 * step * kLd;
#pragma unroll
        for (int s = 0; s < Shape::kPairsPerWarp; ++s) {
          if (warp + kWarps * s < Shape::kPairs)
            mma_8x8x4(acc[s], z[fragments[s] & 0xffff], z[fragments[s] >> 16]);
        }
      }
    }
    __syncthreads();  // the tile is rewritten next
  }

  double* block_gram = gram_partials + blockIdx.x * int64_t{Shape::kPad} * Shape::kPad;
#pragma unroll
  for (int s = 0; s < Shape::kPairsPerWarp; ++s) {
    if (warp + kWarps * s >= Shape::kPairs)
      continue;
    // The block's first row and column, from its fragments' offsets.
    const int row = (fragments[s] & 0xffff) - lane_offset + (lane >> 2);
    const int col = (fragments[s] >> 16) - lane_offset + 2 * (lane & 3);
    block_gram[row + col * Shape::kPad] = acc[s][0];
    block_gram[row + (col + 1) * Shape::kPad] = acc[s][1];
  }
  write_row_partials<8, kSlots>(rho_acc, score_acc, xtu_acc, rows.ncols_x, shared, partials,
                                xtu_partials, xtu_partials_stride(rows.ncols_x));
}

// Newton's majoriser fallback (docs/algorithm.md, "Unpenalised"): sqrt(w m(r)) x for the Gram
// GEMM, m = rh_majoriser_weight(r, tau, c(r)), from the residuals the last row pass stored at
// the current beta. The curvature Gram's scaled rows are overwritten: the row pass after an
// accepted step writes them again.
template <class T, int Team>
__global__ void majoriser_rows_kernel(RowView<T> rows, const double* residual, double tau,
                                      const DeviceScalars* sc, T* scaled) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  const RowTeam<Team> team;
  const double h = sc->bandwidth;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    const double r = residual[i];
    const double m = rh_majoriser_weight(r, tau, smoothed_curvature(r, tau, h));
    write_scaled_row<Team>(rows, i, team.lane, sqrt(row_weight(rows, i) * m), scaled);
  }
}

// K's scaled rows sqrt(w) |psi(r)| x from the residuals the last row pass stored, for a solve
// that ended without moving beta (that pass could not know it was the last; meat.cu). The
// bits the row pass writes for K at the same beta.
template <class T, int Team>
__global__ void meat_rows_kernel(RowView<T> rows, const double* residual, double tau, T* scaled) {
  enter_stream_order();
  const RowTeam<Team> team;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    write_scaled_row<Team>(rows, i, team.lane,
                           sqrt(row_weight(rows, i)) * fabs(huber_psi(residual[i], tau)), scaled);
  }
}

// sum_i w_i ||x_i||^2 for LAMM's curvature bound, the appended intercept column counted as
// ones; one partial per block (summed by lamm_bound_kernel in a fixed order).
template <class T, int Team>
__global__ void weighted_square_norms_kernel(RowView<T> rows, const DeviceScalars* sc,
                                             double* partials) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  __shared__ double shared[kThreads];
  const RowTeam<Team> team;
  double acc = 0.0;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    const double squares = design_squares<Team>(rows, i, team.lane);
    if (team.lane != 0)
      continue;
    acc += row_weight(rows, i) * squares;
  }
  const double total = block_sum<kThreads>(acc, shared);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = total;
}

// The row-statistics extension (row_statistics.cu): per row of `rows` (one chunk of a batch, its
// own view) r = y - x . beta (beta null: NORM alone, no residual), then per-row weights for the
// score and the three Grams, row_weights[k * rows.n + i] with k = 0: w psi(r), 1: w c(r),
// 2: w m(r), 3: w psi(r)^2 (only with beta); one partial per block of sum w rho(r) and of
// sum w ||x||^2, partials[2 block] and partials[2 block + 1]. Always in double.
template <class T, int Team>
__global__ void statistics_rows_kernel(RowView<T> rows, const double* beta, double tau, double h,
                                       double* row_weights, double* partials) {
  enter_stream_order();
  __shared__ double shared[kThreads];
  const RowTeam<Team> team;
  double loss_acc = 0.0;
  double norm_acc = 0.0;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    const double squares = design_squares<Team>(rows, i, team.lane);
    const double r = beta != nullptr
                         ? static_cast<double>(rows.y[i]) - row_dot<Team>(rows, i, team.lane, beta)
                         : 0.0;
    if (team.lane != 0)
      continue;
    const double w = row_weight(rows, i);
    norm_acc += w * squares;
    if (beta == nullptr)
      continue;
    const double psi = huber_psi(r, tau);
    const double c = smoothed_curvature(r, tau, h);
    loss_acc += w * rh_huber_rho(r, tau);
    row_weights[i] = w * psi;
    row_weights[rows.n + i] = w * c;
    row_weights[2 * rows.n + i] = w * rh_majoriser_weight(r, tau, c);
    row_weights[3 * rows.n + i] = w * psi * psi;
  }
  const double loss_total = block_sum<kThreads>(loss_acc, shared);
  const double norm_total = block_sum<kThreads>(norm_acc, shared);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = loss_total;
    partials[2 * blockIdx.x + 1] = norm_total;
  }
}

// Every line-search trial in one pass: the candidate beta - t d has residual r + t (x . d).
// partials[trial * blocks + block].
// A team of lanes shares one row: every lane of it has x . d after the team sum, so the 27
// trials are spread over the team's lanes (trial k on lane k mod Team) instead of queued on
// its first lane. The sums keep the bits of a first-lane-only accumulation: each trial is still
// summed over the same rows in the same order, and the warp combines the teams with the same
// butterfly steps (offsets 16, 8, ..., Team) that warp_sum would apply to the first lanes.
template <class T, int Team>
__global__ void newton_trials_kernel(RowView<T> rows, const double* residual, const double* dir,
                                     double tau, const DeviceScalars* sc, double* partials) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  constexpr int kPerLane = (kLineSearchTrials + Team - 1) / Team;
  __shared__ double shared[kLineSearchTrials * (kThreads / 32)];
  const RowTeam<Team> team;
  double acc[kPerLane];
#pragma unroll
  for (int m = 0; m < kPerLane; ++m)
    acc[m] = 0.0;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    const double q = row_dot<Team>(rows, i, team.lane, dir);
    const double r = residual[i];
    const double w = row_weight(rows, i);
#pragma unroll
    for (int m = 0; m < kPerLane; ++m) {
      const int trial = team.lane + Team * m;
      // t = 2^-trial (its exponent bits), exactly the repeated halving of the reference.
      const double t = __longlong_as_double(static_cast<long long>(1023 - trial) << 52);
      if (trial < kLineSearchTrials)
        acc[m] += w * rh_huber_rho(r + t * q, tau);
    }
  }
  // Per warp: Team == 1 sums all 32 lanes with warp_sum's tree; wider teams combine the teams
  // with the same butterfly steps. Then the warps in order, one thread per trial.
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < kPerLane; ++m) {
    double v = acc[m];
    if constexpr (Team == 1) {
      v = warp_sum(v);
    } else {
#pragma unroll
      for (int offset = 16; offset >= Team; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    const int trial = Team == 1 ? m : lane + Team * m;
    if (lane < Team && trial < kLineSearchTrials)
      shared[warp * kLineSearchTrials + trial] = v;
  }
  __syncthreads();
  if (threadIdx.x < kLineSearchTrials) {
    double total = 0.0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w)
      total += shared[w * kLineSearchTrials + threadIdx.x];
    // Trial-major: the select kernel reads each trial's block partials contiguously.
    partials[threadIdx.x * gridDim.x + blockIdx.x] = total;
  }
}

// J delta for `count` LAMM candidates' deltas (kLammChunk at a time), for the pick's quadratic
// terms: warp w of block `block` forms coefficient j = block * kWarps + w of each, lane l adding
// columns l, l + 32, ... and then the fixed shuffle tree: jdeltas[a * P + j].
__device__ void lamm_quadratic_block(const double* J, const double* deltas, int count, int64_t P,
                                     int64_t block, double* jdeltas) {
  const int64_t j = (block * blockDim.x + threadIdx.x) >> 5;
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

__global__ void lamm_quadratic_kernel(const double* J, const double* deltas, int count, int64_t P,
                                      const DeviceScalars* sc, double* jdeltas) {
  enter_stream_order();
  if (sc->state != kRunning || sc->lamm_accepted)
    return;
  lamm_quadratic_block(J, deltas, count, P, blockIdx.x, jdeltas);
}

// The start both trials kernels share: whether this block sums rows. None does once an attempt
// was accepted or the solve is not running; WithQuadratic, the blocks after the first row_grid
// form J delta (lamm_quadratic_block) instead.
template <bool WithQuadratic>
__device__ __forceinline__ bool lamm_trials_rows_block(const DeviceScalars* sc, int row_grid,
                                                       const double* J, const double* deltas,
                                                       int count, int64_t P, double* jdeltas) {
  if (sc->state != kRunning || sc->lamm_accepted)
    return false;
  if constexpr (WithQuadratic) {
    if (static_cast<int>(blockIdx.x) >= row_grid) {
      lamm_quadratic_block(J, deltas, count, P, blockIdx.x - row_grid, jdeltas);
      return false;
    }
  }
  return true;
}

// The candidate whose sum lane `lane` of a team holds after lamm_spread_sum.
template <int Team>
__device__ __forceinline__ int lamm_spread_candidate(int lane) {
  static_assert(Team % kLammChunk == 0 && kLammChunk == 8, "three halving steps");
  return lane / (Team / kLammChunk);
}

// The sums of one LAMM chunk's kLammChunk candidates over a team's lanes, spread: where team_sum
// would leave every lane with all kLammChunk sums (a butterfly per candidate), the first three
// butterfly steps each keep half of the values a lane holds and hand the other half to its
// partner, so a lane ends with one candidate's sum; the steps left (teams of 32: offsets 2 and
// 1) are plain butterfly steps. 7 shuffles a row instead of 24 for a team of 8 lanes, 9 instead
// of 40 for a warp. Each add sees the operands team_sum's add for that candidate sees, so the
// sums have its bits.
// Returns the lane's sum; the lane's candidate is lamm_spread_candidate<Team>(lane).
template <int Team>
__device__ __forceinline__ double lamm_spread_sum(double (&v)[kLammChunk], int lane,
                                                  unsigned mask) {
#pragma unroll
  for (int held = kLammChunk, offset = Team / 2; held > 1; held /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int m = 0; m < held / 2; ++m) {
      const double send = upper ? v[m] : v[m + held / 2];
      const double keep = upper ? v[m + held / 2] : v[m];
      v[m] = keep + __shfl_xor_sync(mask, send, offset);
    }
  }
  double sum = v[0];
#pragma unroll
  for (int offset = Team / kLammChunk / 2; offset > 0; offset >>= 1)
    sum += __shfl_xor_sync(mask, sum, offset);
  return sum;
}

// Candidate columns a lane keeps in registers for the whole chunk where the row holds at most
// kLammCachedSlots * Team columns (a team of 8: every row it reads; a warp: up to 128 columns).
constexpr int kLammCachedSlots = 4;
// Rows a team takes at once on that path: their loads are in flight together.
constexpr int kLammRowsAtOnce = 2;
static_assert(kWideRowColumns == int64_t{kLammCachedSlots} * 8,
              "a team of 8 lanes keeps every candidate column of its rows");

// The partial dots of row `row` with the chunk's candidates read from memory: the lane's
// columns lane, lane + Team, ... in that order (as row_dot).
template <int Team, class T>
__device__ __forceinline__ void lamm_dots_from_memory(const RowView<T>& rows, int64_t row, int lane,
                                                      const double* chunk,
                                                      double (&dot)[kLammChunk]) {
  const T* xi = rows.x + row * rows.ldx;
#pragma unroll
  for (int k = 0; k < kLammChunk; ++k)
    dot[k] = 0.0;
  for (int64_t j = lane; j < rows.ncols_x; j += Team) {
    const double xv = static_cast<double>(xi[j]);
#pragma unroll
    for (int k = 0; k < kLammChunk; ++k)
      dot[k] += xv * chunk[k * rows.P + j];
  }
}

// Row `row`'s term for the lane's candidate: its dot from the team's partial dots
// (lamm_spread_sum), with the appended intercept's coefficient, then acc += w rho(y - dot).
template <int Team, class T>
__device__ __forceinline__ void add_lamm_row(const RowView<T>& rows, int64_t row,
                                             double (&dot)[kLammChunk], int lane, unsigned mask,
                                             double intercept_value, double tau, double& acc) {
  double mine = lamm_spread_sum<Team>(dot, lane, mask);
  if (rows.ncols_x < rows.P)
    mine += intercept_value;
  const double y = static_cast<double>(rows.y[row]);
  const double w = row_weight(rows, row);
  acc += w * rh_huber_rho(y - mine, tau);
}

// One chunk's objective sums, rows read by teams of Team (8 or 32) lanes. Each lane forms the
// partial dots of the columns it owns (l, l + Team, ..., in that order, as row_dot) for every
// candidate; lamm_spread_sum leaves one candidate's dot per lane, and that lane adds the row's
// weighted rho for it. The result, per candidate, is the sum a lane per team-of-rows forming all
// kLammChunk dots with team_sum would have found, bit for bit: the same dots, the same rows in
// the same order. Returns the lane's sum over its team's rows (its candidate's).
template <class T, int Team, bool Cached>
__device__ __forceinline__ double lamm_chunk_by_team(const RowView<T>& rows, const double* chunk,
                                                     double tau, const RowTeam<Team>& team,
                                                     unsigned mask) {
  const int candidate = lamm_spread_candidate<Team>(team.lane);
  const double intercept_value =
      rows.ncols_x < rows.P ? chunk[candidate * rows.P + rows.P - 1] : 0.0;
  double acc = 0.0;
  if constexpr (Cached) {
    double own[kLammCachedSlots][kLammChunk];
#pragma unroll
    for (int s = 0; s < kLammCachedSlots; ++s) {
      const int64_t j = team.lane + int64_t{Team} * s;
#pragma unroll
      for (int k = 0; k < kLammChunk; ++k)
        own[s][k] = j < rows.ncols_x ? chunk[k * rows.P + j] : 0.0;
    }
    for (int64_t i = team.first; i < rows.n; i += kLammRowsAtOnce * team.stride) {
      T x[kLammRowsAtOnce][kLammCachedSlots];
#pragma unroll
      for (int r = 0; r < kLammRowsAtOnce; ++r) {
        const int64_t row = i + r * team.stride;
        const T* xi = rows.x + row * rows.ldx;
#pragma unroll
        for (int s = 0; s < kLammCachedSlots; ++s) {
          const int64_t j = team.lane + int64_t{Team} * s;
          x[r][s] = row < rows.n && j < rows.ncols_x ? xi[j] : T(0);
        }
      }
#pragma unroll
      for (int r = 0; r < kLammRowsAtOnce; ++r) {
        const int64_t row = i + r * team.stride;
        if (r > 0 && row >= rows.n)
          break;  // the team's rows are done (team-uniform)
        double dot[kLammChunk];
#pragma unroll
        for (int k = 0; k < kLammChunk; ++k)
          dot[k] = 0.0;
#pragma unroll
        for (int s = 0; s < kLammCachedSlots; ++s) {
          if (team.lane + int64_t{Team} * s < rows.ncols_x) {
            const double xv = static_cast<double>(x[r][s]);
#pragma unroll
            for (int k = 0; k < kLammChunk; ++k)
              dot[k] += xv * own[s][k];
          }
        }
        add_lamm_row<Team>(rows, row, dot, team.lane, mask, intercept_value, tau, acc);
      }
    }
  } else {
    for (int64_t i = team.first; i < rows.n; i += team.stride) {
      double dot[kLammChunk];
      lamm_dots_from_memory<Team>(rows, i, team.lane, chunk, dot);
      add_lamm_row<Team>(rows, i, dot, team.lane, mask, intercept_value, tau, acc);
    }
  }
  return acc;
}

// The objective sums of `count` LAMM candidates (a multiple of kLammChunk), kLammChunk per pass
// over the rows, by the first row_grid blocks: partials[block * count + a]. WithQuadratic: the
// blocks after them form J delta for the same candidates (lamm_quadratic_block), which needs no
// row, in the same launch.
//
// A row's team forms its kLammChunk dots and spreads them over its lanes (lamm_chunk_by_team,
// Cached: the candidates' columns in registers; lanes of their own rows where Team is 1); the
// block's sums are block_sums_to's, bit for bit, the warps in order. The kernel that reads the
// candidates from memory is a kernel of its own: the registers of the cached one would halve its
// occupancy. At least two blocks per multiprocessor: the cached kernel's registers fit 128 a thread
// without spilling. Where the device has the float64 tensor cores, rows of 9 to 128 columns go to
// lamm_trials_mma_kernel instead (the same partials; launch_lamm_trials_kernel).
template <class T, int Team, bool WithQuadratic, bool Cached>
__global__ void __launch_bounds__(kThreads, Cached ? 2 : (Team == 1 ? 3 : 4))
    lamm_trials_kernel(RowView<T> rows, const double* candidates, int count, double tau,
                       const DeviceScalars* sc, double* partials, int row_grid, const double* J,
                       const double* deltas, double* jdeltas) {
  enter_stream_order();
  if (!lamm_trials_rows_block<WithQuadratic>(sc, row_grid, J, deltas, count, rows.P, jdeltas))
    return;
  __shared__ double shared[kLammChunk * (kThreads / 32)];
  const RowTeam<Team> team(row_grid);
  for (int first = 0; first < count; first += kLammChunk) {
    const double* chunk = candidates + first * rows.P;
    if constexpr (Team == 1) {
      double acc[kLammChunk];
#pragma unroll
      for (int k = 0; k < kLammChunk; ++k)
        acc[k] = 0.0;
      for (int64_t i = team.first; i < rows.n; i += team.stride) {
        double dot[kLammChunk];
        lamm_dots_from_memory<1>(rows, i, 0, chunk, dot);
        if (rows.ncols_x < rows.P) {
#pragma unroll
          for (int k = 0; k < kLammChunk; ++k)
            dot[k] += chunk[k * rows.P + rows.P - 1];
        }
        const double y = static_cast<double>(rows.y[i]);
        const double w = row_weight(rows, i);
#pragma unroll
        for (int k = 0; k < kLammChunk; ++k)
          acc[k] += w * rh_huber_rho(y - dot[k], tau);
      }
      block_sums_to<kThreads>(acc, shared, partials + blockIdx.x * count + first);
    } else {
      double acc = lamm_chunk_by_team<T, Team, Cached>(rows, chunk, tau, team, team_mask<Team>());
      // The sums block_sums_to would give over lanes of which only a team's first lane held all
      // kLammChunk sums (the others zeros), without its kLammChunk warp trees: a warp's sum is
      // lane 4 k's; with teams of 8, lane 8 t + k holds team t's sum of candidate k, and the
      // warp's is (team 0 + team 2) + (team 1 + team 3), as the tree added them. (Through
      // block_sums_to the launch took 0.3-1 us longer on the H200.)
      if constexpr (Team == 8) {
        acc += __shfl_xor_sync(0xffffffffu, acc, 16);
        acc += __shfl_xor_sync(0xffffffffu, acc, 8);
      }
      const int lane = threadIdx.x & 31;
      if (lane < Team && lane % (Team / kLammChunk) == 0)
        shared[(threadIdx.x >> 5) * kLammChunk + lamm_spread_candidate<Team>(lane)] = acc;
      add_warp_totals<kThreads, kLammChunk>(shared, partials + blockIdx.x * count + first);
    }
    __syncthreads();  // the next chunk reuses `shared`
  }
}

// The column of a row that lamm_trials_mma_kernel's step s takes on the lanes with l % 4 = q
// (the k index of the step's mma m8n8k4, the same on both sides of the product). Float64: 4 s +
// q, a step's 4 columns side by side. Float32: 16 (s / 4) + 4 q + s % 4, so a lane's columns of
// 4 consecutive steps are consecutive, one 16-byte load (LammMmaGroup), and a quad's loads of
// those steps cover 64 bytes of the row. Either map takes each of the columns 0 .. 4 kSteps - 1
// once (kSteps a multiple of 4), and is the step's column on lane 0 plus the lane's at step 0.
template <class T>
__device__ __forceinline__ int lamm_mma_column(int s, int q) {
  if constexpr (sizeof(T) == sizeof(float))
    return 16 * (s >> 2) + 4 * q + (s & 3);
  else
    return 4 * s + q;
}

// Whether float32 rows can take LammMmaGroup's 16-byte loads: every row starts on 16 bytes.
__device__ __forceinline__ bool lamm_mma_rows_aligned(const float* x, int64_t ldx) {
  return reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
}

// One 8-row group of lamm_mma_rows, as this lane reads it: the kSteps columns of row
// 8 g + lane / 4 (the last row for a row past the end) that lamm_mma_column gives it, that row's
// y and weight. kFull: every step's columns exist and the rows are aligned
// (lamm_mma_rows_aligned); float32 then loads 4 steps' columns at once. Otherwise a column past
// the row's end reads the row's last column (`last`: its offset from this lane's column of step
// 0, negative where that column is past the end).
template <bool kFull, int kSteps, class T>
struct LammMmaGroup {
  T a[kSteps];
  double y;
  double w;

  __device__ __forceinline__ void load(const RowView<T>& rows, int lane, int64_t g, int last) {
    const int64_t row = 8 * g + (lane >> 2);
    const int64_t read = row < rows.n ? row : rows.n - 1;
    const T* xi = rows.x + read * rows.ldx + lamm_mma_column<T>(0, lane & 3);
    if constexpr (sizeof(T) == sizeof(float) && kFull) {
      static_assert(kSteps % 4 == 0, "whole 16-byte loads");
      const float4* quad = reinterpret_cast<const float4*>(xi);
#pragma unroll
      for (int k = 0; k < kSteps / 4; ++k) {
        const float4 v = quad[4 * k];
        a[4 * k] = v.x;
        a[4 * k + 1] = v.y;
        a[4 * k + 2] = v.z;
        a[4 * k + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
        a[s] = xi[kFull ? lamm_mma_column<T>(s, 0) : min(lamm_mma_column<T>(s, 0), last)];
    }
    y = static_cast<double>(rows.y[read]);
    w = row_weight(rows, read);
  }
};

// lamm_mma_rows' products and sums for the group `at` holds (group g), for kChunks chunks of
// candidates at once (chunk c's fragments at fragments[c kSteps 32 ..], its intercepts and sums
// at [c]); u0 and u1 get w psi(r) of the lane's row at chunk 0's two candidates (zero for a row
// past the end). Each chunk's products and sums run in the order of a chunk alone.
template <int kChunks, bool kFull, int kSteps, class T>
__device__ __forceinline__ void lamm_mma_sum(const RowView<T>& rows,
                                             const LammMmaGroup<kFull, kSteps, T>& at,
                                             const double* fragments, int lane, int64_t g,
                                             double tau, const double (&intercept)[kChunks][2],
                                             double (&acc)[kChunks][2], double& u0, double& u1) {
  double d[kChunks][2][2];
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
    d[c][0][0] = d[c][0][1] = d[c][1][0] = d[c][1][1] = 0.0;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
      mma_8x8x4(d[c][s & 1], static_cast<double>(at.a[s]), fragments[(c * kSteps + s) * 32 + lane]);
  }
  u0 = 0.0;
  u1 = 0.0;
  if (8 * g + (lane >> 2) < rows.n) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const double r0 = at.y - ((d[c][0][0] + d[c][1][0]) + intercept[c][0]);
      const double r1 = at.y - ((d[c][0][1] + d[c][1][1]) + intercept[c][1]);
      acc[c][0] += at.w * rh_huber_rho(r0, tau);
      acc[c][1] += at.w * rh_huber_rho(r1, tau);
      if (c == 0) {
        u0 = at.w * huber_psi(r0, tau);
        u1 = at.w * huber_psi(r1, tau);
      }
    }
  }
}

// The 8-column tiles of X'psi a warp of lamm_trials_mma_kernel accumulates for kSteps steps
// of 4 columns: the row's columns and the appended intercept's.
template <int kSteps>
constexpr int lamm_gradient_tiles() {
  return kSteps / 2 + 1;
}

// The row's column that X'psi's tile t holds at its column c (0 .. 7): step 2 t + c / 4's column
// on the lanes with l % 4 = c % 4 (lamm_mma_column). The appended intercept's column, ncols_x,
// is the first of a tile past the steps' columns when every step's columns exist. Float64's
// 8 t + c is that same column written out: through lamm_mma_column, ptxas gives the widest
// float64 instance with X'psi 8 more bytes of stack.
template <class T>
__device__ __forceinline__ int lamm_gradient_column(int t, int c) {
  if constexpr (sizeof(T) == sizeof(float))
    return lamm_mma_column<T>(2 * t + (c >> 2), c & 3);
  else
    return 8 * t + c;
}

// Adds X'psi of one 8-row group to a warp's accumulators `acc` (shared memory, tile
// t's 8 columns x 8 candidates at acc[64 t ..], lane l's two entries at 2 l): per tile, two mma
// m8n8k4 over rows 0-3 and 4-7 of the group. Tile t holds the columns of steps 2 t and 2 t + 1
// (lamm_gradient_column; 8 t .. 8 t + 7 in float64). A: lane l takes the tile's column l / 4 of
// row 4 h + l % 4, a row per lane within the quad, where the dots hold a row per quad (`a`, the
// group as lamm_mma_rows loaded it: row r's column of step s on lane 4 r + q, in a[s]; a row
// past the batch's end holds the last row). Two shuffles a tile move those values between the
// lanes, so no row is read twice: in the first, a lane sends a[2 t] from the warp's first half and
// a[2 t + 1] from its second, and takes row l % 4 (lanes 0-15) or 4 + l % 4 (lanes 16-31) from its
// own half; in the second, the other register, from the other half. (Float64 rows of 128 columns
// then spill 124 bytes at 128 registers a thread; that measured faster than reading the later
// tiles' rows again, and than one block an SM without spills.) Columns past the row's end are
// zeros, and the column after it, where the rows have an appended intercept, ones; a row past the
// batch's end has psi zero. B: psi of row 4 h + l % 4 at candidate l / 4, lane 4 (4 h + l % 4)
// + l / 8's u0 or u1. Lane l then holds the sums of the tile's column l / 4 at candidates
// 2 (l % 4) and 2 (l % 4) + 1.
template <int kSteps, class T>
__device__ __forceinline__ void lamm_mma_gradient(const RowView<T>& rows, const T (&a)[kSteps],
                                                  double u0, double u1, int lane,
                                                  bool with_intercept, double* acc) {
  constexpr unsigned kAll = 0xffffffffu;
  const int column = lane >> 2;  // within the tile
  const int row = lane & 3;      // within the half
  const bool first_half = lane < 16;
  double b[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int from = 4 * (4 * h + row) + (lane >> 3);
    const double v0 = __shfl_sync(kAll, u0, from);
    const double v1 = __shfl_sync(kAll, u1, from);
    b[h] = (column & 1) != 0 ? v1 : v0;
  }
  // The lane of this half that holds row `row` (of this half) at this lane's column modulo 4,
  // and the same lane of the other half.
  const int own_half = (first_half ? 0 : 16) + 4 * row + (column & 3);
  const int other_half = own_half ^ 16;
  const int64_t ncols_x = rows.ncols_x;
#pragma unroll
  for (int t = 0; t < lamm_gradient_tiles<kSteps>(); ++t) {
    if (lamm_gradient_column<T>(t, 0) > ncols_x)  // the tile's first column; they increase
      break;
    const int64_t j = lamm_gradient_column<T>(t, column);
    const T low = 2 * t < kSteps ? a[2 * t] : T(0);
    const T high = 2 * t + 1 < kSteps ? a[2 * t + 1] : T(0);
    const T from_own = __shfl_sync(kAll, first_half ? low : high, own_half);
    const T from_other = __shfl_sync(kAll, first_half ? high : low, other_half);
    const T x[2] = {first_half ? from_own : from_other, first_half ? from_other : from_own};
    double d[2] = {acc[64 * t + 2 * lane], acc[64 * t + 2 * lane + 1]};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const double value = j < ncols_x                      ? static_cast<double>(x[h])
                           : with_intercept && j == ncols_x ? 1.0
                                                            : 0.0;
      mma_8x8x4(d, value, b[h]);
    }
    acc[64 * t + 2 * lane] = d[0];
    acc[64 * t + 2 * lane + 1] = d[1];
  }
}

// lamm_trials_mma_kernel's rows: 8-row groups g0, g0 + stride, ... of the batch, this lane's
// sums of w rho(y - dot) for its two candidates of each of kChunks chunks added to acc[chunk]
// (lamm_mma_sum). kFull: every step's columns exist; otherwise a column past the row's end
// reads the lane's last column of the row (offset `last`). A row past the end reads the last row
// (finite: the validation pass refused any other batch), and neither such a row nor such a column
// counts: the row is never summed, and the candidates' side of the column is zero. Float32 rows
// (half the registers) load the next group before the products of this one, so a warp's loads stay
// in flight through them. kGradient: each group's X'psi is added to `gradient` too (the warp's
// accumulators of lamm_mma_gradient).
template <int kChunks, bool kFull, int kSteps, bool kGradient, class T>
__device__ __forceinline__ void lamm_mma_rows(const RowView<T>& rows, const double* fragments,
                                              int lane, int64_t g0, int64_t stride, int last,
                                              double tau, const double (&intercept)[kChunks][2],
                                              double (&acc)[kChunks][2], double* gradient) {
  static_assert(!kGradient || kChunks == 1, "X'psi of one chunk");
  const int64_t groups = (rows.n + 7) / 8;
  const bool with_intercept = rows.ncols_x < rows.P;
  double u0 = 0.0;
  double u1 = 0.0;
  if constexpr (sizeof(T) == sizeof(float)) {
    if (g0 >= groups)
      return;
    LammMmaGroup<kFull, kSteps, T> next;
    next.load(rows, lane, g0, last);
    for (int64_t g = g0; g < groups; g += stride) {
      const LammMmaGroup<kFull, kSteps, T> at = next;
      if (g + stride < groups)
        next.load(rows, lane, g + stride, last);
      lamm_mma_sum<kChunks>(rows, at, fragments, lane, g, tau, intercept, acc, u0, u1);
      if constexpr (kGradient)
        lamm_mma_gradient<kSteps>(rows, at.a, u0, u1, lane, with_intercept, gradient);
    }
  } else {
    for (int64_t g = g0; g < groups; g += stride) {
      LammMmaGroup<kFull, kSteps, T> at;
      at.load(rows, lane, g, last);
      lamm_mma_sum<kChunks>(rows, at, fragments, lane, g, tau, intercept, acc, u0, u1);
      if constexpr (kGradient)
        lamm_mma_gradient<kSteps>(rows, at.a, u0, u1, lane, with_intercept, gradient);
    }
  }
}

// Stages one chunk of kLammChunk candidates (`chunk`) for lamm_mma_sum: step s for lane l at
// fragments[s 32 + l], column lamm_mma_column(s, l % 4) of candidate (l % 32) / 4, zero past the
// row's end. Every thread of the block calls it; a barrier must follow before the products.
template <int kSteps, class T>
__device__ __forceinline__ void stage_lamm_chunk(const RowView<T>& rows, const double* chunk,
                                                 double* fragments) {
  for (int f = threadIdx.x; f < kSteps * 32; f += kThreads) {
    const int64_t j = lamm_mma_column<T>(f >> 5, f & 3);
    fragments[f] = j < rows.ncols_x ? chunk[((f & 31) >> 2) * rows.P + j] : 0.0;
  }
}

// One pass of lamm_trials_mma_kernel (without X'psi) over the rows for two chunks of candidates
// (`chunk`, 2 kLammChunk of them): chunk c's fragments at fragments[c kSteps 32 ..], each
// candidate's products and sums in the order of a chunk alone, the block's sums at out[0 ..
// 2 kLammChunk) in warp order. Every thread of the block calls it. (Its own function, repeating
// the one-chunk loop's warp sums for two chunks: a kChunks parameter of that loop, or one helper
// for both sums, made the X'psi instances spill more at 128 registers, sm_90, CUDA 13.)
template <int kSteps, class T>
__device__ __forceinline__ void lamm_trials_two_chunks(const RowView<T>& rows, const double* chunk,
                                                       double tau, double* fragments,
                                                       double* shared, bool full, int last,
                                                       int64_t warps, double* out) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int c0 = 2 * (lane & 3);
  const bool with_intercept = rows.ncols_x < rows.P;
  stage_lamm_chunk<kSteps>(rows, chunk, fragments);
  stage_lamm_chunk<kSteps>(rows, chunk + kLammChunk * rows.P, fragments + kSteps * 32);
  double intercept[2][2];
  double acc[2][2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      intercept[c][k] =
          with_intercept ? chunk[(c * kLammChunk + c0 + k) * rows.P + rows.P - 1] : 0.0;
      acc[c][k] = 0.0;
    }
  }
  __syncthreads();
  const int64_t g0 = blockIdx.x * int64_t{kWarps} + warp;
  if (full)
    lamm_mma_rows<2, true, kSteps, false>(rows, fragments, lane, g0, warps, last, tau, intercept,
                                          acc, nullptr);
  else
    lamm_mma_rows<2, false, kSteps, false>(rows, fragments, lane, g0, warps, last, tau, intercept,
                                           acc, nullptr);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
#pragma unroll
    for (int offset = 4; offset < 32; offset <<= 1) {
      acc[c][0] += __shfl_xor_sync(0xffffffffu, acc[c][0], offset);
      acc[c][1] += __shfl_xor_sync(0xffffffffu, acc[c][1], offset);
    }
    if (lane < 4) {
      shared[(warp * 2 + c) * kLammChunk + c0] = acc[c][0];
      shared[(warp * 2 + c) * kLammChunk + c0 + 1] = acc[c][1];
    }
  }
  add_warp_totals<kThreads, 2 * kLammChunk>(shared, out);
  __syncthreads();  // the next pass rewrites `fragments` and `shared`
}

// The LAMM trials' objective sums for rows of 9 to 128 stored columns, their dot products on the
// float64 tensor cores: a warp takes 8 rows at a time and forms the 8 x kLammChunk products of
// those rows with the chunk's candidates by kSteps `mma` m8n8k4 steps, 4 columns a step (column
// 4 s + l % 4 of step s on lane l; a column past the row's end counts for nothing, its
// candidates' side being zero), summed in two alternating accumulators. Lane l then holds the
// dots of row 8 g + l / 4 with candidates 2 (l % 4) and 2 (l % 4) + 1, adds the intercept's
// coefficients and sums w rho(y - dot) over its rows; the warp adds its lanes' sums over l / 4
// with a fixed shuffle tree and the block its warps' in warp order. The candidates' fragments sit
// in shared memory, a step's 32 lanes' values together. Every sum depends on the shape alone.
// kGradient (one chunk: LAMM's first group): the launch also forms X'psi at each candidate,
// psi(r) weighted (lamm_mma_gradient), each warp's sums in the dynamic shared memory
// (lamm_trials_gradient_bytes), then the block's in warp order, written as gradient_partials[(c
// row_grid + block) appended_column_stride(ncols_x) + j] for candidate c, column j < ncols_x, and
// the sum of psi at j = ncols_x; so the iteration needs no row pass at the beta it accepts.
// Without kGradient (the later groups) a pass over the rows takes two chunks where two remain
// (lamm_trials_two_chunks): half the passes, each candidate's sums in the same order.
template <class T, int kSteps, bool WithQuadratic, bool kGradient = false>
__global__ void __launch_bounds__(kThreads, 2)
    lamm_trials_mma_kernel(RowView<T> rows, const double* candidates, int count, double tau,
                           const DeviceScalars* sc, double* partials, int row_grid, const double* J,
                           const double* deltas, double* jdeltas, double* gradient_partials) {
  enter_stream_order();
  if (!lamm_trials_rows_block<WithQuadratic>(sc, row_grid, J, deltas, count, rows.P, jdeltas))
    return;
  constexpr int kMostChunks = kGradient ? 1 : 2;  // the most chunks a pass over the rows
  __shared__ double fragments[kMostChunks * kSteps * 32];
  __shared__ double shared[kMostChunks * kLammChunk * kWarps];
  extern __shared__ double gradient_sums[];  // kGradient: kWarps x lamm_gradient_tiles x 64
  constexpr int kWarpSums = lamm_gradient_tiles<kSteps>() * 64;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int quad = lane & 3;  // the column within a step; the pair of candidates in C
  const int64_t warps = static_cast<int64_t>(row_grid) * kWarps;
  const bool with_intercept = rows.ncols_x < rows.P;
  // Every step's columns exist (the common shapes: 32 and 128 columns) and, for float32, the rows
  // are aligned for LammMmaGroup's loads; or the offset of the row's last column from this lane's
  // column of step 0. (Float64 tests nothing more: even a test that folds to true here cost its
  // widest instances 36 more bytes of spills.)
  bool full = rows.ncols_x >= 4 * kSteps;
  if constexpr (sizeof(T) == sizeof(float))
    full = full && lamm_mma_rows_aligned(rows.x, rows.ldx);
  const int last = static_cast<int>(rows.ncols_x) - 1 - lamm_mma_column<T>(0, quad);
  for (int first = 0; first < count;) {
    if constexpr (!kGradient) {
      // Groups without X'psi take two chunks a pass where `count` has them (block-uniform).
      if (count - first >= 2 * kLammChunk) {
        lamm_trials_two_chunks<kSteps>(rows, candidates + first * rows.P, tau, fragments, shared,
                                       full, last, warps, partials + blockIdx.x * count + first);
        first += 2 * kLammChunk;
        continue;
      }
    }
    const double* chunk = candidates + first * rows.P;
    stage_lamm_chunk<kSteps>(rows, chunk, fragments);
    const int c0 = 2 * quad;
    const double intercept[1][2] = {{with_intercept ? chunk[c0 * rows.P + rows.P - 1] : 0.0,
                                     with_intercept ? chunk[(c0 + 1) * rows.P + rows.P - 1] : 0.0}};
    __syncthreads();
    double acc[1][2] = {{0.0, 0.0}};
    const int64_t g0 = blockIdx.x * int64_t{kWarps} + warp;
    double* gradient = nullptr;
    if constexpr (kGradient) {
      gradient = gradient_sums + warp * kWarpSums;
      for (int e = lane; e < kWarpSums; e += 32)
        gradient[e] = 0.0;
      __syncwarp();
    }
    if (full) {
      lamm_mma_rows<1, true, kSteps, kGradient>(rows, fragments, lane, g0, warps, last, tau,
                                                intercept, acc, gradient);
    } else {
      lamm_mma_rows<1, false, kSteps, kGradient>(rows, fragments, lane, g0, warps, last, tau,
                                                 intercept, acc, gradient);
    }
    double acc0 = acc[0][0];
    double acc1 = acc[0][1];
#pragma unroll
    for (int offset = 4; offset < 32; offset <<= 1) {
      acc0 += __shfl_xor_sync(0xffffffffu, acc0, offset);
      acc1 += __shfl_xor_sync(0xffffffffu, acc1, offset);
    }
    if (lane < 4) {
      shared[warp * kLammChunk + c0] = acc0;
      shared[warp * kLammChunk + c0 + 1] = acc1;
    }
    add_warp_totals<kThreads, kLammChunk>(shared, partials + blockIdx.x * count + first);
    __syncthreads();  // the next chunk rewrites `fragments` and `shared`
    first += kLammChunk;
  }
  if constexpr (kGradient) {
    // One chunk (launch_lamm_trials): every warp's sums are in `gradient_sums` after the barrier
    // above. Entry e of a warp's sums: tile e / 64, lane (e % 64) / 2, candidate 2 (lane % 4) +
    // e % 2.
    const int64_t stride = appended_column_stride(rows.ncols_x);
    // The tiles up to the last that holds a column <= ncols_x (float64: column 8 t + c; the
    // float32 tiles' columns interleave, so every tile).
    const int entries =
        sizeof(T) == sizeof(double) ? static_cast<int>((rows.ncols_x + 8) / 8) * 64 : kWarpSums;
    for (int e = threadIdx.x; e < entries; e += kThreads) {
      double total = 0.0;
      for (int w = 0; w < kWarps; ++w)
        total += gradient_sums[w * kWarpSums + e];
      const int owner = (e & 63) >> 1;
      const int64_t j = lamm_gradient_column<T>(e >> 6, owner >> 2);
      const int c = 2 * (owner & 3) + (e & 1);
      if (j <= rows.ncols_x)
        gradient_partials[(c * int64_t{row_grid} + blockIdx.x) * stride + j] = total;
    }
  }
}

template <class T, int Team>
__global__ void predict_kernel(RowView<T> rows, const T* coef, T* out) {
  enter_stream_order();
  const RowTeam<Team> team;
  for (int64_t i = team.first; i < rows.n; i += team.stride) {
    const double dot = row_dot<Team>(rows, i, team.lane, coef);
    if (team.lane == 0)
      out[i] = static_cast<T>(dot);
  }
}

}  // namespace

// Launches kernel<T, 1>, kernel<T, 8> or kernel<T, 32> (the batch's row team) on `blocks`
// blocks; RH_LAUNCH_ROWS on the row grid of the batch.
#define RH_LAUNCH_TEAMS(kernel, T, rows, blocks, s, ...)                        \
  do {                                                                          \
    const int blocks_ = (blocks);                                               \
    const int team_ = row_team((rows).ncols_x);                                 \
    if (team_ == 32) {                                                          \
      launch_kernel(#kernel, kernel<T, 32>, blocks_, kThreads, s, __VA_ARGS__); \
    } else if (team_ == 8) {                                                    \
      launch_kernel(#kernel, kernel<T, 8>, blocks_, kThreads, s, __VA_ARGS__);  \
    } else {                                                                    \
      launch_kernel(#kernel, kernel<T, 1>, blocks_, kThreads, s, __VA_ARGS__);  \
    }                                                                           \
  } while (0)

#define RH_LAUNCH_ROWS(kernel, T, rows, s, ...) \
  RH_LAUNCH_TEAMS(kernel, T, rows, row_blocks((rows).n, (rows).ncols_x), s, __VA_ARGS__)

template <class T>
void launch_validate_rows(const RowView<T>& rows, int first_tile, int end_tile,
                          double* weight_partials, unsigned long long* bad_partials, bool scan_x,
                          cudaStream_t s) {
  if (end_tile <= first_tile)
    return;
  RH_LAUNCH_TEAMS(validate_rows_kernel, T, rows, end_tile - first_tile, s, rows,
                  validation_tile_rows(rows.n, rows.ncols_x), first_tile, scan_x ? 1 : 0,
                  weight_partials, bad_partials);
}

template <class T>
void launch_row_pass(const RowView<T>& rows, const double* beta, double tau, DeviceScalars* sc,
                     double* residual, T* score, T* scaled, T* meat_scaled, double* partials,
                     double* xtu_partials, double* column_partials, CurvatureTrack track,
                     RunWhen when, cudaStream_t s) {
  // The Gram's last column (UpdateContext::row_pass_gram_column) needs the scaled rows and the
  // appended intercept; with X'u as well, the lanes holding a row's columns.
  static_assert(kRowPassColumnWithXtuMaxColumns == kSplitRowSlots * kWideRowColumns,
                "X'u and the Gram's column together: the split teams' rows");
  if (column_partials != nullptr &&
      (scaled == nullptr || rows.ncols_x + 1 != rows.P || row_team(rows.ncols_x) != 32 ||
       (xtu_partials != nullptr && rows.ncols_x > kRowPassColumnWithXtuMaxColumns)))
    fail(RH_CUDA_INTERNAL_ERROR,
         "row pass: the Gram's last column needs scaled rows, an appended intercept, a warp per "
         "row and, with X'u, at most %lld columns (%lld of %lld columns)",
         static_cast<long long>(kRowPassColumnWithXtuMaxColumns),
         static_cast<long long>(rows.ncols_x), static_cast<long long>(rows.P));
  if ((xtu_partials != nullptr || column_partials != nullptr) && row_team(rows.ncols_x) == 32) {
    // X'u (or the Gram's last column) in the row pass: split teams up to 128 columns, above
    // that a warp per row with as few column slots per lane as the row needs.
    if (rows.ncols_x > kRowPassXtuMaxColumns)
      fail(RH_CUDA_INTERNAL_ERROR, "row pass: X'u or Gram column partials for %lld columns",
           static_cast<long long>(rows.ncols_x));
    const int blocks = row_blocks(rows.n, rows.ncols_x);
    auto launch = [&](auto kernel) {
      launch_kernel("row_pass_kernel", kernel, blocks, kThreads, s, rows, beta, tau, sc, residual,
                    score, scaled, meat_scaled, partials, xtu_partials, column_partials, track,
                    static_cast<int>(when));
    };
    static_assert(kRowPassXtuMaxColumns == 32 * 32, "the widest X'u slots below");
    auto dispatch = [&](auto sums) {
      constexpr int kSums = decltype(sums)::value;
      if (rows.ncols_x <= kSplitRowSlots * kWideRowColumns)
        launch(row_pass_kernel<T, kSplitRowTeam, kSplitRowSlots, kSums>);
      else if constexpr (kSums != kBothSums) {
        if (rows.ncols_x <= 256)
          launch(row_pass_kernel<T, 32, 8, kSums>);
        else if (rows.ncols_x <= 512)
          launch(row_pass_kernel<T, 32, 16, kSums>);
        else
          launch(row_pass_kernel<T, 32, 32, kSums>);
      }
    };
    if (column_partials == nullptr) {
      dispatch(std::integral_constant<int, kXtuSums>{});
    } else if (xtu_partials == nullptr) {
      dispatch(std::integral_constant<int, kColumnSums>{});
    } else if constexpr (std::is_same<T, double>::value) {
      dispatch(std::integral_constant<int, kBothSums>{});
    } else {
      fail(RH_CUDA_INTERNAL_ERROR, "row pass: X'u and the Gram's last column together in float32");
    }
    return;
  }
  RH_LAUNCH_ROWS(row_pass_kernel, T, rows, s, rows, beta, tau, sc, residual, score, scaled,
                 meat_scaled, partials, xtu_partials, static_cast<double*>(nullptr), track,
                 static_cast<int>(when));
}

template <class T>
void launch_flipped_rows(const RowView<T>& rows, const int* rows_of, int64_t count, int64_t padded,
                         CurvatureTrack track, T* u, T* v, cudaStream_t s) {
  RH_LAUNCH_TEAMS(flipped_rows_kernel, T, rows, row_blocks(padded, rows.ncols_x), s, rows, rows_of,
                  count, padded, track, u, v);
}

template <class T>
void launch_recorded_scaled_rows(const RowView<T>& rows, CurvatureTrack track, T* scaled,
                                 cudaStream_t s) {
  RH_LAUNCH_ROWS(recorded_scaled_rows_kernel, T, rows, s, rows, track, scaled);
}

bool has_float64_mma(int device) {
  int major = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
             "cudaDeviceGetAttribute (compute capability)");
  return major >= 8;
}

template <class T>
void launch_row_pass_gram(const RowView<T>& rows, const double* beta, double tau, DeviceScalars* sc,
                          double* residual, T* score, double* partials, double* xtu_partials,
                          double* gram_partials, RunWhen when, cudaStream_t s) {
  const int64_t per_block = fused_gram_rows_per_block(rows.n, rows.P);
  const int blocks = fused_gram_blocks(rows.n, rows.P);
  const int w = static_cast<int>(when);
  switch (fused_gram_slots(rows.P)) {
#define RH_FUSED_CASE(slots)                                                                      \
  case slots:                                                                                     \
    launch_kernel("row_gram_kernel", row_gram_kernel<T, slots>, blocks, kThreads, s, rows, beta,  \
                  tau, sc, residual, score, partials, xtu_partials, gram_partials, per_block, w); \
    break;
    RH_FUSED_CASE(2)
    RH_FUSED_CASE(3)
    RH_FUSED_CASE(5)
    RH_FUSED_CASE(8)
    RH_FUSED_CASE(12)
    RH_FUSED_CASE(16)
#undef RH_FUSED_CASE
    default:
      fail(RH_CUDA_INTERNAL_ERROR, "the fused row pass takes at most %lld parameters, not %lld",
           static_cast<long long>(kFusedGramMaxP), static_cast<long long>(rows.P));
  }
}

template <class T>
void launch_newton_trials(const RowView<T>& rows, const double* residual, const double* dir,
                          double tau, const DeviceScalars* sc, double* partials, cudaStream_t s) {
  RH_LAUNCH_ROWS(newton_trials_kernel, T, rows, s, rows, residual, dir, tau, sc, partials);
}

// The dynamic shared memory of lamm_trials_mma_kernel<T, kSteps, *, true>: every warp's X'psi
// sums (at most 69,632 bytes, kSteps 32).
template <int kSteps>
constexpr int lamm_trials_gradient_bytes() {
  return kWarps * lamm_gradient_tiles<kSteps>() * 64 * static_cast<int>(sizeof(double));
}

// The tensor-core trials' instance for `steps` steps of 4 columns, handed to `launch` with its
// dynamic shared memory; with_gradient: the one that forms X'psi too.
template <class T, bool WithQuadratic, class Launch>
void launch_lamm_trials_mma(int64_t steps, bool with_gradient, Launch launch) {
  auto pick = [&](auto steps_constant) {
    constexpr int kSteps = decltype(steps_constant)::value;
    if (with_gradient)
      launch(lamm_trials_mma_kernel<T, kSteps, WithQuadratic, true>,
             lamm_trials_gradient_bytes<kSteps>());
    else
      launch(lamm_trials_mma_kernel<T, kSteps, WithQuadratic, false>, 0);
  };
  if (steps <= 8)
    pick(std::integral_constant<int, 8>{});
  else if (steps <= 16)
    pick(std::integral_constant<int, 16>{});
  else if (steps <= 24)
    pick(std::integral_constant<int, 24>{});
  else
    pick(std::integral_constant<int, kLammMmaMaxSteps>{});
}

// lamm_trials_kernel<T, team, WithQuadratic, cached> on `blocks` blocks (row_grid of them over
// rows), or on the float64 tensor cores lamm_trials_mma_kernel (with gradient_partials, not null
// there only, the instance that forms X'psi).
template <class T, bool WithQuadratic>
void launch_lamm_trials_kernel(int blocks, int row_grid, const RowView<T>& rows,
                               const double* candidates, int count, double tau,
                               const DeviceScalars* sc, double* partials, const double* J,
                               const double* deltas, double* jdeltas, bool float64_mma,
                               double* gradient_partials, cudaStream_t s) {
  auto launch = [&](auto kernel) {
    launch_kernel("lamm_trials_kernel", kernel, blocks, kThreads, s, rows, candidates, count, tau,
                  sc, partials, row_grid, J, deltas, jdeltas);
  };
  const int team = row_team(rows.ncols_x);
  const int64_t steps = (rows.ncols_x + 3) / 4;  // of the tensor-core kernel
  if (lamm_trials_on_mma(rows.ncols_x, float64_mma)) {
    launch_lamm_trials_mma<T, WithQuadratic>(
        steps, gradient_partials != nullptr, [&](auto kernel, int bytes) {
          launch_kernel("lamm_trials_mma_kernel", kernel,
                        LaunchShape{dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                                    static_cast<size_t>(bytes), 0},
                        s, rows, candidates, count, tau, sc, partials, row_grid, J, deltas, jdeltas,
                        gradient_partials);
        });
  } else if (team == 32 && rows.ncols_x <= int64_t{kLammCachedSlots} * 32) {
    launch(lamm_trials_kernel<T, 32, WithQuadratic, true>);
  } else if (team == 32) {
    launch(lamm_trials_kernel<T, 32, WithQuadratic, false>);
  } else if (team == 8) {  // at most kWideRowColumns = kLammCachedSlots * 8 columns
    launch(lamm_trials_kernel<T, 8, WithQuadratic, true>);
  } else {
    launch(lamm_trials_kernel<T, 1, WithQuadratic, false>);
  }
}

template <class T>
bool launch_lamm_trials(const RowView<T>& rows, const double* candidates, int count, double tau,
                        const DeviceScalars* sc, double* partials, const double* J,
                        const double* deltas, double* jdeltas, bool float64_mma,
                        double* gradient_partials, cudaStream_t s) {
  const int row_grid = lamm_trial_blocks(rows.n, rows.ncols_x, float64_mma);
  if (!lamm_trials_on_mma(rows.ncols_x, float64_mma) || count != kLammChunk)
    gradient_partials = nullptr;
  if (lamm_trials_with_quadratic(rows.n, rows.ncols_x)) {
    launch_lamm_trials_kernel<T, true>(row_grid + warp_rows_blocks(rows.P), row_grid, rows,
                                       candidates, count, tau, sc, partials, J, deltas, jdeltas,
                                       float64_mma, gradient_partials, s);
    return gradient_partials != nullptr;
  }
  launch_kernel("lamm_quadratic_kernel", lamm_quadratic_kernel, warp_rows_blocks(rows.P), kThreads,
                s, J, deltas, count, rows.P, sc, jdeltas);
  launch_lamm_trials_kernel<T, false>(row_grid, row_grid, rows, candidates, count, tau, sc,
                                      partials, J, deltas, jdeltas, float64_mma, gradient_partials,
                                      s);
  return gradient_partials != nullptr;
}

namespace {

// Hands every instance of lamm_trials_mma_kernel that forms X'psi, with its dynamic shared
// memory, to `visit` (launch_lamm_trials_mma's choice over every width).
template <class Visit>
void for_each_lamm_trials_gradient_kernel(Visit visit) {
  for (int64_t steps = 8; steps <= kLammMmaMaxSteps; steps += 8) {
    launch_lamm_trials_mma<float, true>(steps, true, visit);
    launch_lamm_trials_mma<float, false>(steps, true, visit);
    launch_lamm_trials_mma<double, true>(steps, true, visit);
    launch_lamm_trials_mma<double, false>(steps, true, visit);
  }
}

}  // namespace

bool configure_lamm_trials_gradient(int device) {
  int optin = 0;
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  // Each instance's static shared memory besides its dynamic sums.
  bool fits = true;
  for_each_lamm_trials_gradient_kernel([&](auto kernel, int bytes) {
    cudaFuncAttributes attributes{};
    check_cuda(cudaFuncGetAttributes(&attributes, kernel),
               "cudaFuncGetAttributes (LAMM trials with X'psi)");
    fits = fits && static_cast<int>(attributes.sharedSizeBytes) + bytes <= optin;
  });
  if (!fits)
    return false;
  for_each_lamm_trials_gradient_kernel([](auto kernel, int bytes) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
               "cudaFuncSetAttribute (LAMM trials with X'psi)");
  });
  return true;
}

template <class T>
void launch_majoriser_rows(const RowView<T>& rows, const double* residual, double tau,
                           const DeviceScalars* sc, T* scaled, cudaStream_t s) {
  RH_LAUNCH_ROWS(majoriser_rows_kernel, T, rows, s, rows, residual, tau, sc, scaled);
}

template <class T>
void launch_meat_rows(const RowView<T>& rows, const double* residual, double tau, T* scaled,
                      cudaStream_t s) {
  RH_LAUNCH_ROWS(meat_rows_kernel, T, rows, s, rows, residual, tau, scaled);
}

template <class T>
void launch_weighted_square_norms(const RowView<T>& rows, const DeviceScalars* sc, double* partials,
                                  cudaStream_t s) {
  RH_LAUNCH_ROWS(weighted_square_norms_kernel, T, rows, s, rows, sc, partials);
}

template <class T>
void launch_statistics_rows(const RowView<T>& rows, const double* beta, double tau, double h,
                            double* row_weights, double* partials, cudaStream_t s) {
  RH_LAUNCH_ROWS(statistics_rows_kernel, T, rows, s, rows, beta, tau, h, row_weights, partials);
}

template <class T>
void launch_predict(const RowView<T>& rows, const T* coef, T* out, cudaStream_t s) {
  RH_LAUNCH_ROWS(predict_kernel, T, rows, s, rows, coef, out);
}

#define RH_INSTANTIATE_ROW_KERNELS(T)                                                              \
  template void launch_validate_rows<T>(const RowView<T>&, int, int, double*, unsigned long long*, \
                                        bool, cudaStream_t);                                       \
  template void launch_row_pass<T>(const RowView<T>&, const double*, double, DeviceScalars*,       \
                                   double*, T*, T*, T*, double*, double*, double*, CurvatureTrack, \
                                   RunWhen, cudaStream_t);                                         \
  template void launch_flipped_rows<T>(const RowView<T>&, const int*, int64_t, int64_t,            \
                                       CurvatureTrack, T*, T*, cudaStream_t);                      \
  template void launch_recorded_scaled_rows<T>(const RowView<T>&, CurvatureTrack, T*,              \
                                               cudaStream_t);                                      \
  template void launch_row_pass_gram<T>(const RowView<T>&, const double*, double, DeviceScalars*,  \
                                        double*, T*, double*, double*, double*, RunWhen,           \
                                        cudaStream_t);                                             \
  template void launch_newton_trials<T>(const RowView<T>&, const double*, const double*, double,   \
                                        const DeviceScalars*, double*, cudaStream_t);              \
  template bool launch_lamm_trials<T>(const RowView<T>&, const double*, int, double,               \
                                      const DeviceScalars*, double*, const double*, const double*, \
                                      double*, bool, double*, cudaStream_t);                       \
  template void launch_majoriser_rows<T>(const RowView<T>&, const double*, double,                 \
                                         const DeviceScalars*, T*, cudaStream_t);                  \
  template void launch_meat_rows<T>(const RowView<T>&, const double*, double, T*, cudaStream_t);   \
  template void launch_weighted_square_norms<T>(const RowView<T>&, const DeviceScalars*, double*,  \
                                                cudaStream_t);                                     \
  template void launch_statistics_rows<T>(const RowView<T>&, const double*, double, double,        \
                                          double*, double*, cudaStream_t);                         \
  template void launch_predict<T>(const RowView<T>&, const T*, T*, cudaStream_t);

RH_INSTANTIATE_ROW_KERNELS(float)
RH_INSTANTIATE_ROW_KERNELS(double)

}  // namespace rh
