// A stream of batches through librh_cpu from C++17: the C ABI behind a small RAII wrapper that
// turns every failing status into an exception carrying the engine's error text. Streams four
// batches, predicts, shows a refused batch leaving the state unchanged, and restores the
// exported state into a second engine.
//
// Build against an installed prefix (see examples/README.md):
//   c++ -std=c++17 stream.cpp $(pkg-config --cflags --libs rh_cpu) -o stream_cpp
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "rh_cuda.h"

namespace {

class EngineError : public std::runtime_error {
 public:
  EngineError(RhCudaStatus status, const std::string& text)
      : std::runtime_error(text), status_(status) {}
  RhCudaStatus status() const { return status_; }

 private:
  RhCudaStatus status_;
};

// Every ABI struct starts with its version and size.
template <class Struct>
Struct make() {
  Struct value{};
  value.abi_version = RH_CUDA_ABI_VERSION;
  value.struct_size = sizeof(Struct);
  return value;
}

struct Deleter {
  void operator()(RhCudaEngine* engine) const { rh_cuda_engine_destroy(engine); }
};

class Engine {
 public:
  Engine(int64_t parameters, int32_t dtype) : parameters_(parameters) {
    auto options = make<RhCudaEngineOptions>();
    options.dtype = dtype;
    options.device_id = -1;
    options.n_parameters = parameters;
    RhCudaEngine* raw = nullptr;
    const RhCudaStatus status = rh_cuda_engine_create(&options, &raw);
    if (status != RH_CUDA_SUCCESS) throw EngineError(status, rh_cuda_last_error());
    handle_.reset(raw);
  }

  RhCudaDiagnostics update(const std::vector<double>& x, const std::vector<double>& y,
                           int64_t features, const RhCudaUpdateConfig& config) {
    auto batch = make<RhCudaHostBatch>();
    batch.x_design = x.data();
    batch.y = y.data();
    batch.n_rows = static_cast<int64_t>(y.size());
    batch.n_columns = features;  // the engine appends the intercept column
    batch.batch_weight = static_cast<double>(y.size());
    auto diagnostics = make<RhCudaDiagnostics>();
    check(rh_cuda_engine_update_host(handle_.get(), &batch, &config, &diagnostics));
    return diagnostics;
  }

  struct State {
    std::vector<double> coefficients, information;
    RhCudaHostState counters;
  };

  State state() const {
    State out{std::vector<double>(parameters_), std::vector<double>(parameters_ * parameters_),
              make<RhCudaHostState>()};
    out.counters.coefficients = out.coefficients.data();
    out.counters.information = out.information.data();
    check(rh_cuda_engine_copy_state(handle_.get(), &out.counters));
    return out;
  }

  void restore(const State& state) {
    auto view = make<RhCudaHostStateView>();
    view.coefficients = state.coefficients.data();
    view.information = state.information.data();
    view.n_samples_seen = state.counters.n_samples_seen;
    view.batch_count = state.counters.batch_count;
    view.previous_lambda = state.counters.previous_lambda;
    view.weight_sum = state.counters.weight_sum;
    check(rh_cuda_engine_restore(handle_.get(), &view));
  }

  std::vector<double> predict(const std::vector<double>& x, int64_t rows, int64_t features) const {
    std::vector<double> out(static_cast<size_t>(rows));
    auto request = make<RhCudaPrediction>();
    request.x_design = x.data();
    request.prediction = out.data();
    request.n_rows = rows;
    request.n_columns = features;
    request.n_features_in = features;
    request.input_location = RH_CUDA_MEMORY_HOST;
    check(rh_cuda_engine_predict(handle_.get(), &request));
    return out;
  }

 private:
  void check(RhCudaStatus status) const {
    if (status != RH_CUDA_SUCCESS) {
      throw EngineError(status, rh_cuda_engine_last_error(handle_.get()));
    }
  }

  int64_t parameters_;
  std::unique_ptr<RhCudaEngine, Deleter> handle_;
};

}  // namespace

int main() {
  constexpr int64_t kFeatures = 3, kRows = 500, kBatches = 4;
  const std::vector<double> truth = {1.5, -2.0, 0.5, 3.0};  // slopes, then the intercept
  std::mt19937_64 generator(7);
  std::normal_distribution<double> gaussian;
  std::uniform_real_distribution<double> uniform;

  auto config = make<RhCudaUpdateConfig>();
  config.n_features_in = kFeatures;
  config.max_iter = 100;
  config.tau = 1.345;
  config.bandwidth_scale = 1.0;
  config.tolerance = 1e-6;
  config.ridge = 1e-8;
  config.penalty = RH_CUDA_PENALTY_NONE;

  try {
    Engine engine(kFeatures + 1, RH_CUDA_DTYPE_FLOAT64);
    std::vector<double> x(kRows * kFeatures), y(kRows);
    for (int64_t b = 0; b < kBatches; ++b) {
      for (int64_t i = 0; i < kRows; ++i) {
        double value = truth[kFeatures];
        for (int64_t j = 0; j < kFeatures; ++j) {
          x[i * kFeatures + j] = gaussian(generator);
          value += truth[j] * x[i * kFeatures + j];
        }
        y[i] = value + 0.5 * gaussian(generator) + (uniform(generator) < 0.05 ? 25.0 : 0.0);
      }
      const RhCudaDiagnostics d = engine.update(x, y, kFeatures, config);
      std::printf("batch %lld: %lld iterations, converged %d\n", static_cast<long long>(b + 1),
                  static_cast<long long>(d.iterations), d.converged);
    }
    const Engine::State state = engine.state();
    int failures = 0;
    for (size_t j = 0; j < truth.size(); ++j) {
      std::printf("coefficient %zu: %+.4f (truth %+.4f)\n", j, state.coefficients[j], truth[j]);
      failures += std::fabs(state.coefficients[j] - truth[j]) > 0.1;
    }

    y[7] = std::nan("");
    try {
      engine.update(x, y, kFeatures, config);
      failures += 1;  // a NaN target must be refused
    } catch (const EngineError& error) {
      std::printf("refused batch: status %d, \"%s\"\n", error.status(), error.what());
      failures += error.status() != RH_CUDA_INVALID_ARGUMENT;
    }
    failures += engine.state().coefficients != state.coefficients;

    Engine twin(kFeatures + 1, RH_CUDA_DTYPE_FLOAT64);
    twin.restore(state);
    const auto mine = engine.predict(x, 4, kFeatures);
    const auto theirs = twin.predict(x, 4, kFeatures);
    failures += mine != theirs;
    std::printf("prediction for row 0: %.4f (restored engine: %.4f)\n", mine[0], theirs[0]);
    std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
  } catch (const EngineError& error) {
    std::fprintf(stderr, "engine error %d: %s\n", error.status(), error.what());
    return 1;
  }
}
