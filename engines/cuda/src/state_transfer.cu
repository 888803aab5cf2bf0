// Restoring and exporting the committed state. A restore is checked completely on the host,
// uploaded into the scratch buffers and swapped in only after the copy finished.
#include <cstring>

#include "api_guard.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"

namespace rh {

namespace {

template <class T>
bool bitwise_symmetric(const T* a, int64_t P) {
  for (int64_t r = 0; r < P; ++r) {
    for (int64_t c = r + 1; c < P; ++c) {
      if (std::memcmp(&a[r * P + c], &a[c * P + r], sizeof(T)) != 0)
        return false;
    }
  }
  return true;
}

}  // namespace

void restore_state(Engine& e, const RhCudaHostStateView* view) {
  RhErrorBuffer scratch{};
  require(rh_validate_state_view(view, &scratch), scratch);
  const int64_t P = e.P;
  const int64_t bad_coef = rh_first_nonfinite(e.dtype, view->coefficients, P);
  if (bad_coef >= 0) {
    refuse_value("RhCudaHostStateView", "coefficients", bad_coef, -1,
                 rh_value_at(e.dtype, view->coefficients, bad_coef), RH_VALUE_FINITE);
  }
  const int64_t bad_info = rh_first_nonfinite(e.dtype, view->information, P * P);
  if (bad_info >= 0) {
    refuse_value("RhCudaHostStateView", "information", bad_info / P, bad_info % P,
                 rh_value_at(e.dtype, view->information, bad_info), RH_VALUE_FINITE);
  }
  int with_meat = 0;
  require(rh_validate_state_meat(view, P, &with_meat, &scratch), scratch);
  const bool symmetric = e.dtype == RH_CUDA_DTYPE_FLOAT32
                             ? bitwise_symmetric(static_cast<const float*>(view->information), P)
                             : bitwise_symmetric(static_cast<const double*>(view->information), P);
  check_cuda(cudaMemcpyAsync(e.scratch.coefficients.data(), view->coefficients, P * e.elem_size,
                             cudaMemcpyHostToDevice, e.stream),
             "cudaMemcpyAsync (restore coefficients)");
  check_cuda(cudaMemcpyAsync(e.scratch.information.data(), view->information, P * P * e.elem_size,
                             cudaMemcpyHostToDevice, e.stream),
             "cudaMemcpyAsync (restore information)");
  if (with_meat) {
    check_cuda(cudaMemcpyAsync(e.scratch.meat.data(), view->meat, P * P * sizeof(double),
                               cudaMemcpyHostToDevice, e.stream),
               "cudaMemcpyAsync (restore meat)");
  }
  e.synchronize();
  if (with_meat)
    e.committed.meat.swap(e.scratch.meat);
  e.committed.meat_available = with_meat != 0;
  e.committed.coefficients.swap(e.scratch.coefficients);
  e.committed.information.swap(e.scratch.information);
  e.committed.n_samples_seen = view->n_samples_seen;
  e.committed.batch_count = view->batch_count;
  e.committed.previous_lambda = view->previous_lambda;
  e.committed.weight_sum = view->weight_sum;
  e.committed.information_symmetric = symmetric;
}

void copy_state(Engine& e, RhCudaHostState* out) {
  RhErrorBuffer scratch{};
  require(rh_validate_state_out(out, &scratch), scratch);
  const int64_t P = e.P;
  char* pinned = e.ws.host_state.as<char>();
  check_cuda(cudaMemcpyAsync(pinned, e.committed.coefficients.data(), P * e.elem_size,
                             cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (coefficients)");
  check_cuda(cudaMemcpyAsync(pinned + P * e.elem_size, e.committed.information.data(),
                             P * P * e.elem_size, cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (information)");
  const bool export_meat =
      rh_state_out_has_meat(out) && out->meat != nullptr && e.committed.meat_available;
  if (export_meat) {
    check_cuda(cudaMemcpyAsync(out->meat, e.committed.meat.data(), P * P * sizeof(double),
                               cudaMemcpyDeviceToHost, e.stream),
               "cudaMemcpyAsync (meat)");
  }
  e.synchronize();
  if (rh_state_out_has_meat(out)) {
    out->meat_available = e.committed.meat_available ? 1 : 0;
    out->reserved1 = 0;
  }
  std::memcpy(out->coefficients, pinned, P * e.elem_size);
  std::memcpy(out->information, pinned + P * e.elem_size, P * P * e.elem_size);
  out->n_samples_seen = e.committed.n_samples_seen;
  out->batch_count = e.committed.batch_count;
  out->previous_lambda = e.committed.previous_lambda;
  out->weight_sum = e.committed.weight_sum;
}

}  // namespace rh
