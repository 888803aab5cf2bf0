// LAMM proximal steps (penalty l1). The 40 attempts of an iteration come in two groups of four
// launches (solver_types.hpp, kLammFirstGroup); kernels after the accepted attempt, and every
// kernel of an iteration queued after the solve ended, return at once. So an iteration is a fixed launch
// sequence (one graph replay with CUDA_GRAPHS), and iterations are queued a chunk at a time
// with one synchronisation per chunk.
#include <algorithm>

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
  for (int first : {0, kLammFirstGroup}) {
    const int count = first == 0 ? kLammFirstGroup : kLammMaxGroup;
    launch_lamm_candidates(first, count, ctx.beta(), ctx.beta0(), ctx.grad(), ctx.k,
                           ctx.device_scalars(), e.ws.candidates.as<double>(),
                           e.ws.candidate_deltas.as<double>(), e.ws.trial_terms.as<double>(),
                           e.stream);
    launch_lamm_quadratic(ctx.information64(), e.ws.candidate_deltas.as<double>(), count,
                          ctx.k.P, ctx.device_scalars(), e.ws.candidate_jdeltas.as<double>(),
                          e.stream);
    launch_lamm_trials<T>(ctx.rows, e.ws.candidates.as<double>(), count, ctx.k.tau,
                          ctx.device_scalars(), e.ws.trial_partials.as<double>(), e.stream);
    launch_lamm_pick(count, first + count == kLammAttempts, e.ws.trial_partials.as<double>(),
                     blocks, e.ws.candidates.as<double>(), e.ws.candidate_deltas.as<double>(),
                     e.ws.candidate_jdeltas.as<double>(), e.ws.trial_terms.as<double>(), ctx.k,
                     ctx.device_scalars(), ctx.beta(), e.stream);
  }
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
  GraphReplayer iteration(ctx.e, kLammIterationGraph);
  for (;;) {
    const int64_t queued = std::min(chunk, ctx.max_iter - done);
    for (int64_t i = 0; i < queued; ++i) iteration.run([&] { enqueue_iteration(ctx); });
    // The Gram at the final beta for the finish; X'u is not needed. Queued after every chunk;
    // the row pass runs only in the chunk that ended the solve (cuBLAS's GEMM cannot skip: in
    // the others it sums stale rows that the finish, skipping too, never reads).
    ctx.row_pass(true, kRunWhenEnded, false);
    ctx.enqueue_finish();
    ctx.wait_for_status();
    const DeviceScalars& s = ctx.status();
    if (solve_ended(s)) return;
    done = s.iterations;
    chunk = ctx.later_chunk;
  }
}

template void solve_lamm<float>(UpdateContext<float>&);
template void solve_lamm<double>(UpdateContext<double>&);

}  // namespace rh
