// Every exported function of librh_cuda, and every way of calling it wrongly: each misuse
// returns the documented status, names the offending field, and leaves the state untouched.
#include <cuda_runtime.h>

#include <cstring>
#include <limits>
#include <string>

#include "test_support.hpp"

using namespace rhtest;

namespace {

constexpr int64_t kP = 5;  // 4 features + intercept
constexpr int64_t kFeatures = 4;

bool last_error_mentions(const RhCudaEngine* engine, const char* needle) {
  const char* text = engine ? rh_cuda_engine_last_error(engine) : rh_cuda_last_error();
  const bool found = text != nullptr && std::strstr(text, needle) != nullptr;
  if (!found) std::fprintf(stderr, "  expected '%s' in error text '%s'\n", needle, text ? text : "(null)");
  return found;
}

struct Snapshot {
  HostState<double> state{kP};
  void take(RhCudaEngine* e) { RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &state.view), RH_CUDA_SUCCESS); }
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
  RH_CHECK(info.runtime_version >= 12000 && info.driver_version >= info.runtime_version / 1000 * 1000);
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
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(nullptr, &b, &c, &d, &s.view), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_update_device_with_state(nullptr, &db, &c, &d, &s.view), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_stream(nullptr, &stream), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_predict(nullptr, &p), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_synchronize(nullptr), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK_STATUS(rh_cuda_engine_features(nullptr, &f), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(std::strcmp(rh_cuda_engine_last_error(nullptr), "engine is null") == 0);
}

template <class Call>
void expect_refused(RhCudaEngine* e, const char* what, RhCudaStatus expected, const char* needle,
                    Call&& call) {
  Snapshot before, after;
  before.take(e);
  const RhCudaStatus got = call();
  if (got != expected) {
    std::fprintf(stderr, "  %s: status %d, expected %d (%s)\n", what, got, expected,
                 rh_cuda_engine_last_error(e));
    ++failures();
  }
  if (needle != nullptr) RH_CHECK(last_error_mentions(e, needle));
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
  expect_refused(e, "config struct_size", RH_CUDA_INVALID_ARGUMENT, "struct_size", [&] { return update(gb, cc); });
  cc = c;
  cc.abi_version = 3;
  expect_refused(e, "config abi_version", RH_CUDA_INVALID_ARGUMENT, "abi_version", [&] { return update(gb, cc); });
  cc = c;
  cc.penalty = 9;
  expect_refused(e, "unknown penalty", RH_CUDA_INVALID_ARGUMENT, "penalty", [&] { return update(gb, cc); });
  cc = c;
  cc.reserved0 = 1;
  expect_refused(e, "config reserved0", RH_CUDA_INVALID_ARGUMENT, "reserved0", [&] { return update(gb, cc); });
  cc = c;
  cc.max_iter = 0;
  expect_refused(e, "max_iter", RH_CUDA_INVALID_ARGUMENT, "max_iter", [&] { return update(gb, cc); });
  cc = c;
  cc.tau = std::numeric_limits<double>::quiet_NaN();
  expect_refused(e, "tau NaN", RH_CUDA_INVALID_ARGUMENT, "tau", [&] { return update(gb, cc); });
  cc = c;
  cc.lambda_scale = -1.0;
  expect_refused(e, "lambda_scale", RH_CUDA_INVALID_ARGUMENT, "lambda_scale", [&] { return update(gb, cc); });
  cc = c;
  cc.n_features_in = kP + 3;
  expect_refused(e, "n_features_in", RH_CUDA_INVALID_ARGUMENT, "n_features_in", [&] { return update(gb, cc); });

  RhCudaHostBatch b = gb;
  b.struct_size = 16;
  expect_refused(e, "batch struct_size", RH_CUDA_INVALID_ARGUMENT, "struct_size", [&] { return update(b, c); });
  b = gb;
  b.abi_version = 0;
  expect_refused(e, "batch abi_version", RH_CUDA_INVALID_ARGUMENT, "abi_version", [&] { return update(b, c); });
  b = gb;
  b.n_columns = kP + 1;
  expect_refused(e, "n_columns off", RH_CUDA_INVALID_ARGUMENT, "n_columns", [&] { return update(b, c); });
  b = gb;
  b.n_rows = 0;
  expect_refused(e, "n_rows 0", RH_CUDA_INVALID_ARGUMENT, "n_rows", [&] { return update(b, c); });
  b = gb;
  b.n_rows = int64_t{1} << 62;
  b.batch_weight = static_cast<double>(b.n_rows);
  expect_refused(e, "overflowing size", RH_CUDA_INVALID_ARGUMENT, nullptr, [&] { return update(b, c); });
  b = gb;
  b.x_design = nullptr;
  expect_refused(e, "null x", RH_CUDA_INVALID_ARGUMENT, "x_design", [&] { return update(b, c); });
  b = gb;
  b.batch_weight = 63.0;
  expect_refused(e, "batch_weight without weights", RH_CUDA_INVALID_ARGUMENT, "batch_weight", [&] { return update(b, c); });

  Batch<double> bad = good;
  bad.x[3 * bad.cols + 2] = std::numeric_limits<double>::quiet_NaN();
  expect_refused(e, "NaN in X", RH_CUDA_INVALID_ARGUMENT, "row 3, column 2", [&] { return update(bad.view(), c); });
  bad = good;
  bad.y[9] = std::numeric_limits<double>::infinity();
  expect_refused(e, "Inf in y", RH_CUDA_INVALID_ARGUMENT, "y has a non-finite value at index 9", [&] { return update(bad.view(), c); });
  bad = good;
  bad.w[4] = std::numeric_limits<double>::quiet_NaN();
  b = bad.view(true);
  b.batch_weight = good.view(true).batch_weight;  // the claimed sum stays finite; the data is not
  expect_refused(e, "NaN in w", RH_CUDA_INVALID_ARGUMENT, "sample_weight has a non-finite value at index 4", [&] { return update(b, c); });
  bad = good;
  bad.w[5] = -1.0;
  expect_refused(e, "negative w", RH_CUDA_INVALID_ARGUMENT, "negative value at index 5", [&] { return update(bad.view(true), c); });
  b = good.view(true);
  b.batch_weight *= 1.01;
  expect_refused(e, "weight sum mismatch", RH_CUDA_INVALID_ARGUMENT, "batch_weight", [&] { return update(b, c); });

  // Device entry point given host memory.
  RhCudaDeviceBatch db{};
  std::memcpy(&db, &gb, sizeof db);
  HostState<double> out(kP);
  expect_refused(e, "host pointers as device batch", RH_CUDA_INVALID_ARGUMENT, "RhCudaDeviceBatch.x_design", [&] {
    RhCudaDiagnostics dd = diagnostics();
    return rh_cuda_engine_update_device_with_state(e, &db, &c, &dd, &out.view);
  });
  expect_refused(e, "null state out", RH_CUDA_INVALID_ARGUMENT, nullptr, [&] {
    return rh_cuda_engine_update_host_with_state(e, &gb, &c, &d, nullptr);
  });
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
  for (int64_t i = 0; i < kP; ++i) s.coef[i] = 0.1 * static_cast<double>(i);
  RhCudaHostStateView v{};
  v.abi_version = RH_CUDA_ABI_VERSION;
  v.struct_size = sizeof v;
  v.coefficients = s.coef.data();
  v.information = s.info.data();
  v.n_samples_seen = 10;
  v.batch_count = 1;
  v.weight_sum = 10.0;
  RhCudaHostStateView w = v;
  w.batch_count = 0;
  expect_refused(e, "batch_count inconsistent", RH_CUDA_INVALID_ARGUMENT, "batch_count", [&] { return rh_cuda_engine_restore(e, &w); });
  w = v;
  w.struct_size = 40;
  expect_refused(e, "state struct_size", RH_CUDA_INVALID_ARGUMENT, "struct_size", [&] { return rh_cuda_engine_restore(e, &w); });
  s.info[7] = std::numeric_limits<double>::infinity();
  expect_refused(e, "Inf in information", RH_CUDA_INVALID_ARGUMENT, "information", [&] { return rh_cuda_engine_restore(e, &v); });
  s.info[7] = 0.0;
  s.coef[2] = std::numeric_limits<double>::quiet_NaN();
  expect_refused(e, "NaN in coefficients", RH_CUDA_INVALID_ARGUMENT, "coefficients", [&] { return rh_cuda_engine_restore(e, &v); });
  expect_refused(e, "null view", RH_CUDA_INVALID_ARGUMENT, nullptr, [&] { return rh_cuda_engine_restore(e, nullptr); });
  HostState<double> out(kP);
  out.view.struct_size = 8;
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &out.view), RH_CUDA_INVALID_ARGUMENT);
}

}  // namespace

int main() {
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
    RH_CHECK_STATUS(rh_cuda_engine_destroy(e), RH_CUDA_SUCCESS);
  }
  return finish("test_cuda_entry_points");
}
