// Engine lifecycle and host-staging costs of librh_cuda. A measurement tool, not a test: it
// prints tables and asserts nothing (a failing call is printed and its row skipped).
//
//   cuda_lifecycle_timing [REPS [all|lifecycle|staging]]
//
// lifecycle: the latency shape (4,096 x 16, both dtypes, penalty none, host input) as the
//   benchmarks' cold case runs it: median of create + update + destroy, then create alone and
//   destroy alone (the engine comes from / goes to the resource pool), the steady update on a
//   primed engine, and create/destroy when the pool has no idle set / is full (7 engines alive).
// staging: host-input vs device-input update time for 65,536 x 32, 32,768 x 90 and
//   1,000,000 x 32 float64 with RH_CUDA_STAGING=plain and =pinned at 1, 4, 8, 12 and 16 threads
//   and the default thread count (the tool
//   sets the variables itself before creating each engine), beside a plain pageable cudaMemcpy
//   of the same bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace rhtest;

namespace {

const char* dtype_name(int32_t dtype) {
  return dtype == RH_CUDA_DTYPE_FLOAT32 ? "f32" : "f64";
}

template <class T>
struct Prepared {
  Batch<T> data;
  RhCudaHostBatch view;
  RhCudaUpdateConfig cfg;
  int64_t P;
  Prepared(int64_t rows, int64_t p, int32_t penalty)
      : data(make_batch<T>(42, rows, p, true, false)), P(p + 1) {
    view = data.view();
    cfg = config(p, penalty);
    cfg.tolerance = 1e-7;
  }
};

// Restores the empty state (outside the timers), so every timed update is a first batch.
template <class T>
struct EmptyState {
  std::vector<T> coef, info;
  RhCudaHostStateView view{};
  explicit EmptyState(int64_t P) : coef(P, T(0)), info(P * P, T(0)) {
    view.abi_version = RH_CUDA_ABI_VERSION;
    view.struct_size = sizeof view;
    view.coefficients = coef.data();
    view.information = info.data();
  }
};

template <class T>
void lifecycle(int32_t dtype, int reps) {
  Prepared<T> in(4096, 16, RH_CUDA_PENALTY_NONE);
  RhCudaEngineOptions o = options(dtype, in.P);
  HostState<T> out(in.P);
  std::vector<double> cycle, cycle_create, cycle_update, cycle_destroy, create_only, destroy_only,
      steady;
  bool ok = true;
  for (int r = 0; r < reps + 3 && ok; ++r) {
    RhCudaEngine* e = nullptr;
    RhCudaDiagnostics d = diagnostics();
    const double t0 = now_us();
    ok = rh_cuda_engine_create(&o, &e) == RH_CUDA_SUCCESS;
    const double t1 = now_us();
    ok = ok && rh_cuda_engine_update_host_with_state(e, &in.view, &in.cfg, &d, &out.view) ==
                   RH_CUDA_SUCCESS;
    const double t2 = now_us();
    if (!ok)
      std::printf("  %s lifecycle failed: %s\n", dtype_name(dtype),
                  e ? rh_cuda_engine_last_error(e) : rh_cuda_last_error());
    rh_cuda_engine_destroy(e);
    const double t3 = now_us();
    if (r >= 3) {
      cycle.push_back(t3 - t0);
      cycle_create.push_back(t1 - t0);
      cycle_update.push_back(t2 - t1);
      cycle_destroy.push_back(t3 - t2);
    }
  }
  for (int r = 0; r < reps + 3 && ok; ++r) {
    RhCudaEngine* e = nullptr;
    const double t0 = now_us();
    ok = rh_cuda_engine_create(&o, &e) == RH_CUDA_SUCCESS;
    const double t1 = now_us();
    rh_cuda_engine_destroy(e);
    const double t2 = now_us();
    if (r >= 3) {
      create_only.push_back(t1 - t0);
      destroy_only.push_back(t2 - t1);
    }
  }
  RhCudaEngine* primed = nullptr;
  if (ok && rh_cuda_engine_create(&o, &primed) == RH_CUDA_SUCCESS) {
    EmptyState<T> empty(in.P);
    for (int r = 0; r < reps + 3; ++r) {
      rh_cuda_engine_restore(primed, &empty.view);
      RhCudaDiagnostics d = diagnostics();
      const double t0 = now_us();
      if (rh_cuda_engine_update_host_with_state(primed, &in.view, &in.cfg, &d, &out.view) !=
          RH_CUDA_SUCCESS) {
        break;
      }
      if (r >= 3)
        steady.push_back(now_us() - t0);
    }
    rh_cuda_engine_destroy(primed);
  }
  // No idle set: 7 engines alive at once (the pool keeps at most 4 idle per device), so the
  // last creates build new sets and the last destroys release theirs for real.
  std::vector<double> create_empty_pool, destroy_full_pool;
  for (int round = 0; round < 5 && ok; ++round) {
    RhCudaEngine* alive[7] = {};
    for (int i = 0; i < 7; ++i) {
      const double t0 = now_us();
      rh_cuda_engine_create(&o, &alive[i]);
      if (i >= 5)
        create_empty_pool.push_back(now_us() - t0);
    }
    for (int i = 0; i < 7; ++i) {
      const double t0 = now_us();
      rh_cuda_engine_destroy(alive[i]);
      if (i >= 5)
        destroy_full_pool.push_back(now_us() - t0);
    }
  }
  std::printf("%-4s %10.1f %10.1f %10.1f %10.1f | %10.1f %10.1f | %10.1f | %10.1f %10.1f\n",
              dtype_name(dtype), median(cycle), median(cycle_create), median(cycle_update),
              median(cycle_destroy), median(create_only), median(destroy_only), median(steady),
              median(create_empty_pool), median(destroy_full_pool));
}

void set_staging(const char* mode, const char* threads) {
  if (mode != nullptr)
    setenv("RH_CUDA_STAGING", mode, 1);
  else
    unsetenv("RH_CUDA_STAGING");
  if (threads != nullptr) {
    setenv("RH_CUDA_STAGING_THREADS", threads, 1);
  } else {
    unsetenv("RH_CUDA_STAGING_THREADS");
  }
}

void staging(int64_t rows, int64_t p, int reps) {
  Prepared<double> in(rows, p, RH_CUDA_PENALTY_NONE);
  const size_t xb = in.data.x.size() * sizeof(double), yb = in.data.y.size() * sizeof(double);
  double *dx = nullptr, *dy = nullptr;
  if (cudaMalloc(&dx, xb) != cudaSuccess || cudaMalloc(&dy, yb) != cudaSuccess) {
    std::printf("%lld x %lld: cudaMalloc failed\n", static_cast<long long>(rows),
                static_cast<long long>(p));
    cudaFree(dx);
    return;
  }
  upload(dx, in.data.x.data(), xb);
  upload(dy, in.data.y.data(), yb);
  std::vector<double> copy_times;
  for (int r = 0; r < reps + 2; ++r) {
    const double t0 = now_us();
    upload(dx, in.data.x.data(), xb);
    upload(dy, in.data.y.data(), yb);
    if (r >= 2)
      copy_times.push_back(now_us() - t0);
  }
  RhCudaDeviceBatch db{};
  std::memcpy(&db, &in.view, sizeof db);
  db.x_design = dx;
  db.y = dy;
  const double mb = static_cast<double>(xb + yb) / 1e6;
  std::printf(
      "%lld x %lld f64 (%.1f MB; pageable cudaMemcpy %.1f us = %.1f GB/s; floor at "
      "55 GB/s %.1f us)\n",
      static_cast<long long>(rows), static_cast<long long>(p), mb, median(copy_times),
      mb * 1e3 / median(copy_times), mb * 1e3 / 55.0);
  // GB/s: the batch's bytes over the extra time host input costs (the effective host path).
  std::printf("  %-16s %12s %12s %12s %10s\n", "staging", "host us", "device us", "extra us",
              "GB/s");
  struct Mode {
    const char* label;
    const char* mode;
    const char* threads;
  };
  const Mode modes[] = {{"plain", "plain", nullptr},         {"pinned x1", "pinned", "1"},
                        {"pinned x4", "pinned", "4"},        {"pinned x8", "pinned", "8"},
                        {"pinned x12", "pinned", "12"},      {"pinned x16", "pinned", "16"},
                        {"pinned default", nullptr, nullptr}};
  for (const Mode& m : modes) {
    set_staging(m.mode, m.threads);
    RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, in.P);
    RhCudaEngine* e = nullptr;
    const RhCudaStatus created = rh_cuda_engine_create(&o, &e);
    set_staging(nullptr, nullptr);
    if (created != RH_CUDA_SUCCESS) {
      std::printf("  %-16s create failed: %s\n", m.label, rh_cuda_last_error());
      continue;
    }
    EmptyState<double> empty(in.P);
    HostState<double> out(in.P);
    std::vector<double> host_times, device_times;
    bool ok = true;
    // Interleaved, so drift on a shared host affects both sides alike.
    for (int r = 0; r < reps + 2 && ok; ++r) {
      for (bool device : {false, true}) {
        rh_cuda_engine_restore(e, &empty.view);
        RhCudaDiagnostics d = diagnostics();
        const double t0 = now_us();
        ok = (device ? rh_cuda_engine_update_device_with_state(e, &db, &in.cfg, &d, &out.view)
                     : rh_cuda_engine_update_host_with_state(e, &in.view, &in.cfg, &d,
                                                             &out.view)) == RH_CUDA_SUCCESS;
        const double t = now_us() - t0;
        if (r >= 2)
          (device ? device_times : host_times).push_back(t);
      }
    }
    if (!ok) {
      std::printf("  %-16s update failed: %s\n", m.label, rh_cuda_engine_last_error(e));
    } else {
      const double host = median(host_times), dev = median(device_times);
      const double extra = host - dev;
      std::printf("  %-16s %12.1f %12.1f %12.1f %10.1f\n", m.label, host, dev, extra,
                  extra > 0.0 ? mb * 1e3 / extra : 0.0);
    }
    rh_cuda_engine_destroy(e);
  }
  cudaFree(dx);
  cudaFree(dy);
}

}  // namespace

int main(int argc, char** argv) {
  skip_without_gpu("cuda_lifecycle_timing");
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 30;
  const std::string section = argc > 2 ? argv[2] : "all";
  if (section == "all" || section == "lifecycle") {
    // The first engine of the process: empty pool, CUDA context and library initialisation.
    RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT32, 17);
    RhCudaEngine* e = nullptr;
    const double t0 = now_us();
    rh_cuda_engine_create(&o, &e);
    const double t1 = now_us();
    rh_cuda_engine_destroy(e);
    std::printf(
        "first create of the process (context + libraries + empty pool): %.1f us, its "
        "destroy %.1f us\n\n",
        t1 - t0, now_us() - t1);
    std::printf("latency shape 4,096 x 16, penalty none, host input; medians of %d, us\n", reps);
    std::printf("%-4s %10s %10s %10s %10s | %10s %10s | %10s | %10s %10s\n", "", "cycle", "create",
                "update", "destroy", "create", "destroy", "steady", "create", "destroy");
    std::printf("%-4s %10s %10s %10s %10s | %10s %10s | %10s | %10s %10s\n", "", "c+u+d",
                "in cycle", "in cycle", "in cycle", "alone", "alone", "update", "no idle",
                "pool full");
    lifecycle<float>(RH_CUDA_DTYPE_FLOAT32, reps);
    lifecycle<double>(RH_CUDA_DTYPE_FLOAT64, reps);
    std::printf("\n");
  }
  if (section == "all" || section == "staging") {
    const int staging_reps = std::max(3, reps / 2);
    std::printf("host vs device input, penalty none, medians of %d (interleaved)\n", staging_reps);
    staging(65536, 32, staging_reps);
    staging(32768, 90, staging_reps);
    staging(1000000, 32, staging_reps);
  }
  return 0;
}
