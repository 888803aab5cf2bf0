// The two solvers of spec/ALGORITHM.md. Each starts from beta = beta0 (already on the device,
// with the information as doubles), runs its iterations, and leaves at the final beta the
// Gram X' diag(w c) X that the state transition adds to the information.
#pragma once

#include "update_context.hpp"

namespace rh {

template <class T>
void solve_newton(UpdateContext<T>& ctx);

template <class T>
void solve_lamm(UpdateContext<T>& ctx);

// Queues the Cholesky attempt on H(beta) (symmetric information only): assemble, factor, and
// the pivot test of docs/decisions.md into DeviceScalars.factor_ok.
template <class T>
void enqueue_cholesky_attempt(UpdateContext<T>& ctx);

// dir = H^-1 g. With cholesky_accepted the factor from enqueue_cholesky_attempt is used;
// otherwise LU with partial pivoting, then the minimum-norm SVD solve (one synchronisation
// each to read their pivot test).
template <class T>
void enqueue_cholesky_solve(UpdateContext<T>& ctx);
template <class T>
void solve_without_cholesky(UpdateContext<T>& ctx);

}  // namespace rh
