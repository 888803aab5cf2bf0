// Small helpers for the librh_cuda tests: checks that count failures, struct builders, a
// deterministic data generator, and the GPU-presence gate (exit 77 = ctest SKIP, with a reason).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <dlfcn.h>

#include "rh_cuda.h"

namespace rhtest {

// For the timing tools: a monotonic clock in microseconds, and the median (0 for no samples).
inline double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline int& failures() {
  static int count = 0;
  return count;
}

#define RH_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++rhtest::failures();                                                         \
    }                                                                               \
  } while (0)

#define RH_CHECK_STATUS(call, expected)                                                            \
  do {                                                                                             \
    const RhCudaStatus rh_got_ = (call);                                                           \
    if (rh_got_ != (expected)) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n", __FILE__, __LINE__, #call, \
                   static_cast<int>(rh_got_), static_cast<int>(expected), rh_cuda_last_error());   \
      ++rhtest::failures();                                                                        \
    }                                                                                              \
  } while (0)

// ctest maps 77 to SKIPPED (SKIP_RETURN_CODE); the reason is printed so a skip is never silent.
inline void skip_without_gpu(const char* test) {
  int32_t available = 0;
  const RhCudaStatus status = rh_cuda_is_available(&available);
  if (status != RH_CUDA_SUCCESS || available != 1) {
    std::printf("SKIP %s: no usable CUDA device (status %d, available %d: %s)\n", test,
                static_cast<int>(status), static_cast<int>(available), rh_cuda_last_error());
    std::exit(77);
  }
}

inline int finish(const char* test) {
  if (failures() == 0) {
    std::printf("PASS %s\n", test);
    return 0;
  }
  std::printf("FAIL %s: %d check(s) failed\n", test, failures());
  return 1;
}

// An ABI struct of type S, zeroed, with its header (abi_version, struct_size) filled in.
template <class S>
S abi_struct() {
  S s{};
  s.abi_version = RH_CUDA_ABI_VERSION;
  s.struct_size = sizeof s;
  return s;
}

inline RhCudaEngineOptions options(int32_t dtype, int64_t P, uint64_t flags = 0) {
  RhCudaEngineOptions o = abi_struct<RhCudaEngineOptions>();
  o.dtype = dtype;
  o.device_id = 0;
  o.n_parameters = P;
  o.reserved0 = flags;
  return o;
}

inline RhCudaUpdateConfig config(int64_t p, int32_t penalty, double tau = 1.345) {
  RhCudaUpdateConfig c = abi_struct<RhCudaUpdateConfig>();
  c.n_features_in = p;
  c.max_iter = 100;
  c.tau = tau;
  c.bandwidth_scale = 1.0;
  c.tolerance = 1e-10;
  c.ridge = 0.0;
  c.penalty = penalty;
  c.lambda_scale = penalty == RH_CUDA_PENALTY_L1 ? 0.5 : 0.0;
  return c;
}

inline RhCudaDiagnostics diagnostics() {
  return abi_struct<RhCudaDiagnostics>();
}

// A prediction request of n_rows x p features (the engine appends the intercept).
inline RhCudaPrediction prediction(const void* x, void* out, int64_t n_rows, int64_t p,
                                   int32_t location = RH_CUDA_MEMORY_HOST) {
  RhCudaPrediction q = abi_struct<RhCudaPrediction>();
  q.x_design = x;
  q.prediction = out;
  q.n_rows = n_rows;
  q.n_columns = p;
  q.n_features_in = p;
  q.input_location = location;
  return q;
}

// An RhCudaHostBatch over caller memory (w null: unweighted).
inline RhCudaHostBatch host_batch(const void* x, const void* y, const void* w, int64_t n_rows,
                                  int64_t n_columns, double batch_weight) {
  RhCudaHostBatch b = abi_struct<RhCudaHostBatch>();
  b.x_design = x;
  b.y = y;
  b.sample_weight = w;
  b.n_rows = n_rows;
  b.n_columns = n_columns;
  b.batch_weight = batch_weight;
  return b;
}

// A state to restore from caller arrays (coefficients: P values, information: P x P) with the
// given counts; previous_lambda 0 and no K.
inline RhCudaHostStateView restore_view(const void* coefficients, const void* information,
                                        int64_t n_samples_seen, int64_t batch_count,
                                        double weight_sum) {
  RhCudaHostStateView v = abi_struct<RhCudaHostStateView>();
  v.coefficients = coefficients;
  v.information = information;
  v.n_samples_seen = n_samples_seen;
  v.batch_count = batch_count;
  v.weight_sum = weight_sum;
  return v;
}

template <class T>
struct Batch {
  std::vector<T> x, y, w;
  int64_t n = 0, cols = 0;
  RhCudaHostBatch view(bool weighted = false) const {
    double sum = 0.0;
    for (T v : w)
      sum += static_cast<double>(v);
    return host_batch(x.data(), y.data(), weighted ? w.data() : nullptr, n, cols,
                      weighted ? sum : static_cast<double>(n));
  }
};

// bytes from host to device memory, landed when it returns: a cudaMemcpy from pageable memory
// may return before its DMA does, and the engine reads device input on its own stream, which
// waits for no other (rh_cuda.h, RhCudaDeviceBatch). Every upload of these tests goes through it.
inline cudaError_t upload(void* device, const void* host, size_t bytes) {
  const cudaError_t copied = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);
  return copied != cudaSuccess ? copied : cudaDeviceSynchronize();
}

// A host batch copied to device memory for update_device and device predict, freed on scope
// exit. A failed copy counts as a test failure, named by `what`. x_shift: X starts that many
// elements past its allocation (cudaMalloc's 256-byte alignment), so that shifts of float32 rows
// off 16 bytes can be tested.
class DeviceBatchCopy {
 public:
  DeviceBatchCopy(const RhCudaHostBatch& host, size_t elem, const char* what, size_t x_shift = 0)
      : batch_{} {
    const size_t rows = static_cast<size_t>(host.n_rows);
    const size_t x_bytes = rows * static_cast<size_t>(host.n_columns) * elem;
    x_ = copy_to_device(host.x_design, x_bytes, what, x_shift * elem);
    y_ = copy_to_device(host.y, rows * elem, what);
    if (host.sample_weight != nullptr)
      w_ = copy_to_device(host.sample_weight, rows * elem, what);
    std::memcpy(&batch_, &host, sizeof batch_);
    batch_.x_design = x_ == nullptr ? nullptr : static_cast<char*>(x_) + x_shift * elem;
    batch_.y = y_;
    batch_.sample_weight = w_;
  }
  ~DeviceBatchCopy() {
    cudaFree(x_);
    cudaFree(y_);
    cudaFree(w_);
  }
  DeviceBatchCopy(const DeviceBatchCopy&) = delete;
  DeviceBatchCopy& operator=(const DeviceBatchCopy&) = delete;
  const RhCudaDeviceBatch* batch() const {
    return &batch_;
  }
  const void* x() const {  // where X starts (x_shift elements into its allocation)
    return batch_.x_design;
  }

 private:
  // The allocation; the copy lands `skip` bytes into it.
  static void* copy_to_device(const void* host, size_t bytes, const char* what, size_t skip = 0) {
    void* device = nullptr;
    if (cudaMalloc(&device, skip + bytes) != cudaSuccess ||
        rhtest::upload(static_cast<char*>(device) + skip, host, bytes) != cudaSuccess) {
      std::fprintf(stderr, "  device copy of %s failed\n", what);
      ++failures();
    }
    return device;
  }
  RhCudaDeviceBatch batch_;
  void* x_ = nullptr;
  void* y_ = nullptr;
  void* w_ = nullptr;
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 6364136223846793005ull + 1442695040888963407ull) {}
  double uniform() {
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(s_ >> 11) + 0.5) / 9007199254740992.0;
  }
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

// y = X beta + noise with a few gross outliers; expanded = the intercept column is included.
// feature_scale multiplies every feature but the intercept's column (features in raw units): y
// is the same, the coefficients shrink by it.
template <class T>
Batch<T> make_batch(uint64_t seed, int64_t n, int64_t p, bool intercept, bool expanded,
                    double outlier_scale = 8.0, double feature_scale = 1.0) {
  Rng rng(seed);
  Batch<T> b;
  b.n = n;
  b.cols = p + (intercept && expanded ? 1 : 0);
  b.x.resize(static_cast<size_t>(n * b.cols));
  b.y.resize(static_cast<size_t>(n));
  b.w.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double target = intercept ? 0.7 : 0.0;
    for (int64_t j = 0; j < p; ++j) {
      const T v = static_cast<T>(rng.normal() * feature_scale);
      b.x[i * b.cols + j] = v;
      target += static_cast<double>(v) / feature_scale * (0.5 + 0.25 * static_cast<double>(j % 5));
    }
    if (intercept && expanded)
      b.x[i * b.cols + p] = T(1);
    target += 0.2 * rng.normal();
    if (i % 50 == 7)
      target += outlier_scale * rng.normal();
    b.y[i] = static_cast<T>(target);
    b.w[i] = static_cast<T>(1 + (i % 3));
  }
  return b;
}

template <class T>
struct HostState {
  std::vector<T> coef, info;
  RhCudaHostState view{};
  explicit HostState(int64_t P) : coef(P), info(P * P) {
    view.abi_version = RH_CUDA_ABI_VERSION;
    view.struct_size = sizeof view;
    view.coefficients = coef.data();
    view.information = info.data();
  }
};

// Makes e's committed state one without K, as the package restores it for a stream without
// inference: beta = 0 and J = information_diagonal I, the empty state (no rows) when weight is 0,
// else one row of that weight. A new engine keeps K, and an unpenalised update that keeps K
// forms its Gram from the scaled rows it writes for K, so it takes neither the fused row pass,
// nor Newton's incremental Gram, nor the speculative Newton step; from such a state it takes
// them where they apply.
template <class T>
RhCudaStatus restore_without_k(RhCudaEngine* e, int64_t P, double information_diagonal = 0.0,
                               double weight = 0.0) {
  const std::vector<T> coef(static_cast<size_t>(P), T(0));
  std::vector<T> info(static_cast<size_t>(P * P), T(0));
  for (int64_t j = 0; j < P; ++j)
    info[static_cast<size_t>(j * P + j)] = static_cast<T>(information_diagonal);
  RhCudaHostStateView v = abi_struct<RhCudaHostStateView>();
  v.coefficients = coef.data();
  v.information = info.data();
  if (weight > 0.0) {
    v.n_samples_seen = 1;
    v.batch_count = 1;
    v.weight_sum = weight;
  }
  return rh_cuda_engine_restore(e, &v);
}

inline double max_abs_diff(const double* a, const double* b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; ++i)
    worst = std::fmax(worst, std::fabs(a[i] - b[i]));
  return worst;
}

template <class T>
double max_rel_diff(const std::vector<T>& a, const std::vector<T>& b) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::fmax(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::fmax(scale, std::fabs(static_cast<double>(b[i])));
  }
  return worst / (scale > 0.0 ? scale : 1.0);
}

#ifdef RH_CPU_ENGINE_PATH
// librh_cpu (the build's, at RH_CPU_ENGINE_PATH) for comparisons, or nullptr with the reason
// printed and a failure counted.
inline void* open_cpu_engine() {
  void* lib = dlopen(RH_CPU_ENGINE_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "  cannot load %s: %s\n", RH_CPU_ENGINE_PATH, dlerror());
    ++failures();
  }
  return lib;
}
#endif

}  // namespace rhtest
