// Damped Newton (penalty none). One iteration queues: solve, all 27 line-search trials in one
// pass over the rows, the device-side choice of t, the row pass and Gram at the new beta, and
// the next Cholesky attempt; then one status readback. With CUDA_GRAPHS that is one replay.
#include "engine_error.hpp"
#include "graph_replayer.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

template <class T>
void enqueue_step_and_next_attempt(UpdateContext<T>& ctx) {
  Engine& e = ctx.e;
  launch_matvec(ctx.information64(), e.ws.dir.as<double>(), e.ws.jdir.as<double>(), ctx.k.P,
                e.stream);
  launch_newton_trials<T>(ctx.rows, e.ws.residual.as<double>(), e.ws.dir.as<double>(), ctx.k.tau,
                          e.ws.trial_partials.as<double>(), e.stream);
  launch_newton_select(e.ws.trial_partials.as<double>(), row_blocks(ctx.rows.n, ctx.rows.ncols_x),
                       e.ws.dir.as<double>(), ctx.jdelta(), e.ws.jdir.as<double>(), ctx.beta0(),
                       ctx.k, ctx.device_scalars(), ctx.beta(), e.stream);
  ctx.row_pass(true, false, false);
  ctx.gradient(false);
  if (ctx.information_symmetric) enqueue_cholesky_attempt(ctx);
  ctx.enqueue_readback();
}

}  // namespace

template <class T>
void solve_newton(UpdateContext<T>& ctx) {
  ctx.row_pass(true, true, false);
  ctx.gradient(false);
  if (ctx.information_symmetric) enqueue_cholesky_attempt(ctx);
  ctx.enqueue_readback();
  ctx.wait_for_status();

  GraphReplayer cholesky_iteration(ctx.e);
  for (int64_t it = 0; it < ctx.max_iter; ++it) {
    if (ctx.status().state != kRunning) break;
    if (ctx.information_symmetric && ctx.status().factor_ok) {
      cholesky_iteration.run([&] {
        enqueue_cholesky_solve(ctx);
        enqueue_step_and_next_attempt(ctx);
      });
    } else {
      solve_without_cholesky(ctx);
      enqueue_step_and_next_attempt(ctx);
    }
    ctx.wait_for_status();
  }
}

template void solve_newton<float>(UpdateContext<float>&);
template void solve_newton<double>(UpdateContext<double>&);

}  // namespace rh
