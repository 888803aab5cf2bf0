// X . beta for the committed state; device requests are answered in place in caller memory.
#include "api_guard.hpp"
#include "engine_error.hpp"
#include "engine_operations.hpp"
#include "kernels.hpp"
#include "memory_access.hpp"

namespace rh {

namespace {

template <class T>
void predict_typed(Engine& e, const RhCudaPrediction& req) {
  RowView<T> rows{static_cast<const T*>(req.x_design), nullptr, nullptr, req.n_rows,
                  req.n_columns, req.n_columns, e.P};
  if (req.input_location == RH_CUDA_MEMORY_DEVICE) {
    launch_predict<T>(rows, e.committed.coefficients.as<T>(), static_cast<T*>(req.prediction),
                      e.stream);
    e.synchronize();
    return;
  }
  const size_t x_bytes = static_cast<size_t>(req.n_rows * req.n_columns) * sizeof(T);
  const size_t out_bytes = static_cast<size_t>(req.n_rows) * sizeof(T);
  e.ws.x_stage.reserve(x_bytes, "staged prediction design");
  e.ws.prediction_stage.reserve(out_bytes, "prediction output");
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
