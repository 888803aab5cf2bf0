// Every exported function of librh_cuda, and every way of calling it wrongly: each misuse
// returns the documented status, names the offending field, and leaves the state untouched.
// Also the engine lifecycle: engines made from pooled resources (sequentially, many alive at
// once, from two threads) give a fresh engine's result bit for bit, a FAST_MATH engine's TF32
// mode never reaches the strict engine that reuses its resources, and staged host input equals
// device input bit for bit for every staging mode and thread count.
//
//   test_cuda_entry_points                       all of the above (also run under the sanitizers)
//   test_cuda_entry_points --allocation-failure  ALLOCATION_FAILED from absurd but valid sizes
//                                                (a separate ctest: compute-sanitizer reports the
//                                                failed allocations themselves as errors)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "test_support.hpp"

using namespace rhtest;

namespace {

constexpr int64_t kP = 5;  // 4 features + intercept
constexpr int64_t kFeatures = 4;

bool last_error_mentions(const RhCudaEngine* engine, const char* needle) {
  const char* text = engine ? rh_cuda_engine_last_error(engine) : rh_cuda_last_error();
  const bool found = text != nullptr && std::strstr(text, needle) != nullptr;
  if (!found)
    std::fprintf(stderr, "  expected '%s' in error text '%s'\n", needle, text ? text : "(null)");
  return found;
}

struct Snapshot {
  explicit Snapshot(int64_t P) : state(P) {}
  HostState<double> state;
  void take(RhCudaEngine* e) {
    RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &state.view), RH_CUDA_SUCCESS);
  }
  bool same_as(const Snapshot& other) const {
    return state.coef == other.state.coef && state.info == other.state.info &&
           state.view.n_samples_seen == other.state.view.n_samples_seen &&
           state.view.batch_count == other.state.view.batch_count &&
           state.view.weight_sum == other.state.view.weight_sum &&
           state.view.previous_lambda == other.state.view.previous_lambda;
  }
};

void test_library_queries() {
  RH_CHECK(rh_cuda_abi_version() == RH_CUDA_ABI_VERSION);
  RH_CHECK(rh_cuda_last_error() != nullptr);
  RH_CHECK_STATUS(rh_cuda_is_available(nullptr), RH_CUDA_INVALID_ARGUMENT);
  int32_t count = -1;
  RH_CHECK_STATUS(rh_cuda_device_count(&count), RH_CUDA_SUCCESS);
  RH_CHECK(count >= 1);
  RH_CHECK_STATUS(rh_cuda_device_count(nullptr), RH_CUDA_INVALID_ARGUMENT);
  RhCudaRuntimeInfo info{};
  RH_CHECK_STATUS(rh_cuda_runtime_info(&info), RH_CUDA_INVALID_ARGUMENT);  // header not filled
  info.abi_version = RH_CUDA_ABI_VERSION;
  info.struct_size = sizeof info - 1;
  RH_CHECK_STATUS(rh_cuda_runtime_info(&info), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(nullptr, "RhCudaRuntimeInfo"));
  info.struct_size = sizeof info;
  RH_CHECK_STATUS(rh_cuda_runtime_info(&info), RH_CUDA_SUCCESS);
  RH_CHECK(info.runtime_version >= 12000 &&
           info.driver_version >= info.runtime_version / 1000 * 1000);
  RH_CHECK(info.device_count == count);
  RH_CHECK_STATUS(rh_cuda_runtime_info(nullptr), RH_CUDA_INVALID_ARGUMENT);
  std::printf("runtime %d driver %d devices %d\n", info.runtime_version, info.driver_version,
              info.device_count);
}

void test_create_rejects_bad_options() {
  RhCudaEngine* engine = reinterpret_cast<RhCudaEngine*>(0x1);
  RH_CHECK_STATUS(rh_cuda_engine_create(nullptr, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(engine == nullptr);
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, nullptr), RH_CUDA_INVALID_ARGUMENT);

  o.struct_size = sizeof o - 8;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(nullptr, "struct_size"));
  o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  o.abi_version = 1;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(nullptr, "abi_version"));
  o = options(7, kP);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(nullptr, "dtype"));
  o = options(RH_CUDA_DTYPE_FLOAT64, 0);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  o = options(RH_CUDA_DTYPE_FLOAT64, int64_t{1} << 40);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  o = options(RH_CUDA_DTYPE_FLOAT64, kP, uint64_t{1} << 5);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  o = options(RH_CUDA_DTYPE_FLOAT64, kP, RH_CUDA_ENGINE_FLAG_FAST_MATH);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(nullptr, "FAST_MATH"));
  int32_t count = 0;
  rh_cuda_device_count(&count);
  o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  o.device_id = -1;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(nullptr, "device_id"));
  o.device_id = count;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(engine == nullptr);
  RH_CHECK_STATUS(rh_cuda_engine_destroy(nullptr), RH_CUDA_SUCCESS);
}

void test_null_engine_everywhere() {
  RhCudaHostBatch b{};
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  RhCudaDiagnostics d = diagnostics();
  HostState<double> s(kP);
  uintptr_t stream = 0;
  RhCudaPrediction p{};
  RhCudaEngineFeatures f{};
  RhCudaHostStateView v{};
  RhCudaDeviceBatch db{};
  RH_CHECK_STATUS(rh_cuda_engine_restore(nullptr, &v), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(nullptr, &s.view), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_update_host(nullptr, &b, &c, &d), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(nullptr, &b, &c, &d, &s.view),
                  RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_update_device_with_state(nullptr, &db, &c, &d, &s.view),
                  RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_stream(nullptr, &stream), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_predict(nullptr, &p), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_synchronize(nullptr), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_features(nullptr, &f), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(std::strcmp(rh_cuda_engine_last_error(nullptr), "engine is null") == 0);
}

// P: the engine's parameter count (the size of the state it copies out).
template <class Call>
void expect_refused(RhCudaEngine* e, const char* what, RhCudaStatus expected, const char* needle,
                    Call&& call, int64_t P = kP) {
  Snapshot before(P), after(P);
  before.take(e);
  const RhCudaStatus got = call();
  if (got != expected) {
    std::fprintf(stderr, "  %s: status %d, expected %d (%s)\n", what, got, expected,
                 rh_cuda_engine_last_error(e));
    ++failures();
  }
  if (needle != nullptr)
    RH_CHECK(last_error_mentions(e, needle));
  after.take(e);
  if (!before.same_as(after)) {
    std::fprintf(stderr, "  %s: committed state changed by a refused call\n", what);
    ++failures();
  }
}

void test_update_misuse(RhCudaEngine* e) {
  Batch<double> good = make_batch<double>(11, 64, kFeatures, true, true);
  RhCudaDiagnostics d = diagnostics();
  const RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  // Give the engine a non-trivial state first, so "unchanged" means something.
  RhCudaHostBatch gb = good.view();
  RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &gb, &c, &d), RH_CUDA_SUCCESS);

  auto update = [&](RhCudaHostBatch b, RhCudaUpdateConfig cc) {
    RhCudaDiagnostics dd = diagnostics();
    return rh_cuda_engine_update_host(e, &b, &cc, &dd);
  };
  expect_refused(e, "null batch", RH_CUDA_INVALID_ARGUMENT, nullptr,
                 [&] { return rh_cuda_engine_update_host(e, nullptr, &c, &d); });
  expect_refused(e, "null config", RH_CUDA_INVALID_ARGUMENT, nullptr,
                 [&] { return rh_cuda_engine_update_host(e, &gb, nullptr, &d); });
  expect_refused(e, "null diagnostics", RH_CUDA_INVALID_ARGUMENT, nullptr,
                 [&] { return rh_cuda_engine_update_host(e, &gb, &c, nullptr); });

  RhCudaUpdateConfig cc = c;
  cc.struct_size = 8;
  expect_refused(e, "config struct_size", RH_CUDA_INVALID_ARGUMENT, "struct_size",
                 [&] { return update(gb, cc); });
  cc = c;
  cc.abi_version = 3;
  expect_refused(e, "config abi_version", RH_CUDA_INVALID_ARGUMENT, "abi_version",
                 [&] { return update(gb, cc); });
  cc = c;
  cc.penalty = 9;
  expect_refused(e, "unknown penalty", RH_CUDA_INVALID_ARGUMENT, "penalty",
                 [&] { return update(gb, cc); });
  cc = c;
  cc.reserved0 = 1;
  expect_refused(e, "config reserved0", RH_CUDA_INVALID_ARGUMENT, "reserved0",
                 [&] { return update(gb, cc); });
  cc = c;
  cc.max_iter = 0;
  expect_refused(e, "max_iter", RH_CUDA_INVALID_ARGUMENT, "max_iter",
                 [&] { return update(gb, cc); });
  cc = c;
  cc.tau = std::numeric_limits<double>::quiet_NaN();
  expect_refused(e, "tau NaN", RH_CUDA_INVALID_ARGUMENT, "tau", [&] { return update(gb, cc); });
  cc = c;
  cc.lambda_scale = -1.0;
  expect_refused(e, "lambda_scale", RH_CUDA_INVALID_ARGUMENT, "lambda_scale",
                 [&] { return update(gb, cc); });
  cc = c;
  cc.n_features_in = kP + 3;
  expect_refused(e, "n_features_in", RH_CUDA_INVALID_ARGUMENT, "n_features_in",
                 [&] { return update(gb, cc); });

  RhCudaHostBatch b = gb;
  b.struct_size = 16;
  expect_refused(e, "batch struct_size", RH_CUDA_INVALID_ARGUMENT, "struct_size",
                 [&] { return update(b, c); });
  b = gb;
  b.abi_version = 0;
  expect_refused(e, "batch abi_version", RH_CUDA_INVALID_ARGUMENT, "abi_version",
                 [&] { return update(b, c); });
  b = gb;
  b.n_columns = kP + 1;
  expect_refused(e, "n_columns off", RH_CUDA_INVALID_ARGUMENT, "n_columns",
                 [&] { return update(b, c); });
  b = gb;
  b.n_rows = 0;
  expect_refused(e, "n_rows 0", RH_CUDA_INVALID_ARGUMENT, "n_rows", [&] { return update(b, c); });
  b = gb;
  b.n_rows = int64_t{1} << 62;
  b.batch_weight = static_cast<double>(b.n_rows);
  expect_refused(e, "overflowing size", RH_CUDA_INVALID_ARGUMENT, nullptr,
                 [&] { return update(b, c); });
  b = gb;
  b.x_design = nullptr;
  expect_refused(e, "null x", RH_CUDA_INVALID_ARGUMENT, "x_design", [&] { return update(b, c); });
  b = gb;
  b.batch_weight = 63.0;
  expect_refused(e, "batch_weight without weights", RH_CUDA_INVALID_ARGUMENT, "batch_weight",
                 [&] { return update(b, c); });

  Batch<double> bad = good;
  bad.x[3 * bad.cols + 2] = std::numeric_limits<double>::quiet_NaN();
  expect_refused(e, "NaN in X", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostBatch.x_design[3, 2] is nan: values must be finite",
                 [&] { return update(bad.view(), c); });
  bad = good;
  bad.y[9] = std::numeric_limits<double>::infinity();
  expect_refused(e, "Inf in y", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostBatch.y[9] is inf: values must be finite",
                 [&] { return update(bad.view(), c); });
  bad = good;
  bad.w[4] = std::numeric_limits<double>::quiet_NaN();
  b = bad.view(true);
  b.batch_weight = good.view(true).batch_weight;  // the claimed sum stays finite; the data is not
  expect_refused(e, "NaN in w", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostBatch.sample_weight[4] is nan: values must be finite",
                 [&] { return update(b, c); });
  bad = good;
  bad.w[5] = -1.0;
  expect_refused(
      e, "negative w", RH_CUDA_INVALID_ARGUMENT,
      "RhCudaHostBatch.sample_weight[5] is negative: values must be >= 0 (this one is -1)",
      [&] { return update(bad.view(true), c); });
  b = good.view(true);
  b.batch_weight *= 1.01;
  expect_refused(e, "weight sum mismatch", RH_CUDA_INVALID_ARGUMENT, "batch_weight",
                 [&] { return update(b, c); });

  // Device entry point given host memory.
  RhCudaDeviceBatch db{};
  std::memcpy(&db, &gb, sizeof db);
  HostState<double> out(kP);
  expect_refused(e, "host pointers as device batch", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaDeviceBatch.x_design", [&] {
                   RhCudaDiagnostics dd = diagnostics();
                   return rh_cuda_engine_update_device_with_state(e, &db, &c, &dd, &out.view);
                 });
  expect_refused(e, "null state out", RH_CUDA_INVALID_ARGUMENT, nullptr,
                 [&] { return rh_cuda_engine_update_host_with_state(e, &gb, &c, &d, nullptr); });
}

void test_predict_misuse_and_services(RhCudaEngine* e) {
  Batch<double> data = make_batch<double>(5, 16, kFeatures, true, false);
  std::vector<double> out(16, -1.0);
  RhCudaPrediction p = prediction(data.x.data(), out.data(), 16, kFeatures);
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &p), RH_CUDA_SUCCESS);
  RhCudaPrediction q = p;
  q.input_location = 0;
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_INVALID_ARGUMENT);
  q = p;
  q.reserved0 = 1;
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_INVALID_ARGUMENT);
  q = p;
  q.input_location = RH_CUDA_MEMORY_DEVICE;
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(last_error_mentions(e, "RhCudaPrediction.x_design"));
  q = p;
  q.n_columns = kP + 2;
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, nullptr), RH_CUDA_INVALID_ARGUMENT);

  uintptr_t stream = 0;
  RH_CHECK_STATUS(rh_cuda_engine_stream(e, &stream), RH_CUDA_SUCCESS);
  RH_CHECK(stream != 0);
  RH_CHECK_STATUS(rh_cuda_engine_stream(e, nullptr), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_synchronize(e), RH_CUDA_SUCCESS);
  RhCudaEngineFeatures f{};
  RH_CHECK_STATUS(rh_cuda_engine_features(e, &f), RH_CUDA_INVALID_ARGUMENT);
  f.abi_version = RH_CUDA_ABI_VERSION;
  f.struct_size = sizeof f;
  RH_CHECK_STATUS(rh_cuda_engine_features(e, &f), RH_CUDA_SUCCESS);
  RH_CHECK(f.requested_flags == 0 && f.enabled_flags == 0);
}

void test_restore_misuse(RhCudaEngine* e) {
  HostState<double> s(kP);
  for (int64_t i = 0; i < kP; ++i)
    s.coef[i] = 0.1 * static_cast<double>(i);
  const RhCudaHostStateView v = restore_view(s.coef.data(), s.info.data(), 10, 1, 10.0);
  RhCudaHostStateView w = v;
  w.batch_count = 0;
  expect_refused(e, "batch_count inconsistent", RH_CUDA_INVALID_ARGUMENT, "batch_count",
                 [&] { return rh_cuda_engine_restore(e, &w); });
  w = v;
  w.struct_size = 40;
  expect_refused(e, "state struct_size", RH_CUDA_INVALID_ARGUMENT, "struct_size",
                 [&] { return rh_cuda_engine_restore(e, &w); });
  s.info[7] = std::numeric_limits<double>::infinity();
  expect_refused(e, "Inf in information", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostStateView.information[1, 2] is inf: values must be finite",
                 [&] { return rh_cuda_engine_restore(e, &v); });
  s.info[7] = 0.0;
  s.coef[2] = std::numeric_limits<double>::quiet_NaN();
  expect_refused(e, "NaN in coefficients", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostStateView.coefficients[2] is nan: values must be finite",
                 [&] { return rh_cuda_engine_restore(e, &v); });
  expect_refused(e, "null view", RH_CUDA_INVALID_ARGUMENT, nullptr,
                 [&] { return rh_cuda_engine_restore(e, nullptr); });
  HostState<double> out(kP);
  out.view.struct_size = 8;
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &out.view), RH_CUDA_INVALID_ARGUMENT);
}

// The empty state restored after a batch (the start of every new stream on a kept engine; the
// engine zeroes its buffers instead of copying zeros when every byte of an array is zero): the
// export is the empty state, with and without K, and the next batch gives the same bits as the
// same batch on a new engine. A state of -0.0 (non-zero bytes) and one of zero information
// with non-zero coefficients are restored as given.
void test_restoring_zeros_after_a_batch() {
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* fresh = nullptr;
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &fresh), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  if (fresh == nullptr || e == nullptr)
    return;
  const Batch<double> first = make_batch<double>(31, 50, kFeatures, true, false);
  const Batch<double> second = make_batch<double>(32, 50, kFeatures, true, false);
  const RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  RhCudaDiagnostics d = diagnostics();
  HostState<double> want(kP), got(kP);
  std::vector<double> want_meat(kP * kP, 1.0), got_meat(kP * kP, 1.0);
  want.view.meat = want_meat.data();
  got.view.meat = got_meat.data();
  const RhCudaHostBatch b1 = first.view(), b2 = second.view();
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(fresh, &b2, &c, &d, &want.view),
                  RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &b1, &c, &d), RH_CUDA_SUCCESS);

  const std::vector<double> zeros(kP * kP, 0.0);
  RhCudaHostStateView empty = restore_view(zeros.data(), zeros.data(), 0, 0, 0.0);
  for (const double* meat : {static_cast<const double*>(nullptr), zeros.data()}) {
    empty.meat = meat;
    RH_CHECK_STATUS(rh_cuda_engine_restore(e, &empty), RH_CUDA_SUCCESS);
    got.coef.assign(kP, 9.0);
    got.info.assign(kP * kP, 9.0);
    RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &got.view), RH_CUDA_SUCCESS);
    RH_CHECK(std::memcmp(got.coef.data(), zeros.data(), kP * sizeof(double)) == 0);
    RH_CHECK(std::memcmp(got.info.data(), zeros.data(), kP * kP * sizeof(double)) == 0);
    RH_CHECK(got.view.n_samples_seen == 0 && got.view.batch_count == 0 &&
             got.view.weight_sum == 0.0);
    RH_CHECK(got.view.meat_available == (meat != nullptr ? 1 : 0));
  }
  // From the restored empty state with K, the second batch as on the new engine.
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b2, &c, &d, &got.view),
                  RH_CUDA_SUCCESS);
  RH_CHECK(got.coef == want.coef && got.info == want.info && got_meat == want_meat);
  RH_CHECK(got.view.meat_available == 1 && got.view.n_samples_seen == want.view.n_samples_seen);

  // -0.0 everywhere: not all-zero bytes, so copied; the export keeps the signs.
  const std::vector<double> negative_zeros(kP * kP, -0.0);
  RhCudaHostStateView signed_zeros =
      restore_view(negative_zeros.data(), negative_zeros.data(), 0, 0, 0.0);
  RH_CHECK_STATUS(rh_cuda_engine_restore(e, &signed_zeros), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &got.view), RH_CUDA_SUCCESS);
  RH_CHECK(std::memcmp(got.info.data(), negative_zeros.data(), kP * kP * sizeof(double)) == 0);
  RH_CHECK(std::memcmp(got.coef.data(), negative_zeros.data(), kP * sizeof(double)) == 0);
  RH_CHECK(got.view.meat_available == 0);

  // Zero information, non-zero coefficients: each array takes its own path.
  std::vector<double> coefficients(kP);
  for (int64_t j = 0; j < kP; ++j)
    coefficients[j] = 0.25 * static_cast<double>(j + 1);
  RhCudaHostStateView mixed = restore_view(coefficients.data(), zeros.data(), 7, 1, 7.0);
  RH_CHECK_STATUS(rh_cuda_engine_restore(e, &mixed), RH_CUDA_SUCCESS);
  got.info.assign(kP * kP, 9.0);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &got.view), RH_CUDA_SUCCESS);
  RH_CHECK(got.coef == coefficients);
  RH_CHECK(std::memcmp(got.info.data(), zeros.data(), kP * kP * sizeof(double)) == 0);
  RH_CHECK(got.view.n_samples_seen == 7 && got.view.batch_count == 1);
  RH_CHECK_STATUS(rh_cuda_engine_destroy(fresh), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
}

// ------------------------------------------------------------------ lifecycle and pooling

// One batch as raw bytes, so float32 and float64 cases share the code below.
struct Case {
  const char* name = "";
  int32_t dtype = RH_CUDA_DTYPE_FLOAT64;
  int64_t p = 0;
  bool intercept = true;
  uint64_t flags = 0;
  int32_t penalty = RH_CUDA_PENALTY_NONE;
  bool weighted = false;
  int64_t n = 0;
  std::vector<unsigned char> x, y, w;
  double batch_weight = 0.0;

  int64_t P() const {
    return p + (intercept ? 1 : 0);
  }
  size_t elem() const {
    return dtype == RH_CUDA_DTYPE_FLOAT32 ? sizeof(float) : sizeof(double);
  }
  RhCudaHostBatch view() const {
    // n_columns = p: the engine appends the intercept column.
    return host_batch(x.data(), y.data(), weighted ? w.data() : nullptr, n, p, batch_weight);
  }
  RhCudaUpdateConfig update_config() const {
    return config(p, penalty);
  }
};

template <class T>
void fill_case(Case& c, uint64_t seed) {
  Batch<T> b = make_batch<T>(seed, c.n, c.p, c.intercept, false);
  auto bytes = [](const std::vector<T>& v) {
    std::vector<unsigned char> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  c.x = bytes(b.x);
  c.y = bytes(b.y);
  c.w = bytes(b.w);
  c.batch_weight = b.view(c.weighted).batch_weight;
}

Case make_case(const char* name, int32_t dtype, int64_t n, int64_t p, bool intercept,
               uint64_t flags, int32_t penalty, bool weighted, uint64_t seed) {
  Case c;
  c.name = name;
  c.dtype = dtype;
  c.n = n;
  c.p = p;
  c.intercept = intercept;
  c.flags = flags;
  c.penalty = penalty;
  c.weighted = weighted;
  if (dtype == RH_CUDA_DTYPE_FLOAT32) {
    fill_case<float>(c, seed);
  } else {
    fill_case<double>(c, seed);
  }
  return c;
}

// What one update produced: the exported state and diagnostics as bits.
struct Outcome {
  RhCudaStatus status = RH_CUDA_INTERNAL_ERROR;
  std::string error;
  std::vector<unsigned char> coef, info;
  RhCudaDiagnostics diag{};
  int64_t n_seen = 0, batches = 0;
  double lambda = 0.0, weight = 0.0;
  uintptr_t stream = 0;
};

bool same_double(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_bits(const Outcome& a, const Outcome& b) {
  return a.status == RH_CUDA_SUCCESS && b.status == RH_CUDA_SUCCESS && a.coef == b.coef &&
         a.info == b.info && a.diag.iterations == b.diag.iterations &&
         a.diag.converged == b.diag.converged &&
         a.diag.used_regularized_fallback == b.diag.used_regularized_fallback &&
         same_double(a.diag.objective, b.diag.objective) &&
         same_double(a.diag.lambda_value, b.diag.lambda_value) &&
         same_double(a.diag.bandwidth, b.diag.bandwidth) && a.n_seen == b.n_seen &&
         a.batches == b.batches && same_double(a.lambda, b.lambda) &&
         same_double(a.weight, b.weight);
}

void describe_mismatch(const char* what, const Case& c, const Outcome& got, const Outcome& want) {
  std::fprintf(stderr,
               "  %s (%s): status %d/%d (%s), iterations %lld/%lld, objective %.17g/%.17g, "
               "coefficients %s, information %s\n",
               what, c.name, static_cast<int>(got.status), static_cast<int>(want.status),
               got.error.c_str(), static_cast<long long>(got.diag.iterations),
               static_cast<long long>(want.diag.iterations), got.diag.objective,
               want.diag.objective, got.coef == want.coef ? "equal" : "DIFFER",
               got.info == want.info ? "equal" : "DIFFER");
}

// One update of `c` on engine `e` (host input unless `device` is given), with the state export.
Outcome update(RhCudaEngine* e, const Case& c, const DeviceBatchCopy* device = nullptr) {
  Outcome out;
  const int64_t P = c.P();
  out.coef.assign(static_cast<size_t>(P) * c.elem(), 0);
  out.info.assign(static_cast<size_t>(P * P) * c.elem(), 0);
  RhCudaHostState state = abi_struct<RhCudaHostState>();
  state.coefficients = out.coef.data();
  state.information = out.info.data();
  out.diag = diagnostics();
  const RhCudaUpdateConfig cfg = c.update_config();
  RhCudaHostBatch hb = c.view();
  if (device == nullptr) {
    out.status = rh_cuda_engine_update_host_with_state(e, &hb, &cfg, &out.diag, &state);
  } else {
    out.status =
        rh_cuda_engine_update_device_with_state(e, device->batch(), &cfg, &out.diag, &state);
  }
  if (out.status != RH_CUDA_SUCCESS)
    out.error = rh_cuda_engine_last_error(e);
  out.n_seen = state.n_samples_seen;
  out.batches = state.batch_count;
  out.lambda = state.previous_lambda;
  out.weight = state.weight_sum;
  rh_cuda_engine_stream(e, &out.stream);
  return out;
}

// A whole lifecycle: create, one update, destroy. Safe to call from several threads.
Outcome fresh_fit(const Case& c) {
  RhCudaEngineOptions o = options(c.dtype, c.P(), c.flags);
  RhCudaEngine* e = nullptr;
  Outcome out;
  out.status = rh_cuda_engine_create(&o, &e);
  if (out.status != RH_CUDA_SUCCESS) {
    out.error = rh_cuda_last_error();
    return out;
  }
  out = update(e, c);
  const RhCudaStatus destroyed = rh_cuda_engine_destroy(e);
  if (destroyed != RH_CUDA_SUCCESS && out.status == RH_CUDA_SUCCESS) {
    out.status = destroyed;
    out.error = rh_cuda_last_error();
  }
  return out;
}

std::vector<Case> lifecycle_cases() {
  std::vector<Case> cases;
  cases.push_back(make_case("f64 none p4+1", RH_CUDA_DTYPE_FLOAT64, 300, 4, true, 0,
                            RH_CUDA_PENALTY_NONE, false, 21));
  cases.push_back(make_case("f32 l1 graphs p16+1", RH_CUDA_DTYPE_FLOAT32, 4096, 16, true,
                            RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS, RH_CUDA_PENALTY_L1, false, 22));
  cases.push_back(make_case("f64 none graphs weighted p8", RH_CUDA_DTYPE_FLOAT64, 1000, 8, false,
                            RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS, RH_CUDA_PENALTY_NONE, true, 23));
  cases.push_back(make_case("f32 fast-math none p24+1", RH_CUDA_DTYPE_FLOAT32, 2048, 24, true,
                            RH_CUDA_ENGINE_FLAG_FAST_MATH, RH_CUDA_PENALTY_NONE, false, 24));
  return cases;
}

void test_engines_from_pooled_resources_match_fresh_ones() {
  const std::vector<Case> cases = lifecycle_cases();
  std::vector<Outcome> reference;
  for (const Case& c : cases) {
    reference.push_back(fresh_fit(c));
    RH_CHECK_STATUS(reference.back().status, RH_CUDA_SUCCESS);
  }
  // Sequential create/update/destroy, alternating shapes, dtypes and flags, so every engine is
  // made from a set another kind of engine just returned.
  int reused_stream = 0;
  uintptr_t last_stream = 0;
  for (int round = 0; round < 24; ++round) {
    const size_t k = static_cast<size_t>(round) % cases.size();
    const Outcome got = fresh_fit(cases[k]);
    if (!same_bits(got, reference[k])) {
      describe_mismatch("sequential lifecycle", cases[k], got, reference[k]);
      ++failures();
    }
    reused_stream += got.stream == last_stream ? 1 : 0;
    last_stream = got.stream;
  }
  // With nothing else running, the set a destroy returned is the one the next create takes.
  RH_CHECK(reused_stream >= 20);

  // A set keeps an engine's device buffers for the next one only up to its allowance (64 MiB):
  // after a batch whose workspace is larger (300,000 x 32 float64: its scaled rows alone are
  // 79 MB), the set goes idle without its largest buffers, and the engines made from it next,
  // of every kind, still match.
  {
    const Case big = make_case("f64 none p32+1 300,000 rows", RH_CUDA_DTYPE_FLOAT64, 300000, 32,
                               true, 0, RH_CUDA_PENALTY_NONE, false, 25);
    RH_CHECK_STATUS(fresh_fit(big).status, RH_CUDA_SUCCESS);
    for (size_t k = 0; k < cases.size(); ++k) {
      const Outcome got = fresh_fit(cases[k]);
      if (!same_bits(got, reference[k])) {
        describe_mismatch("after a set trimmed to its allowance", cases[k], got, reference[k]);
        ++failures();
      }
    }
  }

  // More engines alive at once than the pool keeps idle: the surplus is released for real on
  // destroy, and the engines made afterwards still match.
  for (int wave = 0; wave < 2; ++wave) {
    std::vector<RhCudaEngine*> alive;
    for (size_t i = 0; i < 7; ++i) {
      const Case& c = cases[i % cases.size()];
      RhCudaEngineOptions o = options(c.dtype, c.P(), c.flags);
      RhCudaEngine* e = nullptr;
      RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
      if (e != nullptr)
        alive.push_back(e);
    }
    for (size_t i = 0; i < alive.size(); ++i) {
      const Case& c = cases[i % cases.size()];
      const Outcome got = update(alive[i], c);
      if (!same_bits(got, reference[i % cases.size()])) {
        describe_mismatch("many engines alive", c, got, reference[i % cases.size()]);
        ++failures();
      }
    }
    for (RhCudaEngine* e : alive)
      RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
  }
  // An engine that failed an update is returned to the pool too; the next one must not notice.
  {
    RhCudaEngineOptions o = options(cases[0].dtype, cases[0].P(), cases[0].flags);
    RhCudaEngine* e = nullptr;
    RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
    if (e != nullptr) {
      Case bad = cases[0];
      const double nan = std::numeric_limits<double>::quiet_NaN();
      std::memcpy(bad.x.data() + 5 * bad.elem(), &nan, sizeof nan);
      const Outcome refused = update(e, bad);
      RH_CHECK(refused.status == RH_CUDA_INVALID_ARGUMENT);
      RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
    }
    const Outcome got = fresh_fit(cases[0]);
    if (!same_bits(got, reference[0])) {
      describe_mismatch("after a refused update", cases[0], got, reference[0]);
      ++failures();
    }
  }
  std::printf("pooled lifecycle: %d of 24 sequential engines reused the previous stream\n",
              reused_stream);
}

void test_engines_created_from_two_threads() {
  const std::vector<Case> cases = lifecycle_cases();
  std::vector<Outcome> reference;
  for (const Case& c : cases)
    reference.push_back(fresh_fit(c));
  constexpr int kThreads = 2, kRounds = 12;
  int mismatches[kThreads] = {0, 0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t k = static_cast<size_t>(round + 2 * t) % cases.size();
        const Outcome got = fresh_fit(cases[k]);
        if (!same_bits(got, reference[k])) {
          describe_mismatch("concurrent lifecycle", cases[k], got, reference[k]);
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t) {
    if (mismatches[t] != 0) {
      std::fprintf(stderr, "  thread %d: %d of %d lifecycles differed from a fresh engine\n", t,
                   mismatches[t], kRounds);
      ++failures();
    }
  }
}

void test_strict_engine_after_fast_math_engine() {
  Case strict = make_case("f32 strict p64+1", RH_CUDA_DTYPE_FLOAT32, 2048, 64, true, 0,
                          RH_CUDA_PENALTY_NONE, false, 31);
  Case fast = strict;
  fast.name = "f32 fast-math p64+1";
  fast.flags = RH_CUDA_ENGINE_FLAG_FAST_MATH;
  const Outcome want = fresh_fit(strict);
  RH_CHECK_STATUS(want.status, RH_CUDA_SUCCESS);
  const Outcome tf32 = fresh_fit(fast);
  RH_CHECK_STATUS(tf32.status, RH_CUDA_SUCCESS);
  const Outcome got = fresh_fit(strict);
  if (!same_bits(got, want)) {
    describe_mismatch("strict engine made from a FAST_MATH engine's resources", strict, got, want);
    ++failures();
  }
  // The strict engine must really have taken the FAST_MATH engine's set for this to mean much.
  RH_CHECK(got.stream == tf32.stream);
  std::printf("fast math: TF32 %s the strict float32 result (a leaked TF32 mode %s be seen)\n",
              same_bits(tf32, want) ? "did not change" : "changed",
              same_bits(tf32, want) ? "could not" : "would");
}

void set_env(const char* name, const char* value) {
  if (value == nullptr) {
    unsetenv(name);
  } else {
    setenv(name, value, 1);
  }
}

// The host staging settings the staging tests run under (RH_CUDA_STAGING and
// RH_CUDA_STAGING_THREADS; null: unset), and an engine created under one of them.
struct StagingMode {
  const char* staging;
  const char* threads;
};
constexpr StagingMode kStagingModes[] = {
    {nullptr, nullptr}, {"pinned", "1"}, {"pinned", "3"}, {"plain", nullptr}};

RhCudaEngine* create_with_staging(const RhCudaEngineOptions& o, const StagingMode& m) {
  set_env("RH_CUDA_STAGING", m.staging);
  set_env("RH_CUDA_STAGING_THREADS", m.threads);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  set_env("RH_CUDA_STAGING", nullptr);
  set_env("RH_CUDA_STAGING_THREADS", nullptr);
  return e;
}

void test_staged_host_input_equals_device_input() {
  // Larger than the old 8 MB chunk and many of the adaptive ones; odd lengths, weights.
  const Case cases[] = {make_case("f64 none weighted 33001 x 32", RH_CUDA_DTYPE_FLOAT64, 33001, 32,
                                  true, 0, RH_CUDA_PENALTY_NONE, true, 41),
                        make_case("f32 l1 20001 x 40", RH_CUDA_DTYPE_FLOAT32, 20001, 40, true, 0,
                                  RH_CUDA_PENALTY_L1, false, 42)};
  for (const Case& c : cases) {
    const DeviceBatchCopy device(c.view(), c.elem(), c.name);
    Outcome want;
    std::vector<unsigned char> want_prediction(static_cast<size_t>(c.n) * c.elem());
    {
      RhCudaEngineOptions o = options(c.dtype, c.P(), c.flags);
      RhCudaEngine* e = nullptr;
      RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
      if (e == nullptr)
        continue;
      want = update(e, c, &device);
      RH_CHECK_STATUS(want.status, RH_CUDA_SUCCESS);
      void* out = nullptr;
      RH_CHECK(cudaMalloc(&out, want_prediction.size()) == cudaSuccess);
      RhCudaPrediction q = prediction(device.x(), out, c.n, c.p, RH_CUDA_MEMORY_DEVICE);
      RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_SUCCESS);
      cudaMemcpy(want_prediction.data(), out, want_prediction.size(), cudaMemcpyDeviceToHost);
      cudaFree(out);
      RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
    }
    for (const StagingMode& m : kStagingModes) {
      RhCudaEngine* e = create_with_staging(options(c.dtype, c.P(), c.flags), m);
      if (e == nullptr)
        continue;
      const Outcome got = update(e, c);
      if (!same_bits(got, want)) {
        std::fprintf(stderr, "  staging %s, threads %s:\n", m.staging ? m.staging : "default",
                     m.threads ? m.threads : "default");
        describe_mismatch("host input vs device input", c, got, want);
        ++failures();
      }
      std::vector<unsigned char> predicted(want_prediction.size(), 0xA5);
      RhCudaPrediction q = prediction(c.x.data(), predicted.data(), c.n, c.p);
      RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_SUCCESS);
      if (predicted != want_prediction) {
        std::fprintf(stderr, "  staging %s, threads %s: host prediction differs from device\n",
                     m.staging ? m.staging : "default", m.threads ? m.threads : "default");
        ++failures();
      }
      RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
    }
    // Page-locked host arrays (cudaHostRegister here; cudaMallocHost memory is the same kind) go
    // to the DMA engine in place; with only the first half of X locked the batch is staged as
    // pageable memory. Both give the device input's bits.
    for (const bool whole : {true, false}) {
      Case locked = c;  // arrays of its own to lock
      std::vector<void*> registered;
      auto lock = [&](std::vector<unsigned char>& v, size_t bytes) {
        if (cudaHostRegister(v.data(), bytes, cudaHostRegisterDefault) == cudaSuccess) {
          registered.push_back(v.data());
        } else {
          std::fprintf(stderr, "  cudaHostRegister of %zu bytes failed\n", bytes);
          ++failures();
        }
      };
      lock(locked.x, whole ? locked.x.size() : locked.x.size() / 2);
      if (whole) {
        lock(locked.y, locked.y.size());
        if (locked.weighted)
          lock(locked.w, locked.w.size());
      }
      RhCudaEngineOptions o = options(c.dtype, c.P(), c.flags);
      RhCudaEngine* e = nullptr;
      RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
      if (e != nullptr) {
        const Outcome got = update(e, locked);
        if (!same_bits(got, want)) {
          describe_mismatch(whole ? "page-locked host input vs device input"
                                  : "host input with half of X page-locked vs device input",
                            c, got, want);
          ++failures();
        }
        RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
      }
      for (void* p : registered)
        cudaHostUnregister(p);
    }
  }
}

// Refused values spread over the chunks of a staged batch (each chunk is validated on the GPU
// as it lands): the error names the first bad value of the whole batch, whichever chunk it came
// in, for every staging mode and for device input, and the committed state is unchanged.
void test_staged_chunks_report_the_first_bad_value() {
  // 40,000 x 32 with weights, 10.9 MB: about five staged chunks.
  const int64_t n = 40000, p = 32;
  const Batch<double> good = make_batch<double>(61, n, p, true, true);
  const RhCudaUpdateConfig c = config(p, RH_CUDA_PENALTY_NONE);
  struct Bad {
    const char* what;
    const char* needle;
    Batch<double> batch;
  };
  std::vector<Bad> cases;
  Batch<double> b = good;
  b.x[31000 * b.cols + 5] = std::numeric_limits<double>::infinity();
  b.x[12000 * b.cols + 7] = std::numeric_limits<double>::quiet_NaN();
  b.x[12000 * b.cols + 9] = std::numeric_limits<double>::quiet_NaN();
  cases.push_back({"X bad in two chunks", ".x_design[12000, 7] is nan: values must be finite", b});
  b = good;
  b.y[35000] = std::numeric_limits<double>::quiet_NaN();
  b.y[20000] = -std::numeric_limits<double>::infinity();
  cases.push_back({"y bad in two chunks", ".y[20000] is -inf: values must be finite", b});
  b = good;
  b.w[n - 1] = -2.0;
  cases.push_back({"negative weight in the last row",
                   ".sample_weight[39999] is negative: values must be >= 0 (this one is -2)", b});
  b = good;
  b.w[1] = -1.0;
  b.w[n - 2] = std::numeric_limits<double>::quiet_NaN();
  cases.push_back({"NaN weight late, negative early",
                   ".sample_weight[39998] is nan: values must be finite", b});
  for (const StagingMode& m : kStagingModes) {
    RhCudaEngine* e = create_with_staging(options(RH_CUDA_DTYPE_FLOAT64, p + 1), m);
    if (e == nullptr)
      continue;
    RhCudaDiagnostics d = diagnostics();
    const RhCudaHostBatch first = good.view(true);
    RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &first, &c, &d), RH_CUDA_SUCCESS);
    for (const Bad& bad : cases) {
      RhCudaHostBatch hb = bad.batch.view(true);
      hb.batch_weight = first.batch_weight;  // a NaN weight must be named, not the sum
      expect_refused(
          e, bad.what, RH_CUDA_INVALID_ARGUMENT, bad.needle,
          [&] {
            RhCudaDiagnostics dd = diagnostics();
            return rh_cuda_engine_update_host(e, &hb, &c, &dd);
          },
          p + 1);
      if (m.staging == nullptr) {
        const DeviceBatchCopy device(hb, sizeof(double), bad.what);
        HostState<double> out(p + 1);
        expect_refused(
            e, bad.what, RH_CUDA_INVALID_ARGUMENT, bad.needle,
            [&] {
              RhCudaDiagnostics dd = diagnostics();
              return rh_cuda_engine_update_device_with_state(e, device.batch(), &c, &dd, &out.view);
            },
            p + 1);
      }
    }
    // Still usable: the good batch goes through after the refusals.
    RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &first, &c, &d), RH_CUDA_SUCCESS);
    RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
  }
}

void test_staging_settings_are_checked() {
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  const struct {
    const char* name;
    const char* value;
  } bad[] = {{"RH_CUDA_STAGING", "pinnedd"},
             {"RH_CUDA_STAGING_THREADS", "0"},
             {"RH_CUDA_STAGING_THREADS", "4x"},
             {"RH_CUDA_STAGING_THREADS", "65"}};
  for (const auto& b : bad) {
    set_env(b.name, b.value);
    RhCudaEngine* e = reinterpret_cast<RhCudaEngine*>(0x1);
    RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_INVALID_ARGUMENT);
    RH_CHECK(e == nullptr);
    RH_CHECK(last_error_mentions(nullptr, b.name));
    set_env(b.name, nullptr);
  }
}

// Sizes that pass validation but cannot be allocated: ALLOCATION_FAILED naming the buffer, the
// committed state unchanged, and the engine's next update the one a fresh engine computes.
void test_allocation_failure() {
  const Case c = make_case("f32 none p64+1", RH_CUDA_DTYPE_FLOAT32, 512, 64, true, 0,
                           RH_CUDA_PENALTY_NONE, false, 51);
  RhCudaEngineOptions o = options(c.dtype, c.P(), c.flags);
  Outcome want_first, want_second;
  {
    RhCudaEngine* ref = nullptr;
    RH_CHECK_STATUS(rh_cuda_engine_create(&o, &ref), RH_CUDA_SUCCESS);
    if (ref == nullptr)
      return;
    want_first = update(ref, c);
    want_second = update(ref, c);
    RH_CHECK_STATUS(want_second.status, RH_CUDA_SUCCESS);
    RH_CHECK_STATUS(rh_cuda_engine_destroy(ref), RH_CUDA_SUCCESS);
  }
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  if (e == nullptr)
    return;
  const Outcome first = update(e, c);
  RH_CHECK(same_bits(first, want_first));
  auto state_bits = [&] {
    Outcome s;
    s.coef.assign(static_cast<size_t>(c.P()) * c.elem(), 0);
    s.info.assign(static_cast<size_t>(c.P() * c.P()) * c.elem(), 0);
    RhCudaHostState st = abi_struct<RhCudaHostState>();
    st.coefficients = s.coef.data();
    st.information = s.info.data();
    s.status = rh_cuda_engine_copy_state(e, &st);
    s.n_seen = st.n_samples_seen;
    s.batches = st.batch_count;
    s.lambda = st.previous_lambda;
    s.weight = st.weight_sum;
    return s;
  };
  auto same_state = [](const Outcome& a, const Outcome& b) {
    return a.status == RH_CUDA_SUCCESS && b.status == RH_CUDA_SUCCESS && a.coef == b.coef &&
           a.info == b.info && a.n_seen == b.n_seen && a.batches == b.batches &&
           same_double(a.lambda, b.lambda) && same_double(a.weight, b.weight);
  };
  const Outcome before = state_bits();
  RH_CHECK(same_state(before, first));

  // Prediction of 2^40 host rows: the staged design (2^40 x 64 floats) cannot exist. The host
  // pointers are never read: the allocation comes first.
  std::vector<float> row(static_cast<size_t>(c.p), 1.0f), out(4, 0.0f);
  RhCudaPrediction q = prediction(row.data(), out.data(), int64_t{1} << 40, c.p);
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &q), RH_CUDA_ALLOCATION_FAILED);
  RH_CHECK(last_error_mentions(e, "staged prediction design"));
  RH_CHECK(same_state(state_bits(), before));

  // An update of 2^31 - 1 host rows: its row workspaces (the scaled design alone is 2^31 x 65
  // floats, 558 GB) cannot all exist. Again nothing reads the host arrays first.
  RhCudaHostBatch b = c.view();
  b.n_rows = 2147483647;
  b.batch_weight = 2147483647.0;
  const RhCudaUpdateConfig cfg = c.update_config();
  RhCudaDiagnostics d = diagnostics();
  RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &b, &cfg, &d), RH_CUDA_ALLOCATION_FAILED);
  RH_CHECK(last_error_mentions(e, "allocating"));
  std::printf("allocation failure reported as: %s\n", rh_cuda_engine_last_error(e));
  RH_CHECK(same_state(state_bits(), before));

  const Outcome second = update(e, c);
  if (!same_bits(second, want_second)) {
    describe_mismatch("update after ALLOCATION_FAILED", c, second, want_second);
    ++failures();
  }
  RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
}

// K (the meat matrix) against the formula written out here, the 56-byte state structs of callers
// built before K (allocated at exactly that size, so a sanitizer sees any access past them),
// sizes in between refused, a bad K refused, and an L1 batch ending K.
void test_meat_and_old_size_state_structs() {
  constexpr int64_t n = 60;
  std::vector<double> x(n * kFeatures), y(n);
  uint64_t seed = 12345;
  auto uniform = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(seed >> 11) / 9007199254740992.0 - 0.5;
  };
  for (int64_t i = 0; i < n; ++i) {
    double fit = 0.5;
    for (int64_t j = 0; j < kFeatures; ++j) {
      x[i * kFeatures + j] = 4.0 * uniform();
      fit += (j % 2 ? -0.7 : 1.1) * x[i * kFeatures + j];
    }
    y[i] = fit + uniform() + (i % 7 == 0 ? 8.0 : 0.0);  // one-sided outliers beyond tau
  }
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  if (e == nullptr)
    return;
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = host_batch(x.data(), y.data(), nullptr, n, kFeatures, n);
  RhCudaDiagnostics d = diagnostics();
  HostState<double> s(kP);
  std::vector<double> meat(kP * kP, 0.0), expected(kP * kP, 0.0);
  s.view.meat = meat.data();
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &s.view), RH_CUDA_SUCCESS);
  RH_CHECK(s.view.meat_available == 1 && s.view.reserved1 == 0);
  for (int64_t i = 0; i < n; ++i) {
    double row[kP], r = y[i];
    for (int64_t j = 0; j < kP; ++j) {
      row[j] = j < kFeatures ? x[i * kFeatures + j] : 1.0;
      r -= row[j] * s.coef[j];
    }
    const double psi = r > c.tau ? c.tau : (r < -c.tau ? -c.tau : r);
    for (int64_t j = 0; j < kP; ++j) {
      for (int64_t k = 0; k < kP; ++k)
        expected[j * kP + k] += psi * psi * row[j] * row[k];
    }
  }
  double largest = 0.0;
  for (double v : expected)
    largest = std::fmax(largest, std::fabs(v));
  RH_CHECK(max_abs_diff(meat.data(), expected.data(), meat.size()) <= 1e-10 * largest);

  const uint32_t old_size = static_cast<uint32_t>(offsetof(RhCudaHostState, meat));
  RH_CHECK(old_size == 56 && offsetof(RhCudaHostStateView, meat) == 56);
  auto* old_out = static_cast<RhCudaHostState*>(std::malloc(old_size));
  auto* old_view = static_cast<RhCudaHostStateView*>(std::malloc(old_size));
  RH_CHECK(old_out != nullptr && old_view != nullptr);
  if (old_out != nullptr && old_view != nullptr) {
    std::memcpy(old_out, &s.view, old_size);
    old_out->struct_size = old_size;
    RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, old_out), RH_CUDA_SUCCESS);
    RH_CHECK(old_out->batch_count == 2);
    RhCudaHostStateView v = restore_view(s.coef.data(), s.info.data(), old_out->n_samples_seen,
                                         old_out->batch_count, old_out->weight_sum);
    v.previous_lambda = old_out->previous_lambda;
    std::memcpy(old_view, &v, old_size);
    old_view->struct_size = old_size;
    RH_CHECK_STATUS(rh_cuda_engine_restore(e, old_view), RH_CUDA_SUCCESS);
    std::fill(meat.begin(), meat.end(), -3.0);
    s.view.meat_available = 9;
    RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &s.view), RH_CUDA_SUCCESS);
    RH_CHECK(s.view.meat_available == 0 && meat[0] == -3.0);

    v.meat = expected.data();
    RH_CHECK_STATUS(rh_cuda_engine_restore(e, &v), RH_CUDA_SUCCESS);
    RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &s.view), RH_CUDA_SUCCESS);
    RH_CHECK(s.view.meat_available == 1 && meat == expected);
    v.struct_size = 60;
    expect_refused(e, "state view struct_size between the two layouts", RH_CUDA_INVALID_ARGUMENT,
                   "must be 56", [&] { return rh_cuda_engine_restore(e, &v); });
    v.struct_size = sizeof v;
    expected[kP + 1] = -1.0;
    expect_refused(e, "negative K diagonal", RH_CUDA_INVALID_ARGUMENT,
                   "RhCudaHostStateView.meat[1, 1] is negative: diagonal entries must be >= 0 "
                   "(this one is -1)",
                   [&] { return rh_cuda_engine_restore(e, &v); });
    s.view.struct_size = 64;
    expect_refused(e, "export struct_size between the two layouts", RH_CUDA_INVALID_ARGUMENT,
                   "or at least 72", [&] { return rh_cuda_engine_copy_state(e, &s.view); });
    s.view.struct_size = sizeof s.view;
    c.penalty = RH_CUDA_PENALTY_L1;
    c.lambda_scale = 0.5;
    RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &s.view), RH_CUDA_SUCCESS);
    RH_CHECK(s.view.meat_available == 0);
  }
  std::free(old_out);
  std::free(old_view);
  RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
}

}  // namespace

// A device pointer misaligned for the dtype (cudaMalloc + 1) is refused before any kernel reads
// it: a misaligned access would leave the process's CUDA context unusable. Afterwards the same
// engine, and a new one, still work.
// The rules both engines share since the reliability audit: NaN/Inf in a prediction design is
// refused naming its row and column (host and device input, the output untouched); a bandwidth
// below the normal range is refused before any work; a restored state without a batch has
// weight 0; P above 46340 is refused at creation.
void test_rules_shared_with_the_cpu_engine(RhCudaEngine* e) {
  Batch<double> data = make_batch<double>(21, 8, kFeatures, true, false);
  data.x[2 * kFeatures + 1] = std::nan("");
  std::vector<double> out(8, 7.25);
  RhCudaPrediction q = prediction(data.x.data(), out.data(), 8, kFeatures);
  expect_refused(e, "NaN in a host prediction", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaPrediction.x_design[2, 1] is nan: values must be finite",
                 [&] { return rh_cuda_engine_predict(e, &q); });
  RH_CHECK(out == std::vector<double>(8, 7.25));

  data.x[2 * kFeatures + 1] = 0.5;
  data.x[7 * kFeatures + 3] = -std::numeric_limits<double>::infinity();
  const DeviceBatchCopy device(data.view(), sizeof(double), "NaN prediction");
  void* device_out = nullptr;
  RH_CHECK(cudaMalloc(&device_out, 8 * sizeof(double)) == cudaSuccess);
  RH_CHECK(upload(device_out, out.data(), 8 * sizeof(double)) == cudaSuccess);
  RhCudaPrediction dq = prediction(device.x(), device_out, 8, kFeatures, RH_CUDA_MEMORY_DEVICE);
  expect_refused(e, "Inf in a device prediction", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaPrediction.x_design[7, 3] is -inf: values must be finite",
                 [&] { return rh_cuda_engine_predict(e, &dq); });
  std::vector<double> back(8, 0.0);
  RH_CHECK(cudaMemcpy(back.data(), device_out, 8 * sizeof(double), cudaMemcpyDeviceToHost) ==
           cudaSuccess);
  RH_CHECK(back == std::vector<double>(8, 7.25));
  cudaFree(device_out);

  Batch<double> batch = make_batch<double>(22, 40, kFeatures, true, false);
  RhCudaHostBatch hb = batch.view();
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  c.bandwidth_scale = 1e-310;  // h = 1e-310 / (sqrt(N) ln 4): subnormal
  expect_refused(e, "subnormal bandwidth", RH_CUDA_INVALID_ARGUMENT,
                 "must be a positive normal number", [&] {
                   RhCudaDiagnostics d = diagnostics();
                   return rh_cuda_engine_update_host(e, &hb, &c, &d);
                 });

  HostState<double> empty(kP);
  const RhCudaHostStateView v = restore_view(empty.coef.data(), empty.info.data(), 0, 0, 5.0);
  expect_refused(e, "weight without a batch", RH_CUDA_INVALID_ARGUMENT,
                 "weight_sum is 5 with batch_count 0",
                 [&] { return rh_cuda_engine_restore(e, &v); });

  RhCudaEngineOptions big = options(RH_CUDA_DTYPE_FLOAT32, 46341);
  RhCudaEngine* none = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&big, &none), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(none == nullptr && last_error_mentions(nullptr, "46340"));
}

void test_misaligned_device_pointers_are_refused(RhCudaEngine* e) {
  Batch<double> good = make_batch<double>(12, 64, kFeatures, true, true);
  const RhCudaHostBatch gb = good.view();
  const DeviceBatchCopy device(gb, sizeof(double), "misaligned test");
  const RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  HostState<double> state(kP);
  void* raw = nullptr;
  RH_CHECK(cudaMalloc(&raw, 64 * kP * sizeof(double) + 8) == cudaSuccess);
  const void* shifted = static_cast<const char*>(raw) + 1;
  for (int field = 0; field < 3; ++field) {
    RhCudaDeviceBatch b = *device.batch();
    (field == 0 ? b.x_design : field == 1 ? b.y : b.sample_weight) = shifted;
    if (field == 2)
      b.batch_weight = 64.0;
    expect_refused(e, "misaligned device pointer", RH_CUDA_INVALID_ARGUMENT, "not aligned", [&] {
      RhCudaDiagnostics d = diagnostics();
      return rh_cuda_engine_update_device_with_state(e, &b, &c, &d, &state.view);
    });
  }
  RhCudaPrediction p = abi_struct<RhCudaPrediction>();
  p.x_design = shifted;
  p.prediction = static_cast<char*>(raw) + 1;
  p.n_rows = 4;
  p.n_columns = kP;
  p.n_features_in = kFeatures;
  p.input_location = RH_CUDA_MEMORY_DEVICE;
  expect_refused(e, "misaligned device prediction", RH_CUDA_INVALID_ARGUMENT, "not aligned",
                 [&] { return rh_cuda_engine_predict(e, &p); });
  // Host arrays, states and predictions too (rh_check_aligned, the same words): a host copy of
  // the batch 4 bytes into double-aligned memory, and state targets likewise.
  std::vector<double> room(64 * kP + 1);
  char* odd = reinterpret_cast<char*>(room.data()) + 4;
  std::memcpy(odd, gb.x_design, 64 * kFeatures * sizeof(double));
  for (int field = 0; field < 3; ++field) {
    RhCudaHostBatch b = gb;
    (field == 0 ? b.x_design : field == 1 ? b.y : b.sample_weight) = odd;
    const char* name = field == 0   ? "RhCudaHostBatch.x_design (0x"
                       : field == 1 ? "RhCudaHostBatch.y (0x"
                                    : "RhCudaHostBatch.sample_weight (0x";
    expect_refused(e, "misaligned host pointer", RH_CUDA_INVALID_ARGUMENT, name, [&] {
      RhCudaDiagnostics d = diagnostics();
      return rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &state.view);
    });
  }
  HostState<double> odd_state(kP);
  odd_state.view.information = odd;
  expect_refused(e, "misaligned state target", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostState.information (0x", [&] {
                   RhCudaDiagnostics d = diagnostics();
                   return rh_cuda_engine_update_host_with_state(e, &gb, &c, &d, &odd_state.view);
                 });
  expect_refused(e, "misaligned copy_state target", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaHostState.information (0x",
                 [&] { return rh_cuda_engine_copy_state(e, &odd_state.view); });
  p.x_design = odd;
  p.prediction = static_cast<char*>(raw) + 1;
  p.input_location = RH_CUDA_MEMORY_HOST;
  expect_refused(e, "misaligned host prediction", RH_CUDA_INVALID_ARGUMENT,
                 "RhCudaPrediction.x_design (0x", [&] { return rh_cuda_engine_predict(e, &p); });
  RhCudaDiagnostics d = diagnostics();
  RH_CHECK_STATUS(rh_cuda_engine_update_device_with_state(e, device.batch(), &c, &d, &state.view),
                  RH_CUDA_SUCCESS);
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* fresh = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &fresh), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(
      rh_cuda_engine_update_device_with_state(fresh, device.batch(), &c, &d, &state.view),
      RH_CUDA_SUCCESS);
  rh_cuda_engine_destroy(fresh);
  cudaFree(raw);
}

// Device input whose X starts 0 to 3 elements past a 16-byte boundary: every offset must give the
// aligned copy's fit bit for bit. A refused value must be named wherever it falls: the batch's
// first or last value, the first values of rows at and around likely tile starts, or several in
// one tile (the first of them). The objective at beta0 refuses these batches and the update runs
// again with the validation pass (BatchConstants::checks_deferred), which reads each tile's
// values of X as 16-byte vectors, taking the values before the first boundary and after the last
// whole vector one by one. Small enough for the sanitizer runs of this test.
template <class T>
void check_device_rows_at_offsets(int32_t dtype) {
  const int64_t n = 3000, p = 13, P = p + 1;
  const Batch<T> good = make_batch<T>(73, n, p, true, false);
  const RhCudaUpdateConfig c = config(p, RH_CUDA_PENALTY_NONE);
  const size_t cells = static_cast<size_t>(n * p);
  constexpr int kOffsets = 16 / sizeof(T);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  struct Spot {
    int64_t row, col;
    T value;
  };
  struct Bad {
    std::vector<Spot> spots;
    std::string needle;  // the first spot's
  };
  const std::vector<Bad> cases = {
      {{{0, 0, nan}}, ".x_design[0, 0] is nan: values must be finite"},
      {{{n - 1, p - 1, inf}}, ".x_design[2999, 12] is inf: values must be finite"},
      {{{31, 0, -inf}}, ".x_design[31, 0] is -inf"},
      {{{32, 0, nan}}, ".x_design[32, 0] is nan"},
      {{{33, 1, inf}}, ".x_design[33, 1] is inf"},
      {{{64, 0, nan}}, ".x_design[64, 0] is nan"},
      {{{40, 12, nan}, {41, 0, inf}, {40, 3, -inf}}, ".x_design[40, 3] is -inf"},
      {{{2000, 7, inf}, {1500, 11, nan}}, ".x_design[1500, 11] is nan"},
  };
  T* x = nullptr;
  RH_CHECK(cudaMalloc(&x, (cells + kOffsets) * sizeof(T)) == cudaSuccess);
  const DeviceBatchCopy aligned(good.view(), sizeof(T), "offset test");
  std::vector<T> want_coef, want_info;
  for (int offset = 0; offset < kOffsets && x != nullptr; ++offset) {
    T* at = x + offset;
    RH_CHECK(upload(at, good.x.data(), cells * sizeof(T)) == cudaSuccess);
    RhCudaDeviceBatch b = *aligned.batch();
    b.x_design = at;
    RhCudaEngineOptions o = options(dtype, P);
    RhCudaEngine* e = nullptr;
    RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
    if (e == nullptr)
      break;
    HostState<T> out(P);
    RhCudaDiagnostics d = diagnostics();
    RH_CHECK_STATUS(rh_cuda_engine_update_device_with_state(e, &b, &c, &d, &out.view),
                    RH_CUDA_SUCCESS);
    if (offset == 0) {
      want_coef = out.coef;
      want_info = out.info;
    } else if (out.coef != want_coef || out.info != want_info) {
      std::fprintf(stderr, "  X %d elements past a 16-byte boundary: fit differs from aligned\n",
                   offset);
      ++failures();
    }
    for (const Bad& bad : cases) {
      for (const Spot& s : bad.spots)
        RH_CHECK(upload(at + s.row * p + s.col, &s.value, sizeof(T)) == cudaSuccess);
      const std::string what = "offset " + std::to_string(offset) + ": " + bad.needle;
      expect_refused(
          e, what.c_str(), RH_CUDA_INVALID_ARGUMENT, bad.needle.c_str(),
          [&] {
            RhCudaDiagnostics dd = diagnostics();
            HostState<T> refused(P);
            return rh_cuda_engine_update_device_with_state(e, &b, &c, &dd, &refused.view);
          },
          P);
      for (const Spot& s : bad.spots) {
        const T kept = good.x[static_cast<size_t>(s.row * p + s.col)];
        RH_CHECK(upload(at + s.row * p + s.col, &kept, sizeof(T)) == cudaSuccess);
      }
    }
    RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
  }
  cudaFree(x);
}

void test_device_rows_at_offsets() {
  check_device_rows_at_offsets<double>(RH_CUDA_DTYPE_FLOAT64);
  check_device_rows_at_offsets<float>(RH_CUDA_DTYPE_FLOAT32);
}

// Device input is checked by the objective at beta0 (BatchConstants::checks_deferred) and, where
// that check fails, by the validation pass of a second run of the update. A refusal must name
// what the pass alone names (X before y before the weights, the first bad index of each), leave
// the state as it was, and leave the engine fitting the next batch to the bits of an engine that
// always runs the pass (RH_CUDA_TEST_DEVICE_CHECKS=pass). Also finite data whose objective at
// beta0 overflows (tau 1e300, |y| about 1e200: rho = y^2 / 2), which the pass accepts: the same
// outcome either way.
void test_deferred_device_checks_refuse_as_the_pass() {
  const int64_t n = 700;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const size_t p = kFeatures;
  struct Spoil {
    const char* what;
    bool weighted;
    std::function<void(Batch<double>&, RhCudaHostBatch&)> apply;
    const char* needle;  // null: the pass accepts the batch
    double tau;
  };
  const Spoil spoils[] = {
      {"NaN in X", false, [&](Batch<double>& b, RhCudaHostBatch&) { b.x[7 * p + 2] = nan; },
       ".x_design[7, 2] is nan", 1.345},
      {"Inf in y", false, [&](Batch<double>& b, RhCudaHostBatch&) { b.y[3] = inf; }, ".y[3] is inf",
       1.345},
      {"NaN in y, -Inf in X further on", false,
       [&](Batch<double>& b, RhCudaHostBatch&) {
         b.y[2] = nan;
         b.x[10 * p] = -inf;
       },
       ".x_design[10, 0] is -inf", 1.345},
      {"negative weight, NaN in X further on", true,
       [&](Batch<double>& b, RhCudaHostBatch&) {
         b.w[5] = -1.0;
         b.x[600 * p + 1] = nan;
       },
       ".x_design[600, 1] is nan", 1.345},
      {"NaN weight", true, [&](Batch<double>& b, RhCudaHostBatch&) { b.w[4] = nan; },
       ".sample_weight[4] is nan", 1.345},
      {"negative weight", true, [&](Batch<double>& b, RhCudaHostBatch&) { b.w[9] = -2.0; },
       ".sample_weight[9]", 1.345},
      {"batch_weight", true,
       [&](Batch<double>&, RhCudaHostBatch& view) { view.batch_weight *= 2.0; }, "batch_weight",
       1.345},
      {"objective overflowing at beta0", false,
       [&](Batch<double>& b, RhCudaHostBatch&) {
         for (int64_t i = 0; i < n; ++i)
           b.y[i] = (i % 2 == 0 ? 1e200 : -1e200) * (1.0 + 0.001 * static_cast<double>(i % 7));
       },
       nullptr, 1e300},
  };
  for (const Spoil& sp : spoils) {
    std::string message[2];
    RhCudaStatus status[2] = {RH_CUDA_INTERNAL_ERROR, RH_CUDA_INTERNAL_ERROR};
    HostState<double> spoiled_state[2] = {HostState<double>(kP), HostState<double>(kP)};
    HostState<double> next_state[2] = {HostState<double>(kP), HostState<double>(kP)};
    for (int pass = 0; pass < 2; ++pass) {
      set_env("RH_CUDA_TEST_DEVICE_CHECKS", pass == 1 ? "pass" : nullptr);
      RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
      RhCudaEngine* e = nullptr;
      RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
      set_env("RH_CUDA_TEST_DEVICE_CHECKS", nullptr);
      if (e == nullptr)
        return;
      RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE, sp.tau);
      HostState<double> state(kP);
      const auto update_device = [&](const RhCudaHostBatch& view, HostState<double>& out) {
        const DeviceBatchCopy device(view, sizeof(double), sp.what);
        RhCudaDiagnostics d = diagnostics();
        return rh_cuda_engine_update_device_with_state(e, device.batch(), &c, &d, &out.view);
      };
      const Batch<double> first = make_batch<double>(61, n, kFeatures, true, false);
      if (sp.needle != nullptr)  // the overflow case starts from the empty state
        RH_CHECK_STATUS(update_device(first.view(sp.weighted), state), RH_CUDA_SUCCESS);
      Batch<double> spoiled = make_batch<double>(62, n, kFeatures, true, false);
      RhCudaHostBatch view = spoiled.view(sp.weighted);
      sp.apply(spoiled, view);
      const std::string what =
          std::string(sp.what) + (pass == 1 ? " (validation pass)" : " (deferred checks)");
      if (sp.needle != nullptr) {
        expect_refused(e, what.c_str(), RH_CUDA_INVALID_ARGUMENT, sp.needle,
                       [&] { return update_device(view, spoiled_state[pass]); });
        status[pass] = RH_CUDA_INVALID_ARGUMENT;
      } else {
        status[pass] = update_device(view, spoiled_state[pass]);
      }
      message[pass] = status[pass] == RH_CUDA_SUCCESS ? "" : rh_cuda_engine_last_error(e);
      // The engine goes on as before the refusal.
      const Batch<double> next = make_batch<double>(63, n, kFeatures, true, false);
      c.tau = 1.345;
      RH_CHECK_STATUS(update_device(next.view(sp.weighted), next_state[pass]), RH_CUDA_SUCCESS);
      RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
    }
    if (status[0] != status[1] || message[0] != message[1] ||
        spoiled_state[0].coef != spoiled_state[1].coef ||
        spoiled_state[0].info != spoiled_state[1].info ||
        next_state[0].coef != next_state[1].coef || next_state[0].info != next_state[1].info) {
      std::fprintf(
          stderr, "  %s: deferred checks gave status %d '%s', the pass %d '%s'; states %s\n",
          sp.what, static_cast<int>(status[0]), message[0].c_str(), static_cast<int>(status[1]),
          message[1].c_str(), next_state[0].coef == next_state[1].coef ? "equal" : "DIFFER");
      ++failures();
    }
    if (sp.needle == nullptr)
      std::printf("deferred device checks: %s: status %d both ways%s%s\n", sp.what,
                  static_cast<int>(status[0]), message[0].empty() ? "" : ", ", message[0].c_str());
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--allocation-failure") == 0) {
    skip_without_gpu("test_cuda_allocation_failure");
    test_allocation_failure();
    return finish("test_cuda_allocation_failure");
  }
  if (argc > 1 && std::strcmp(argv[1], "--lifecycle") == 0) {
    // About 70 create/update/destroy cycles, two threads at once: a ctest of its own, outside
    // the compute-sanitizer runs of the entry-point test.
    skip_without_gpu("test_cuda_lifecycle");
    test_engines_from_pooled_resources_match_fresh_ones();
    test_engines_created_from_two_threads();
    return finish("test_cuda_lifecycle");
  }
  if (argc > 1 && std::strcmp(argv[1], "--staging") == 0) {
    // Batches of several MB in every staging mode: a ctest of its own, kept out of the
    // compute-sanitizer runs of the entry-point test (racecheck would take minutes on them).
    skip_without_gpu("test_cuda_staging");
    test_staged_host_input_equals_device_input();
    test_staged_chunks_report_the_first_bad_value();
    test_staging_settings_are_checked();
    return finish("test_cuda_staging");
  }
  skip_without_gpu("test_cuda_entry_points");
  test_library_queries();
  test_create_rejects_bad_options();
  test_null_engine_everywhere();
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  if (e != nullptr) {
    test_update_misuse(e);
    test_predict_misuse_and_services(e);
    test_restore_misuse(e);
    test_misaligned_device_pointers_are_refused(e);
    test_rules_shared_with_the_cpu_engine(e);
    RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
  }
  test_strict_engine_after_fast_math_engine();
  test_meat_and_old_size_state_structs();
  test_restoring_zeros_after_a_batch();
  test_device_rows_at_offsets();
  test_deferred_device_checks_refuse_as_the_pass();
  return finish("test_cuda_entry_points");
}
