// Damped Newton (penalty none) with the majoriser fallback of docs/algorithm.md
// ("Unpenalised"). One iteration queues: the Cholesky attempt on H(beta) and the solve for the
// direction, all 27 line-search trials in one pass over the rows, the device-side choice of t,
// and the row pass and Gram at the new beta. Speculative iterations (from a fitted beta0, until
// the solve's first pause: UpdateContext::speculative_newton) queue the attempt, the row pass
// and Gram at beta - dir and the verdict on that whole step: one pass over the rows per
// iteration where the step is accepted.
// Every kernel checks the state first, so iterations are queued a chunk at a time with one
// synchronisation per chunk; with CUDA_GRAPHS each iteration is one graph replay. The rare
// remainders of an iteration (a refused Cholesky attempt, 27 rejected trials) pause the state
// on the device and are queued by the host between chunks, so the iteration that accepts the
// Newton step costs nothing for them beyond the kernels' state checks.
#include <algorithm>

#include "engine_error.hpp"
#include "graph_replayer.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

// The line search along dir and the row pass and Gram at the new beta. jdir_ready: the
// one-block Cholesky solve already formed J dir. direction: what dir is (StepDirection); the
// majoriser's rejection ends the solve, a Newton direction's pauses the iteration in
// kNeedsMajoriser.
template <class T>
void enqueue_step(UpdateContext<T>& ctx, bool jdir_ready, StepDirection direction) {
  Engine& e = ctx.e;
  if (!jdir_ready) {
    launch_matvec(ctx.information64(), e.ws.dir.as<double>(), ctx.device_scalars(),
                  e.ws.jdir.as<double>(), ctx.k.P, e.stream);
  }
  launch_newton_trials<T>(ctx.rows, e.ws.residual.as<double>(), e.ws.dir.as<double>(), ctx.k.tau,
                          ctx.device_scalars(), e.ws.trial_partials.as<double>(), e.stream);
  launch_newton_select(e.ws.trial_partials.as<double>(), row_blocks(ctx.rows.n, ctx.rows.ncols_x),
                       e.ws.dir.as<double>(), ctx.jdelta(), e.ws.jdir.as<double>(), ctx.beta0(),
                       ctx.grad(), direction, ctx.k, ctx.device_scalars(), ctx.beta(), e.stream);
  // The Gram at the final beta is needed even when this step ended the solve, and the gradient
  // at the new beta when the step paused for its confirmation (rule 5: d_M = M^-1 g there).
  ctx.row_pass_then_gradient(kRunWhileFresh, kRunWhileConfirming, false);
}

// One iteration on the Cholesky path: the attempt on H(beta) comes first, so an iteration
// queued after the solve ended costs no factorisation where the kernels can skip it (the
// one-block solve), and one cuSOLVER potrf where they cannot.
template <class T>
void enqueue_cholesky_iteration(UpdateContext<T>& ctx) {
  enqueue_cholesky_attempt(ctx, ctx.gram());
  enqueue_step(ctx, ctx.small_dense(), kNewtonDirection);
}

// The same iteration with the speculative whole step (UpdateContext::speculative_newton): the
// attempt also forms the candidate beta - dir, the row pass, Gram and gradient run there, and
// the step's verdict (NewtonAccept, in the gradient's launch) keeps them when f did not
// increase, which is the line search's first trial; the 27-trial pass and its pick are then not
// needed. A rejected candidate pauses the iteration in kNeedsLineSearch.
template <class T>
void enqueue_speculative_iteration(UpdateContext<T>& ctx) {
  Engine& e = ctx.e;
  double* candidate = e.ws.candidates.as<double>();
  enqueue_cholesky_attempt(ctx, ctx.gram(), candidate);
  NewtonAccept accept;
  accept.dir = e.ws.dir.as<double>();
  accept.beta = ctx.beta();
  ctx.row_pass_then_gradient(kRunWhileRunning, kRunWhileRunning, false, candidate, accept);
}

// The rest of an iteration paused in kNeedsLineSearch (beta, dir and jdir unchanged; the
// residuals, Gram, g and J delta the candidate's): the row pass at beta again, which gives back
// their values there bit for bit, then the line search along dir as without speculation. The
// incremental Gram's pass at beta flags the rows whose weight the candidate changed; they are
// added before the step's own pass flags again: on the device right after that pass, or by the
// host after one synchronisation more (on this path only).
template <class T>
void enqueue_line_search_iteration(UpdateContext<T>& ctx) {
  launch_resume(ctx.device_scalars(), ctx.e.stream);
  ctx.row_pass_then_gradient(kRunWhileRunning, kRunWhileRunning, false);
  if (ctx.incremental_gram && !ctx.device_gram_flips) {
    ctx.enqueue_readback();
    ctx.wait_for_status();
    ctx.apply_gram_flips();
  }
  enqueue_step(ctx, ctx.small_dense(), kNewtonDirection);
}

// The rest of an iteration paused in kNeedsMajoriser (beta, its residuals, g and F unchanged):
// the majoriser's Gram at beta, the direction M^-1 g from the same ladder, and the same line
// search along it; or, after a step along a truncated Newton direction that would have ended
// the solve (DeviceScalars.confirming), the same direction at the new beta for its confirmation.
// Cholesky's verdict is read back before the step (one synchronisation, on a path that runs only
// far from the optimum), so a refusal goes on to LU / SVD at once.
template <class T>
void enqueue_majoriser_iteration(UpdateContext<T>& ctx) {
  launch_resume(ctx.device_scalars(), ctx.e.stream);
  ctx.majoriser_gram_pass();
  bool jdir_ready = false;
  if (ctx.information_symmetric) {
    enqueue_cholesky_attempt(ctx, ctx.majoriser_gram());
    ctx.enqueue_readback();
    ctx.wait_for_status();
    if (ctx.status().state == kNeedsFallback) {
      launch_resume(ctx.device_scalars(), ctx.e.stream);
      solve_without_cholesky(ctx, ctx.majoriser_gram());
    } else {
      jdir_ready = ctx.small_dense();  // the attempt solved for dir
    }
  } else {
    solve_without_cholesky(ctx, ctx.majoriser_gram());
  }
  enqueue_step(ctx, jdir_ready, kMajoriserDirection);
}

}  // namespace

template <class T>
void solve_newton(UpdateContext<T>& ctx) {
  ctx.row_pass_then_gradient(kRunWhileRunning, kRunWhileRunning, true);

  // A wasted iteration costs launches that return at once, except cuBLAS's X'u (wide rows), its
  // Gram (beyond UpdateContext::fused_gram) and, above Engine::cluster_cholesky.max_p, cuSOLVER's
  // potrf, which cannot (UpdateContext::later_chunk).
  int64_t chunk = ctx.first_chunk;
  int paused = kRunning;  // the needs_host state the last chunk ended in, if any
  int64_t done = 0;
  // Speculation lasts until the first pause: its F is the objective the last accepted whole
  // step left, which the other paths' steps do not keep, and a solve that needed the line
  // search or a fallback once is far enough from the optimum to need them again.
  bool speculate = ctx.speculative_newton();
  GraphReplayer cholesky_iteration(ctx.e, kNewtonIterationGraph);
  GraphReplayer speculative_iteration(ctx.e, kNewtonSpeculativeGraph);
  for (;;) {
    if (paused != kRunning)
      speculate = false;
    if (paused == kNeedsMajoriser) {
      enqueue_majoriser_iteration(ctx);
    } else if (paused == kNeedsLineSearch) {
      enqueue_line_search_iteration(ctx);
    } else if (paused == kNeedsFallback || !ctx.information_symmetric) {
      // LU / SVD, decided on the host: a refused Cholesky attempt, or asymmetric information.
      launch_resume(ctx.device_scalars(), ctx.e.stream);
      const bool truncated = solve_without_cholesky(ctx, ctx.gram());
      enqueue_step(ctx, false, truncated ? kTruncatedNewtonDirection : kNewtonDirection);
    } else {
      const int64_t queued = std::min(chunk, ctx.max_iter - done);
      for (int64_t i = 0; i < queued; ++i) {
        if (speculate)
          speculative_iteration.run([&] { enqueue_speculative_iteration(ctx); });
        else
          cholesky_iteration.run([&] { enqueue_cholesky_iteration(ctx); });
      }
    }
    ctx.enqueue_finish();
    ctx.wait_for_status();
    const DeviceScalars& s = ctx.status();
    // The chunk's last row pass may have left its Gram to the host: add it before the next
    // Cholesky attempt, or commit again with it (the commit kernels only write).
    if (ctx.apply_gram_flips() && solve_ended(s)) {
      ctx.enqueue_finish();
      ctx.wait_for_status();
      return;
    }
    if (solve_ended(s))
      return;
    done = s.iterations;
    // A paused iteration is finished on the host before the Cholesky path resumes with the
    // next one; the pause does not count the iteration, so done < max_iter here.
    paused = s.state;
    chunk = ctx.later_chunk;
  }
}

template void solve_newton<float>(UpdateContext<float>&);
template void solve_newton<double>(UpdateContext<double>&);

}  // namespace rh
