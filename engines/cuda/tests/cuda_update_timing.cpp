// Per-batch update time of librh_cuda on the standard batch shapes (docs/benchmarks.md), host and
// device input, both dtypes and penalties, beside a plain cudaMemcpy of the same bytes from
// pageable memory. A measurement tool, not a test: it prints a table and asserts nothing.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace rhtest;

namespace {

struct Shape {
  const char* name;
  int64_t rows;
  int64_t p;
};

int max_iter_override = 0;  // > 0: every update stops after this many iterations

template <class T>
void time_shape(const Shape& s, int32_t dtype, uint64_t flags, int reps) {
  const int64_t P = s.p + 1;
  Batch<T> data = make_batch<T>(42, s.rows, s.p, true, false);
  const size_t xb = data.x.size() * sizeof(T), yb = data.y.size() * sizeof(T);
  T *dx = nullptr, *dy = nullptr;
  cudaMalloc(&dx, xb);
  cudaMalloc(&dy, yb);
  upload(dx, data.x.data(), xb);
  upload(dy, data.y.data(), yb);
  std::vector<double> copy_times;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_us();
    upload(dx, data.x.data(), xb);
    upload(dy, data.y.data(), yb);
    copy_times.push_back(now_us() - t0);
  }
  RhCudaEngineOptions o = options(dtype, P, flags);
  RhCudaEngine* e = nullptr;
  if (rh_cuda_engine_create(&o, &e) != RH_CUDA_SUCCESS) {
    std::printf("%s: create failed: %s\n", s.name, rh_cuda_last_error());
    return;
  }
  std::vector<T> zeros_coef(P, T(0)), zeros_info(P * P, T(0));
  RhCudaHostStateView empty = abi_struct<RhCudaHostStateView>();
  empty.coefficients = zeros_coef.data();
  empty.information = zeros_info.data();
  HostState<T> out(P);
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    RhCudaUpdateConfig c = config(s.p, penalty);
    c.tolerance = 1e-7;
    if (max_iter_override > 0)
      c.max_iter = max_iter_override;
    for (bool device : {false, true}) {
      RhCudaHostBatch hb = data.view();
      RhCudaDeviceBatch db{};
      std::memcpy(&db, &hb, sizeof db);
      db.x_design = dx;
      db.y = dy;
      std::vector<double> times;
      RhCudaDiagnostics d = diagnostics();
      RhCudaStatus st = RH_CUDA_SUCCESS;
      for (int r = 0; r < reps + 2 && st == RH_CUDA_SUCCESS; ++r) {
        rh_cuda_engine_restore(e, &empty);
        const double t0 = now_us();
        st = device ? rh_cuda_engine_update_device_with_state(e, &db, &c, &d, &out.view)
                    : rh_cuda_engine_update_host_with_state(e, &hb, &c, &d, &out.view);
        if (r >= 2)
          times.push_back(now_us() - t0);
      }
      if (st != RH_CUDA_SUCCESS) {
        std::printf("%-10s %s %-4s %-6s FAILED: %s\n", s.name,
                    dtype == RH_CUDA_DTYPE_FLOAT32 ? "f32" : "f64", penalty ? "l1" : "none",
                    device ? "device" : "host", rh_cuda_engine_last_error(e));
        continue;
      }
      std::printf(
          "%-10s %7lld x %-4lld %s %-4s %-6s %-6s update %9.1f us (min %9.1f)  it %3lld conv %d fb "
          "%d | pageable copy %9.1f us\n",
          s.name, static_cast<long long>(s.rows), static_cast<long long>(s.p),
          dtype == RH_CUDA_DTYPE_FLOAT32 ? "f32" : "f64", penalty ? "l1" : "none",
          device ? "device" : "host", flags & RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS ? "graph" : "eager",
          median(times), *std::min_element(times.begin(), times.end()),
          static_cast<long long>(d.iterations), d.converged, d.used_regularized_fallback,
          median(copy_times));
    }
  }
  rh_cuda_engine_destroy(e);
  cudaFree(dx);
  cudaFree(dy);
}

}  // namespace

// Usage: cuda_update_timing [REPS [SHAPE|all [eager|graph|both [f32|f64|both [MAX_ITER]]]]]
// MAX_ITER caps the solver's iterations (e.g. 1 to see the fixed cost of an update).
int main(int argc, char** argv) {
  skip_without_gpu("cuda_update_timing");
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const std::string only_shape = argc > 2 ? argv[2] : "all";
  const std::string mode = argc > 3 ? argv[3] : "both";
  const std::string dtypes = argc > 4 ? argv[4] : "both";
  max_iter_override = argc > 5 ? std::atoi(argv[5]) : 0;
  const Shape shapes[] = {{"latency", 4096, 16},
                          {"reference", 32768, 90},
                          {"wide", 4096, 256},
                          {"streaming", 65536, 32},
                          {"big", 1000000, 32}};
  for (const Shape& s : shapes) {
    if (only_shape != "all" && only_shape != s.name)
      continue;
    for (uint64_t flags : {uint64_t{0}, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS}) {
      const bool graph = flags != 0;
      if ((mode == "eager" && graph) || (mode == "graph" && !graph))
        continue;
      if (dtypes != "f64")
        time_shape<float>(s, RH_CUDA_DTYPE_FLOAT32, flags, reps);
      if (dtypes != "f32")
        time_shape<double>(s, RH_CUDA_DTYPE_FLOAT64, flags, reps);
    }
  }
  return 0;
}
