// X . beta for the committed state; device requests are answered in place in caller memory,
// host requests through a pinned buffer copied out once the device work has succeeded.
#include "api_guard.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "kernel_launch.cuh"
#include "kernels.hpp"
#include "memory_access.hpp"
#include "rh_common.h"

#include <cstring>

namespace rh {

namespace {

// One rule for both engines (rh_cuda.h): a design with NaN or Inf is refused, naming the first
// such value's row and column, before any output is written.
// `value` is the design's element at `index` (read back from device input by the caller).
[[noreturn]] void refuse_nonfinite(const RhCudaPrediction& req, int64_t index, double value) {
  refuse_value("RhCudaPrediction", "x_design", index / req.n_columns, index % req.n_columns, value,
               RH_VALUE_FINITE);
}

constexpr unsigned long long kAllFinite = ~0ull;

template <class T>
__global__ void first_nonfinite_kernel(const T* x, int64_t count, unsigned long long* first) {
  enter_stream_order();
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    if (!isfinite(x[i])) {
      // this thread's later indices are larger: the grid's least index wins
      atomicMin(first, static_cast<unsigned long long>(i));
      return;
    }
  }
}

// The device design's first non-finite index, found on the engine's stream (one pass over X,
// one 8-byte copy back) before the prediction kernel may write the caller's output.
template <class T>
void require_finite_device_design(Engine& e, const RhCudaPrediction& req) {
  const int64_t count = req.n_rows * req.n_columns;  // overflow-checked by the validation
  e.ws.bad_partials.reserve(sizeof(unsigned long long), "prediction finiteness check");
  auto* first = e.ws.bad_partials.as<unsigned long long>();
  check_cuda(cudaMemsetAsync(first, 0xff, sizeof *first, e.stream),
             "cudaMemsetAsync (prediction finiteness check)");
  constexpr int kThreads = 256;
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 1024 ? wanted : 1024);
  launch_kernel("first_nonfinite_kernel", first_nonfinite_kernel<T>, blocks, kThreads, e.stream,
                static_cast<const T*>(req.x_design), count, first);
  unsigned long long found = kAllFinite;
  check_cuda(cudaMemcpyAsync(&found, first, sizeof found, cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (prediction finiteness check)");
  e.synchronize();
  if (found != kAllFinite) {
    const auto at = static_cast<int64_t>(found);
    refuse_nonfinite(req, at, device_element(req.x_design, at, sizeof(T)));
  }
}

template <class T>
void require_finite_host_design(const RhCudaPrediction& req) {
  const int64_t count = req.n_rows * req.n_columns;
  const int64_t bad = sizeof(T) == sizeof(float)
                          ? rh_first_nonfinite_f32(static_cast<const float*>(req.x_design), count)
                          : rh_first_nonfinite_f64(static_cast<const double*>(req.x_design), count);
  if (bad >= 0) {
    refuse_nonfinite(req, bad, static_cast<double>(static_cast<const T*>(req.x_design)[bad]));
  }
}

// Pinned room for n bytes of host predictions, grown by at least half its size at a time so a
// growing series of requests pins memory a logarithmic number of times.
size_t host_prediction_capacity(const GrowingBuffer& b, size_t bytes) {
  constexpr size_t kMinPinned = size_t{64} << 10;
  if (bytes <= b.capacity())
    return bytes;
  size_t wanted = bytes > kMinPinned ? bytes : kMinPinned;
  const size_t grown = b.capacity() + b.capacity() / 2;
  return wanted > grown ? wanted : grown;
}

// The output contract (rh_cuda.h, docs/abi.md):
//  - host output: untouched by every failure. The predictions travel device -> pinned buffer,
//    the stream is waited for, and only then are they copied into the caller's array, a step
//    that cannot fail.
//  - device output: written in place by the prediction kernel, which is launched last. Every
//    failure before that launch leaves it untouched; a failure reported by the launch itself or
//    by the final wait may leave it partly written (its contents are then unspecified).
//    Staging it would not close that window (the copy into the caller's memory would be the
//    last step, with the same wait after it), so the engine does not pay for a second buffer.
//    Either way no work of a failed call is still running when it returns.
template <class T>
void predict_typed(Engine& e, const RhCudaPrediction& req) {
  RowView<T> rows{static_cast<const T*>(req.x_design),
                  nullptr,
                  nullptr,
                  req.n_rows,
                  req.n_columns,
                  req.n_columns,
                  e.P};
  if (req.input_location == RH_CUDA_MEMORY_DEVICE) {
    require_finite_device_design<T>(e, req);
    launch_predict<T>(rows, e.committed.coefficients.as<T>(), static_cast<T*>(req.prediction),
                      e.stream);
    e.synchronize();
    return;
  }
  const size_t x_bytes = static_cast<size_t>(req.n_rows * req.n_columns) * sizeof(T);
  const size_t out_bytes = static_cast<size_t>(req.n_rows) * sizeof(T);
  e.ws.x_stage.reserve(x_bytes, "staged prediction design");
  e.ws.prediction_stage.reserve(out_bytes, "prediction output");
  e.ws.host_predictions.reserve(host_prediction_capacity(e.ws.host_predictions, out_bytes),
                                "pinned prediction output");
  // After the staging buffers exist: a request too large to stage is refused without its
  // host rows being read.
  require_finite_host_design<T>(req);
  const HostRows from{req.x_design, nullptr,
                      nullptr,      static_cast<size_t>(req.n_columns) * sizeof(T),
                      sizeof(T),    req.n_rows};
  stage_rows_to_device(e, from, DeviceRows{e.ws.x_stage.data(), nullptr, nullptr}, 1,
                       [](int64_t, int64_t) {});
  rows.x = e.ws.x_stage.as<T>();
  launch_predict<T>(rows, e.committed.coefficients.as<T>(), e.ws.prediction_stage.as<T>(),
                    e.stream);
  check_cuda(cudaMemcpyAsync(e.ws.host_predictions.data(), e.ws.prediction_stage.data(), out_bytes,
                             cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (prediction)");
  e.synchronize();
  // Nothing can fail from here: the caller's array is written only by a call that succeeds.
  std::memcpy(req.prediction, e.ws.host_predictions.data(), out_bytes);
}

}  // namespace

void predict(Engine& e, const RhCudaPrediction* request) {
  RhErrorBuffer scratch{};
  int append_intercept = 0;
  require(rh_validate_prediction(request, e.P, e.elem_size, &append_intercept, &scratch), scratch);
  if (request->input_location == RH_CUDA_MEMORY_DEVICE) {
    require_device_memory(e, request->x_design, "RhCudaPrediction.x_design");
    require_device_memory(e, request->prediction, "RhCudaPrediction.prediction");
  }
  try {
    if (e.dtype == RH_CUDA_DTYPE_FLOAT32) {
      predict_typed<float>(e, *request);
    } else {
      predict_typed<double>(e, *request);
    }
  } catch (...) {
    // A failed call does not return while its work may still run: kernels reading the caller's
    // device design or writing its device output, a copy into the pinned output. The caller
    // may free or reuse its arrays as soon as the call returns.
    (void)cudaStreamSynchronize(e.stream);
    (void)cudaGetLastError();
    throw;
  }
}

}  // namespace rh
