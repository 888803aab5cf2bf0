// Restoring and exporting the committed state. A restore is checked completely on the host,
// uploaded into the scratch buffers (an all-zero array by a device memset) and swapped in only
// after the upload is ordered before any later use.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "api_guard.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "memory_access.hpp"

namespace rh {

namespace {

// Whether a[r][c] and a[c][r] have the same bits for every pair, compared in square tiles so
// both sides of a pair are read from a few cache lines (a row against a column of a large P x P
// array would touch a new page per element).
template <class T>
bool bitwise_symmetric(const T* a, int64_t P) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < P; r0 += kTile) {
    const int64_t r1 = std::min(P, r0 + kTile);
    for (int64_t c0 = r0; c0 < P; c0 += kTile) {
      const int64_t c1 = std::min(P, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = std::max(c0, r + 1); c < c1; ++c) {
          if (std::memcmp(&a[r * P + c], &a[c * P + r], sizeof(T)) != 0)
            return false;
        }
      }
    }
  }
  return true;
}

// A restored array into its scratch buffer: zeros by a device memset when every byte of it is
// zero (the empty state every new stream restores: no pageable copy of P x P zeros), else
// copied from the caller's memory.
void upload(void* device, const void* host, size_t bytes, bool zero, cudaStream_t stream,
            const char* what) {
  const cudaError_t rc = zero
                             ? cudaMemsetAsync(device, 0, bytes, stream)
                             : cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream);
  char call[64];
  std::snprintf(call, sizeof call, "%s (restore %s)", zero ? "cudaMemsetAsync" : "cudaMemcpyAsync",
                what);
  check_cuda(rc, call);
}

}  // namespace

void restore_state(Engine& e, const RhCudaHostStateView* view) {
  RhErrorBuffer scratch{};
  require(rh_validate_state_view(view, e.elem_size, &scratch), scratch);
  const int64_t P = e.P;
  const size_t coef_bytes = static_cast<size_t>(P) * e.elem_size;
  const size_t info_bytes = static_cast<size_t>(P * P) * e.elem_size;
  // All-zero arrays are finite and symmetric: their scans are skipped.
  const bool zero_coef = rh_all_bytes_zero(view->coefficients, coef_bytes) != 0;
  const bool zero_info = rh_all_bytes_zero(view->information, info_bytes) != 0;
  const int64_t bad_coef = zero_coef ? -1 : rh_first_nonfinite(e.dtype, view->coefficients, P);
  if (bad_coef >= 0) {
    refuse_value("RhCudaHostStateView", "coefficients", bad_coef, -1,
                 rh_value_at(e.dtype, view->coefficients, bad_coef), RH_VALUE_FINITE);
  }
  const int64_t bad_info = zero_info ? -1 : rh_first_nonfinite(e.dtype, view->information, P * P);
  if (bad_info >= 0) {
    refuse_value("RhCudaHostStateView", "information", bad_info / P, bad_info % P,
                 rh_value_at(e.dtype, view->information, bad_info), RH_VALUE_FINITE);
  }
  int with_meat = 0;
  require(rh_validate_state_meat(view, P, &with_meat, &scratch), scratch);
  const bool symmetric =
      zero_info || (e.dtype == RH_CUDA_DTYPE_FLOAT32
                        ? bitwise_symmetric(static_cast<const float*>(view->information), P)
                        : bitwise_symmetric(static_cast<const double*>(view->information), P));
  upload(e.scratch.coefficients.data(), view->coefficients, coef_bytes, zero_coef, e.stream,
         "coefficients");
  upload(e.scratch.information.data(), view->information, info_bytes, zero_info, e.stream,
         "information");
  bool copied = !zero_coef || !zero_info;
  if (with_meat) {
    const size_t meat_bytes = static_cast<size_t>(P * P) * sizeof(double);
    const bool zero_meat = rh_all_bytes_zero(view->meat, meat_bytes) != 0;
    upload(e.scratch.meat.data(), view->meat, meat_bytes, zero_meat, e.stream, "meat");
    copied = copied || !zero_meat;
  }
  // A copy from the caller's memory must be done before the call returns (the arrays are
  // borrowed for the call) and before the swap; memsets alone are ordered before every later
  // use of the buffers by the stream.
  if (copied)
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
  e.committed.information_zero =
      zero_info || rh_all_values_zero(e.dtype, view->information, P * P) != 0;
}

void copy_state(Engine& e, RhCudaHostState* out) {
  RhErrorBuffer scratch{};
  require(rh_validate_state_out(out, e.elem_size, &scratch), scratch);
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
  expect_export(e, export_meat);
  e.synchronize();
  if (rh_state_out_has_meat(out)) {
    out->meat_available = e.committed.meat_available ? 1 : 0;
    out->reserved1 = 0;
  }
  std::memcpy(out->coefficients, pinned, P * e.elem_size);
  copy_export(e, out->information, pinned + P * e.elem_size, P * P * e.elem_size);
  out->n_samples_seen = e.committed.n_samples_seen;
  out->batch_count = e.committed.batch_count;
  out->previous_lambda = e.committed.previous_lambda;
  out->weight_sum = e.committed.weight_sum;
}

}  // namespace rh
