// The end of an update on the device: J_new = J + G, the coefficients rounded to the stored
// dtype, the penalised objective and the status block, written to the state (and, exporting,
// to pinned host memory).
#include <cmath>

#include "engine_error.hpp"
#include "kernel_launch.cuh"
#include "step_common.cuh"

namespace rh {

namespace {

// J_new = J + G (mirrored) into the scratch information and, when exporting, into the pinned
// host buffer (mapped: pinned memory is device-addressable under unified addressing); each block
// flags a non-finite value in block_flags[block]. Only once the solve has ended: the finish of a
// chunk that another chunk follows writes nothing but the status block.
template <class T>
__global__ void commit_information_kernel(const double* J, const T* gram, int64_t P,
                                          const DeviceScalars* sc, T* info_out, T* host_info,
                                          int* block_flags) {
  enter_stream_order();
  if (!solve_ended(*sc)) {
    if (threadIdx.x == 0)
      block_flags[blockIdx.x] = 0;
    return;
  }
  const int64_t total = P * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int bad = 0;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += stride) {
    const double added = static_cast<double>(gram[mirrored_upper_index(idx, P)]);
    const T value = static_cast<T>(J[idx] + added);
    info_out[idx] = value;
    if (host_info != nullptr)
      host_info[idx] = value;
    if (!isfinite(static_cast<double>(value)))
      bad = 1;
  }
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0)
    block_flags[blockIdx.x] = bad;
}

// The new coefficients (scratch state and, when exporting, the pinned host buffer), the
// penalised objective, commit_nonfinite from both kernels, and then the whole status block to
// the pinned host copy the host reads after its synchronisation: the last launch of a chunk.
template <class T>
__global__ void commit_coefficients_kernel(const double* beta, BatchConstants k,
                                           const int* block_flags, int flag_blocks,
                                           DeviceScalars* sc, T* coef_out, T* host_coef,
                                           DeviceScalars* host_status) {
  enter_stream_order();
  __shared__ double shared[kThreads];
  double l1 = 0.0;
  int bad = 0;
  const bool ended = solve_ended(*sc);
  for (int64_t j = threadIdx.x; ended && j < k.P; j += kThreads) {
    const T value = static_cast<T>(beta[j]);
    coef_out[j] = value;
    if (host_coef != nullptr)
      host_coef[j] = value;
    if (!isfinite(static_cast<double>(value)))
      bad = 1;
    l1 += fabs(beta[j]) * mask_of(k, j);
  }
  for (int b = threadIdx.x; b < flag_blocks; b += kThreads)
    bad |= block_flags[b];
  l1 = block_sum<kThreads>(l1, shared);
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0) {
    sc->penalised_objective = sc->objective + sc->lambda * l1;
    sc->commit_nonfinite = bad;
    *host_status = *sc;
    __threadfence_system();
  }
}

}  // namespace

template <class T>
void launch_commit(const double* J, const T* gram, const double* beta, const BatchConstants& k,
                   DeviceScalars* sc, T* info_out, T* coef_out, T* host_state, int* block_flags,
                   DeviceScalars* host_status, cudaStream_t s) {
  const int blocks = elementwise_blocks(k.P * k.P);
  launch_kernel("commit_information_kernel", commit_information_kernel<T>, blocks, kThreads, s, J,
                gram, k.P, sc, info_out, host_state != nullptr ? host_state + k.P : nullptr,
                block_flags);
  launch_kernel("commit_coefficients_kernel", commit_coefficients_kernel<T>, 1, kThreads, s, beta,
                k, block_flags, blocks, sc, coef_out, host_state, host_status);
}

#define RH_INSTANTIATE_COMMIT_KERNELS(T)                                                        \
  template void launch_commit<T>(const double*, const T*, const double*, const BatchConstants&, \
                                 DeviceScalars*, T*, T*, T*, int*, DeviceScalars*, cudaStream_t);

RH_INSTANTIATE_COMMIT_KERNELS(float)
RH_INSTANTIATE_COMMIT_KERNELS(double)

}  // namespace rh
