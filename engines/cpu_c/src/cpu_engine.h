/*
 * cpu_engine.h -- internal interface of librh_cpu (never installed).
 *
 * Data flow of one update: the ABI entry point validates the structs (rh_common) and the
 * batch values (batch_checks.c), sizes the workspace once for the batch shape (workspace.c),
 * builds an RhProblem in double precision, runs the Newton or LAMM solver on it, adds this
 * batch's Gram to the information and commits into the engine's state only when every value
 * is finite (update.c). All dense algebra and every reduction runs in double for both dtypes;
 * the data stays in the caller's dtype and is converted on the fly.
 */
#ifndef RH_CPU_ENGINE_H
#define RH_CPU_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "multiversion.h"
#include "rh_common.h"

/* Row passes reduce over fixed blocks of this many rows; the size never depends on the thread
 * count, which is what makes every result bitwise independent of it. */
#define RH_ROW_BLOCK 1024
/* The Gram sums fixed super-blocks of listed rows into one partial each, packing them in
 * chunks of RH_GRAM_DEPTH rows (see gram.c). */
#define RH_GRAM_SUPERBLOCK 1024
#define RH_GRAM_DEPTH 128
/* rh_gram_and_meat packs four panels per chunk instead of two, in chunks half as deep, so the
 * packing buffer keeps its size. */
#define RH_MEAT_DEPTH (RH_GRAM_DEPTH / 2)
/* Spare doubles in the Gram buffers so gram.c can align them to a cache line. */
#define RH_GRAM_ALIGN_SLACK 8
/* Below these amounts of multiply-adds a parallel region costs more than it saves (and on a
 * loaded machine every barrier can wait a scheduler quantum), so the work stays serial. The
 * result does not depend on it: the block layout is the same either way. */
#define RH_PARALLEL_MIN_ROW_WORK ((int64_t)1 << 18)
#define RH_PARALLEL_MIN_GRAM_WORK ((int64_t)1 << 22)

/* A validated host batch, read in place in its own dtype. */
typedef struct RhBatchData {
  int32_t dtype;
  const void* x;
  const void* y;
  const void* weights; /* NULL: all ones */
  int64_t n_rows;
  int64_t n_columns;    /* row stride of x */
  int64_t n_parameters; /* P; equals n_columns + 1 when the intercept is appended */
  int append_intercept;
} RhBatchData;

/* Reusable scratch, sized once per (n_rows, P) and only grown. Every solver loop runs on it
 * without allocating. */
typedef struct RhWorkspace {
  int64_t rows_capacity;
  int64_t params_capacity;
  /* per row */
  double* curvature;      /* c(r) at the current iterate */
  double* curvature_next; /* c(r) at a trial point */
  double* row_scale;      /* scale per listed row for the Gram */
  int64_t* row_list;      /* rows selected for a Gram */
  /* per row block */
  double* block_gradient; /* n_blocks x P partial sums */
  double* block_loss;     /* n_blocks */
  double* gram_pack;      /* super-blocks x 2 packed chunk panels (gram.c) */
  double* gram_partial;   /* super-blocks x padded P x padded P */
  double* meat_partial;   /* the same for the meat Gram of rh_gram_and_meat */
  /* per parameter */
  double* beta0;
  double* history; /* (W0/N) lambda0 sign(beta0) m, or zeros */
  double* mask;
  double* beta;
  double* candidate;
  double* gradient;
  double* gradient_next;
  double* step;
  double* scratch;
  double* singular_values;
  double* bound_terms; /* 6 x P: the LAMM rejection bound's terms (lamm_solver.c) */
  /* P x P */
  double* information;   /* J in double */
  double* gram_weighted; /* X' diag(w) X for the batch, computed lazily */
  double* gram;          /* X' diag(w c) X at the current iterate */
  double* hessian;
  double* factor;
  double* right_vectors;
  double* equilibrated;  /* diag(d) H diag(d) for the ladder's LU and SVD rungs */
  double* equilibration; /* d, d * rhs and an equilibrated solution (dense_solve.c) */
  double* batch_meat;    /* X' diag(w psi(r)^2) X of the batch at its solution */
  /* commit staging in the engine dtype (the meat matrix K always in double) */
  void* staged_coefficients;
  void* staged_information;
  double* staged_meat;
  int gram_weighted_ready;
} RhWorkspace;

struct RhCudaEngine {
  int32_t dtype;
  size_t elem_size;
  int64_t n_parameters;
  uint64_t requested_flags;
  RhErrorBuffer error;
  /* committed state, in the engine dtype */
  void* coefficients;
  void* information;
  int64_t n_samples_seen;
  int64_t batch_count;
  double previous_lambda;
  double weight_sum;
  double* meat;       /* P x P doubles: K of the sandwich covariance, meaningful when available */
  int meat_available; /* K covers every batch of the stream (docs/abi.md, "The meat matrix") */
  double* coefficients_f64; /* P doubles: the committed coefficients widened for predict */
  RhWorkspace workspace;
};

/* One batch transition in double precision (docs/algorithm.md notation). */
typedef struct RhProblem {
  RhBatchData data;
  RhWorkspace* ws;
  int64_t P;
  int penalty;
  int64_t max_iter;
  double tau;
  double bandwidth;
  double lambda;
  double ridge;
  double tolerance;
  double total_weight; /* N */
  double machine_eps;  /* of the engine dtype: the rounding floor of F (rh_within_rounding) */
  double ladder_eps;   /* the solve ladder's thresholds' eps (rh_ladder_epsilon) */
  int used_fallback;
} RhProblem;

typedef struct RhSolveResult {
  int64_t iterations;
  int converged;
  double objective; /* F at the returned beta (without the L1 norm) */
} RhSolveResult;

/* ---- workspace.c */
RhCudaStatus rh_workspace_reserve(RhWorkspace* ws, int64_t n_rows, int64_t n_parameters,
                                  size_t elem_size, RhErrorBuffer* err);
void rh_workspace_release(RhWorkspace* ws);

/* ---- batch_checks.c: values of a batch whose shape rh_validate_batch accepted. On success
 * *batch_weight is the engine's own double sum of the weights. Checks y and the weights only:
 * a separate pass over X would cost as much as a solver pass, and every non-finite x_ij makes
 * the solvers' first objective non-finite (x_ij beta_j is NaN or infinite for any beta_j), so
 * the solvers call rh_check_design_values exactly then, before anything is committed. */
RhCudaStatus rh_check_batch_values(const RhBatchData* data, double declared_weight,
                                   double previous_weight, double* batch_weight,
                                   RhErrorBuffer* err);
/* INVALID_ARGUMENT naming the first non-finite x_design value, if any. */
RhCudaStatus rh_check_design_values(const RhBatchData* data, RhErrorBuffer* err);

/* ---- row_pass.c: one fused sweep over the rows at beta. Always returns sum w rho(r) in
 * *loss. With gradient != NULL also X'(w psi(r)) (P values); with curvature != NULL also c(r)
 * per row. */
void rh_row_pass(const RhProblem* problem, const double* beta, double* loss, double* gradient,
                 double* curvature);
/* Newton's majoriser fallback (docs/algorithm.md, "Solvers"): weights[i] =
 * rh_majoriser_weight(r_i, tau, curvature[i]) with r at beta and curvature = c(r) at beta as
 * the row pass computed it. Independent per row, so thread-count independent. */
void rh_majoriser_row_weights(const RhProblem* problem, const double* beta, const double* curvature,
                              double* weights);
/* prediction = X beta in the batch dtype. */
void rh_predict_rows(int32_t dtype, const void* x, int64_t n_rows, int64_t n_columns,
                     int append_intercept, const double* beta, void* prediction);

/* ---- row_pass_avx512.c (where RH_HAVE_AVX512_KERNELS): the row_pass.c kernels for AVX-512,
 * called only when rh_cpu_has_avx512(). */
void row_block_f32_avx512(const RhProblem* problem, const double* beta, int64_t first, int64_t last,
                          double* loss, double* gradient, double* curvature);
void row_block_f64_avx512(const RhProblem* problem, const double* beta, int64_t first, int64_t last,
                          double* loss, double* gradient, double* curvature);
void predict_block_f32_avx512(const float* x, int64_t first, int64_t last, int64_t m,
                              double intercept, const double* beta, float* out);
void predict_block_f64_avx512(const double* x, int64_t first, int64_t last, int64_t m,
                              double intercept, const double* beta, double* out);

/* ---- gram.c: G = X' diag(w c) X at the curvature in ws->curvature (exactly symmetric).
 * reuse_weighted: the caller will ask again this batch, so caching X' diag(w) X pays off. */
void rh_gram_at_curvature(RhProblem* problem, int reuse_weighted, double* gram);
/* G = X' diag(w v) X summed directly over the rows (v: per-row weights, e.g. the majoriser's),
 * never as a correction of X' diag(w) X, which would cancel where most v are small. */
void rh_gram_at_row_weights(RhProblem* problem, const double* row_weights, double* gram);
/* At commit: gram as rh_gram_at_curvature computes it and, in the same sweep over the rows,
 * meat = X' diag(w psi(r)^2) X with r = y - X ws->beta (the batch's solution). */
void rh_gram_and_meat(RhProblem* problem, int reuse_weighted, double* gram, double* meat);

/* ---- dense_solve.c: x = H^{-1} g through Cholesky -> LU -> minimum-norm SVD. Sets
 * *used_fallback when the SVD ran, and returns 1 when it kept fewer than P singular values (x
 * then ignores g's part in the dropped directions), else 0. Clobbers ws->factor,
 * ws->right_vectors, ws->singular_values and ws->scratch. */
int rh_dense_solve(const double* hessian, const double* rhs, int64_t P, double eps, RhWorkspace* ws,
                   double* solution, int* used_fallback);

/* ---- objective.c: f(beta) and, when gradient != NULL, g(beta) and c(r) into curvature. */
double rh_objective(const RhProblem* problem, const double* beta, double* gradient,
                    double* curvature);

/* Both solvers start here: beta = beta0, and f, g and the curvature at it. A non-finite
 * objective means bad design values (reported exactly, INVALID_ARGUMENT) or overflow
 * (NUMERICAL_ERROR). */
RhCudaStatus rh_start_at_previous(RhProblem* problem, double* objective, RhErrorBuffer* err);

/* ---- newton_solver.c, lamm_solver.c: leave the solution in ws->beta and c(r) at it in
 * ws->curvature. NUMERICAL_ERROR when non-finite values appear. */
RhCudaStatus rh_solve_newton(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err);
RhCudaStatus rh_solve_lamm(RhProblem* problem, RhSolveResult* result, RhErrorBuffer* err);

/* ---- update.c */
RhCudaStatus rh_engine_update(RhCudaEngine* engine, const RhCudaHostBatch* batch,
                              const RhCudaUpdateConfig* config, RhCudaDiagnostics* diagnostics,
                              RhCudaHostState* state_out);

/* ---- engine_state.c */
RhCudaStatus rh_engine_new(const RhCudaEngineOptions* options, RhCudaEngine** out,
                           RhErrorBuffer* err);
void rh_engine_free(RhCudaEngine* engine);
RhCudaStatus rh_engine_restore_state(RhCudaEngine* engine, const RhCudaHostStateView* view);
RhCudaStatus rh_engine_export_state(RhCudaEngine* engine, RhCudaHostState* state);
/* Swaps the staged arrays in as the committed state and sets the counters; with_meat: the
 * staged K is swapped in too, else the engine holds no K from now on. Cannot fail. */
void rh_engine_commit(RhCudaEngine* engine, int64_t n_rows, double lambda, double weight_sum,
                      int with_meat);

#endif /* RH_CPU_ENGINE_H */
