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

// After a batch's solve ended: scratch.meat = committed.meat + X' diag(w psi(r)^2) X at the
// solution, the batch's Gram formed in the engine dtype and added in double. K's scaled rows
// come from the solver's row pass at the final beta when it wrote them (rows_written, i.e.
// DeviceScalars.meat_rows_final), else from one pass over the rows with the residuals that pass
// stored at the same beta. Uses the majoriser-Gram workspace, which the solve no longer needs.
// export_meat: the new K also lands in ws.host_meat (pinned; P x P doubles, then the flag) for
// the caller's state. One synchronisation; NUMERICAL_ERROR when K would not be finite.
template <class T>
void accumulate_meat(Engine& e, const RowView<T>& rows, const double* residual, double tau,
                     bool rows_written, bool export_meat);

}  // namespace rh
