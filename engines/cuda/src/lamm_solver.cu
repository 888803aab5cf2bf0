// LAMM proximal steps (penalty l1). The 40 attempts of an iteration are evaluated 8 at a time,
// each group in one pass over the rows; kernels after the accepted attempt return at once, so
// an iteration is a fixed launch sequence, and kLammIterationsPerReplay of them one graph
// replay and one status readback.
#include "engine_error.hpp"
#include "graph_replayer.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

template <class T>
void enqueue_iteration(UpdateContext<T>& ctx) {
  Engine& e = ctx.e;
  const int blocks = row_blocks(ctx.rows.n, ctx.rows.ncols_x);
  for (int chunk = 0; chunk < kLammChunks; ++chunk) {
    launch_lamm_candidates(chunk, ctx.beta(), ctx.beta0(), ctx.grad(), ctx.k,
                           ctx.device_scalars(), e.ws.candidates.as<double>(),
                           e.ws.candidate_deltas.as<double>(), e.ws.trial_terms.as<double>(),
                           e.stream);
    launch_lamm_quadratic(ctx.information64(), e.ws.candidate_deltas.as<double>(), ctx.k.P,
                          ctx.device_scalars(), e.ws.candidate_jdeltas.as<double>(), e.stream);
    launch_lamm_trials<T>(ctx.rows, e.ws.candidates.as<double>(), ctx.k.tau,
                          ctx.device_scalars(), e.ws.trial_partials.as<double>(), e.stream);
    launch_lamm_pick(chunk, e.ws.trial_partials.as<double>(), blocks,
                     e.ws.candidates.as<double>(), e.ws.candidate_deltas.as<double>(),
                     e.ws.candidate_jdeltas.as<double>(), e.ws.trial_terms.as<double>(), ctx.k,
                     ctx.device_scalars(), ctx.beta(), e.stream);
  }
  ctx.row_pass(false, false, true);
  ctx.gradient(true);
}

}  // namespace

template <class T>
void solve_lamm(UpdateContext<T>& ctx) {
  ctx.row_pass(false, true, false);
  ctx.gradient(false);
  ctx.enqueue_readback();
  ctx.wait_for_status();

  // Several iterations per replay and status readback: once the state leaves kRunning the
  // remaining kernels of the replay return at once, so only cuBLAS's X'u reruns, unchanged.
  GraphReplayer several(ctx.e);
  GraphReplayer one(ctx.e);
  int64_t it = 0;
  while (it < ctx.max_iter && ctx.status().state == kRunning) {
    if (ctx.max_iter - it >= kLammIterationsPerReplay) {
      several.run([&] {
        for (int i = 0; i < kLammIterationsPerReplay; ++i) enqueue_iteration(ctx);
        ctx.enqueue_readback();
      });
      it += kLammIterationsPerReplay;
    } else {
      one.run([&] {
        enqueue_iteration(ctx);
        ctx.enqueue_readback();
      });
      it += 1;
    }
    ctx.wait_for_status();
  }
  ctx.row_pass(true, false, false);
}

template void solve_lamm<float>(UpdateContext<float>&);
template void solve_lamm<double>(UpdateContext<double>&);

}  // namespace rh
