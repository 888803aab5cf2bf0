// The two solvers of docs/algorithm.md ("Solvers"). Each starts from beta = beta0 (already on
// the device, with the information as doubles) and queues its iterations in chunks, each chunk
// followed by UpdateContext::enqueue_finish and one synchronisation, until the solve has ended
// (converged, stalled, non-finite) or max_iter iterations ran. An iteration that pauses in a
// needs_host state (solver_types.hpp) is finished by the host between two chunks. On return the
// last finish holds the new state and the status block is final.
#pragma once

#include "update_context.hpp"

namespace rh {

template <class T>
void solve_newton(UpdateContext<T>& ctx);

template <class T>
void solve_lamm(UpdateContext<T>& ctx);

// Queues the Cholesky attempt on (gram + J) / N + ridge I (symmetric information only; gram is
// the Gram at beta for H(beta), the majoriser's for M(beta)): assemble, factor, and the pivot
// test of docs/decisions.md into DeviceScalars.factor_ok, and on an accepted factor dir = H^-1 g
// (or M^-1 g); a refused factor moves the state to kNeedsFallback, so the rest of the chunk
// returns at once. For P <= Engine::small_dense_max one kernel does it all and also forms J dir.
// candidate (not null): also beta - dir there, for Newton's speculative step.
template <class T>
void enqueue_cholesky_attempt(UpdateContext<T>& ctx, const T* gram, double* candidate = nullptr);

// dir = H^-1 g (or M^-1 g) without Cholesky (state kRunning): assembles from gram and factors
// with LU with partial pivoting, then falls back to the minimum-norm SVD solve (one
// synchronisation to read the LU pivot test; the SVD sets UpdateContext::used_svd). Returns
// whether the SVD dropped singular values (dir then ignores g's part in those directions).
template <class T>
bool solve_without_cholesky(UpdateContext<T>& ctx, const T* gram);

}  // namespace rh
