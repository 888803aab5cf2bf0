// Newton's step selection (docs/algorithm.md, "Unpenalised"), as a block of Threads threads runs
// it: the select kernel's whole block after the trials (newton_kernels.cu), or the last block of
// the gradient's launch after the row pass at a speculative candidate (step_kernels.cu).
#pragma once

#include <cmath>

#include "step_common.cuh"

namespace rh {

// First trial index at which beta_j - t d_j rounds back to beta_j (kLineSearchTrials when none
// does). Rounding is monotone in t, so every later, smaller step vanishes as well.
__device__ __forceinline__ int vanishing_trial(double beta, double dir) {
  double t = 1.0;
  int trial = 0;
  while (trial < kLineSearchTrials && beta - t * dir != beta) {
    t *= 0.5;
    ++trial;
  }
  return trial;
}

// Thread 0's totals of N per-thread values over the block: each warp's fixed shuffle tree, one
// barrier, then the warp totals in warp order (block_sum's order, so the same bits), and the
// largest of an int per thread. The other threads get nothing: thread 0 alone decides.
template <int N, int Threads>
__device__ __forceinline__ void sums_to_thread0(const double (&v)[N], int largest, double* shared,
                                                int* shared_int, double (&total)[N],
                                                int& total_largest) {
  constexpr int kWarps = Threads / 32;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  double mine[N];
#pragma unroll
  for (int n = 0; n < N; ++n)
    mine[n] = warp_sum(v[n]);
  largest = warp_max(largest);
  if (lane == 0) {
#pragma unroll
    for (int n = 0; n < N; ++n)
      shared[n * kWarps + warp] = mine[n];
    shared_int[warp] = largest;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int w = 0; w < kWarps; ++w)
        acc += shared[n * kWarps + w];
      total[n] = acc;
    }
    int most = 0;
    for (int w = 0; w < kWarps; ++w)
      most = max(most, shared_int[w]);
    total_largest = most;
  }
}

// Rule 3's test of dir as a direction at beta (rh_rejected_direction_converged) needs g'd (the
// decrease the majoriser's quadratic model predicts for the whole step is half of it), ||d||^2
// and ||beta||^2: thread 0's sums of them. Every thread calls it (block-wide sums, after a
// barrier that frees `shared`).
template <int Threads>
__device__ void direction_terms(const double* g, const double* dir, const double* beta, int64_t P,
                                double* shared, int* shared_index, double (&totals)[3]) {
  double terms[3] = {0.0, 0.0, 0.0};
  for (int64_t j = threadIdx.x; j < P; j += Threads) {
    terms[0] += g[j] * dir[j];
    terms[1] += dir[j] * dir[j];
    terms[2] += beta[j] * beta[j];
  }
  __syncthreads();
  int no_index = 0;
  sums_to_thread0<3, Threads>(terms, 0, shared, shared_index, totals, no_index);
}

// Thread 0's verdict of rule 3 from direction_terms' sums at F.
__device__ __forceinline__ bool direction_converged(const double (&totals)[3], double F,
                                                    const BatchConstants& k) {
  return rh_rejected_direction_converged(0.5 * totals[0], F, k.dtype_epsilon, sqrt(totals[1]),
                                         sqrt(totals[2]), k.tolerance);
}

// The line search of docs/algorithm.md ("Unpenalised"). F is the objective at beta evaluated
// like the reference does, from the fresh residual of the last row pass; a trial whose candidate
// equals beta bitwise has objective exactly F and is accepted, as in the reference: the fused
// r + t (x . d) form would otherwise compare F with a rounding-perturbed copy of itself near the
// optimum. All 27 trials rejected: along a Newton direction the iteration pauses in
// kNeedsMajoriser, uncounted, for the host's fallback step; along the majoriser's direction it
// ends the solve, converged when g'd / 2 is within rounding of F or d passes the step test
// (rh_rejected_direction_converged). A step along a truncated Newton direction
// (kTruncatedNewtonDirection) that passes the convergence test pauses in kNeedsMajoriser with
// DeviceScalars.confirming instead of ending the solve; the majoriser's direction then comes here
// first for that same test (rule 5 of docs/algorithm.md, "Unpenalised"), which ends the solve
// converged at beta unmoved, and otherwise is searched as any majoriser step (counted), unless
// max_iter iterations have run.
// speculative (the last block of the gradient's launch after the row pass at the candidate,
// launch_gradient's NewtonAccept): the row pass and gradient ran at the candidate beta - dir,
// so the whole step is the only trial. Its f comes from that pass as F would at the next
// iteration, (rho_sum + delta' J delta / 2) / N with jdelta = J delta at the candidate,
// and F is the objective the last accepted step (or the solve's start) left, the same value
// read the same way: the search's choice between fresh values, as in the reference. Rejected:
// kNeedsLineSearch, for the host's row pass at beta and the 27 trials.
template <int Threads>
__device__ void newton_choose_step(const double* partials, int blocks, const double* dir,
                                   const double* jdelta, const double* jdir, const double* beta0,
                                   const double* g, int direction, int speculative,
                                   const BatchConstants& k, DeviceScalars* sc, double* beta) {
  __shared__ double shared[Threads];
  __shared__ int shared_index[Threads];
  __shared__ double trial_sums[kLineSearchTrials];
  __shared__ double chosen_step;
  __shared__ int zero_step;
  __shared__ int unmoved_end;    // a confirmation ended the solve without a step
  __shared__ double verdict[3];  // thread 0's direction_terms for a confirmation
  const int majoriser = direction == kMajoriserDirection;
  if (sc->state != kRunning) {
    // A step queued after the solve ended: nothing moved, so the row pass after it has
    // nothing to refresh.
    if (threadIdx.x == 0)
      sc->fresh = 0;
    return;
  }
  // A confirmation tests the direction before any trial; its sums come first, while few values
  // are live. Every thread reads the flag before thread 0 clears it (after the sums' barriers).
  if (majoriser && sc->confirming) {
    direction_terms<Threads>(g, dir, beta, k.P, shared, shared_index, verdict);
    __syncthreads();  // thread 0 has read its sums out of `shared` before the line's sums reuse it
  }
  const int warp = threadIdx.x >> 5;
  const int trials = speculative ? 1 : kLineSearchTrials;
  for (int t = warp; !speculative && t < trials; t += Threads / 32) {
    // The trials kernel writes trial-major partials: this trial's are contiguous.
    const double total = warp_column_sum(partials + static_cast<int64_t>(t) * blocks, blocks, 1, 0);
    if ((threadIdx.x & 31) == 0)
      trial_sums[t] = total;
  }
  // Per thread: its share of delta' J delta, of the line's slope and curvature terms, of the
  // nonzero count of dir, and the first trial at which its coefficients stop moving.
  double mine[4] = {0.0, 0.0, 0.0, 0.0};
  int vanishes_mine = 0;
  // Speculative: only a, at the candidate (jdelta is J delta there).
  for (int64_t j = threadIdx.x; j < k.P; j += Threads) {
    if (speculative) {
      const double delta = (beta[j] - dir[j]) - beta0[j];
      mine[0] += delta * jdelta[j];
    } else {
      const double delta = beta[j] - beta0[j];
      mine[0] += delta * jdelta[j];
      mine[1] += dir[j] * jdelta[j] + delta * jdir[j];
      mine[2] += dir[j] * jdir[j];
    }
    mine[3] += dir[j] != 0.0 ? 1.0 : 0.0;
    vanishes_mine = max(vanishes_mine, vanishing_trial(beta[j], dir[j]));
  }
  double line[4];  // thread 0's: a, b, c, nonzero
  int vanishes_from = 0;
  sums_to_thread0<4, Threads>(mine, vanishes_mine, shared, shared_index, line, vanishes_from);
  const double a = line[0], b = line[1], c = line[2], nonzero = line[3];
  // Thread 0's: a step the line search cut short ends the solve only when it also changed f by
  // at most tol |f| (short because of the cut, it says nothing of the distance to the optimum,
  // which a first-order decrease of f reveals).
  bool settled = false;
  if (threadIdx.x == 0) {
    const double N = sc->total_weight;
    const double F = speculative ? sc->objective : (sc->rho_sum + 0.5 * a) / N;
    // After a zero Newton step the majoriser's step must strictly decrease f.
    const bool strict = majoriser && sc->zero_newton_step;
    double t = 1.0;
    int chosen = -1;
    chosen_step = 0.0;
    sc->objective = F;
    // A confirmed direction ends the solve converged; an unconfirmed one with no iteration left
    // ends it unconverged (kRunning at max_iter: solve_ended). beta does not move either way
    // (fresh cleared; at max_iter the row pass after this still runs, at the same beta).
    int trials_run = trials;
    unmoved_end = 0;
    if (majoriser && sc->confirming) {  // read again: thread 0 alone clears it
      sc->confirming = 0;
      const bool confirmed = direction_converged(verdict, F, k);
      if (confirmed)
        sc->state = kConverged;
      if (confirmed || sc->iterations >= sc->max_iter) {
        unmoved_end = 1;
        sc->fresh = 0;
        trials_run = 0;
      }
    }
    for (int trial = 0; trial < trials_run; ++trial) {
      double f = F;
      if (trial < vanishes_from) {
        f = speculative ? (sc->rho_sum + 0.5 * a) / N
                        : (trial_sums[trial] + 0.5 * (a - t * b + t * t * c)) / N;
      }
      if (f < F || (f == F && !strict)) {
        chosen_step = t;
        chosen = trial;
        sc->objective = f;
        break;
      }
      t *= 0.5;
    }
    // A zero Newton direction (a singular H) is no progress: the iteration pauses for the
    // majoriser as if every trial had been rejected.
    zero_step = !majoriser && chosen >= 0 && nonzero == 0.0;
    if (zero_step) {
      chosen_step = 0.0;
      sc->objective = F;
    }
    settled = chosen == 0 || rh_decrease_settled(F, sc->objective, k.tolerance);
    if (trials_run > 0 && (chosen_step != 0.0 || majoriser))
      sc->iterations += 1;
  }
  __syncthreads();
  if (unmoved_end)
    return;
  const double t = chosen_step;
  if (t == 0.0) {
    if (!majoriser) {
      if (threadIdx.x == 0) {
        sc->state = speculative && !zero_step ? kNeedsLineSearch : kNeedsMajoriser;
        sc->fresh = 0;
        sc->zero_newton_step = zero_step;
      }
      return;
    }
    if (sc->zero_newton_step) {
      // No strictly decreasing majoriser step: the zero Newton step stands (Delta = 0 passes
      // the step test), beta is optimal to rounding.
      __syncthreads();
      if (threadIdx.x == 0) {
        sc->state = kConverged;
        sc->fresh = 0;
        sc->zero_newton_step = 0;
      }
      return;
    }
    // Rule 3 on the majoriser's rejected direction (F is sc->objective: no trial moved it).
    double totals[3];
    direction_terms<Threads>(g, dir, beta, k.P, shared, shared_index, totals);
    if (threadIdx.x == 0) {
      sc->state = direction_converged(totals, sc->objective, k) ? kConverged : kStalled;
      sc->fresh = 0;
    }
    return;
  }
  double squares[2] = {0.0, 0.0};  // of the step and of the new beta
  for (int64_t j = threadIdx.x; j < k.P; j += Threads) {
    const double updated = beta[j] - t * dir[j];
    const double step = updated - beta[j];
    beta[j] = updated;
    squares[0] += step * step;
    squares[1] += updated * updated;
  }
  double totals[2];
  int unused = 0;
  sums_to_thread0<2, Threads>(squares, 0, shared, shared_index, totals, unused);
  if (threadIdx.x == 0) {
    const double step2 = totals[0], norm2 = totals[1];
    sc->fresh = 1;
    sc->zero_newton_step = 0;
    if (!isfinite(norm2) || !isfinite(sc->objective)) {
      sc->state = kNonFinite;
    } else if (settled && rh_step_converged(sqrt(step2), sqrt(norm2), k.tolerance)) {
      const bool confirm = direction == kTruncatedNewtonDirection;
      sc->state = confirm ? kNeedsMajoriser : kConverged;
      sc->confirming = confirm ? 1 : 0;
    }
  }
}

}  // namespace rh
