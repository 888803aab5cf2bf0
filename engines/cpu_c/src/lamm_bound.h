/* LAMM's float32 rejection bound (lamm_bound.c), used by lamm_solver.c.
 *
 * Under the float32 rule most LAMM rejections are decided within float32 resolution: near the
 * optimum f(candidate) rounds to F while U = F + g'step + phi |step|^2 / 2 lies below it, and
 * at the end of every batch candidates are rejected one by one until phi is large enough for
 * the step to round to zero. Each costs a pass over the rows. A lower bound on the f that
 * pass would compute settles most of them without it: f is assembled from L = sum w rho(r),
 * Q = delta' J delta and D = history . delta, non-decreasing in L and Q and non-increasing in
 * D, and with c = beta + step:
 *   L(c) >= L(beta) - s . step, s = X'(w psi(r(beta))) = J delta - N (g + history)  (convexity)
 *   Q(c) = Q(beta) + (J + J') delta . step + step' J step
 *   D(c) = D(beta) + history . step
 * with the rounding of every computed quantity (the row passes at beta and at c, the rebuilt
 * s, these sums) bounded from absolute sizes (Higham: a sum whose terms each pass through at
 * most k additions errs by at most k u sum |terms|), times 4 to spare. A certain rejection
 * skips the pass; anything else is evaluated. Every decision is the one the full evaluation
 * takes, so results do not change, only the number of row passes. */
#ifndef RH_LAMM_BOUND_H
#define RH_LAMM_BOUND_H

#include "solver_common.h"

/* sum_i w_i ||x_i||_1 and (a bound on) max_i ||x_i||_1, the appended intercept column counted
 * as ones, and sum_i w_i |y_i|: they bound every residual's size and hence a row pass's
 * rounding. */
typedef struct RhBatchMass {
  int ready;
  double weighted_x;
  double max_row_x;
  double weighted_y;
} RhBatchMass;

/* Per iterate: f's parts at beta as the row pass computed them, and the sizes the bound uses. */
typedef struct RhBoundState {
  int symmetric;        /* J == J' bitwise, per batch */
  int ready;            /* the terms below belong to the current beta */
  double* j_delta;      /* J delta at beta (one of the two J delta slots) */
  double* j_delta_next; /* J delta at the candidate evaluated last */
  double largest_beta;  /* ||beta||_inf */
  double abs_quadratic; /* |delta|' |J| |delta| */
  double abs_linear;    /* |history|' |delta| */
} RhBoundState;

/* What the bound keeps across a solve: the batch's sizes, measured the first time an attempt
 * asks, and the current iterate's terms. */
typedef struct RhLammBound {
  int enabled; /* the float32 rule: see rh_lamm_bound_start */
  RhBatchMass mass;
  RhBoundState state;
} RhLammBound;

/* Starts a solve's bound: enabled for a float32 batch, where decisions are taken on float32
 * values; float64 rejections are rare and decided well above the rounding, where the bound
 * cannot settle them. Disabled, state.j_delta and state.j_delta_next are NULL. */
void rh_lamm_bound_start(RhLammBound* bound, const RhProblem* problem);

/* 1 when the attempt at ws->candidate (ws->step from ws->beta, not zero) is certain to be
 * rejected: f(candidate) > upper + RH_LAMM_SLACK for the f a row pass would compute. at_beta:
 * f's parts at beta. Always 0 when the bound is disabled. */
int rh_lamm_rejection_certain(const RhProblem* problem, RhLammBound* bound,
                              const RhObjectiveParts* at_beta, double upper);

/* The candidate evaluated last became beta: its J delta is now beta's, and the iterate's
 * terms are prepared again when next needed. */
void rh_lamm_bound_advance(RhLammBound* bound);

#endif /* RH_LAMM_BOUND_H */
