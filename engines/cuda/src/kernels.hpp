// Launchers of the engine's kernels. Row kernels stream the batch once per call; step kernels
// work on P-sized vectors and P x P matrices and run on a single block or a few warps, one file
// per section below (step_common.cuh holds what they share).
#pragma once

#include <cuda_runtime.h>

#include "solver_types.hpp"

namespace rh {

// Lanes per row of a row pass (1, 8 above kNarrowRowColumns stored columns, a warp above
// kWideRowColumns; the X'u row pass keeps 8 up to 128 columns), and the fixed number of blocks
// a row pass over n_rows such rows launches.
// Row passes can form X'u themselves (solver_types.hpp, kRowPassXtuMaxColumns; xtu_partials:
// xtu_partials_stride(ncols_x) per block; otherwise scores for cuBLAS's gemv).
int row_team(int64_t ncols_x);
int row_blocks(int64_t n_rows, int64_t ncols_x);
// Whether launch_lamm_trials forms J delta in the trials' launch: for batches of at most
// kLammMergedTrialsMaxValues stored values; on larger ones J delta keeps a launch of its own,
// which measured faster on an H200 (docs/decisions.md).
bool lamm_trials_with_quadratic(int64_t n_rows, int64_t ncols_x);
// Validation checks the rows in tiles of validation_tile_rows consecutive rows, one block and
// one set of partials per tile (validation_tiles of them, at most row_blocks): staged host input
// is checked chunk by chunk as it lands, with the same partials as one pass over the batch.
int64_t validation_tile_rows(int64_t n_rows, int64_t ncols_x);
int validation_tiles(int64_t n_rows, int64_t ncols_x);

// --- row passes (row_kernels.cu) -------------------------------------------------------------
// Tiles [first_tile, end_tile): per tile the weight sum and the first bad index of each kind
// (kBadKinds per tile). Reads only those tiles' rows; without scan_x only y and the weights
// (X's non-finite values left to the objective at beta0, BatchConstants::checks_deferred).
template <class T>
void launch_validate_rows(const RowView<T>& rows, int first_tile, int end_tile,
                          double* weight_partials, unsigned long long* bad_partials, bool scan_x,
                          cudaStream_t s);
// meat_scaled (nullptr: none): where the pass at the beta the solve ended on writes K's scaled
// rows, setting DeviceScalars.meat_rows_final (meat.cu). track: see CurvatureTrack.
// column_partials (nullptr: none; never with xtu_partials, only with scaled rows and the
// appended intercept): the Gram's last column, sum_i w_i c_i (x_i, 1), as per-block partials,
// appended_column_stride(ncols_x) per block (the corner at ncols_x), which GramSum.column_partials
// sums in place of cuBLAS's gemv over the scaled rows.
template <class T>
void launch_row_pass(const RowView<T>& rows, const double* beta, double tau, DeviceScalars* sc,
                     double* residual, T* score, T* scaled, T* meat_scaled, double* partials,
                     double* xtu_partials, double* column_partials, CurvatureTrack track,
                     RunWhen when, cudaStream_t s);
// The Gram update for the `count` rows whose curvature weight changed, rows_of[s] the s-th of
// them in row order: u_s = sign(d) sqrt|d| x_i and v_s = sqrt|d| x_i (d = track.delta[i], the
// appended intercept column as sqrt|d|), so that U'V = sum_i d_i x_i x_i'; rows count ..
// padded - 1 of both zero. Clears the flags it used.
template <class T>
void launch_flipped_rows(const RowView<T>& rows, const int* rows_of, int64_t count, int64_t padded,
                         CurvatureTrack track, T* u, T* v, cudaStream_t s);
// sqrt(track.value[i]) x_i for every row (the Gram formed in full again from the recorded
// weights, when too many rows changed), clearing every flag.
template <class T>
void launch_recorded_scaled_rows(const RowView<T>& rows, CurvatureTrack track, T* scaled,
                                 cudaStream_t s);
// The same update without a synchronisation (gram_flips.cu): gram += sum of d_i x_i x_i' over
// the rows the last row pass flagged, rows_of listing them and sc->gram_flips their count, both
// written on the device by CUB's select; upper triangle, summed in double in an order fixed by
// the count; clears the flags it used. partials: kGramFlipSlices * P * P doubles. Does nothing on
// refused data or when no row changed.
constexpr int kGramFlipSlices = 16;
template <class T>
void launch_gram_flip_update(const RowView<T>& rows, const int* rows_of, const DeviceScalars* sc,
                             CurvatureTrack track, double* partials, T* gram, cudaStream_t s);
// The row pass with the Gram fused in, for P <= kFusedGramMaxP (what launch_row_pass writes,
// without K's rows, and instead of scaled rows the Gram of each block's rows): the grid is
// fused_gram_blocks(n, P) blocks, each with its partials (2 in partials, kWideRowColumns of X'u
// when xtu_partials is not null, for rows of at most kWideRowColumns columns, else the scores) and
// its Gram's upper 8 x 8 blocks in gram_partials (fused_gram_padded(P)^2 doubles per block,
// column-major).
int64_t fused_gram_padded(int64_t P);
int fused_gram_blocks(int64_t n_rows, int64_t P);
// Whether `device` has the float64 tensor cores (`mma` m8n8k4: compute capability 8.0 and
// later), which the fused row pass (up to kFusedGramMaxP parameters; cuBLAS's Gram without them)
// and LAMM's trials use. Called when a resource set is made.
bool has_float64_mma(int device);
template <class T>
void launch_row_pass_gram(const RowView<T>& rows, const double* beta, double tau, DeviceScalars* sc,
                          double* residual, T* score, double* partials, double* xtu_partials,
                          double* gram_partials, RunWhen when, cudaStream_t s);
template <class T>
void launch_newton_trials(const RowView<T>& rows, const double* residual, const double* dir,
                          double tau, const DeviceScalars* sc, double* partials, cudaStream_t s);
// The blocks of launch_lamm_trials' row sums, a partial per candidate each: the row grid, or
// on the float64 tensor cores at most kFusedGramMaxBlocks (one wave), every warp taking at
// least kLammMmaGroupsPerWarp groups of 8 rows where the batch has them.
int lamm_trial_blocks(int64_t n_rows, int64_t ncols_x, bool float64_mma);
// The objective sums of `count` LAMM candidates, and J delta of their deltas (jdeltas) for
// launch_lamm_pick: in the same launch while lamm_trials_with_quadratic, else just before it.
// float64_mma: rows of 9 to 128 stored columns form their dots on the float64 tensor cores
// (Engine::lamm_mma). gradient_partials (not null: a group of one chunk, on the tensor cores,
// lamm_trials_on_mma): the launch also forms each candidate's X'psi there, kLammChunk
// x lamm_trial_blocks x appended_column_stride(ncols_x) doubles, for the gradient at the beta the
// pick accepts (launch_gradient's trials_xtu). Returns whether it did.
template <class T>
bool launch_lamm_trials(const RowView<T>& rows, const double* candidates, int count, double tau,
                        const DeviceScalars* sc, double* partials, const double* J,
                        const double* deltas, double* jdeltas, bool float64_mma,
                        double* gradient_partials, cudaStream_t s);
// Whether LAMM's trials form their dots on the float64 tensor cores (rows of 9 to 128 stored
// columns), where launch_lamm_trials can also form X'psi; and, once per device, the shared
// memory that takes (configure_lamm_trials_gradient: false where the device cannot give it).
bool lamm_trials_on_mma(int64_t ncols_x, bool float64_mma);
bool configure_lamm_trials_gradient(int device);
// While running: scaled = sqrt(w m(r)) x with Newton's majoriser weight m (rh_algorithm.h) at
// the residuals `residual` holds, for the Gram of the majoriser fallback.
template <class T>
void launch_majoriser_rows(const RowView<T>& rows, const double* residual, double tau,
                           const DeviceScalars* sc, T* scaled, cudaStream_t s);
// scaled = sqrt(w) |psi(r)| x at the residuals `residual` holds: K's rows (meat.cu) when the
// solver's last row pass did not write them.
template <class T>
void launch_meat_rows(const RowView<T>& rows, const double* residual, double tau, T* scaled,
                      cudaStream_t s);
// While running: per block of the row grid, sum_i w_i ||x_i||^2 (appended intercept counted),
// row_blocks(n, ncols_x) partials for launch_lamm_bound.
template <class T>
void launch_weighted_square_norms(const RowView<T>& rows, const DeviceScalars* sc, double* partials,
                                  cudaStream_t s);
// The row-statistics extension over one chunk of rows (its own view): per-row weights w psi,
// w c, w m, w psi^2 (row_weights, 4 rows.n doubles; beta null: none, NORM alone) and per block
// sum w rho and sum w ||x||^2 (partials, 2 per block of the row grid). Runs unconditionally.
template <class T>
void launch_statistics_rows(const RowView<T>& rows, const double* beta, double tau, double h,
                            double* row_weights, double* partials, cudaStream_t s);
template <class T>
void launch_predict(const RowView<T>& rows, const T* coef, T* out, cudaStream_t s);

// --- P-sized steps every solver runs (step_kernels.cu) ---------------------------------------
// Finishes the validation (batch weight, first bad indices, every per-batch scalar, the state:
// kRunning, or kInvalidData for refused data) and loads beta0 = beta = coefficients and
// J = information as doubles, in one launch.
template <class T>
void launch_begin_update(const double* weight_partials, const unsigned long long* bad_partials,
                         int blocks, const BatchConstants& k, const T* coefficients,
                         const T* information, double* beta0, double* beta, double* J,
                         DeviceScalars* sc, cudaStream_t s);
// The row pass's sums (rho_sum, score_sum; with set_objective F = rho_sum / N), then
// g = (-X'u + J delta) / N - history term and J delta. X'u: the row pass's per-block partials
// summed in a fixed order when xtu_partials is not null, else xtu from cuBLAS. `gram_sum` (kind
// kNone: none) runs in the same launch, on blocks after the gradient's; with accept.dir (beta
// being the candidate accept.beta - accept.dir) the launch's last block then judges the whole
// step as launch_newton_select would judge its first trial, from these sums at the candidate
// (f fresh, F from DeviceScalars.objective). Not lower: the state becomes kNeedsLineSearch
// (iteration not counted); a zero dir pauses in kNeedsMajoriser.
template <class T>
void launch_gradient(const double* J, const double* beta, const double* beta0, const T* xtu,
                     const double* xtu_partials, int64_t ncols_x, const BatchConstants& k,
                     const double* partials, int blocks, bool set_objective, DeviceScalars* sc,
                     double* g, double* jdelta, RunWhen when, const GramSum<T>& gram_sum,
                     const NewtonAccept& accept, const LammTrialsXtu& trials_xtu, cudaStream_t s);
// While running: H = (G + J) / N + ridge I, column-major for cuSOLVER, G mirrored from its
// upper triangle.
template <class T>
void launch_assemble_hessian(const T* gram, const double* J, const BatchConstants& k,
                             const DeviceScalars* sc, double* H, cudaStream_t s);
// The sum of a row pass's (or a GEMM's) partial Grams that `sum` describes (GramSum), in its
// own launch.
template <class T>
void launch_gram_sum(const GramSum<T>& sum, cudaStream_t s);
// A paused state (needs_host: kNeedsFallback, kNeedsMajoriser, kNeedsLammBound,
// kNeedsLineSearch) -> kRunning,
// before the host queues the rest of the paused iteration.
void launch_resume(DeviceScalars* sc, cudaStream_t s);
// out = A v while running.
void launch_matvec(const double* A, const double* v, const DeviceScalars* sc, double* out,
                   int64_t P, cudaStream_t s);
// out = beta - dir while running (the speculative Newton step's candidate, where the Cholesky
// solve did not form it).
void launch_newton_candidate(const double* beta, const double* dir, const DeviceScalars* sc,
                             double* out, int64_t P, cudaStream_t s);

// --- the linear-solve ladder (linear_solve_kernels.cu) ----------------------------------------
// P <= Engine::small_dense_max, while running: assemble H, factor it (Cholesky), set factor_ok with
// the same test as launch_cholesky_verdict_solve (refused: kNeedsFallback), solve H dir = g and
// form jdir = J dir, in one single-block kernel; candidate (null: none) = beta - dir.
template <class T>
void launch_small_cholesky_solve(const T* gram, const double* J, const BatchConstants& k,
                                 DeviceScalars* sc, const double* g, double* dir, double* jdir,
                                 const double* beta, double* candidate, cudaStream_t s);
// The largest P, at most cap, whose one-block Cholesky fits the device's opt-in shared memory
// per block; lets the kernel use that much. Called when a resource set is made (device
// current).
int64_t configure_small_dense(int device, int64_t cap);
// While running, on cuSOLVER's Cholesky factor of H = (G + J) / N + ridge I (lower): accepts it
// when info == 0 and every squared pivot exceeds rh_pivot_floor(P, eps) times H's own diagonal
// entry (recomputed from gram and J), then solves H dir = g with it; a refused attempt moves the
// state to kNeedsFallback. One single-block kernel; tile_inverses holds
// cholesky_tile_inverse_elems(P) doubles of scratch, used where shared_limit bytes (from
// configure_cholesky_solve) do not hold them.
template <class T>
void launch_cholesky_verdict_solve(const double* factor, const int* info, const T* gram,
                                   const double* J, const BatchConstants& k, DeviceScalars* sc,
                                   const double* g, double* dir, double* tile_inverses,
                                   int shared_limit, cudaStream_t s);
int64_t cholesky_tile_inverse_elems(int64_t P);
// The dynamic shared memory the Cholesky solve may use on this device, which it is allowed.
// Called when a resource set is made (device current).
int configure_cholesky_solve(int device);
// Above the one-block limit, up to ClusterCholeskyLimits::max_p (cluster_cholesky.cu), while
// running, in one cluster of thread blocks with at most shared_limit bytes of shared memory each:
// assembles H = (G + J) / N + ridge I, factors H = L L', applies the acceptance test of
// launch_cholesky_verdict_solve to it (a refused factor moves the state to kNeedsFallback, dir
// untouched) and, on an accepted factor, sets factor_ok and solves H dir = g. The factor itself
// stays in shared memory.
template <class T>
void launch_cluster_cholesky_solve(const T* gram, const double* J, const double* g,
                                   const BatchConstants& k, DeviceScalars* sc, double* dir,
                                   int shared_limit, cudaStream_t s);
// The cluster Cholesky's limits on this device (none without cluster launches), whose shared
// memory it is allowed. Called when a resource set is made (device current).
ClusterCholeskyLimits configure_cluster_cholesky(int device);
// While running, on an LU factor: sets factor_ok when info == 0 and
// min |u_ii| > rh_pivot_floor(P, eps) max |u_ii|.
void launch_check_factor(const double* factor, const int* info, int64_t P, double eps,
                         DeviceScalars* sc, cudaStream_t s);
// dir = V S^+ U' g from an SVD (columns of U and V, S descending), singular values at or below
// eps P S[0] dropped; *rank = the number kept.
void launch_svd_solve(const double* U, const double* S, const double* V, const double* g, int64_t P,
                      double eps, double* scratch, double* dir, int* rank, cudaStream_t s);
// The linear-solve ladder's equilibration (docs/decisions.md, "Linear solve ladder"):
// d_i = rh_equilibration_factor(H_ii) (or 1 when unit) and dg = d * g, setting
// DeviceScalars.equilibrated_finite; launch_equilibrate_matrix then scales H to diag(d) H diag(d)
// in place (exact: powers of two) and clears the flag on any non-finite product.
void launch_equilibration(const double* H, const double* g, int64_t P, bool unit, double* d,
                          double* dg, DeviceScalars* sc, cudaStream_t s);
void launch_equilibrate_matrix(double* H, const double* d, int64_t P, DeviceScalars* sc,
                               cudaStream_t s);
// v *= d elementwise.
void launch_scale_vector(double* v, const double* d, int64_t P, cudaStream_t s);

// --- Newton (newton_kernels.cu) ---------------------------------------------------------------
// While running: the first of the 27 trials along dir (partials from launch_newton_trials)
// that does not increase f moves beta and counts the iteration, with the convergence test.
// None: along a Newton direction the state becomes kNeedsMajoriser (iteration not counted);
// along the majoriser's direction the iteration is counted and the solve ends, kConverged when
// g'dir / 2 is within rounding of F or dir passes the step test (rh_rejected_direction_converged),
// else kStalled. A step along a truncated Newton direction that passes the convergence test
// pauses for the majoriser's confirmation instead (DeviceScalars.confirming, newton_choose_step).
void launch_newton_select(const double* partials, int blocks, const double* dir,
                          const double* jdelta, const double* jdir, const double* beta0,
                          const double* g, StepDirection direction, const BatchConstants& k,
                          DeviceScalars* sc, double* beta, cudaStream_t s);

// --- LAMM (lamm_kernels.cu) -------------------------------------------------------------------
// One group of LAMM attempts (count a multiple of kLammChunk, at most kLammMaxGroup): the
// candidates and their bound terms, the trials with J delta (launch_lamm_trials, row_kernels.cu),
// then the pick of the first acceptable one; the pick's `group` says what a group without one
// leads to (LammGroup).
void launch_lamm_candidates(int first_attempt, int count, const double* beta, const double* beta0,
                            const double* g, const BatchConstants& k, const DeviceScalars* sc,
                            double* candidates, double* deltas, double* trial_terms,
                            cudaStream_t s);
// trials_gradient (the first group's pick only): the trials formed each candidate's X'psi
// (launch_lamm_trials), so an accepted attempt is named in DeviceScalars.lamm_trials_gradient.
void launch_lamm_pick(int count, LammGroup group, const double* partials, int blocks,
                      const double* candidates, const double* deltas, const double* jdeltas,
                      const double* trial_terms, const BatchConstants& k, DeviceScalars* sc,
                      double* beta, bool trials_gradient, cudaStream_t s);
// While running, after LAMM's 40th rejection: with partials (launch_weighted_square_norms,
// `blocks` of them) computes and keeps the curvature bound L in lamm_bound; with null reuses
// the kept one. Then phi = max(2^40 phi, L), the start of the curvature-bound group.
void launch_lamm_bound(const double* partials, int blocks, const double* J, int64_t P,
                       DeviceScalars* sc, cudaStream_t s);

// --- the commit (commit_kernels.cu) ----------------------------------------------------------
// J_new = J + G (mirrored), beta_new = beta rounded to T, the penalised objective and
// commit_nonfinite; host_state (pinned, or null): also P coefficients then P x P information
// there; finally the status block to host_status (pinned). block_flags: one int per block of
// the information kernel (at most 4096).
template <class T>
void launch_commit(const double* J, const T* gram, const double* beta, const BatchConstants& k,
                   DeviceScalars* sc, T* info_out, T* coef_out, T* host_state, int* block_flags,
                   DeviceScalars* host_status, cudaStream_t s);

}  // namespace rh
