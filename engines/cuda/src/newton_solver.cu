// Damped Newton (penalty none). One iteration queues: the Cholesky attempt on H(beta) and the
// solve for the direction, all 27 line-search trials in one pass over the rows, the device-side
// choice of t, and the row pass and Gram at the new beta.
// Every kernel checks the state first, so iterations are queued a chunk at a time with one
// synchronisation per chunk; with CUDA_GRAPHS each iteration is one graph replay.
#include <algorithm>

#include "engine_error.hpp"
#include "graph_replayer.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

// The line search along dir and the row pass and Gram at the new beta. jdir_ready: the
// one-block Cholesky solve already formed J dir.
template <class T>
void enqueue_step(UpdateContext<T>& ctx, bool jdir_ready) {
  Engine& e = ctx.e;
  if (!jdir_ready) {
    launch_matvec(ctx.information64(), e.ws.dir.as<double>(), ctx.device_scalars(),
                  e.ws.jdir.as<double>(), ctx.k.P, e.stream);
  }
  launch_newton_trials<T>(ctx.rows, e.ws.residual.as<double>(), e.ws.dir.as<double>(), ctx.k.tau,
                          ctx.device_scalars(), e.ws.trial_partials.as<double>(), e.stream);
  launch_newton_select(e.ws.trial_partials.as<double>(), row_blocks(ctx.rows.n, ctx.rows.ncols_x),
                       e.ws.dir.as<double>(), ctx.jdelta(), e.ws.jdir.as<double>(), ctx.beta0(),
                       ctx.k, ctx.device_scalars(), ctx.beta(), e.stream);
  // The Gram at the final beta is needed even when this step ended the solve.
  ctx.row_pass(true, kRunWhileFresh);
  ctx.gradient(kRunWhileRunning);
}

// One iteration on the Cholesky path: the attempt on H(beta) comes first, so an iteration
// queued after the solve ended costs no factorisation where the kernels can skip it (the
// one-block solve), and one cuSOLVER potrf where they cannot.
template <class T>
void enqueue_cholesky_iteration(UpdateContext<T>& ctx) {
  enqueue_cholesky_attempt(ctx);
  enqueue_cholesky_solve(ctx);
  enqueue_step(ctx, ctx.small_dense());
}

}  // namespace

template <class T>
void solve_newton(UpdateContext<T>& ctx) {
  ctx.row_pass(true, kRunWhileRunning);
  ctx.gradient(kRunWhileRunning, true);

  // A wasted iteration costs launches that return at once, except cuBLAS's X'u and Gram and,
  // above kSmallDenseMax, cuSOLVER's potrf/potrs, which cannot (UpdateContext::later_chunk).
  int64_t chunk = ctx.first_chunk;
  bool host_solve = !ctx.information_symmetric;  // LU / SVD, decided on the host
  int64_t done = 0;
  GraphReplayer cholesky_iteration(ctx.e, kNewtonIterationGraph);
  for (;;) {
    if (host_solve && done < ctx.max_iter) {
      launch_resume(ctx.device_scalars(), ctx.e.stream);
      solve_without_cholesky(ctx);
      enqueue_step(ctx, false);
    } else {
      const int64_t queued = std::min(chunk, ctx.max_iter - done);
      for (int64_t i = 0; i < queued; ++i) {
        cholesky_iteration.run([&] { enqueue_cholesky_iteration(ctx); });
      }
    }
    ctx.enqueue_finish();
    ctx.wait_for_status();
    const DeviceScalars& s = ctx.status();
    if (solve_ended(s)) return;
    done = s.iterations;
    // A refused attempt stopped its iteration before the step: that iteration is solved on the
    // host (LU, then SVD), and the Cholesky path resumes with the next one.
    host_solve = !ctx.information_symmetric || s.state == kNeedsFallback;
    chunk = ctx.later_chunk;
  }
}

template void solve_newton<float>(UpdateContext<float>&);
template void solve_newton<double>(UpdateContext<double>&);

}  // namespace rh
