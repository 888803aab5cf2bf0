// Damped Newton (penalty none). One iteration queues: the solve (for P <= kSmallDenseMax the
// previous attempt already solved), all 27 line-search trials in one pass over the rows, the
// device-side choice of t, the row pass and Gram at the new beta, and the next Cholesky attempt.
// Every kernel checks the state first, so iterations are queued a chunk at a time with one
// synchronisation per chunk; with CUDA_GRAPHS each iteration is one graph replay.
#include <algorithm>

#include "engine_error.hpp"
#include "graph_replayer.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

// jdir_ready: the one-block Cholesky solve already formed J dir.
template <class T>
void enqueue_step_and_next_attempt(UpdateContext<T>& ctx, bool jdir_ready) {
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
  ctx.row_pass(true, false, kRunWhileFresh);
  ctx.gradient(kRunWhileRunning);
  if (ctx.information_symmetric) enqueue_cholesky_attempt(ctx);
}

}  // namespace

template <class T>
void solve_newton(UpdateContext<T>& ctx) {
  ctx.row_pass(true, true, kRunWhileRunning);
  ctx.gradient(kRunWhileRunning);
  if (ctx.information_symmetric) enqueue_cholesky_attempt(ctx);

  // A wasted iteration costs launches that return at once, except cuBLAS's X'u and Gram and,
  // above kSmallDenseMax, cuSOLVER's potrf/potrs, which cannot (UpdateContext::later_chunk).
  int64_t chunk = ctx.first_chunk;
  bool host_solve = !ctx.information_symmetric;  // LU / SVD, decided on the host
  int64_t done = 0;
  GraphReplayer cholesky_iteration(ctx.e);
  for (;;) {
    if (host_solve && done < ctx.max_iter) {
      launch_resume(ctx.device_scalars(), ctx.e.stream);
      solve_without_cholesky(ctx);
      enqueue_step_and_next_attempt(ctx, false);
    } else {
      const int64_t queued = std::min(chunk, ctx.max_iter - done);
      for (int64_t i = 0; i < queued; ++i) {
        cholesky_iteration.run([&] {
          enqueue_cholesky_solve(ctx);
          enqueue_step_and_next_attempt(ctx, ctx.small_dense());
        });
      }
    }
    ctx.enqueue_finish();
    ctx.wait_for_status();
    const DeviceScalars& s = ctx.status();
    done = s.iterations;
    if (done >= ctx.max_iter || (s.state != kRunning && s.state != kNeedsFallback)) return;
    host_solve = !ctx.information_symmetric || s.state == kNeedsFallback;
    chunk = ctx.later_chunk;
  }
}

template void solve_newton<float>(UpdateContext<float>&);
template void solve_newton<double>(UpdateContext<double>&);

}  // namespace rh
