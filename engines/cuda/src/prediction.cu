// X . beta for the committed state; device requests are answered in place in caller memory.
#include "api_guard.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "kernels.hpp"
#include "memory_access.hpp"
#include "rh_common.h"

namespace rh {

namespace {

// One rule for both engines (rh_cuda.h): a design with NaN or Inf is refused, naming the first
// such value's row and column, before any output is written.
[[noreturn]] void refuse_nonfinite(const RhCudaPrediction& req, int64_t index) {
  fail(RH_CUDA_INVALID_ARGUMENT, "RhCudaPrediction.x_design[%lld, %lld] is not finite",
       static_cast<long long>(index / req.n_columns),
       static_cast<long long>(index % req.n_columns));
}

constexpr unsigned long long kAllFinite = ~0ull;

template <class T>
__global__ void first_nonfinite_kernel(const T* x, int64_t count, unsigned long long* first) {
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
  first_nonfinite_kernel<T><<<blocks, kThreads, 0, e.stream>>>(
      static_cast<const T*>(req.x_design), count, first);
  check_launch("first_nonfinite_kernel");
  unsigned long long found = kAllFinite;
  check_cuda(cudaMemcpyAsync(&found, first, sizeof found, cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (prediction finiteness check)");
  e.synchronize();
  if (found != kAllFinite) refuse_nonfinite(req, static_cast<int64_t>(found));
}

template <class T>
void require_finite_host_design(const RhCudaPrediction& req) {
  const int64_t count = req.n_rows * req.n_columns;
  const int64_t bad =
      sizeof(T) == sizeof(float)
          ? rh_first_nonfinite_f32(static_cast<const float*>(req.x_design), count)
          : rh_first_nonfinite_f64(static_cast<const double*>(req.x_design), count);
  if (bad >= 0) refuse_nonfinite(req, bad);
}

template <class T>
void predict_typed(Engine& e, const RhCudaPrediction& req) {
  RowView<T> rows{static_cast<const T*>(req.x_design), nullptr, nullptr, req.n_rows,
                  req.n_columns, req.n_columns, e.P};
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
  // After the staging buffers exist: a request too large to stage is refused without its
  // host rows being read.
  require_finite_host_design<T>(req);
  const HostRows from{req.x_design, nullptr, nullptr,
                      static_cast<size_t>(req.n_columns) * sizeof(T), sizeof(T), req.n_rows};
  stage_rows_to_device(e, from, DeviceRows{e.ws.x_stage.data(), nullptr, nullptr}, 1,
                       [](int64_t, int64_t) {});
  rows.x = e.ws.x_stage.as<T>();
  launch_predict<T>(rows, e.committed.coefficients.as<T>(), e.ws.prediction_stage.as<T>(),
                    e.stream);
  check_cuda(cudaMemcpyAsync(req.prediction, e.ws.prediction_stage.data(), out_bytes,
                             cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (prediction)");
  e.synchronize();
}

}  // namespace

void predict(Engine& e, const RhCudaPrediction* request) {
  RhErrorBuffer scratch{};
  int append_intercept = 0;
  require(rh_validate_prediction(request, e.P, e.elem_size, &append_intercept, &scratch),
          scratch);
  if (request->input_location == RH_CUDA_MEMORY_DEVICE) {
    require_device_memory(e, request->x_design, "RhCudaPrediction.x_design");
    require_device_memory(e, request->prediction, "RhCudaPrediction.prediction");
  }
  if (e.dtype == RH_CUDA_DTYPE_FLOAT32) {
    predict_typed<float>(e, *request);
  } else {
    predict_typed<double>(e, *request);
  }
}

}  // namespace rh
