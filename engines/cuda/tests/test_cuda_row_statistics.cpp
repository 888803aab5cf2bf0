// The optional row-statistics extension in librh_cuda (abi/rh_cuda_row_statistics.h, version 2):
// every sum against its definition evaluated here in long double from the values as stored
// (float32 widened), for float64 and float32 engines, with and without weights, rows in host
// and in device memory, P of 1, 33 and 257, over one chunk and over many (the test switch
// RH_CUDA_TEST_STATISTICS_ROWS, and a batch larger than the engine's own chunk); host and
// device rows bitwise equal; agreement with librh_cpu's extension; every refusal of both entry
// points with its message (the device call's in the host call's words but for the owner), the
// outputs untouched by a failed call and the committed state untouched by every call; the
// engine flags (FAST_MATH, CUDA_GRAPHS) leave the double sums alone.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cinttypes>
#include <cstdlib>
#include <functional>
#include <string>

#include "rh_cuda_row_statistics.h"
#include "test_support.hpp"

using namespace rhtest;

namespace {

constexpr double kTau = 1.345;
constexpr double kBandwidth = 0.4;

template <class T>
constexpr int32_t dtype_of() {
  return sizeof(T) == 4 ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64;
}

// n x P rows, the last column the intercept's ones when P > 1; residuals at `beta` on every
// piece of the curvature (inside, on the ramps, beyond); weights in [0, 2) with exact zeros.
template <class T>
struct Rows {
  int64_t n = 0, P = 0;
  std::vector<T> x, y, w, beta;
  double weight_sum() const {
    double s = 0.0;
    for (T v : w)
      s += static_cast<double>(v);
    return s;
  }
  RhCudaHostBatch batch(bool weighted) const {
    return host_batch(x.data(), y.data(), weighted ? w.data() : nullptr, n, P,
                      weighted ? weight_sum() : static_cast<double>(n));
  }
};

template <class T>
Rows<T> make_rows(uint64_t seed, int64_t n, int64_t P) {
  Rng rng(seed);
  Rows<T> d;
  d.n = n;
  d.P = P;
  d.x.resize(static_cast<size_t>(n * P));
  d.y.resize(static_cast<size_t>(n));
  d.w.resize(static_cast<size_t>(n));
  d.beta.resize(static_cast<size_t>(P));
  for (int64_t j = 0; j < P; ++j)
    d.beta[j] = static_cast<T>(0.3 * rng.normal() / std::sqrt(static_cast<double>(P)));
  for (int64_t i = 0; i < n; ++i) {
    double fitted = 0.0;
    for (int64_t j = 0; j < P; ++j) {
      const double v = (P > 1 && j == P - 1) ? 1.0 : rng.normal();
      d.x[i * P + j] = static_cast<T>(v);
      fitted += static_cast<double>(d.x[i * P + j]) * static_cast<double>(d.beta[j]);
    }
    d.y[i] = static_cast<T>(fitted + 1.5 * rng.normal() + (i % 13 == 0 ? 9.0 * rng.normal() : 0.0));
    d.w[i] = static_cast<T>(i % 7 == 0 ? 0.0 : 2.0 * rng.uniform());
  }
  return d;
}

struct Outputs {
  std::vector<double> score, grams[3];
  double loss = 0.0, norm = 0.0;
  explicit Outputs(int64_t P, double fill = 0.0) : score(P, fill) {
    for (auto& g : grams)
      g.assign(static_cast<size_t>(P * P), fill);
  }
};

RhCudaRowStatistics request(uint64_t bits, const void* beta, Outputs& out) {
  RhCudaRowStatistics s = abi_struct<RhCudaRowStatistics>();
  s.statistics = bits;
  s.coefficients = beta;
  s.tau = kTau;
  s.bandwidth = kBandwidth;
  s.score = (bits & RH_CUDA_STATISTIC_SCORE) ? out.score.data() : nullptr;
  s.curvature_gram = (bits & RH_CUDA_STATISTIC_CURVATURE) ? out.grams[0].data() : nullptr;
  s.majoriser_gram = (bits & RH_CUDA_STATISTIC_MAJORISER) ? out.grams[1].data() : nullptr;
  s.meat = (bits & RH_CUDA_STATISTIC_MEAT) ? out.grams[2].data() : nullptr;
  return s;
}

// The definitions in long double: r = y - x . beta, rho / psi the Huber loss and score, c the
// trapezoid of half-width h around +-tau, m = max(c, min(1, tau / |r|)). Each entry also keeps
// the sum of its terms' magnitudes, the scale of the rounding a double sum may carry.
struct Reference {
  long double loss = 0, loss_abs = 0, norm = 0;
  std::vector<long double> score, score_abs;
  std::vector<long double> gram[3], gram_abs[3];
  std::vector<std::pair<int64_t, int64_t>> entries;  // the Gram entries evaluated
};

long double clamp_ld(long double v, long double lo, long double hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// Gram entries: all of them up to P = 40, else every entry of rows 0, 1, P / 2, P - 2, P - 1,
// the diagonal and 300 pairs from a fixed generator.
std::vector<std::pair<int64_t, int64_t>> gram_entries(int64_t P) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (P <= 40) {
    for (int64_t j = 0; j < P; ++j)
      for (int64_t k = 0; k < P; ++k)
        out.emplace_back(j, k);
    return out;
  }
  for (int64_t j : {int64_t{0}, int64_t{1}, P / 2, P - 2, P - 1})
    for (int64_t k = 0; k < P; ++k)
      out.emplace_back(j, k);
  for (int64_t j = 0; j < P; ++j)
    out.emplace_back(j, j);
  Rng rng(77);
  for (int q = 0; q < 300; ++q) {
    out.emplace_back(static_cast<int64_t>(rng.uniform() * static_cast<double>(P)),
                     static_cast<int64_t>(rng.uniform() * static_cast<double>(P)));
  }
  return out;
}

template <class T>
Reference reference(const Rows<T>& d, bool weighted) {
  Reference ref;
  const int64_t P = d.P;
  ref.entries = gram_entries(P);
  ref.score.assign(P, 0);
  ref.score_abs.assign(P, 0);
  for (int g = 0; g < 3; ++g) {
    ref.gram[g].assign(ref.entries.size(), 0);
    ref.gram_abs[g].assign(ref.entries.size(), 0);
  }
  const long double tau = kTau, h = kBandwidth;
  std::vector<long double> x(P);
  for (int64_t i = 0; i < d.n; ++i) {
    long double fitted = 0, squares = 0;
    for (int64_t j = 0; j < P; ++j) {
      x[j] = static_cast<long double>(d.x[i * P + j]);
      fitted += x[j] * static_cast<long double>(d.beta[j]);
      squares += x[j] * x[j];
    }
    const long double w = weighted ? static_cast<long double>(d.w[i]) : 1.0L;
    const long double r = static_cast<long double>(d.y[i]) - fitted;
    const long double a = std::fabs(r);
    const long double psi = clamp_ld(r, -tau, tau);
    const long double rho = a <= tau ? 0.5L * r * r : tau * a - 0.5L * tau * tau;
    const long double c = clamp_ld(0.5L + (tau - a) / (2.0L * h), 0.0L, 1.0L);
    const long double irls = a <= tau ? 1.0L : tau / a;
    const long double m = c > irls ? c : irls;
    const long double row[3] = {w * c, w * m, w * psi * psi};
    ref.loss += w * rho;
    ref.loss_abs += std::fabs(w * rho);
    ref.norm += w * squares;
    for (int64_t j = 0; j < P; ++j) {
      ref.score[j] += w * psi * x[j];
      ref.score_abs[j] += std::fabs(w * psi * x[j]);
    }
    for (size_t q = 0; q < ref.entries.size(); ++q) {
      const long double xx = x[ref.entries[q].first] * x[ref.entries[q].second];
      for (int g = 0; g < 3; ++g) {
        ref.gram[g][q] += row[g] * xx;
        ref.gram_abs[g][q] += std::fabs(row[g] * xx);
      }
    }
  }
  return ref;
}

// |got - want| <= 1e-12 * (sum of |terms|) + tiny: a double sum over these rows in any order.
bool close(double got, long double want, long double scale) {
  return std::fabs(static_cast<long double>(got) - want) <= 1e-12L * scale + 1e-300L;
}

int check_against(const Outputs& out, const Reference& ref, uint64_t bits, int64_t P,
                  const char* what) {
  int bad = 0;
  auto report = [&](const char* name, int64_t j, int64_t k, double got, long double want,
                    long double scale) {
    if (bad < 5) {
      std::fprintf(stderr, "  %s: %s[%lld, %lld] = %.17g, definition %.17Lg (scale %.3Lg)\n", what,
                   name, static_cast<long long>(j), static_cast<long long>(k), got, want, scale);
    }
    ++bad;
  };
  if ((bits & RH_CUDA_STATISTIC_LOSS) && !close(out.loss, ref.loss, ref.loss_abs))
    report("loss", 0, 0, out.loss, ref.loss, ref.loss_abs);
  if ((bits & RH_CUDA_STATISTIC_NORM) && !close(out.norm, ref.norm, ref.norm))
    report("weighted_norm", 0, 0, out.norm, ref.norm, ref.norm);
  if (bits & RH_CUDA_STATISTIC_SCORE) {
    for (int64_t j = 0; j < P; ++j) {
      if (!close(out.score[j], ref.score[j], ref.score_abs[j]))
        report("score", j, 0, out.score[j], ref.score[j], ref.score_abs[j]);
    }
  }
  const char* names[3] = {"curvature_gram", "majoriser_gram", "meat"};
  const uint64_t gram_bits[3] = {RH_CUDA_STATISTIC_CURVATURE, RH_CUDA_STATISTIC_MAJORISER,
                                 RH_CUDA_STATISTIC_MEAT};
  for (int g = 0; g < 3; ++g) {
    if ((bits & gram_bits[g]) == 0)
      continue;
    for (size_t q = 0; q < ref.entries.size(); ++q) {
      const int64_t j = ref.entries[q].first, k = ref.entries[q].second;
      const double got = out.grams[g][j * P + k];
      if (!close(got, ref.gram[g][q], ref.gram_abs[g][q]))
        report(names[g], j, k, got, ref.gram[g][q], ref.gram_abs[g][q]);
    }
    // Exactly symmetric, every entry.
    for (int64_t j = 0; j < P; ++j) {
      for (int64_t k = 0; k < j; ++k) {
        if (out.grams[g][j * P + k] != out.grams[g][k * P + j])
          report(names[g], j, k, out.grams[g][j * P + k], out.grams[g][k * P + j], 0);
      }
    }
  }
  if (bad > 0)
    std::fprintf(stderr, "  %s: %d value(s) off their definition\n", what, bad);
  return bad;
}

RhCudaEngine* new_engine(int32_t dtype, int64_t P) {
  RhCudaEngineOptions o = options(dtype, P);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  return e;
}

// One call on host or device rows; outputs in `out`.
template <class T>
RhCudaStatus run(RhCudaEngine* e, const Rows<T>& d, bool weighted, bool device, uint64_t bits,
                 Outputs& out) {
  RhCudaRowStatistics s = request(bits, d.beta.data(), out);
  const RhCudaHostBatch hb = d.batch(weighted);
  RhCudaStatus status;
  if (device) {
    const DeviceBatchCopy copy(hb, sizeof(T), "row-statistics rows");
    status = rh_cuda_engine_row_statistics_device(e, copy.batch(), &s);
  } else {
    status = rh_cuda_engine_row_statistics(e, &hb, &s);
  }
  if (status != RH_CUDA_SUCCESS)
    std::fprintf(stderr, "  row statistics failed: %s\n", rh_cuda_engine_last_error(e));
  out.loss = s.loss;
  out.norm = s.weighted_norm;
  return status;
}

// chunk_rows: RH_CUDA_TEST_STATISTICS_ROWS for the engine (0: the engine's own chunks).
template <class T>
void check_values(int64_t P, int64_t n, int64_t chunk_rows) {
  if (chunk_rows > 0)
    setenv("RH_CUDA_TEST_STATISTICS_ROWS", std::to_string(chunk_rows).c_str(), 1);
  RhCudaEngine* e = new_engine(dtype_of<T>(), P);
  unsetenv("RH_CUDA_TEST_STATISTICS_ROWS");
  if (e == nullptr)
    return;
  const Rows<T> d = make_rows<T>(1000 + static_cast<uint64_t>(P), n, P);
  for (int weighted = 0; weighted <= 1; ++weighted) {
    const Reference ref = reference(d, weighted != 0);
    Outputs host(P), device(P);
    RH_CHECK_STATUS(run(e, d, weighted != 0, false, RH_CUDA_STATISTIC_ALL, host), RH_CUDA_SUCCESS);
    RH_CHECK_STATUS(run(e, d, weighted != 0, true, RH_CUDA_STATISTIC_ALL, device), RH_CUDA_SUCCESS);
    char what[160];
    std::snprintf(what, sizeof what, "%s P %lld n %lld chunk %lld %s",
                  sizeof(T) == 4 ? "float32" : "float64", static_cast<long long>(P),
                  static_cast<long long>(n), static_cast<long long>(chunk_rows),
                  weighted ? "weighted" : "unweighted");
    std::string host_what = std::string(what) + " host rows";
    std::string device_what = std::string(what) + " device rows";
    RH_CHECK(check_against(host, ref, RH_CUDA_STATISTIC_ALL, P, host_what.c_str()) == 0);
    RH_CHECK(check_against(device, ref, RH_CUDA_STATISTIC_ALL, P, device_what.c_str()) == 0);
    // The same kernels over the same values: bitwise equal.
    bool same = host.loss == device.loss && host.norm == device.norm && host.score == device.score;
    for (int g = 0; g < 3; ++g)
      same = same && host.grams[g] == device.grams[g];
    if (!same)
      std::fprintf(stderr, "  %s: host and device rows differ\n", what);
    RH_CHECK(same);
    std::printf("row statistics %s: loss %.6e (definition %.6Le)\n", what, host.loss, ref.loss);
  }
  rh_cuda_engine_destroy(e);
}

void test_sums_follow_their_definitions() {
  for (int64_t P : {int64_t{1}, int64_t{33}, int64_t{257}}) {
    const int64_t n = P == 257 ? 900 : 3001;
    check_values<double>(P, n, 0);
    check_values<float>(P, n, 0);
    // Many chunks, the last one short.
    check_values<double>(P, n, 97);
    check_values<float>(P, n, 97);
  }
  // More rows than the engine's own chunk for P = 257 (2^22 / 257 = 16320 rows).
  check_values<double>(257, 16500, 0);
}

// Each statistic alone (and NORM without coefficients), on a fresh engine each.
void test_each_statistic_alone() {
  const int64_t P = 33;
  const Rows<double> d = make_rows<double>(5, 1500, P);
  const Reference ref = reference(d, true);
  for (uint64_t bits :
       {RH_CUDA_STATISTIC_LOSS, RH_CUDA_STATISTIC_SCORE, RH_CUDA_STATISTIC_CURVATURE,
        RH_CUDA_STATISTIC_MAJORISER, RH_CUDA_STATISTIC_MEAT, RH_CUDA_STATISTIC_NORM}) {
    RhCudaEngine* e = new_engine(RH_CUDA_DTYPE_FLOAT64, P);
    for (int device = 0; device <= 1; ++device) {
      Outputs out(P);
      RH_CHECK_STATUS(run(e, d, true, device != 0, bits, out), RH_CUDA_SUCCESS);
      char what[64];
      std::snprintf(what, sizeof what, "bits 0x%" PRIx64 " %s", bits, device ? "device" : "host");
      RH_CHECK(check_against(out, ref, bits, P, what) == 0);
    }
    rh_cuda_engine_destroy(e);
  }
  RhCudaEngine* e = new_engine(RH_CUDA_DTYPE_FLOAT64, P);
  Outputs out(P);
  RhCudaRowStatistics s = request(RH_CUDA_STATISTIC_NORM, nullptr, out);
  const RhCudaHostBatch hb = d.batch(true);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics(e, &hb, &s), RH_CUDA_SUCCESS);
  RH_CHECK(close(s.weighted_norm, ref.norm, ref.norm));
  const DeviceBatchCopy copy(hb, sizeof(double), "norm rows");
  s.weighted_norm = 0.0;
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(e, copy.batch(), &s), RH_CUDA_SUCCESS);
  RH_CHECK(close(s.weighted_norm, ref.norm, ref.norm));
  // A batch whose weights are all zero: every sum zero.
  Rows<double> zero = d;
  std::fill(zero.w.begin(), zero.w.end(), 0.0);
  Outputs z(P, 5.0);
  RhCudaRowStatistics all = request(RH_CUDA_STATISTIC_ALL, zero.beta.data(), z);
  RhCudaHostBatch zb = zero.batch(true);
  RH_CHECK(zb.batch_weight == 0.0);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics(e, &zb, &all), RH_CUDA_SUCCESS);
  RH_CHECK(all.loss == 0.0 && all.weighted_norm == 0.0 && z.score[0] == 0.0 &&
           z.grams[0][0] == 0.0 && z.grams[1][P * P - 1] == 0.0 && z.grams[2][5] == 0.0);
  rh_cuda_engine_destroy(e);
}

// The committed state is neither read nor changed: after an update, a call of each entry point
// leaves copy_state's export byte for byte as it was, and the next update matches a twin engine
// that never computed statistics.
void test_committed_state_is_untouched() {
  const int64_t features = 5, P = features + 1;
  Batch<double> data = make_batch<double>(42, 800, features, true, true);
  RhCudaHostBatch update_batch = data.view(true);
  RhCudaUpdateConfig c = config(features, RH_CUDA_PENALTY_NONE);
  RhCudaEngine* e = new_engine(RH_CUDA_DTYPE_FLOAT64, P);
  RhCudaEngine* twin = new_engine(RH_CUDA_DTYPE_FLOAT64, P);
  RhCudaDiagnostics d = diagnostics();
  RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &update_batch, &c, &d), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_update_host(twin, &update_batch, &c, &d), RH_CUDA_SUCCESS);
  HostState<double> before(P), after(P);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &before.view), RH_CUDA_SUCCESS);
  const Rows<double> rows = make_rows<double>(9, 700, P);
  Outputs out(P);
  RH_CHECK_STATUS(run(e, rows, true, false, RH_CUDA_STATISTIC_ALL, out), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(run(e, rows, true, true, RH_CUDA_STATISTIC_ALL, out), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &after.view), RH_CUDA_SUCCESS);
  RH_CHECK(before.coef == after.coef && before.info == after.info);
  RH_CHECK(before.view.n_samples_seen == after.view.n_samples_seen &&
           before.view.batch_count == after.view.batch_count &&
           before.view.weight_sum == after.view.weight_sum &&
           before.view.previous_lambda == after.view.previous_lambda);
  Batch<double> next = make_batch<double>(43, 800, features, true, true);
  RhCudaHostBatch next_batch = next.view(true);
  HostState<double> mine(P), theirs(P);
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &next_batch, &c, &d, &mine.view),
                  RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(twin, &next_batch, &c, &d, &theirs.view),
                  RH_CUDA_SUCCESS);
  RH_CHECK(mine.coef == theirs.coef && mine.info == theirs.info);
  rh_cuda_engine_destroy(e);
  rh_cuda_engine_destroy(twin);
}

// FAST_MATH (TF32 for float32 dense algebra) and CUDA_GRAPHS do not reach the sums, which are
// formed in double: a float32 engine with both flags still meets the definitions' bound.
void test_engine_flags_leave_the_double_sums_alone() {
  const int64_t P = 33;
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT32, P,
                                  RH_CUDA_ENGINE_FLAG_FAST_MATH | RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  if (e == nullptr)
    return;
  const Rows<float> d = make_rows<float>(12, 2500, P);
  const Reference ref = reference(d, true);
  for (int device = 0; device <= 1; ++device) {
    Outputs out(P);
    RH_CHECK_STATUS(run(e, d, true, device != 0, RH_CUDA_STATISTIC_ALL, out), RH_CUDA_SUCCESS);
    RH_CHECK(check_against(
                 out, ref, RH_CUDA_STATISTIC_ALL, P,
                 device ? "FAST_MATH float32 device rows" : "FAST_MATH float32 host rows") == 0);
  }
  rh_cuda_engine_destroy(e);
}

#ifdef RH_CPU_ENGINE_PATH
// librh_cpu's extension over the same rows: both within the definitions' rounding scale.
template <class T>
void compare_with_cpu(void* lib, int64_t P, int64_t n) {
  using Create = RhCudaStatus (*)(const RhCudaEngineOptions*, RhCudaEngine**);
  using Stats = RhCudaStatus (*)(RhCudaEngine*, const RhCudaHostBatch*, RhCudaRowStatistics*);
  using Destroy = RhCudaStatus (*)(RhCudaEngine*);
  using Version = uint32_t (*)(void);
  auto create = reinterpret_cast<Create>(dlsym(lib, "rh_cuda_engine_create"));
  auto stats = reinterpret_cast<Stats>(dlsym(lib, "rh_cuda_engine_row_statistics"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "rh_cuda_engine_destroy"));
  auto version = reinterpret_cast<Version>(dlsym(lib, "rh_cuda_row_statistics_version"));
  RH_CHECK(create && stats && destroy && version);
  if (!create || !stats || !destroy || !version)
    return;
  RH_CHECK(version() == rh_cuda_row_statistics_version());
  RhCudaEngineOptions o = options(dtype_of<T>(), P);
  o.device_id = -1;
  RhCudaEngine* cpu = nullptr;
  RH_CHECK_STATUS(create(&o, &cpu), RH_CUDA_SUCCESS);
  RhCudaEngine* gpu = new_engine(dtype_of<T>(), P);
  const Rows<T> d = make_rows<T>(31, n, P);
  const Reference ref = reference(d, true);
  Outputs cpu_out(P), gpu_out(P);
  RhCudaRowStatistics s = request(RH_CUDA_STATISTIC_ALL, d.beta.data(), cpu_out);
  const RhCudaHostBatch hb = d.batch(true);
  RH_CHECK_STATUS(stats(cpu, &hb, &s), RH_CUDA_SUCCESS);
  cpu_out.loss = s.loss;
  cpu_out.norm = s.weighted_norm;
  RH_CHECK_STATUS(run(gpu, d, true, false, RH_CUDA_STATISTIC_ALL, gpu_out), RH_CUDA_SUCCESS);
  // Each against the definition, and each entry of one against the other within the scale.
  RH_CHECK(check_against(cpu_out, ref, RH_CUDA_STATISTIC_ALL, P, "librh_cpu") == 0);
  RH_CHECK(check_against(gpu_out, ref, RH_CUDA_STATISTIC_ALL, P, "librh_cuda") == 0);
  double worst = std::fabs(cpu_out.loss - gpu_out.loss) / static_cast<double>(ref.loss_abs);
  for (int64_t j = 0; j < P; ++j)
    worst = std::fmax(worst, std::fabs(cpu_out.score[j] - gpu_out.score[j]) /
                                 std::fmax(static_cast<double>(ref.score_abs[j]), 1e-300));
  for (int g = 0; g < 3; ++g) {
    for (size_t q = 0; q < ref.entries.size(); ++q) {
      const int64_t at = ref.entries[q].first * P + ref.entries[q].second;
      worst = std::fmax(worst, std::fabs(cpu_out.grams[g][at] - gpu_out.grams[g][at]) /
                                   std::fmax(static_cast<double>(ref.gram_abs[g][q]), 1e-300));
    }
  }
  std::printf("row statistics vs librh_cpu (%s, P %lld, n %lld): worst difference %.3e of scale\n",
              sizeof(T) == 4 ? "float32" : "float64", static_cast<long long>(P),
              static_cast<long long>(n), worst);
  RH_CHECK(worst < 2e-12);
  destroy(cpu);
  rh_cuda_engine_destroy(gpu);
}

void test_agrees_with_the_cpu_engine() {
  void* lib = open_cpu_engine();
  if (lib == nullptr)
    return;
  compare_with_cpu<double>(lib, 33, 2600);
  compare_with_cpu<float>(lib, 33, 2600);
  compare_with_cpu<double>(lib, 1, 2600);
  dlclose(lib);
}
#endif

// ---------------------------------------------------------------------------------- refusals

constexpr int64_t kRP = 4;     // 3 features and the intercept's ones
constexpr int64_t kRN = 2600;  // several validation tiles

struct Refusals {
  RhCudaEngine* e = nullptr;
  Rows<double> d = make_rows<double>(3, kRN, kRP);
};

// One refusal on the host call and the same on the device call: INVALID_ARGUMENT, the host
// message contains `needle`, the device message is the host message with RhCudaHostBatch read
// as RhCudaDeviceBatch, and no output is written by either. `spoil` edits copies of the rows
// (before they are uploaded) and the batch and request.
using Spoil = std::function<void(Rows<double>&, RhCudaHostBatch&, RhCudaRowStatistics&)>;

std::string as_device(std::string text) {
  const std::string from = "RhCudaHostBatch", to = "RhCudaDeviceBatch";
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

void refused(Refusals& t, const Spoil& spoil, const char* needle, int line) {
  std::string messages[2];
  for (int device = 0; device <= 1; ++device) {
    Rows<double> rows = t.d;
    Outputs out(kRP, 7.5);
    RhCudaRowStatistics s = request(RH_CUDA_STATISTIC_ALL, rows.beta.data(), out);
    s.loss = -7.0;
    s.weighted_norm = -7.0;
    RhCudaHostBatch b = rows.batch(true);
    spoil(rows, b, s);
    RhCudaStatus status;
    if (device) {
      // Upload the (spoiled) rows and point the device batch at them, keeping whatever the
      // spoil did to the pointers themselves (NULL stays NULL).
      RhCudaHostBatch shape = b;
      if (shape.x_design == nullptr)
        shape.x_design = rows.x.data();
      if (shape.y == nullptr)
        shape.y = rows.y.data();
      const int64_t n_copy = std::min<int64_t>(b.n_rows > 0 ? b.n_rows : kRN, kRN);
      shape.n_rows = n_copy;
      shape.n_columns = kRP;
      const DeviceBatchCopy copy(shape, sizeof(double), "refusal rows");
      RhCudaDeviceBatch db;
      std::memcpy(&db, &b, sizeof db);
      if (b.x_design != nullptr)
        db.x_design = copy.x();
      if (b.y != nullptr)
        db.y = copy.batch()->y;
      if (b.sample_weight != nullptr)
        db.sample_weight = copy.batch()->sample_weight;
      status = rh_cuda_engine_row_statistics_device(t.e, &db, &s);
    } else {
      status = rh_cuda_engine_row_statistics(t.e, &b, &s);
    }
    messages[device] = rh_cuda_engine_last_error(t.e);
    if (status != RH_CUDA_INVALID_ARGUMENT) {
      std::fprintf(stderr, "line %d (%s rows): status %d, expected INVALID_ARGUMENT (%s)\n", line,
                   device ? "device" : "host", static_cast<int>(status), messages[device].c_str());
      ++failures();
    }
    bool untouched = s.loss == -7.0 && s.weighted_norm == -7.0;
    for (double v : out.score)
      untouched = untouched && v == 7.5;
    for (const auto& g : out.grams)
      for (double v : g)
        untouched = untouched && v == 7.5;
    if (!untouched) {
      std::fprintf(stderr, "line %d (%s rows): an output was written by a refused call\n", line,
                   device ? "device" : "host");
      ++failures();
    }
  }
  if (messages[0].find(needle) == std::string::npos) {
    std::fprintf(stderr, "line %d: host message '%s' lacks '%s'\n", line, messages[0].c_str(),
                 needle);
    ++failures();
  }
  if (messages[1] != as_device(messages[0])) {
    std::fprintf(stderr, "line %d: device message '%s' is not the host message '%s'\n", line,
                 messages[1].c_str(), messages[0].c_str());
    ++failures();
  }
}

#define RH_REFUSED(t, body, needle)                                      \
  refused(                                                               \
      t,                                                                 \
      [&](Rows<double>& r, RhCudaHostBatch& b, RhCudaRowStatistics& s) { \
        (void)r;                                                         \
        (void)b;                                                         \
        (void)s;                                                         \
        body;                                                            \
      },                                                                 \
      needle, __LINE__)

void test_every_refusal() {
  Refusals t;
  t.e = new_engine(RH_CUDA_DTYPE_FLOAT64, kRP);
  if (t.e == nullptr)
    return;
  RH_CHECK(rh_cuda_row_statistics_version() == 2u);
  HostState<double> before(kRP), after(kRP);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(t.e, &before.view), RH_CUDA_SUCCESS);

  // Without an engine, a request or a batch.
  Outputs out(kRP);
  RhCudaRowStatistics good = request(RH_CUDA_STATISTIC_ALL, t.d.beta.data(), out);
  RhCudaHostBatch hb = t.d.batch(false);
  RhCudaDeviceBatch db;
  std::memcpy(&db, &hb, sizeof db);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics(nullptr, &hb, &good), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(std::string(rh_cuda_last_error()).find("engine is null") != std::string::npos);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(nullptr, &db, &good),
                  RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(std::string(rh_cuda_last_error()).find("engine is null") != std::string::npos);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics(t.e, &hb, nullptr), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(
      std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaRowStatistics pointer is NULL") !=
      std::string::npos);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(t.e, &db, nullptr),
                  RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(
      std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaRowStatistics pointer is NULL") !=
      std::string::npos);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics(t.e, nullptr, &good), RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaHostBatch pointer is NULL") !=
           std::string::npos);
  RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(t.e, nullptr, &good),
                  RH_CUDA_INVALID_ARGUMENT);
  RH_CHECK(std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaDeviceBatch pointer is NULL") !=
           std::string::npos);

  // The request.
  RH_REFUSED(t, s.abi_version = 1, "RhCudaRowStatistics.abi_version is 1");
  RH_REFUSED(t, s.struct_size = 80, "RhCudaRowStatistics.struct_size is 80");
  RH_REFUSED(t, s.statistics = 0, "RhCudaRowStatistics.statistics is 0");
  RH_REFUSED(t, s.statistics = 0x7f, "unknown bits 0x40");
  RH_REFUSED(t, s.coefficients = nullptr, "RhCudaRowStatistics.coefficients is NULL");
  RH_REFUSED(t, s.tau = 0.0, "RhCudaRowStatistics.tau is 0");
  RH_REFUSED(t, s.tau = NAN, "RhCudaRowStatistics.tau is nan");
  RH_REFUSED(t, s.bandwidth = 1e-310, "RhCudaRowStatistics.bandwidth is");
  RH_REFUSED(t, s.bandwidth = INFINITY, "RhCudaRowStatistics.bandwidth is inf");
  RH_REFUSED(t, s.score = nullptr, "RhCudaRowStatistics.score is NULL");
  RH_REFUSED(t, s.curvature_gram = nullptr, "curvature_gram is NULL");
  RH_REFUSED(t, s.majoriser_gram = nullptr, "majoriser_gram is NULL");
  RH_REFUSED(t, s.meat = nullptr, "RhCudaRowStatistics.meat is NULL");
  RH_REFUSED(t,
             (s.statistics = RH_CUDA_STATISTIC_LOSS | RH_CUDA_STATISTIC_MEAT, s.score = nullptr,
              s.curvature_gram = nullptr),
             "RhCudaRowStatistics.majoriser_gram is set but statistics (0x11) does not request "
             "MAJORISER");

  // The batch.
  RH_REFUSED(t, b.abi_version = 3, "RhCudaHostBatch.abi_version is 3");
  RH_REFUSED(t, b.struct_size = 8, "RhCudaHostBatch.struct_size is 8");
  RH_REFUSED(t, b.x_design = nullptr, "RhCudaHostBatch.x_design is NULL");
  RH_REFUSED(t, b.y = nullptr, "RhCudaHostBatch.y is NULL");
  RH_REFUSED(t, b.n_columns = kRP - 1, "RhCudaHostBatch.n_columns is 3");
  RH_REFUSED(t, b.n_rows = 0, "RhCudaHostBatch.n_rows is 0");
  RH_REFUSED(t, b.n_rows = INT64_MAX / 2, "overflows");
  RH_REFUSED(t, (b.n_rows = int64_t{1} << 31, b.batch_weight = 0.0),
             "exceeds the CUDA engine's per-batch limit of 2147483647 rows");
  RH_REFUSED(t, b.batch_weight = -1.0, "RhCudaHostBatch.batch_weight is -1");
  RH_REFUSED(t, (b.sample_weight = nullptr, b.batch_weight = 5.0),
             "without sample_weight it must equal n_rows");
  RH_REFUSED(t, b.batch_weight += 50.0, "sample_weight sums to");

  // The values, one spoiled at a time (in the rows, before any upload).
  RH_REFUSED(t, (r.x[7 * kRP + 2] = NAN, b.x_design = r.x.data()),
             "RhCudaHostBatch.x_design[7, 2] is nan: values must be finite");
  RH_REFUSED(t, (r.x[2555 * kRP + 0] = -INFINITY, b.x_design = r.x.data()),
             "RhCudaHostBatch.x_design[2555, 0] is -inf");
  RH_REFUSED(t, (r.y[11] = INFINITY, b.y = r.y.data()), "RhCudaHostBatch.y[11] is inf");
  RH_REFUSED(t, (r.w[3] = -0.5, b.sample_weight = r.w.data(), b.batch_weight -= 0.5 + t.d.w[3]),
             "RhCudaHostBatch.sample_weight[3] is negative");
  RH_REFUSED(t, (r.w[1900] = NAN, b.sample_weight = r.w.data()),
             "RhCudaHostBatch.sample_weight[1900] is nan");
  RH_REFUSED(t, (r.beta[2] = -INFINITY, s.coefficients = r.beta.data()),
             "RhCudaRowStatistics.coefficients[2] is -inf");
  // Several bad values: the first in librh_cpu's order (y before sample_weight before x).
  RH_REFUSED(t,
             (r.x[0] = NAN, r.w[5] = NAN, r.y[9] = NAN, b.x_design = r.x.data(), b.y = r.y.data(),
              b.sample_weight = r.w.data()),
             "RhCudaHostBatch.y[9] is nan");
  RH_REFUSED(t,
             (r.x[0] = NAN, r.w[8] = -1.0, b.x_design = r.x.data(), b.sample_weight = r.w.data()),
             "RhCudaHostBatch.sample_weight[8] is negative");
  RH_REFUSED(t, (r.x[0] = NAN, b.x_design = r.x.data(), b.batch_weight += 50.0),
             "sample_weight sums to");

  // Device only: misaligned and host pointers.
  {
    const RhCudaHostBatch host = t.d.batch(true);
    const DeviceBatchCopy copy(host, sizeof(double), "alignment rows");
    Outputs o(kRP, 7.5);
    RhCudaRowStatistics s = request(RH_CUDA_STATISTIC_ALL, t.d.beta.data(), o);
    RhCudaDeviceBatch mis = *copy.batch();
    mis.x_design = static_cast<const char*>(copy.x()) + 4;
    RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(t.e, &mis, &s), RH_CUDA_INVALID_ARGUMENT);
    RH_CHECK(std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaDeviceBatch.x_design") !=
                 std::string::npos &&
             std::string(rh_cuda_engine_last_error(t.e)).find("is not aligned") !=
                 std::string::npos);
    mis = *copy.batch();
    mis.sample_weight = static_cast<const char*>(mis.sample_weight) + 2;
    RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(t.e, &mis, &s), RH_CUDA_INVALID_ARGUMENT);
    RH_CHECK(std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaDeviceBatch.sample_weight") !=
             std::string::npos);
    mis = *copy.batch();
    mis.y = t.d.y.data();  // host memory
    RH_CHECK_STATUS(rh_cuda_engine_row_statistics_device(t.e, &mis, &s), RH_CUDA_INVALID_ARGUMENT);
    RH_CHECK(std::string(rh_cuda_engine_last_error(t.e)).find("RhCudaDeviceBatch.y") !=
                 std::string::npos &&
             std::string(rh_cuda_engine_last_error(t.e)).find("is not device memory") !=
                 std::string::npos);
    bool untouched = true;
    for (double v : o.score)
      untouched = untouched && v == 7.5;
    for (const auto& g : o.grams)
      for (double v : g)
        untouched = untouched && v == 7.5;
    RH_CHECK(untouched);
    std::printf("misaligned / host pointer refusal: %s\n", rh_cuda_engine_last_error(t.e));
  }

  // Nothing of it reached the state, and the engine still works.
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(t.e, &after.view), RH_CUDA_SUCCESS);
  RH_CHECK(before.coef == after.coef && before.info == after.info &&
           after.view.n_samples_seen == 0 && after.view.batch_count == 0);
  Outputs fine(kRP);
  RH_CHECK_STATUS(run(t.e, t.d, true, false, RH_CUDA_STATISTIC_ALL, fine), RH_CUDA_SUCCESS);
  RH_CHECK_STATUS(run(t.e, t.d, true, true, RH_CUDA_STATISTIC_ALL, fine), RH_CUDA_SUCCESS);
  rh_cuda_engine_destroy(t.e);
}

}  // namespace

int main() {
  skip_without_gpu("test_cuda_row_statistics");
  test_every_refusal();
  test_committed_state_is_untouched();
  test_each_statistic_alone();
  test_sums_follow_their_definitions();
  test_engine_flags_leave_the_double_sums_alone();
#ifdef RH_CPU_ENGINE_PATH
  test_agrees_with_the_cpu_engine();
#else
  std::printf("librh_cpu not built: the CPU comparison did not run\n");
#endif
  return finish("test_cuda_row_statistics");
}
