// The meat matrix K of the sandwich covariance on the device (docs/algorithm.md, "Inference").
#pragma once

#include <cstdint>

#include "engine.hpp"
#include "solver_types.hpp"

namespace rh {

// The upper-triangle Gram A A' of n scaled rows (row-major n x P), as the solvers form theirs
// (update_context.cu).
template <class T>
void gram_of_scaled_rows(Engine& e, int64_t P, int64_t n, const T* scaled, T* out);

// After a batch's solve ended: scratch.meat = committed.meat + X' diag(w psi(r)^2) X with
// r = y - X beta (beta: the solution, device doubles), the batch's Gram formed in the engine
// dtype and added in double. Uses the scaled-row and majoriser-Gram workspaces, which the solve
// no longer needs. Synchronises; NUMERICAL_ERROR when K would not be finite.
template <class T>
void accumulate_meat(Engine& e, const RowView<T>& rows, const double* beta, double tau);

}  // namespace rh
