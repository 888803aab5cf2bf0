// K += X' diag(w psi(r)^2) X for a batch whose solve ended. The solver's row pass at the final
// beta writes K's scaled rows sqrt(w) |psi(r)| x beside the Hessian's (row_kernels.cu) when it
// knows the solve has ended there; when the solve ended without moving beta (every trial
// rejected), the rows come from the residuals that row pass stored, in one pass here. cuBLAS
// forms the Gram as for J, and one kernel adds it to K in double.
#include "kernel_launch.cuh"
#include "meat.hpp"

#include "engine_error.hpp"
#include "huber_math.cuh"
#include "kernels.hpp"
#include "step_common.cuh"

namespace rh {

namespace {

// meat_out = meat + the mirrored upper triangle of gram (column-major, as cuBLAS wrote it), also
// into host_copy (pinned host memory; nullptr: no copy). Any non-finite value sets *nonfinite
// (pinned host memory; plain stores of the same value, no atomics across the bus).
template <class T>
__global__ void add_meat_kernel(const double* meat, const T* gram, int64_t P, double* meat_out,
                                double* host_copy, int* nonfinite) {
  enter_stream_order();
  const int64_t total = P * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int bad = 0;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    const double value = meat[idx] + static_cast<double>(gram[mirrored_upper_index(idx, P)]);
    meat_out[idx] = value;
    if (host_copy != nullptr)
      host_copy[idx] = value;
    if (!isfinite(value))
      bad = 1;
  }
  if (bad)
    *nonfinite = 1;
}

}  // namespace

template <class T>
void accumulate_meat(Engine& e, const RowView<T>& rows, const double* residual, double tau,
                     bool rows_written, bool export_meat) {
  T* scaled = e.ws.meat_rows.as<T>();
  T* gram = e.ws.majoriser_gram.as<T>();
  if (!rows_written || e.separate_meat_pass) {
    launch_meat_rows<T>(rows, residual, tau, scaled, e.stream);
  }
  gram_of_scaled_rows<T>(e, rows.P, rows.n, scaled, gram);
  // The stream is idle (the solve's last synchronisation), so the host may reset the flag.
  double* host = e.ws.host_meat.as<double>();
  int* flag = reinterpret_cast<int*>(host + rows.P * rows.P);
  *flag = 0;
  launch_kernel("add_meat_kernel", add_meat_kernel<T>, elementwise_blocks(rows.P * rows.P),
                kThreads, e.stream, e.committed.meat.as<double>(), gram, rows.P,
                e.scratch.meat.as<double>(), export_meat ? host : nullptr, flag);
  e.synchronize();
  if (*flag != 0) {
    fail(RH_CUDA_NUMERICAL_ERROR,
         "the batch made the meat matrix K non-finite (overflow); state unchanged");
  }
}

template void accumulate_meat<float>(Engine&, const RowView<float>&, const double*, double, bool,
                                     bool);
template void accumulate_meat<double>(Engine&, const RowView<double>&, const double*, double, bool,
                                      bool);

}  // namespace rh
