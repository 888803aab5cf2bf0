// LAMM proximal steps (penalty l1), docs/algorithm.md ("Penalised"). The 40 attempts of an
// iteration come in two groups of three launches (solver_types.hpp, kLammFirstGroup); kernels
// after the accepted attempt, and every kernel of an iteration queued after the solve ended,
// return at once. So an iteration is a fixed launch sequence (one graph replay with
// CUDA_GRAPHS), and iterations are queued a chunk at a time with one synchronisation per chunk.
// When all 40 are rejected (phi far below f's curvature: features in raw units) the iteration
// pauses in kNeedsLammBound and the host queues the curvature-bound group between chunks, so
// the iterations that accept cost nothing for it beyond the kernels' state checks.
#include <algorithm>

#include "engine_error.hpp"
#include "graph_replayer.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

// Attempts first .. first + count - 1 from the phi in DeviceScalars: candidates, their bound
// terms, the objective sums with J delta (one launch), and the pick. With gradient_partials (the
// first group, where Engine::lamm_trials_gradient) the trials also form each candidate's X'psi
// there where they can (launch_lamm_trials); returns whether they do.
template <class T>
bool enqueue_group(UpdateContext<T>& ctx, int first, int count, LammGroup group,
                   double* gradient_partials = nullptr) {
  Engine& e = ctx.e;
  launch_lamm_candidates(first, count, ctx.beta(), ctx.beta0(), ctx.grad(), ctx.k,
                         ctx.device_scalars(), e.ws.candidates.as<double>(),
                         e.ws.candidate_deltas.as<double>(), e.ws.trial_terms.as<double>(),
                         e.stream);
  const bool with_gradient = launch_lamm_trials<T>(
      ctx.rows, e.ws.candidates.as<double>(), count, ctx.k.tau, ctx.device_scalars(),
      e.ws.trial_partials.as<double>(), ctx.information64(), e.ws.candidate_deltas.as<double>(),
      e.ws.candidate_jdeltas.as<double>(), e.lamm_mma, gradient_partials, e.stream);
  launch_lamm_pick(count, group, e.ws.trial_partials.as<double>(),
                   lamm_trial_blocks(ctx.rows.n, ctx.rows.ncols_x, e.lamm_mma),
                   e.ws.candidates.as<double>(), e.ws.candidate_deltas.as<double>(),
                   e.ws.candidate_jdeltas.as<double>(), e.ws.trial_terms.as<double>(), ctx.k,
                   ctx.device_scalars(), ctx.beta(), with_gradient, e.stream);
  return with_gradient;
}

// An iteration: the first group's trials form X'psi at their candidates where they can
// (launch_lamm_trials decides), and then the row pass runs only when the accepted attempt is not
// among them (the second group's, or none: kRunUnlessTrialsGradient); the gradient reads X'u
// from where it was formed.
template <class T>
void enqueue_iteration(UpdateContext<T>& ctx) {
  Engine& e = ctx.e;
  double* gradient_partials =
      e.lamm_trials_gradient ? e.ws.lamm_gradient_partials.as<double>() : nullptr;
  LammTrialsXtu trials_xtu;
  if (enqueue_group(ctx, 0, kLammFirstGroup, kLammGroupFirst, gradient_partials)) {
    trials_xtu.partials = gradient_partials;
    trials_xtu.blocks = lamm_trial_blocks(ctx.rows.n, ctx.rows.ncols_x, e.lamm_mma);
  }
  enqueue_group(ctx, kLammFirstGroup, kLammMaxGroup, kLammGroupRest);
  ctx.row_pass(false, trials_xtu.partials != nullptr ? kRunUnlessTrialsGradient : kRunWhileRunning);
  ctx.gradient(kRunWhileRunning, false, {}, nullptr, {}, trials_xtu);
}

// The rest of an iteration paused in kNeedsLammBound: phi = max(2^40 phi, L), then
// kLammBoundAttempts attempts doubling phi from there. The pass over the rows for L runs once
// per solve (the batch fixes L).
template <class T>
void enqueue_bound_attempts(UpdateContext<T>& ctx) {
  Engine& e = ctx.e;
  launch_resume(ctx.device_scalars(), e.stream);
  double* partials = nullptr;
  if (!ctx.lamm_bound_ready) {
    partials = e.ws.trial_partials.as<double>();
    launch_weighted_square_norms<T>(ctx.rows, ctx.device_scalars(), partials, e.stream);
    ctx.lamm_bound_ready = true;
  }
  launch_lamm_bound(partials, row_blocks(ctx.rows.n, ctx.rows.ncols_x), ctx.information64(),
                    ctx.k.P, ctx.device_scalars(), e.stream);
  enqueue_group(ctx, 0, kLammBoundAttempts, kLammGroupBound);
  ctx.row_pass(false, kRunWhileRunning);
  ctx.gradient(kRunWhileRunning);
}

}  // namespace

template <class T>
void solve_lamm(UpdateContext<T>& ctx) {
  ctx.row_pass(false, kRunWhileRunning);
  ctx.gradient(kRunWhileRunning, true);

  int64_t done = 0;
  int64_t chunk = ctx.first_chunk;
  bool paused = false;  // the last chunk ended in kNeedsLammBound
  GraphReplayer iteration(ctx.e, kLammIterationGraph);
  for (;;) {
    if (paused) {
      enqueue_bound_attempts(ctx);
    } else {
      const int64_t queued = std::min(chunk, ctx.max_iter - done);
      for (int64_t i = 0; i < queued; ++i)
        iteration.run([&] { enqueue_iteration(ctx); });
    }
    // The Gram at the final beta for the finish; X'u is not needed. Light Grams are queued
    // after every chunk: the row pass runs only in the chunk that ended the solve (cuBLAS's
    // GEMM cannot skip: in the others it sums stale rows that the finish, skipping too, never
    // reads). A heavy Gram waits for the status to show the end: one more synchronisation.
    if (ctx.gram_after_end) {
      ctx.enqueue_readback();
      ctx.wait_for_status();
    }
    if (!ctx.gram_after_end || solve_ended(ctx.status())) {
      ctx.row_pass(true, kRunWhenEnded, false);
      ctx.enqueue_finish();
      ctx.wait_for_status();
    }
    const DeviceScalars& s = ctx.status();
    if (solve_ended(s))
      return;
    done = s.iterations;
    // The pause does not count its iteration, so done < max_iter here.
    paused = s.state == kNeedsLammBound;
    chunk = ctx.later_chunk;
  }
}

template void solve_lamm<float>(UpdateContext<float>&);
template void solve_lamm<double>(UpdateContext<double>&);

}  // namespace rh
