// The two solvers of spec/ALGORITHM.md. Each starts from beta = beta0 (already on the device,
// with the information as doubles) and queues its iterations in chunks, each chunk followed by
// UpdateContext::enqueue_finish and one synchronisation, until the solve has ended (converged,
// stalled, non-finite) or max_iter iterations ran. On return the last finish holds the new state
// and the status block is final.
#pragma once

#include "update_context.hpp"

namespace rh {

template <class T>
void solve_newton(UpdateContext<T>& ctx);

template <class T>
void solve_lamm(UpdateContext<T>& ctx);

// Queues the Cholesky attempt on H(beta) (symmetric information only): assemble, factor, and
// the pivot test of docs/decisions.md into DeviceScalars.factor_ok; a refused factor moves the
// state to kNeedsFallback, so the rest of the chunk returns at once. For P <= kSmallDenseMax
// the same kernel also solves for dir and forms J dir.
template <class T>
void enqueue_cholesky_attempt(UpdateContext<T>& ctx);

// dir = H^-1 g. enqueue_cholesky_solve uses the factor from enqueue_cholesky_attempt;
// solve_without_cholesky (state kRunning) factors with LU with partial pivoting, then falls
// back to the minimum-norm SVD solve (one synchronisation to read the LU pivot test).
template <class T>
void enqueue_cholesky_solve(UpdateContext<T>& ctx);
template <class T>
void solve_without_cholesky(UpdateContext<T>& ctx);

}  // namespace rh
