// K += X' diag(w psi(r)^2) X for a batch whose solve ended: a pass over the rows writes
// sqrt(w) |psi(r)| x (r recomputed at the solution, so nothing depends on which trial point the
// solver evaluated last), cuBLAS forms the Gram as for J, and one kernel adds it to K in double.
#include "meat.hpp"

#include "engine_error.hpp"
#include "huber_math.cuh"
#include "kernels.hpp"

namespace rh {

namespace {

template <class T>
__global__ void meat_rows_kernel(RowView<T> rows, const double* beta, double tau, T* scaled) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows.n;
       i += stride) {
    const T* xi = rows.x + i * rows.ldx;
    double fit = rows.ncols_x < rows.P ? beta[rows.P - 1] : 0.0;
    for (int64_t j = 0; j < rows.ncols_x; ++j)
      fit += static_cast<double>(xi[j]) * beta[j];
    const double psi = huber_psi(static_cast<double>(rows.y[i]) - fit, tau);
    const double w = rows.w == nullptr ? 1.0 : static_cast<double>(rows.w[i]);
    const double root = sqrt(w) * fabs(psi);
    T* out = scaled + i * rows.P;
    for (int64_t j = 0; j < rows.ncols_x; ++j) {
      out[j] = static_cast<T>(root * static_cast<double>(xi[j]));
    }
    if (rows.ncols_x < rows.P)
      out[rows.P - 1] = static_cast<T>(root);
  }
}

// meat_out = meat + the mirrored upper triangle of gram (column-major, as cuBLAS wrote it).
template <class T>
__global__ void add_meat_kernel(const double* meat, const T* gram, int64_t P, double* meat_out,
                                int* nonfinite) {
  const int64_t total = P * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int bad = 0;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    const double value = meat[idx] + static_cast<double>(gram[mirrored_upper_index(idx, P)]);
    meat_out[idx] = value;
    if (!isfinite(value))
      bad = 1;
  }
  if (bad)
    atomicOr(nonfinite, 1);
}

int grid_for(int64_t count) {
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxElementwiseBlocks ? wanted : kMaxElementwiseBlocks);
}

}  // namespace

template <class T>
void accumulate_meat(Engine& e, const RowView<T>& rows, const double* beta, double tau) {
  T* scaled = e.ws.scaled_rows.as<T>();
  T* gram = e.ws.majoriser_gram.as<T>();
  meat_rows_kernel<T><<<grid_for(rows.n), kThreads, 0, e.stream>>>(rows, beta, tau, scaled);
  check_launch("meat_rows_kernel");
  gram_of_scaled_rows<T>(e, rows.P, rows.n, scaled, gram);
  int* flag = e.ws.commit_flags.as<int>();
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), e.stream), "cudaMemsetAsync (meat flag)");
  add_meat_kernel<T><<<grid_for(rows.P * rows.P), kThreads, 0, e.stream>>>(
      e.committed.meat.as<double>(), gram, rows.P, e.scratch.meat.as<double>(), flag);
  check_launch("add_meat_kernel");
  int nonfinite = 0;
  check_cuda(cudaMemcpyAsync(&nonfinite, flag, sizeof(int), cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (meat flag)");
  e.synchronize();
  if (nonfinite != 0) {
    fail(RH_CUDA_NUMERICAL_ERROR,
         "the batch made the meat matrix K non-finite (overflow); state unchanged");
  }
}

template void accumulate_meat<float>(Engine&, const RowView<float>&, const double*, double);
template void accumulate_meat<double>(Engine&, const RowView<double>&, const double*, double);

}  // namespace rh
