// Types shared by the host orchestration and the kernels. Every solver scalar lives on the
// device (DeviceScalars) so iterations can be queued, or replayed as a CUDA Graph, without the
// host reading anything back except the small status block once per iteration.
#pragma once

#include <cstdint>

#include "rh_algorithm.h"

namespace rh {

constexpr int kThreads = 256;
// Fixed grid for row passes: the row-to-thread assignment, and so every floating-point sum,
// depends only on n_rows, never on timing (no floating atomics anywhere). Eight blocks of 256
// threads per SM of an H200 (132 SMs): a row pass is a stream of dependent loads per team, and
// two blocks per SM left large batches latency-bound, far from HBM bandwidth.
constexpr int kMaxRowBlocks = 1056;
// LAMM's trials form J delta in their own launch for batches of at most this many stored
// values (lamm_trials_with_quadratic; docs/decisions.md).
constexpr int64_t kLammMergedTrialsMaxValues = int64_t{1} << 22;
// Grid cap of the elementwise kernels over P x P matrices (grid-stride beyond it).
constexpr int kMaxElementwiseBlocks = 4096;
// Rows wider than kWideRowColumns are read by a warp each, rows wider than kNarrowRowColumns
// by 8 lanes each (coalesced, and enough threads for few rows); narrower rows by one lane. The
// row pass forming X'u reads rows of up to 128 columns with 8 lanes each too (row_kernels.cu).
constexpr int64_t kWideRowColumns = 32;
constexpr int64_t kNarrowRowColumns = 8;
// X'u: the row pass forms it itself (per-block partials in double, summed in a fixed order by
// the gradient kernel) for rows of at most kRowPassXtuMaxColumns stored columns, and the fused
// row pass (launch_row_pass_gram) for every row it takes; wider rows leave scores for cuBLAS's
// gemv. Lane l of a row's team owns columns l, l + Team, ... (kRowPassXtuMaxColumns / 32
// double sums at most).
constexpr int64_t kRowPassXtuMaxColumns = 1024;
// The row pass forms X'u and the Gram's last column together (Newton's passes that write the
// scaled rows for a full Gram, UpdateContext::row_pass_gram_column) for rows of at most this many
// stored columns: those whose lanes hold their columns in registers (row_kernels.cu).
constexpr int64_t kRowPassColumnWithXtuMaxColumns = 128;
// Columns per block in the X'u partials: kWideRowColumns up to that many columns, else ncols_x
// rounded up to a whole warp.
constexpr int64_t xtu_partials_stride(int64_t ncols_x) {
  return ncols_x <= kWideRowColumns
             ? kWideRowColumns
             : (ncols_x + kWideRowColumns - 1) / kWideRowColumns * kWideRowColumns;
}
// Columns per block in per-block partials of the ncols_x column sums and one more entry after
// them: LAMM's trials' X'psi (launch_lamm_trials' gradient_partials; sum psi, the appended
// intercept's column) and the Gram's last column (launch_row_pass' column_partials; its corner).
constexpr int64_t appended_column_stride(int64_t ncols_x) {
  return xtu_partials_stride(ncols_x + 1);
}
// The solver constants of docs/algorithm.md ("Solvers"), from rh_algorithm.h: the kernels
// size registers and shared memory with them, so they are compile-time constants here.
constexpr int kLineSearchTrials = RH_LINE_SEARCH_TRIALS;  // t = 1, 1/2, ..., 2^-26
// LAMM's 40 attempts (phi, 2 phi, ..., 2^39 phi) come in two groups, each one set of four
// launches: the first 8, where nearly every iteration accepts, then the other 32, which return
// at once unless the first group had no acceptable attempt. Inside a group the attempts are
// evaluated kLammChunk at a time (registers per row), one pass over the rows each. The 8
// curvature-bound attempts after 40 rejections are one more group of the same launches, queued
// by the host only when the state asks for them (kNeedsLammBound).
constexpr int kLammChunk = 8;
constexpr int kLammAttempts = RH_LAMM_ATTEMPTS;
constexpr int kLammBoundAttempts = RH_LAMM_BOUND_ATTEMPTS;
constexpr int kLammFirstGroup = 8;
constexpr int kLammMaxGroup = kLammAttempts - kLammFirstGroup;
static_assert(kLammFirstGroup % kLammChunk == 0 && kLammMaxGroup % kLammChunk == 0,
              "LAMM groups are whole chunks");
static_assert(kLammBoundAttempts == kLammChunk, "the curvature-bound attempts are one chunk");
static_assert(kLammMaxGroup >= kLammFirstGroup && kLammMaxGroup >= kLammBoundAttempts,
              "buffers are sized for the largest group");
// Which group of LAMM attempts a pick decides, and so what it does when none is acceptable:
// nothing (the next group follows), pause for the curvature-bound group, or end the solve.
enum LammGroup : int { kLammGroupFirst = 0, kLammGroupRest = 1, kLammGroupBound = 2 };
// Newton systems up to Engine::small_dense_max parameters are factored and solved in one
// block's shared memory (launch_small_cholesky_solve); larger ones up to
// ClusterCholeskyLimits::max_p are factored and solved by one cluster of blocks
// (launch_cluster_cholesky_solve), the rest by cuSOLVER. The one-block limit is the largest P whose
// factor fits the device's opt-in shared memory per block, at most kSmallDenseCap
// (docs/decisions.md, "The one-block Cholesky", "The cluster Cholesky").
constexpr int64_t kSmallDenseCap = 160;
// The cluster Cholesky on one device (configure_cluster_cholesky).
struct ClusterCholeskyLimits {
  int64_t max_p = 0;     // the largest P it factors (0: none)
  int shared_bytes = 0;  // the shared memory per block it is allowed
};
// Up to kFusedGramMaxP parameters the row pass forms the Gram itself (launch_row_pass_gram), a
// tile of rows at a time, each row read by a team of 8 lanes (kFusedTeams teams per kThreads
// block); above it, and for the majoriser's and K's Grams, the Gram X' diag(v) X comes from
// cuBLAS over scaled rows.
constexpr int64_t kFusedGramMaxP = 128;
constexpr int kFusedTeams = kThreads / 8;
// Its grid: about two blocks per SM of an H200 up to 64 padded columns, one above
// (fused_gram_rows_per_block), so never more than kFusedGramMaxBlocks blocks and partial Grams.
constexpr int kFusedGramMaxBlocks = 264;
// The Gram X' diag(v) X is split over row chunks (one strided-batched GEMM, then a fixed-order
// sum) so tall-skinny batches use many SMs: chunks of at least kGramChunkRows rows, and about
// kGramTargetTiles output tiles of 64 x 64 in flight.
constexpr int64_t kGramChunkRows = 128;
constexpr int64_t kGramTargetTiles = 264;
constexpr int64_t kGramMaxChunks = 256;
// From 2 x kGramColumnBlock columns of its GEMM up, the Gram's GEMM is split into column blocks
// of about kGramColumnBlock columns (inner bounds at multiples of 64), each taking only the rows
// up to its last column: the upper triangle and its diagonal blocks, (nb + 1) / (2 nb) of the
// full product's flops. Below that, a float32 Gram of kGramTriangleColumns up to (not
// including) kGramTriangleEnd columns is split in two, its row chunks then sized by the first
// (smallest) block; float64's tensor-core GEMM, and float32's at 256 columns, measured faster
// over the whole square (docs/decisions.md, "Symmetry of the Gram").
constexpr int64_t kGramColumnBlock = 256;
constexpr int64_t kGramTriangleColumns = 128;
constexpr int64_t kGramTriangleEnd = 256;
static_assert(kGramTriangleEnd <= 2 * kGramColumnBlock, "the split in two stays below the blocks");

// kInvalidData: the batch was refused (non-finite value, negative weight, weight mismatch); every
// kernel after the validation returns at once and the host reports the reason.
// The kNeeds* states pause the solve in the middle of an iteration (not yet counted): the rest
// of the queued chunk returns at once, and the host queues that iteration's rare remainder
// before it resumes the chunks.
// kNeedsFallback: the Cholesky attempt on H(beta) was refused; the host solves with LU (then
// SVD). A refused attempt on M(beta) sets it too, inside the host's majoriser step, which
// reads it back at once. kNeedsMajoriser: all 27 trials along the Newton direction were
// rejected; the host solves with the majoriser M(beta) and searches along that direction
// (docs/algorithm.md, "Unpenalised"). kNeedsLammBound: LAMM's 40 attempts were rejected; the
// host queues the curvature-bound attempts (docs/algorithm.md, "Penalised").
// kNeedsLineSearch: the speculative Newton step (UpdateContext::speculative_newton) found the
// whole step beta - dir no lower in f; the row pass, Gram and gradient are the candidate's, so
// the host queues the row pass at beta again and the 27-trial line search along the same dir.
// kStalled: every step of the last iteration was rejected and the decrease it predicted is
// not within rounding of F (not converged).
enum SolverState : int {
  kRunning = 0,
  kConverged = 1,
  kStalled = 2,
  kNonFinite = 3,
  kInvalidData = 4,
  kNeedsFallback = 5,
  kNeedsMajoriser = 6,
  kNeedsLammBound = 7,
  kNeedsLineSearch = 8,
};

// When a kernel queued ahead of the solver's progress does its work. Iterations are queued
// several at a time (one host synchronisation per chunk), so every kernel of an iteration checks
// the state on the device first.
enum RunWhen : int {
  kRunUnlessInvalid = 0,    // always, except on refused data
  kRunWhileRunning = 1,     // only while the solve is still running
  kRunWhileFresh = 2,       // while running, or right after the step that ended the solve moved
                            // beta (the Gram at the final beta is still needed)
  kRunWhenEnded = 3,        // only once the solve has ended (solve_ended): the finish's Gram
  kRunWhileConfirming = 4,  // while running, or paused for the majoriser's confirmation of a
                            // truncated Newton step (DeviceScalars.confirming): g, J delta and
                            // the rho sum at the new beta, which the confirmation reads
  kRunUnlessTrialsGradient = 5,  // while running, unless LAMM's trials formed X'u at the beta
                                 // they accepted (DeviceScalars.lamm_trials_gradient)
};

// The curvature weights w c(r) a row pass records for the incremental Gram
// (UpdateContext::incremental_gram): value[i] is row i's weight in the Gram that gram() holds.
// Before the batch's weights are recorded (the pass whose Gram is formed in full) the pass
// records them and clears flags[i]; once they are (a pass that leaves its Gram to
// UpdateContext::apply_gram_flips) it sets flags[i] when row i's weight changed, keeps the change
// in delta[i] and records the new weight.
struct CurvatureTrack {
  double* value = nullptr;
  double* delta = nullptr;
  unsigned char* flags = nullptr;
  bool recorded = false;
};
struct DeviceScalars {
  double batch_weight;  // B, summed on the device in double
  double total_weight;  // N = W0 + B
  double bandwidth;     // capped h
  double lambda;
  double history_coef;  // (W0 / N) * lambda0 when the historical subgradient applies, else 0
  double objective;     // F
  double penalised_objective;
  double phi;
  double lamm_bound;  // LAMM's curvature bound, once computed (the batch fixes it)
  double rho_sum;
  double score_sum;
  unsigned long long first_bad_x;
  unsigned long long first_bad_y;
  unsigned long long first_bad_w;
  unsigned long long first_negative_w;
  int weight_mismatch;
  int state;  // SolverState
  int iterations;
  int factor_ok;
  int lamm_accepted;
  int fresh;                // the last Newton step moved beta (see kRunWhileFresh)
  int zero_newton_step;     // the paused iteration's Newton step left beta as it was: its
                            // majoriser step must strictly decrease f, else the zero step stands
  int commit_nonfinite;     // the state built by the commit kernels has a non-finite value
  int equilibrated_finite;  // the linear solve's diag(d) H diag(d) is finite (linear_solve.cu)
  int svd_rank;             // singular values kept by the last SVD solve
  int confirming;           // kNeedsMajoriser after a step along a truncated Newton direction
                            // that would have ended the solve: the majoriser's direction at the
                            // new beta confirms it or gives the next step (newton_choose_step)
  int meat_rows_final;      // the last row pass that ran wrote K's scaled rows, the solve having
                            // ended at its beta (meat.cu reads them instead of a pass of its own)
  int max_iter;             // the update's iteration limit (set with the rest at the start)
  int gram_flips;           // rows whose curvature weight changed in the last row pass that
                            // left its Gram to UpdateContext::apply_gram_flips
  unsigned int accept_arrivals;  // blocks of a gradient launch with a NewtonAccept done so far
  int lamm_trials_gradient;      // 1 + the attempt LAMM's first group accepted when its trials
                                 // also formed each candidate's X'psi (launch_lamm_trials'
                                 // gradient_partials): the gradient reads it from there and the
                                 // iteration's row pass returns at once (kRunUnlessTrialsGradient);
                                 // 0: the row pass forms X'u
};

// What a line search's direction is (newton_choose_step): Newton's from Cholesky or LU, Newton's
// from an SVD solve that dropped singular values (it ignores g's part in the dropped directions,
// so a step along it that would end the solve asks the majoriser first: DeviceScalars.confirming),
// or the majoriser's.
enum StepDirection : int {
  kNewtonDirection = 0,
  kTruncatedNewtonDirection = 1,
  kMajoriserDirection = 2,
};

// The speculative Newton step's verdict, run by the last block of the gradient's launch after
// the row pass at the candidate beta - dir (newton_solver.cu, step_kernels.cu): dir null, none.
struct NewtonAccept {
  const double* dir = nullptr;
  double* beta = nullptr;
};

// X'u from LAMM's trials (launch_lamm_trials' gradient_partials, `blocks` per candidate), which
// the gradient reads instead of the row pass's where DeviceScalars.lamm_trials_gradient names
// the candidate the pick accepted; partials null: none.
struct LammTrialsXtu {
  const double* partials = nullptr;
  int blocks = 0;
};

// A sum of partial Grams (launch_gram_sum, or the gradient's launch after a Newton row pass:
// UpdateContext::row_pass_then_gradient), each entry summed in a fixed order in double.
// kFused: the fused row pass's `count` per-block partials (double, padded to `pad`), a warp per
// entry of the upper triangle, written to both triangles. kChunks: `count` per-chunk partials
// of cuBLAS's GEMMs (T), the upper triangle only (the GEMMs may leave the rest unwritten), by a
// thread per entry, or a warp per entry above 16 chunks; `accumulate` adds the sum to `out`
// (the incremental Gram's update). With a gate (the update's DeviceScalars; null: always) the
// sum runs only when `when` holds there: the Gram of a row pass reaches `out` only when that
// pass ran (it tested the same state).
template <class T>
struct GramSum {
  enum Kind : int { kNone = 0, kFused = 1, kChunks = 2 };
  int kind = kNone;
  const double* fused_partials = nullptr;
  const T* chunk_partials = nullptr;
  int count = 0;
  int64_t P = 0;
  int64_t pad = 0;
  const DeviceScalars* gate = nullptr;
  int when = kRunUnlessInvalid;
  bool accumulate = false;
  T* out = nullptr;
  // kChunks whose GEMMs leave the last column out (gram_gemm_columns): that column's entries
  // are the sums of the row pass's column_blocks partials, appended_column_stride(P - 1) apart
  // (launch_row_pass' column_partials), instead of cuBLAS's gemv into chunk_partials.
  const double* column_partials = nullptr;
  int column_blocks = 0;
};

#if defined(__CUDACC__)
#define RH_HOST_DEVICE __host__ __device__
#else
#define RH_HOST_DEVICE
#endif

// A state in which the host finishes the current iteration (see SolverState).
inline RH_HOST_DEVICE bool needs_host(int state) {
  return state == kNeedsFallback || state == kNeedsMajoriser || state == kNeedsLammBound ||
         state == kNeedsLineSearch;
}

// The solve is over (converged, stalled, non-finite, or max_iter iterations ran), so the finish
// queued after this chunk builds the state the host keeps. One rule for both sides: the host
// stops queueing chunks on it (solve_newton, solve_lamm) and the commit kernels and the finish's
// row pass skip their work unless it holds. needs_host: the host finishes the paused iteration
// and the solve goes on (its iteration is not counted yet, so max_iter cannot have been
// reached), and so does a confirmation (DeviceScalars.confirming), which follows a counted
// iteration and may come after the last one; kInvalidData: the host refuses the batch first.
inline RH_HOST_DEVICE bool solve_ended(const DeviceScalars& s) {
  if (s.state == kInvalidData || s.confirming)
    return false;
  return s.iterations >= s.max_iter || (s.state != kRunning && !needs_host(s.state));
}

constexpr unsigned long long kNoIndex = ~0ull;
// Kinds of bad value the validation pass looks for, in the order of its per-tile first indices:
// non-finite x, y, w, and negative w.
enum BadKind : int { kBadX = 0, kBadY = 1, kBadWeight = 2, kNegativeWeight = 3 };
constexpr int kBadKinds = 4;

// One batch as the kernels see it: row-major, ldx columns stored, P used; when ncols_x == P - 1
// the trailing intercept column is the constant one and is never materialised.
template <class T>
struct RowView {
  const T* x;
  const T* y;
  const T* w;  // nullptr: all ones
  int64_t n;
  int64_t ldx;
  int64_t ncols_x;
  int64_t P;
};

struct BatchConstants {
  double tau;
  double bandwidth_scale;
  double tolerance;
  double ridge;
  double lambda_scale;
  double previous_weight;  // W0
  double previous_lambda;
  double claimed_batch_weight;
  int64_t n_rows;
  int64_t n_features_in;
  int64_t P;
  int has_weights;
  int l1;
  int use_history;    // l1 and s0 > 0
  int fit_intercept;  // the last coefficient is never penalised
  // float32 L1: LAMM decides on float32 values (docs/decisions.md "Float32 oracle"):
  // candidates rounded to float, the objective assembled in float from once-rounded sums.
  int float_lamm;
  int max_iter;  // 1 .. INT32_MAX (rh_validate_config)
  // Device input checked by the objective at beta0 instead of a validation pass over X
  // (docs/decisions.md, "Data checks"): any non-finite x or y makes its row's residual, and so
  // the objective, non-finite. The first gradient then refuses the batch (kInvalidData) and the
  // host repeats the update with the validation pass (DeferredChecksFailed).
  int checks_deferred;
  // Machine epsilon of the engine dtype: eps of the rounding floor (rh_within_rounding,
  // rh_rejected_direction_converged) that decides whether a solve whose last steps were all
  // rejected is converged.
  double dtype_epsilon;
  // eps of the linear-solve ladder's pivot floor and rank cutoff (rh_ladder_epsilon): double's at
  // a stream's first batch, dtype_epsilon after it.
  double ladder_epsilon;
};

}  // namespace rh
