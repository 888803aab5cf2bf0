// The ABI fuzzer's device variant for librh_cuda: seeded random device batches
// (update_device_with_state), device predictions and row statistics over device rows (the
// optional extension's version 2, rh_cuda_row_statistics.h), every array allocated with cudaMalloc
// at exactly its declared size (so compute-sanitizer memcheck sees any read or write past a
// declared shape), with misaligned and NULL pointers, NaN/Inf values, negative or mismatched
// weights, broken shapes and scalars, among valid calls. Checks after every call: only the status
// the documented rules predict (a call breaking a rule is INVALID_ARGUMENT; a valid one SUCCESS, or
// NUMERICAL_ERROR for extreme values), a message with every failure, the committed state
// byte-identical after every failure, a refused prediction's output untouched, and a twin engine
// fed only the successful batches byte-identical to the fuzzed one; row statistics never change
// the committed state, leave their outputs untouched when refused, and on success equal, bit for
// bit, the host-row call on the same values. The row-statistics calls draw from a generator of
// their own, so the update and prediction calls of a seed are those of earlier versions.
//
// Without a GPU it exits 77 (ctest: SKIPPED). Usage: cuda_device_fuzz [--calls N] [--seed S]
// (default 3000 calls, seed 1); a finding prints the seed and the call index.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "rh_cuda.h"
#include "rh_cuda_row_statistics.h"
#include "test_support.hpp"

namespace {

struct Options {
  long long calls = 3000;
  unsigned long long seed = 1;
};

long long call_index = 0;
unsigned long long seed_used = 1;
long long findings = 0;

void finding(const char* what, const char* detail) {
  ++findings;
  std::printf("FINDING (seed %llu, call %lld): %s: %s\n", seed_used, call_index, what, detail);
}

// A device array of exactly `count` elements (none for count 0), optionally misaligned by
// `offset` bytes within a slightly larger allocation.
class DeviceArray {
 public:
  DeviceArray(const std::vector<double>& values, size_t elem, size_t offset = 0) {
    const size_t bytes = values.size() * elem;
    if (bytes == 0 && offset == 0)
      return;
    if (cudaMalloc(&base_, bytes + offset) != cudaSuccess)
      std::exit(3);
    std::vector<unsigned char> host(bytes);
    for (size_t i = 0; i < values.size(); ++i) {
      if (elem == 4) {
        const float v = static_cast<float>(values[i]);
        std::memcpy(&host[i * 4], &v, 4);
      } else {
        std::memcpy(&host[i * 8], &values[i], 8);
      }
    }
    ptr_ = static_cast<unsigned char*>(base_) + offset;
    if (bytes > 0 && rhtest::upload(ptr_, host.data(), bytes) != cudaSuccess) {
      std::exit(3);
    }
    bytes_ = bytes;
  }
  ~DeviceArray() {
    cudaFree(base_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* get() const {
    return ptr_;
  }
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> out(bytes_);
    if (bytes_ > 0 && cudaMemcpy(out.data(), ptr_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) {
      std::exit(3);
    }
    return out;
  }

 private:
  void* base_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct State {
  std::vector<double> coef, info;  // raw bytes of either dtype, sized for float64
  int64_t n_samples_seen = 0, batch_count = 0;
  double previous_lambda = 0.0, weight_sum = 0.0;
  bool operator==(const State& o) const {
    return coef == o.coef && info == o.info && n_samples_seen == o.n_samples_seen &&
           batch_count == o.batch_count &&
           std::memcmp(&previous_lambda, &o.previous_lambda, 8) == 0 &&
           std::memcmp(&weight_sum, &o.weight_sum, 8) == 0;
  }
};

State copy_state(RhCudaEngine* e, int64_t P) {
  State s;
  s.coef.assign(static_cast<size_t>(P), 0.0);
  s.info.assign(static_cast<size_t>(P * P), 0.0);
  RhCudaHostState h = rhtest::abi_struct<RhCudaHostState>();
  h.coefficients = s.coef.data();
  h.information = s.info.data();
  if (rh_cuda_engine_copy_state(e, &h) != RH_CUDA_SUCCESS) {
    finding("copy_state failed", rh_cuda_engine_last_error(e));
  }
  s.n_samples_seen = h.n_samples_seen;
  s.batch_count = h.batch_count;
  s.previous_lambda = h.previous_lambda;
  s.weight_sum = h.weight_sum;
  return s;
}

double special(rhtest::Rng& rng) {
  const double values[] = {std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  return values[static_cast<int>(rng.uniform() * 3) % 3];
}

bool chance(rhtest::Rng& rng, double p) {
  return rng.uniform() < p;
}
int64_t range(rhtest::Rng& rng, int64_t lo, int64_t hi) {
  return lo +
         static_cast<int64_t>(rng.uniform() * static_cast<double>(hi - lo + 1)) % (hi - lo + 1);
}

struct World {
  int32_t dtype = RH_CUDA_DTYPE_FLOAT64;
  size_t elem = 8;
  int64_t P = 1, p = 1;
  RhCudaEngine* engine = nullptr;
  RhCudaEngine* twin = nullptr;
};

void new_world(World& w, rhtest::Rng& rng) {
  if (w.engine != nullptr)
    rh_cuda_engine_destroy(w.engine);
  if (w.twin != nullptr)
    rh_cuda_engine_destroy(w.twin);
  w.dtype = chance(rng, 0.5) ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64;
  w.elem = w.dtype == RH_CUDA_DTYPE_FLOAT32 ? 4 : 8;
  w.p = range(rng, 1, 5);
  w.P = w.p + (chance(rng, 0.7) ? 1 : 0);
  RhCudaEngineOptions o = rhtest::options(w.dtype, w.P);
  if (rh_cuda_engine_create(&o, &w.engine) != RH_CUDA_SUCCESS ||
      rh_cuda_engine_create(&o, &w.twin) != RH_CUDA_SUCCESS) {
    std::printf("engine creation failed: %s\n", rh_cuda_last_error());
    std::exit(1);
  }
}

void check_failure(const World& w, RhCudaStatus status, const State& before, const char* fn) {
  char detail[640];
  if (rh_cuda_engine_last_error(w.engine)[0] == '\0') {
    std::snprintf(detail, sizeof detail, "%s returned %d", fn, static_cast<int>(status));
    finding("failure without a message", detail);
  }
  if (!(copy_state(w.engine, w.P) == before)) {
    std::snprintf(detail, sizeof detail, "%s returned %d: %s", fn, static_cast<int>(status),
                  rh_cuda_engine_last_error(w.engine));
    finding("a refused call changed the committed state", detail);
  }
}

void check_outcome(const World& w, RhCudaStatus status, bool valid, bool extreme, const char* fn) {
  char detail[640];
  const bool allowed =
      valid ? (status == RH_CUDA_SUCCESS || (extreme && status == RH_CUDA_NUMERICAL_ERROR))
            : status == RH_CUDA_INVALID_ARGUMENT;
  if (!allowed) {
    std::snprintf(detail, sizeof detail, "%s returned %d for a %s call: %s", fn,
                  static_cast<int>(status), valid ? "valid" : "rule-breaking",
                  rh_cuda_engine_last_error(w.engine));
    finding("undocumented outcome", detail);
  }
}

// One device batch of n rows x cols columns and, half the time, one broken rule of the batch
// rules every device-batch call shares (NULL or misaligned arrays, a refused value, a wrong
// weight sum, row count or column count: `wrong_cols`). Two of the twelve draws are the
// caller's own rule (own = 0 or 1, valid false); own is -1 otherwise.
struct BatchFault {
  bool valid = true;
  bool null_x = false, null_y = false;
  size_t offset_x = 0, offset_y = 0, offset_w = 0;
  int64_t rows = 0, cols = 0;
  int own = -1;
};

BatchFault break_batch_rule(const World& w, rhtest::Rng& rng, bool weighted, int64_t n,
                            int64_t cols, int64_t wrong_cols, std::vector<double>& x,
                            std::vector<double>& y, std::vector<double>& wt, double& declared) {
  BatchFault f;
  f.rows = n;
  f.cols = cols;
  if (!chance(rng, 0.5))
    return f;
  f.valid = false;
  const int64_t draw = range(rng, 0, 11);
  switch (draw) {
    case 0:
      f.null_x = true;
      break;
    case 1:
      f.null_y = true;
      break;
    case 2:
      f.offset_x = static_cast<size_t>(range(rng, 1, static_cast<int64_t>(w.elem) - 1));
      break;
    case 3:
      f.offset_y = static_cast<size_t>(range(rng, 1, static_cast<int64_t>(w.elem) - 1));
      break;
    case 4:
      if (weighted) {
        f.offset_w = static_cast<size_t>(range(rng, 1, static_cast<int64_t>(w.elem) - 1));
      } else {
        declared += 1.0;  // without weights batch_weight must be n_rows exactly
      }
      break;
    case 5:
      x[static_cast<size_t>(range(rng, 0, n * cols - 1))] = special(rng);
      break;
    case 6:
      y[static_cast<size_t>(range(rng, 0, n - 1))] = special(rng);
      break;
    case 7:
      if (weighted) {
        wt[static_cast<size_t>(range(rng, 0, n - 1))] = chance(rng, 0.5) ? special(rng) : -1.0;
      } else {
        declared = 0.0;
      }
      break;
    case 8:
      f.rows = chance(rng, 0.5) ? 0 : -n;
      break;
    case 9:
      f.cols = wrong_cols;
      break;
    default:
      f.own = static_cast<int>(draw - 10);
      break;
  }
  return f;
}

// The device arrays of a batch drawn by break_batch_rule, and the struct naming them.
struct DeviceRows {
  DeviceArray x, y, w;
  RhCudaDeviceBatch batch{};
  DeviceRows(const World& world, const BatchFault& f, const std::vector<double>& xv,
             const std::vector<double>& yv, const std::vector<double>& wv, bool weighted,
             double declared)
      : x(xv, world.elem, f.offset_x),
        y(yv, world.elem, f.offset_y),
        w(wv, world.elem, f.offset_w) {
    batch.abi_version = RH_CUDA_ABI_VERSION;
    batch.struct_size = sizeof batch;
    batch.x_design = f.null_x ? nullptr : x.get();
    batch.y = f.null_y ? nullptr : y.get();
    batch.sample_weight = weighted ? w.get() : nullptr;
    batch.n_rows = f.rows;
    batch.n_columns = f.cols;
    batch.batch_weight = declared;
  }
};

// Sample weights 0.5 + U(0, 1) for n rows four times in ten (else none, wt left empty), each 0
// with probability zero_chance and rounded to float where float_exact; returns the batch_weight
// to declare (their sum, or n without weights).
double fuzz_weights(rhtest::Rng& rng, int64_t n, bool float_exact, double zero_chance,
                    std::vector<double>& wt) {
  if (!chance(rng, 0.4))
    return static_cast<double>(n);
  wt.resize(static_cast<size_t>(n));
  double declared = 0.0;
  for (double& v : wt) {
    if (zero_chance > 0.0 && chance(rng, zero_chance)) {
      v = 0.0;
      continue;
    }
    const double u = 0.5 + rng.uniform();
    v = float_exact ? static_cast<double>(static_cast<float>(u)) : u;
    declared += v;
  }
  return declared;
}

void fuzz_update(World& w, rhtest::Rng& rng) {
  const int64_t n = range(rng, 1, 40);
  const int64_t cols = chance(rng, 0.5) ? w.P : w.p;
  std::vector<double> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n)), wt;
  for (double& v : x)
    v = rng.normal();
  for (double& v : y)
    v = rng.normal() * 2.0;
  double declared = fuzz_weights(rng, n, w.dtype == RH_CUDA_DTYPE_FLOAT32, 0.0, wt);
  const bool weighted = !wt.empty();
  RhCudaUpdateConfig c =
      rhtest::config(w.p, chance(rng, 0.5) ? RH_CUDA_PENALTY_NONE : RH_CUDA_PENALTY_L1);
  c.max_iter = 50;
  c.tolerance = 1e-8;
  const BatchFault fault = break_batch_rule(w, rng, weighted, n, cols, w.P + 1, x, y, wt, declared);
  if (fault.own == 0) {
    c.bandwidth_scale = 1e-320;  // h subnormal at any N >= 1
  } else if (fault.own == 1) {
    declared *= weighted ? 1.01 : 2.0;
  }
  const bool valid = fault.valid;
  // arrays of exactly the declared size (when the declared shape is the real one)
  DeviceRows rows(w, fault, x, y, wt, weighted, declared);
  const RhCudaDeviceBatch& b = rows.batch;
  const State before = copy_state(w.engine, w.P);
  RhCudaDiagnostics d = rhtest::diagnostics();
  std::vector<double> coef(static_cast<size_t>(w.P)), info(static_cast<size_t>(w.P * w.P));
  RhCudaHostState out = rhtest::abi_struct<RhCudaHostState>();
  out.coefficients = coef.data();
  out.information = info.data();
  const RhCudaStatus status = rh_cuda_engine_update_device_with_state(w.engine, &b, &c, &d, &out);
  check_outcome(w, status, valid, false, "update_device_with_state");
  if (status != RH_CUDA_SUCCESS) {
    check_failure(w, status, before, "update_device_with_state");
    return;
  }
  RhCudaDiagnostics dt = rhtest::diagnostics();
  std::vector<double> tc(coef.size()), ti(info.size());
  RhCudaHostState tout = out;
  tout.coefficients = tc.data();
  tout.information = ti.data();
  if (rh_cuda_engine_update_device_with_state(w.twin, &b, &c, &dt, &tout) != RH_CUDA_SUCCESS ||
      !(copy_state(w.twin, w.P) == copy_state(w.engine, w.P))) {
    finding("the twin engine fed only the successful calls differs",
            rh_cuda_engine_last_error(w.twin));
  }
}

void fuzz_predict(World& w, rhtest::Rng& rng) {
  const int64_t n = range(rng, 1, 40);
  const int64_t cols = chance(rng, 0.5) ? w.P : w.p;
  std::vector<double> x(static_cast<size_t>(n * cols)), canary(static_cast<size_t>(n), 7.25);
  for (double& v : x)
    v = rng.normal();
  bool valid = true, null_x = false, null_out = false;
  size_t offset_x = 0, offset_out = 0;
  if (chance(rng, 0.5)) {
    valid = false;
    switch (range(rng, 0, 4)) {
      case 0:
        null_x = true;
        break;
      case 1:
        null_out = true;
        break;
      case 2:
        offset_x = static_cast<size_t>(range(rng, 1, static_cast<int64_t>(w.elem) - 1));
        break;
      case 3:
        offset_out = static_cast<size_t>(range(rng, 1, static_cast<int64_t>(w.elem) - 1));
        break;
      default:
        x[static_cast<size_t>(range(rng, 0, n * cols - 1))] = special(rng);
        break;
    }
  }
  DeviceArray dx(x, w.elem, offset_x), dout(canary, w.elem, offset_out);
  const std::vector<unsigned char> out_before = dout.read();
  RhCudaPrediction q = rhtest::prediction(
      null_x ? nullptr : dx.get(), null_out ? nullptr : dout.get(), n, w.p, RH_CUDA_MEMORY_DEVICE);
  q.n_columns = cols;
  const State before = copy_state(w.engine, w.P);
  const RhCudaStatus status = rh_cuda_engine_predict(w.engine, &q);
  check_outcome(w, status, valid, false, "predict (device)");
  if (status != RH_CUDA_SUCCESS) {
    check_failure(w, status, before, "predict (device)");
    if (dout.read() != out_before)
      finding("a refused prediction wrote its output", "device");
  }
}

// Row statistics over device rows: n x P rows (n_columns must be P), a random non-empty set of
// statistics, and half the time one broken rule. Host-memory outputs start as a canary.
void fuzz_row_statistics(World& w, rhtest::Rng& rng) {
  const int64_t n = range(rng, 1, 40);
  const int64_t P = w.P;
  std::vector<double> x(static_cast<size_t>(n * P)), y(static_cast<size_t>(n)), wt;
  for (double& v : x)
    v = rng.normal();
  for (double& v : y)
    v = rng.normal() * 2.0;
  std::vector<double> beta64(static_cast<size_t>(P));
  std::vector<float> beta32(static_cast<size_t>(P));
  for (int64_t j = 0; j < P; ++j) {
    beta32[j] = static_cast<float>(rng.normal());
    beta64[j] = static_cast<double>(beta32[j]);
  }
  // Weights exact in float32 too, and sometimes 0.
  double declared = fuzz_weights(rng, n, true, 0.1, wt);
  const bool weighted = !wt.empty();
  uint64_t bits = 0;
  while (bits == 0)
    bits = static_cast<uint64_t>(range(rng, 0, 63));
  bool null_beta = false, stray_output = false;
  const BatchFault fault =
      break_batch_rule(w, rng, weighted, n, P, P == w.p ? P + 1 : w.p, x, y, wt, declared);
  if (fault.own == 0) {
    if (bits == RH_CUDA_STATISTIC_NORM) {
      bits = 1ull << 6;  // an unknown bit
    } else if (chance(rng, 0.5)) {
      null_beta = true;
    } else {
      beta64[static_cast<size_t>(range(rng, 0, P - 1))] = special(rng);
      for (int64_t j = 0; j < P; ++j)
        beta32[j] = static_cast<float>(beta64[j]);
    }
  } else if (fault.own == 1) {
    stray_output = true;  // an output pointer for a statistic not requested, or none
  }
  const bool valid = fault.valid;
  DeviceRows rows(w, fault, x, y, wt, weighted, declared);
  const RhCudaDeviceBatch& b = rows.batch;
  const size_t PP = static_cast<size_t>(P * P);
  std::vector<double> outputs(2 + static_cast<size_t>(P) + 3 * PP, 7.25);
  RhCudaRowStatistics s = rhtest::abi_struct<RhCudaRowStatistics>();
  s.statistics = bits;
  s.coefficients = null_beta                          ? nullptr
                   : w.dtype == RH_CUDA_DTYPE_FLOAT32 ? static_cast<const void*>(beta32.data())
                                                      : static_cast<const void*>(beta64.data());
  s.tau = 1.345;
  s.bandwidth = 0.5;
  s.loss = outputs[0];
  s.weighted_norm = outputs[1];
  double* out = outputs.data() + 2;
  double* grams = out + P;
  s.score = (bits & RH_CUDA_STATISTIC_SCORE) ? out : nullptr;
  s.curvature_gram = (bits & RH_CUDA_STATISTIC_CURVATURE) ? grams : nullptr;
  s.majoriser_gram = (bits & RH_CUDA_STATISTIC_MAJORISER) ? grams + PP : nullptr;
  s.meat = (bits & RH_CUDA_STATISTIC_MEAT) ? grams + 2 * PP : nullptr;
  if (stray_output)
    s.score = s.score != nullptr ? nullptr : out;
  const State before = copy_state(w.engine, w.P);
  const RhCudaStatus status = rh_cuda_engine_row_statistics_device(w.engine, &b, &s);
  check_outcome(w, status, valid, false, "row_statistics_device");
  if (status == RH_CUDA_SUCCESS && !(copy_state(w.engine, w.P) == before))
    finding("row statistics changed the committed state", "after a successful call");
  if (status != RH_CUDA_SUCCESS) {
    check_failure(w, status, before, "row_statistics_device");
    bool untouched = s.loss == 7.25 && s.weighted_norm == 7.25;
    for (size_t i = 2; i < outputs.size(); ++i)
      untouched = untouched && outputs[i] == 7.25;
    if (!untouched)
      finding("a refused row-statistics call wrote an output", rh_cuda_engine_last_error(w.engine));
    return;
  }
  // The host-row call on the same values gives the same bits.
  std::vector<unsigned char> hx(x.size() * w.elem), hy(y.size() * w.elem), hw(wt.size() * w.elem);
  auto narrow = [&](const std::vector<double>& from, std::vector<unsigned char>& to) {
    for (size_t i = 0; i < from.size(); ++i) {
      if (w.elem == 4) {
        const float v = static_cast<float>(from[i]);
        std::memcpy(&to[i * 4], &v, 4);
      } else {
        std::memcpy(&to[i * 8], &from[i], 8);
      }
    }
  };
  narrow(x, hx);
  narrow(y, hy);
  narrow(wt, hw);
  RhCudaHostBatch hb{};
  std::memcpy(&hb, &b, sizeof hb);
  hb.x_design = hx.data();
  hb.y = hy.data();
  hb.sample_weight = weighted ? hw.data() : nullptr;
  std::vector<double> host_outputs(outputs.size(), 7.25);
  RhCudaRowStatistics hs = s;
  double* hout = host_outputs.data() + 2;
  double* hgrams = hout + P;
  hs.score = s.score != nullptr ? hout : nullptr;
  hs.curvature_gram = s.curvature_gram != nullptr ? hgrams : nullptr;
  hs.majoriser_gram = s.majoriser_gram != nullptr ? hgrams + PP : nullptr;
  hs.meat = s.meat != nullptr ? hgrams + 2 * PP : nullptr;
  if (rh_cuda_engine_row_statistics(w.engine, &hb, &hs) != RH_CUDA_SUCCESS) {
    finding("the host-row call refused what the device-row call accepted",
            rh_cuda_engine_last_error(w.engine));
    return;
  }
  outputs[0] = s.loss;
  outputs[1] = s.weighted_norm;
  host_outputs[0] = hs.loss;
  host_outputs[1] = hs.weighted_norm;
  if (std::memcmp(outputs.data(), host_outputs.data(), outputs.size() * sizeof(double)) != 0)
    finding("device-row and host-row statistics differ", "bits");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      opt.calls = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      opt.seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--calls N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  rhtest::skip_without_gpu("cuda_device_fuzz");
  seed_used = opt.seed;
  rhtest::Rng rng(opt.seed);
  rhtest::Rng statistics_rng(opt.seed + 0x5eed);
  World w;
  new_world(w, rng);
  const double start = rhtest::now_us();
  for (call_index = 0; call_index < opt.calls; ++call_index) {
    if (chance(rng, 0.02))
      new_world(w, rng);
    if (chance(rng, 0.6)) {
      fuzz_update(w, rng);
    } else {
      fuzz_predict(w, rng);
    }
    if (chance(statistics_rng, 0.3))
      fuzz_row_statistics(w, statistics_rng);
  }
  rh_cuda_engine_destroy(w.engine);
  rh_cuda_engine_destroy(w.twin);
  std::printf("cuda_device_fuzz: seed %llu, %lld calls in %.1f s, %lld finding(s)\n", opt.seed,
              opt.calls, (rhtest::now_us() - start) / 1e6, findings);
  return findings == 0 ? 0 : 1;
}
