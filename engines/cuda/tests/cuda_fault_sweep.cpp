// Fault-injection sweep over librh_cuda_testing built with RH_FAULT_INJECTION (fault_sites.hpp):
// for every operation below, each kind of failure ("allocation", "error") and every k from 1 up,
// the operation runs with its k-th fault site (a checked CUDA / cuBLAS / cuSOLVER call or a
// buffer allocation) failing. Until k passes the operation's number of fault sites, each run
// must return the status of that kind (ALLOCATION_FAILED; or CUDA_ERROR, CUBLAS_ERROR,
// CUSOLVER_ERROR) with a message, leave the committed state byte-identical (copy_state before
// and after) and keep the output promise of rh_cuda_engine_predict (rh_cuda.h): a host
// prediction's output untouched by every failure; a device prediction's untouched by every
// failure except one reported by its last two fault sites (the prediction kernel's launch
// check and the final stream wait), after which it is unspecified; and the row-statistics
// extension's outputs (host and device rows) untouched by every failure. The same call repeated
// without injection must succeed with exactly the result of a run that never saw a failure;
// a mismatch is reported by part (state, diagnostics, predictions, exported state, row
// statistics) with the fault site. An injected run that succeeds (k past the operation's fault
// sites, or a failure the engine absorbs, as a CUDA Graph capture does by launching eagerly) must
// give that result too; kTail such runs in a row end the sweep. The counts (last failing site,
// absorbed sites) are printed for the record.
//
// Without a GPU it exits 77 (ctest: SKIPPED) with the reason. On the GPU host, under
// compute-sanitizer (memcheck with --leak-check full) it also shows that no failure path leaks
// device memory: engines/cuda/tests/run_fault_sweep.sh writes the log.
//
// Usage: cuda_fault_sweep [--max-k N] [--only NAME_PART]
//   --max-k: at most N fault sites per operation (default 5000);
//   --only: only the sweeps whose name contains NAME_PART (e.g. "predict").
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rh_cuda.h"
#include "rh_cuda_row_statistics.h"
#include "test_support.hpp"

namespace {

using rhtest::failures;

constexpr int64_t kFeatures = 3;
constexpr int64_t kParams = 4;  // with the intercept
constexpr int64_t kSmallRows = 24;
constexpr int64_t kRows = 96;

// Committed state of an engine (either dtype, as raw bytes) and its counters.
struct Snapshot {
  double coefficients[kParams];
  double information[kParams * kParams];
  int64_t n_samples_seen, batch_count;
  double previous_lambda, weight_sum;
};

// The row-statistics extension's outputs: loss, weighted norm, score, then the curvature,
// majoriser and meat Grams.
constexpr int64_t kRowSums = 2 + kParams + 3 * kParams * kParams;

struct Outcome {
  Snapshot state;
  RhCudaDiagnostics diagnostics;
  double predictions[kRows];
  Snapshot exported;
  double row_sums[kRowSums];
};

// More engines than the pool keeps idle sets for one device (engine.cu keeps 4): holding them
// leaves the pool empty, so the next create builds its stream and handles afresh.
constexpr int kPoolDrainers = 6;

// What an operation produces is only what it writes into `out`: the set-ups never write there,
// so a reference run and a retry (both starting from a zeroed Outcome) are comparable byte for
// byte. (A set-up update that wrote its diagnostics there made every predict retry, whose
// Outcome is zeroed after the set-up, differ from the reference.)
struct Fixture {
  int32_t dtype = RH_CUDA_DTYPE_FLOAT64;
  RhCudaEngine* engine = nullptr;
  RhCudaEngine* drainers[kPoolDrainers] = {};
  Outcome out;
  // Set by the predict and row-statistics operations when a failed call changed the caller's
  // output.
  bool output_changed = false;
};

// Bytes of canary put in the caller's prediction output before every predict.
constexpr unsigned char kCanary = 0x5a;

Snapshot snapshot(RhCudaEngine* engine) {
  Snapshot s;
  std::memset(&s, 0, sizeof s);
  RhCudaHostState h = rhtest::abi_struct<RhCudaHostState>();
  h.coefficients = s.coefficients;
  h.information = s.information;
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(engine, &h), RH_CUDA_SUCCESS);
  s.n_samples_seen = h.n_samples_seen;
  s.batch_count = h.batch_count;
  s.previous_lambda = h.previous_lambda;
  s.weight_sum = h.weight_sum;
  return s;
}

// The data, both dtypes, on the host and once on the device (exactly the declared sizes).
struct Data {
  rhtest::Batch<double> b64 = rhtest::make_batch<double>(11, kRows, kFeatures, true, false);
  rhtest::Batch<float> b32 = rhtest::make_batch<float>(11, kRows, kFeatures, true, false);
  void* device_x[2] = {nullptr, nullptr};
  void* device_y[2] = {nullptr, nullptr};
  void* device_out[2] = {nullptr, nullptr};
  // The full design (the intercept's ones appended) for the row statistics, which take all P
  // columns, on the host and on the device.
  std::vector<double> design64 = full_design(b64);
  std::vector<float> design32 = full_design(b32);
  void* device_design[2] = {nullptr, nullptr};
  template <class T>
  static std::vector<T> full_design(const rhtest::Batch<T>& b) {
    std::vector<T> out(static_cast<size_t>(kRows * kParams));
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = 0; j < kFeatures; ++j)
        out[i * kParams + j] = b.x[i * kFeatures + j];
      out[i * kParams + kFeatures] = T(1);
    }
    return out;
  }
  const void* design(int32_t dtype) const {
    return dtype == RH_CUDA_DTYPE_FLOAT32 ? static_cast<const void*>(design32.data())
                                          : static_cast<const void*>(design64.data());
  }
  static int slot(int32_t dtype) {
    return dtype == RH_CUDA_DTYPE_FLOAT32 ? 0 : 1;
  }
  const void* x(int32_t dtype) const {
    return dtype == RH_CUDA_DTYPE_FLOAT32 ? static_cast<const void*>(b32.x.data())
                                          : static_cast<const void*>(b64.x.data());
  }
  const void* y(int32_t dtype) const {
    return dtype == RH_CUDA_DTYPE_FLOAT32 ? static_cast<const void*>(b32.y.data())
                                          : static_cast<const void*>(b64.y.data());
  }
  void upload() {
    for (int32_t dtype : {RH_CUDA_DTYPE_FLOAT32, RH_CUDA_DTYPE_FLOAT64}) {
      const size_t elem = dtype == RH_CUDA_DTYPE_FLOAT32 ? 4 : 8;
      const int s = slot(dtype);
      const size_t xb = static_cast<size_t>(kRows * kFeatures) * elem;
      const size_t yb = static_cast<size_t>(kRows) * elem;
      const size_t db = static_cast<size_t>(kRows * kParams) * elem;
      if (cudaMalloc(&device_x[s], xb) != cudaSuccess ||
          cudaMalloc(&device_y[s], yb) != cudaSuccess ||
          cudaMalloc(&device_out[s], yb) != cudaSuccess ||
          cudaMalloc(&device_design[s], db) != cudaSuccess ||
          rhtest::upload(device_x[s], x(dtype), xb) != cudaSuccess ||
          rhtest::upload(device_y[s], y(dtype), yb) != cudaSuccess ||
          rhtest::upload(device_design[s], design(dtype), db) != cudaSuccess) {
        std::fprintf(stderr, "device copies of the sweep data failed\n");
        std::exit(1);
      }
    }
  }
  ~Data() {
    for (int s = 0; s < 2; ++s) {
      cudaFree(device_x[s]);
      cudaFree(device_y[s]);
      cudaFree(device_out[s]);
      cudaFree(device_design[s]);
    }
  }
};

Data* data = nullptr;

RhCudaEngine* new_engine(int32_t dtype) {
  RhCudaEngineOptions o = rhtest::options(dtype, kParams);
  RhCudaEngine* engine = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
  return engine;
}

RhCudaStatus host_update(Fixture& f, int64_t rows, int32_t penalty, RhCudaHostState* state,
                         RhCudaDiagnostics* diagnostics) {
  RhCudaUpdateConfig c = rhtest::config(kFeatures, penalty);
  RhCudaHostBatch b = rhtest::host_batch(data->x(f.dtype), data->y(f.dtype), nullptr, rows,
                                         kFeatures, static_cast<double>(rows));
  *diagnostics = rhtest::diagnostics();
  if (state != nullptr) {
    return rh_cuda_engine_update_host_with_state(f.engine, &b, &c, diagnostics, state);
  }
  return rh_cuda_engine_update_host(f.engine, &b, &c, diagnostics);
}

// An update of a set-up: its diagnostics are not part of the operation's Outcome.
void setup_update(Fixture& f, int64_t rows) {
  RhCudaDiagnostics ignored;
  RH_CHECK_STATUS(host_update(f, rows, RH_CUDA_PENALTY_NONE, nullptr, &ignored), RH_CUDA_SUCCESS);
}

// ----------------------------------------------------------------- set-ups (never injected)
void fresh_f64(Fixture& f) {
  f.dtype = RH_CUDA_DTYPE_FLOAT64;
  f.engine = new_engine(f.dtype);
}
void fresh_f32(Fixture& f) {
  f.dtype = RH_CUDA_DTYPE_FLOAT32;
  f.engine = new_engine(f.dtype);
}
void no_engine_f64(Fixture& f) {
  f.dtype = RH_CUDA_DTYPE_FLOAT64;
}
void no_engine_pool_drained(Fixture& f) {
  f.dtype = RH_CUDA_DTYPE_FLOAT32;
  for (RhCudaEngine*& d : f.drainers)
    d = new_engine(RH_CUDA_DTYPE_FLOAT64);
}
void small_batch_f64(Fixture& f) {
  fresh_f64(f);
  setup_update(f, kSmallRows);
}
void full_batch_f64(Fixture& f) {
  fresh_f64(f);
  setup_update(f, kRows);
}
void fresh_graphs_f64(Fixture& f) {
  f.dtype = RH_CUDA_DTYPE_FLOAT64;
  RhCudaEngineOptions o = rhtest::options(f.dtype, kParams, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &f.engine), RH_CUDA_SUCCESS);
}
void full_batch_f32(Fixture& f) {
  fresh_f32(f);
  setup_update(f, kRows);
}

// ------------------------------------------------------------------- operations (injected)
RhCudaStatus op_create(Fixture& f) {
  RhCudaEngineOptions o = rhtest::options(f.dtype, kParams);
  const RhCudaStatus status = rh_cuda_engine_create(&o, &f.engine);
  if (status != RH_CUDA_SUCCESS)
    RH_CHECK(f.engine == nullptr);
  return status;
}
RhCudaStatus op_restore(Fixture& f) {
  double coefficients[kParams] = {0.5, -1.25, 2.0, 0.125};
  double information[kParams * kParams];
  for (int k = 0; k < kParams * kParams; ++k)
    information[k] = k % (kParams + 1) == 0 ? 3.0 : 0.25;
  float coefficients32[kParams], information32[kParams * kParams];
  for (int k = 0; k < kParams; ++k)
    coefficients32[k] = static_cast<float>(coefficients[k]);
  for (int k = 0; k < kParams * kParams; ++k)
    information32[k] = static_cast<float>(information[k]);
  const bool f32 = f.dtype == RH_CUDA_DTYPE_FLOAT32;
  const RhCudaHostStateView v = rhtest::restore_view(
      f32 ? static_cast<const void*>(coefficients32) : coefficients,
      f32 ? static_cast<const void*>(information32) : information, 120, 3, 117.5);
  return rh_cuda_engine_restore(f.engine, &v);
}
RhCudaStatus op_update_newton(Fixture& f) {
  return host_update(f, kRows, RH_CUDA_PENALTY_NONE, nullptr, &f.out.diagnostics);
}
RhCudaStatus op_update_l1(Fixture& f) {
  return host_update(f, kRows, RH_CUDA_PENALTY_L1, nullptr, &f.out.diagnostics);
}
RhCudaStatus op_update_with_state(Fixture& f) {
  Snapshot& e = f.out.exported;
  RhCudaHostState h = rhtest::abi_struct<RhCudaHostState>();
  h.coefficients = e.coefficients;
  h.information = e.information;
  const RhCudaStatus status = host_update(f, kRows, RH_CUDA_PENALTY_L1, &h, &f.out.diagnostics);
  e.n_samples_seen = h.n_samples_seen;
  e.batch_count = h.batch_count;
  e.previous_lambda = h.previous_lambda;
  e.weight_sum = h.weight_sum;
  return status;
}
RhCudaStatus op_update_device(Fixture& f) {
  RhCudaUpdateConfig c = rhtest::config(kFeatures, RH_CUDA_PENALTY_NONE);
  const int s = Data::slot(f.dtype);
  RhCudaDeviceBatch b = rhtest::abi_struct<RhCudaDeviceBatch>();
  b.x_design = data->device_x[s];
  b.y = data->device_y[s];
  b.n_rows = kRows;
  b.n_columns = kFeatures;
  b.batch_weight = static_cast<double>(kRows);
  f.out.diagnostics = rhtest::diagnostics();
  Snapshot& e = f.out.exported;
  RhCudaHostState h = rhtest::abi_struct<RhCudaHostState>();
  h.coefficients = e.coefficients;
  h.information = e.information;
  const RhCudaStatus status =
      rh_cuda_engine_update_device_with_state(f.engine, &b, &c, &f.out.diagnostics, &h);
  e.n_samples_seen = h.n_samples_seen;
  e.batch_count = h.batch_count;
  e.previous_lambda = h.previous_lambda;
  e.weight_sum = h.weight_sum;
  return status;
}
size_t prediction_bytes(const Fixture& f) {
  return static_cast<size_t>(kRows) * (f.dtype == RH_CUDA_DTYPE_FLOAT32 ? 4 : 8);
}

bool canary_intact(const Fixture& f) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(f.out.predictions);
  for (size_t i = 0; i < sizeof f.out.predictions; ++i) {
    if (bytes[i] != kCanary)
      return false;
  }
  return true;
}

RhCudaStatus op_predict_host(Fixture& f) {
  std::memset(f.out.predictions, kCanary, sizeof f.out.predictions);
  RhCudaPrediction q = rhtest::prediction(data->x(f.dtype), f.out.predictions, kRows, kFeatures);
  const RhCudaStatus status = rh_cuda_engine_predict(f.engine, &q);
  if (status != RH_CUDA_SUCCESS && !canary_intact(f))
    f.output_changed = true;
  return status;
}
RhCudaStatus op_predict_device(Fixture& f) {
  const int s = Data::slot(f.dtype);
  const size_t bytes = prediction_bytes(f);
  std::memset(f.out.predictions, kCanary, sizeof f.out.predictions);
  if (rhtest::upload(data->device_out[s], f.out.predictions, bytes) != cudaSuccess) {
    std::fprintf(stderr, "copying the canary to the device output failed\n");
    ++failures();
  }
  RhCudaPrediction q = rhtest::prediction(data->device_x[s], data->device_out[s], kRows, kFeatures,
                                          RH_CUDA_MEMORY_DEVICE);
  const RhCudaStatus status = rh_cuda_engine_predict(f.engine, &q);
  if (cudaMemcpy(f.out.predictions, data->device_out[s], bytes, cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    std::fprintf(stderr, "copying the device output back failed\n");
    ++failures();
  }
  if (status != RH_CUDA_SUCCESS && !canary_intact(f))
    f.output_changed = true;
  return status;
}

// The row-statistics extension, every statistic, on host or device rows; the outputs start as
// canary bytes, and a failed call must leave every one of them so.
RhCudaStatus op_row_statistics(Fixture& f, bool device) {
  const int s = Data::slot(f.dtype);
  double* sums = f.out.row_sums;
  std::memset(sums, kCanary, sizeof f.out.row_sums);
  double beta64[kParams];
  float beta32[kParams];
  for (int64_t j = 0; j < kParams; ++j) {
    beta64[j] = 0.1 * static_cast<double>(j + 1);
    beta32[j] = static_cast<float>(beta64[j]);
  }
  RhCudaRowStatistics r = rhtest::abi_struct<RhCudaRowStatistics>();
  r.statistics = RH_CUDA_STATISTIC_ALL;
  r.coefficients = f.dtype == RH_CUDA_DTYPE_FLOAT32 ? static_cast<const void*>(beta32)
                                                    : static_cast<const void*>(beta64);
  r.tau = 1.345;
  r.bandwidth = 0.4;
  r.loss = sums[0];
  r.weighted_norm = sums[1];
  r.score = sums + 2;
  r.curvature_gram = sums + 2 + kParams;
  r.majoriser_gram = sums + 2 + kParams + kParams * kParams;
  r.meat = sums + 2 + kParams + 2 * kParams * kParams;
  RhCudaHostBatch b = rhtest::host_batch(data->design(f.dtype), data->y(f.dtype), nullptr, kRows,
                                         kParams, static_cast<double>(kRows));
  RhCudaStatus status;
  if (device) {
    RhCudaDeviceBatch db;
    std::memcpy(&db, &b, sizeof db);
    db.x_design = data->device_design[s];
    db.y = data->device_y[s];
    status = rh_cuda_engine_row_statistics_device(f.engine, &db, &r);
  } else {
    status = rh_cuda_engine_row_statistics(f.engine, &b, &r);
  }
  sums[0] = r.loss;
  sums[1] = r.weighted_norm;
  if (status != RH_CUDA_SUCCESS) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(sums);
    for (size_t i = 0; i < sizeof f.out.row_sums; ++i) {
      if (bytes[i] != kCanary)
        f.output_changed = true;
    }
  }
  return status;
}
RhCudaStatus op_row_statistics_host(Fixture& f) {
  return op_row_statistics(f, false);
}
RhCudaStatus op_row_statistics_device(Fixture& f) {
  return op_row_statistics(f, true);
}

// ------------------------------------------------------------------------------- sweep
void set_injection(long long k, const char* kind) {
  if (k > 0) {
    setenv("RH_CUDA_TEST_FAIL_CALL", std::to_string(k).c_str(), 1);
    setenv("RH_CUDA_TEST_FAIL_KIND", kind, 1);
  } else {
    unsetenv("RH_CUDA_TEST_FAIL_CALL");
    unsetenv("RH_CUDA_TEST_FAIL_KIND");
  }
}

void finish_outcome(Fixture& f) {
  if (f.engine != nullptr)
    f.out.state = snapshot(f.engine);
}

void teardown(Fixture& f) {
  RH_CHECK_STATUS(rh_cuda_engine_destroy(f.engine), RH_CUDA_SUCCESS);
  f.engine = nullptr;
  for (RhCudaEngine*& d : f.drainers) {
    RH_CHECK_STATUS(rh_cuda_engine_destroy(d), RH_CUDA_SUCCESS);
    d = nullptr;
  }
}

bool expected_status(RhCudaStatus status, const char* kind) {
  if (std::strcmp(kind, "allocation") == 0)
    return status == RH_CUDA_ALLOCATION_FAILED;
  // An error injected into a device allocation is that allocation failing, whatever its code.
  return status == RH_CUDA_CUDA_ERROR || status == RH_CUDA_CUBLAS_ERROR ||
         status == RH_CUDA_CUSOLVER_ERROR || status == RH_CUDA_ALLOCATION_FAILED;
}

long long max_k = 5000;
// Injected runs in a row that succeed before a sweep ends: sites past the operation's last
// one, with room for failures the engine absorbs on the way.
constexpr long long kTail = 32;
long long total_failures = 0;

// Compares an operation's Outcome with the reference's and, when they differ, names the parts
// that differ (with the first differing element) and the fault site k of the run.
void compare_outcome(const char* name, const char* kind, long long k, const char* run,
                     const Fixture& f, const Outcome& reference) {
  const Outcome& got = f.out;
  if (std::memcmp(&got, &reference, sizeof got) == 0)
    return;
  ++failures();
  std::fprintf(stderr, "%s, %s, fault site %lld: the %s differs from the reference in:", name, kind,
               k, run);
  if (std::memcmp(&got.state, &reference.state, sizeof got.state) != 0) {
    std::fprintf(stderr, " [committed state]");
  }
  if (std::memcmp(&got.diagnostics, &reference.diagnostics, sizeof got.diagnostics) != 0) {
    std::fprintf(stderr, " [diagnostics: iterations %lld vs %lld, objective %.17g vs %.17g]",
                 static_cast<long long>(got.diagnostics.iterations),
                 static_cast<long long>(reference.diagnostics.iterations),
                 got.diagnostics.objective, reference.diagnostics.objective);
  }
  if (std::memcmp(got.predictions, reference.predictions, sizeof got.predictions) != 0) {
    const size_t elem = f.dtype == RH_CUDA_DTYPE_FLOAT32 ? 4 : 8;
    const auto* a = reinterpret_cast<const unsigned char*>(got.predictions);
    const auto* b = reinterpret_cast<const unsigned char*>(reference.predictions);
    size_t first = 0;
    while (a[first] == b[first])
      ++first;
    const size_t row = first / elem;
    double va = 0.0, vb = 0.0;
    if (row < static_cast<size_t>(kRows)) {
      if (elem == 4) {
        float x, y;
        std::memcpy(&x, a + row * 4, 4);
        std::memcpy(&y, b + row * 4, 4);
        va = x;
        vb = y;
      } else {
        std::memcpy(&va, a + row * 8, 8);
        std::memcpy(&vb, b + row * 8, 8);
      }
      std::fprintf(stderr, " [predictions: first at row %zu, %.17g vs %.17g]", row, va, vb);
    } else {
      std::fprintf(stderr, " [prediction array past the %lld rows, byte %zu]",
                   static_cast<long long>(kRows), first);
    }
  }
  if (std::memcmp(&got.exported, &reference.exported, sizeof got.exported) != 0) {
    std::fprintf(stderr, " [exported state]");
  }
  if (std::memcmp(got.row_sums, reference.row_sums, sizeof got.row_sums) != 0) {
    int64_t first = 0;
    while (std::memcmp(&got.row_sums[first], &reference.row_sums[first], sizeof(double)) == 0)
      ++first;
    std::fprintf(stderr, " [row statistics: first at output %lld, %.17g vs %.17g]",
                 static_cast<long long>(first), got.row_sums[first], reference.row_sums[first]);
  }
  std::fprintf(stderr, "\n");
}

// Only the sweeps whose name contains this (--only), all when null.
const char* only = nullptr;

// min_sites: the fewest fault sites the operation must show (a sweep that injects nothing
// would pass vacuously; every ABI call's first fault site is DeviceScope's cudaGetDevice).
// write_sites: how many of the operation's last fault sites may leave the caller's output changed
// after a failure (the documented promise: 0 but for a device predict, 2).
void sweep(const char* name, const char* kind, void (*setup)(Fixture&),
           RhCudaStatus (*op)(Fixture&), long long min_sites = 1, long long write_sites = 0) {
  if (only != nullptr && std::strstr(name, only) == nullptr)
    return;
  Fixture reference;
  std::memset(&reference.out, 0, sizeof reference.out);
  set_injection(0, kind);
  setup(reference);
  RH_CHECK_STATUS(op(reference), RH_CUDA_SUCCESS);
  finish_outcome(reference);
  teardown(reference);

  long long k = 1, last_failure = 0, in_a_row = 0, absorbed = 0;
  std::vector<long long> output_changed_at;
  for (; k <= max_k && in_a_row < kTail; ++k) {
    Fixture f;
    std::memset(&f.out, 0, sizeof f.out);
    setup(f);
    Snapshot before;
    std::memset(&before, 0, sizeof before);
    if (f.engine != nullptr)
      before = snapshot(f.engine);
    set_injection(k, kind);
    const RhCudaStatus status = op(f);
    set_injection(0, kind);
    if (status == RH_CUDA_SUCCESS) {
      // k is past the operation's fault sites, or the engine absorbed the failure (a CUDA
      // Graph capture falls back to eager launches): either way the result is the reference.
      finish_outcome(f);
      compare_outcome(name, kind, k, "injected run that succeeded", f, reference.out);
      teardown(f);
      ++in_a_row;
      continue;
    }
    absorbed += in_a_row;
    in_a_row = 0;
    last_failure = k;
    ++total_failures;
    const char* message =
        f.engine != nullptr ? rh_cuda_engine_last_error(f.engine) : rh_cuda_last_error();
    if (!expected_status(status, kind) || message[0] == '\0') {
      std::fprintf(stderr, "%s, %s failure at fault site %lld: status %d, message \"%s\"\n", name,
                   kind, k, static_cast<int>(status), message);
      ++failures();
    }
    if (f.engine != nullptr) {
      const Snapshot after = snapshot(f.engine);
      if (std::memcmp(&after, &before, sizeof after) != 0) {
        std::fprintf(stderr, "%s, %s failure at fault site %lld changed the committed state\n",
                     name, kind, k);
        ++failures();
      }
    }
    if (f.output_changed)
      output_changed_at.push_back(k);
    std::memset(&f.out, 0, sizeof f.out);
    f.output_changed = false;
    RH_CHECK_STATUS(op(f), RH_CUDA_SUCCESS);  // the next call, without injection, succeeds
    finish_outcome(f);
    compare_outcome(name, kind, k, "retry without injection", f, reference.out);
    teardown(f);
  }
  if (in_a_row != kTail) {
    std::fprintf(stderr, "%s, %s: still failing at fault site %lld (--max-k %lld)\n", name, kind,
                 last_failure, max_k);
    ++failures();
  }
  if (last_failure < min_sites) {
    std::fprintf(stderr, "%s, %s: %lld fault site(s), expected at least %lld\n", name, kind,
                 last_failure, min_sites);
    ++failures();
  }
  // Failures before the output is written must leave it as it was.
  for (long long changed : output_changed_at) {
    if (changed <= last_failure - write_sites) {
      std::fprintf(stderr,
                   "%s, %s failure at fault site %lld changed the caller's output (allowed only "
                   "at the last %lld of the %lld fault sites)\n",
                   name, kind, changed, write_sites, last_failure);
      ++failures();
    }
  }
  std::printf("  %-38s %-10s %4lld fault site(s), %lld absorbed", name, kind, last_failure,
              absorbed);
  if (write_sites > 0) {
    std::printf(", output written by %zu failed call(s)", output_changed_at.size());
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--max-k") == 0 && i + 1 < argc) {
      max_k = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--max-k N] [--only NAME_PART]\n", argv[0]);
      return 2;
    }
  }
  set_injection(0, "allocation");
  rhtest::skip_without_gpu("cuda_fault_sweep");
  {
    // The injection must be live, or every sweep below would pass vacuously.
    Fixture f;
    no_engine_f64(f);
    set_injection(1, "allocation");
    const RhCudaStatus status = op_create(f);
    set_injection(0, "allocation");
    if (status == RH_CUDA_SUCCESS) {
      std::printf(
          "FAIL cuda_fault_sweep: RH_CUDA_TEST_FAIL_CALL=1 did not fail create: this "
          "library was built without RH_FAULT_INJECTION\n");
      rh_cuda_engine_destroy(f.engine);
      return 1;
    }
  }
  Data shared;
  shared.upload();
  data = &shared;
  const double start = rhtest::now_us();
  for (const char* kind : {"allocation", "error"}) {
    sweep("create (float64)", kind, no_engine_f64, op_create);
    sweep("create, fresh resources (float32)", kind, no_engine_pool_drained, op_create);
    sweep("restore (float64)", kind, fresh_f64, op_restore);
    sweep("restore (float32)", kind, fresh_f32, op_restore);
    sweep("first update_host, Newton (float64)", kind, fresh_f64, op_update_newton);
    sweep("first update_host, Newton (float32)", kind, fresh_f32, op_update_newton);
    sweep("first update_host, L1 (float64)", kind, fresh_f64, op_update_l1);
    sweep("first update_host, Newton, CUDA graphs", kind, fresh_graphs_f64, op_update_newton);
    sweep("first update_host, L1, CUDA graphs", kind, fresh_graphs_f64, op_update_l1);
    sweep("growing update_host_with_state, L1", kind, small_batch_f64, op_update_with_state);
    sweep("second update_host, L1", kind, full_batch_f64, op_update_l1);
    sweep("update_device_with_state (float64)", kind, small_batch_f64, op_update_device);
    sweep("update_device_with_state (float32)", kind, fresh_f32, op_update_device);
    // The last two fault sites of a device predict are the prediction kernel's launch check and
    // the final stream wait (prediction.cu): only there may a failure leave the output written.
    sweep("predict host (float64)", kind, full_batch_f64, op_predict_host);
    sweep("predict host (float32)", kind, full_batch_f32, op_predict_host);
    sweep("predict device (float64)", kind, full_batch_f64, op_predict_device, 3, 2);
    sweep("predict device (float32)", kind, full_batch_f32, op_predict_device, 3, 2);
    // The row statistics write their outputs only after the last fault site.
    sweep("row statistics host (float64)", kind, full_batch_f64, op_row_statistics_host, 3);
    sweep("row statistics host (float32)", kind, fresh_f32, op_row_statistics_host, 3);
    sweep("row statistics device (float64)", kind, full_batch_f64, op_row_statistics_device, 3);
    sweep("row statistics device (float32)", kind, fresh_f32, op_row_statistics_device, 3);
  }
  std::printf("%lld injected failures in %.1f s\n", total_failures,
              (rhtest::now_us() - start) / 1e6);
  return rhtest::finish("cuda_fault_sweep");
}
