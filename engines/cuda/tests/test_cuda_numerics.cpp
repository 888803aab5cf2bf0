// What librh_cuda computes: the OLS limit and the closed-form lambda/bandwidth (independent
// math), agreement with librh_cpu, host/device and narrow/expanded input equality,
// reproducibility, K against its definition, the speculative Newton step against the line search,
// the SVD fallback on an exactly singular system,
// asymmetric restores, rollback after an injected cuSOLVER failure, graphs on/off, and TF32 against
// strict float32.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"

using namespace rhtest;

namespace {

constexpr int64_t kFeatures = 6;
constexpr int64_t kP = kFeatures + 1;

struct Fit {
  std::vector<double> coef, info;
  RhCudaDiagnostics diag{};
  RhCudaStatus status = RH_CUDA_SUCCESS;
  std::vector<int> batch_iterations;  // one count a batch, where the caller records them
  bool ok = true;                     // every batch converged, where the caller records it
  int64_t graph_captures = 0;         // the engine's, where the caller reads them
};

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// max_j |a_j - b_j| / (1 + |b_j|)
double relative_gap(const std::vector<double>& a, const std::vector<double>& b) {
  double gap = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t j = 0; j < a.size() && j < b.size(); ++j)
    gap = std::fmax(gap, std::fabs(a[j] - b[j]) / (1.0 + std::fabs(b[j])));
  return gap;
}

// The largest gap between two P x P information matrices on the scale a Gram's rounding errors
// take: |a_jk - b_jk| / (1 + sqrt(b_jj b_kk)), since |sum_i w_i c_i x_ij x_ik| <= sqrt(G_jj G_kk)
// bounds every term's share (Cauchy-Schwarz). An off-diagonal entry far smaller than its terms
// carries the rounding of those terms, which relative_gap would measure against the entry alone.
double gram_scaled_gap(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t P = static_cast<size_t>(std::llround(std::sqrt(static_cast<double>(b.size()))));
  if (a.size() != b.size() || P * P != b.size())
    return INFINITY;
  double gap = 0.0;
  for (size_t j = 0; j < P; ++j)
    for (size_t k = 0; k < P; ++k) {
      const double scale = std::sqrt(std::fabs(b[j * P + j]) * std::fabs(b[k * P + k]));
      gap = std::fmax(gap, std::fabs(a[j * P + k] - b[j * P + k]) / (1.0 + scale));
    }
  return gap;
}

// Runs `batches` batches (seeds 100, 101, ...) on a fresh engine and returns the final state;
// without_k: from the empty state without K (restore_without_k).
template <class T>
Fit stream_fit(int32_t dtype, int32_t penalty, uint64_t flags, bool device, bool expanded,
               bool weighted, int batches = 3, int64_t rows = 2000, int64_t features = kFeatures,
               int64_t max_iter = 100, bool without_k = false, double feature_scale = 1.0,
               double tolerance = 1e-10, size_t x_shift = 0) {
  Fit fit;
  RhCudaEngineOptions o = options(dtype, features + 1, flags);
  RhCudaEngine* e = nullptr;
  fit.status = rh_cuda_engine_create(&o, &e);
  if (fit.status == RH_CUDA_SUCCESS && without_k)
    fit.status = restore_without_k<T>(e, features + 1);
  if (fit.status != RH_CUDA_SUCCESS)
    return fit;
  HostState<T> state(features + 1);
  RhCudaUpdateConfig c = config(features, penalty);
  c.max_iter = max_iter;
  c.tolerance = tolerance;
  for (int b = 0; b < batches && fit.status == RH_CUDA_SUCCESS; ++b) {
    Batch<T> data = make_batch<T>(100 + b, rows, features, true, expanded, 8.0, feature_scale);
    RhCudaHostBatch hb = data.view(weighted);
    fit.diag = diagnostics();
    if (!device) {
      fit.status = rh_cuda_engine_update_host_with_state(e, &hb, &c, &fit.diag, &state.view);
      continue;
    }
    const DeviceBatchCopy device_batch(hb, sizeof(T), "stream batch", x_shift);
    fit.status = rh_cuda_engine_update_device_with_state(e, device_batch.batch(), &c, &fit.diag,
                                                         &state.view);
  }
  if (fit.status != RH_CUDA_SUCCESS)
    std::fprintf(stderr, "  stream_fit: %s\n", rh_cuda_engine_last_error(e));
  fit.coef = widen(state.coef);
  fit.info = widen(state.info);
  rh_cuda_engine_destroy(e);
  return fit;
}

// K after a stream of `batches` batches (seeds 200, 201, ...), and K's definition evaluated here
// in long double from the exported states: the sum over batches of X_b' diag(w psi(r_b)^2) X_b
// with r_b the residuals at that batch's committed coefficients (appended intercept last).
struct MeatStream {
  std::vector<double> meat, expected;
  int iterations = 0;
  bool ok = false;
};

template <class T>
MeatStream meat_stream(int64_t features, int64_t max_iter, uint64_t flags, bool device,
                       int batches = 3) {
  MeatStream out;
  const int64_t P = features + 1;
  const int32_t dtype = sizeof(T) == 4 ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64;
  RhCudaEngineOptions o = options(dtype, P, flags);
  RhCudaEngine* e = nullptr;
  if (rh_cuda_engine_create(&o, &e) != RH_CUDA_SUCCESS)
    return out;
  HostState<T> state(P);
  out.meat.assign(static_cast<size_t>(P * P), 0.0);
  state.view.meat = out.meat.data();
  std::vector<long double> expected(static_cast<size_t>(P * P), 0.0L);
  RhCudaUpdateConfig c = config(features, RH_CUDA_PENALTY_NONE);
  c.max_iter = max_iter;
  bool ok = true;
  for (int b = 0; b < batches && ok; ++b) {
    Batch<T> data = make_batch<T>(200 + b, 3000, features, true, false, 30.0);
    RhCudaHostBatch hb = data.view(true);
    RhCudaDiagnostics d = diagnostics();
    if (device) {
      const DeviceBatchCopy copy(hb, sizeof(T), "meat stream batch");
      ok = rh_cuda_engine_update_device_with_state(e, copy.batch(), &c, &d, &state.view) ==
           RH_CUDA_SUCCESS;
    } else {
      ok = rh_cuda_engine_update_host_with_state(e, &hb, &c, &d, &state.view) == RH_CUDA_SUCCESS;
    }
    ok = ok && state.view.meat_available == 1;
    out.iterations = static_cast<int>(d.iterations);
    for (int64_t i = 0; ok && i < data.n; ++i) {
      std::vector<long double> x(static_cast<size_t>(P), 1.0L);
      long double fit = 0.0L;
      for (int64_t j = 0; j < P; ++j) {
        if (j < features)
          x[j] = static_cast<long double>(data.x[i * features + j]);
        fit += x[j] * static_cast<long double>(state.coef[j]);
      }
      const long double r = static_cast<long double>(data.y[i]) - fit;
      const long double psi = std::fmax(-c.tau, std::fmin(static_cast<double>(r), c.tau));
      const long double scale = static_cast<long double>(data.w[i]) * psi * psi;
      for (int64_t j = 0; j < P; ++j)
        for (int64_t k = 0; k < P; ++k)
          expected[j * P + k] += scale * x[j] * x[k];
    }
  }
  if (!ok)
    std::fprintf(stderr, "  meat_stream: %s\n", rh_cuda_engine_last_error(e));
  rh_cuda_engine_destroy(e);
  out.expected.assign(expected.begin(), expected.end());
  out.ok = ok;
  return out;
}

// K's rows come from the solver's row pass at the final beta, or (RH_CUDA_TEST_MEAT_PASS=
// separate) from meat.cu's own pass over the residuals that row pass stored: both give the same
// bits, and K equals its definition. Cases: one lane, 8 lanes and a warp per row; max_iter
// ending the solve (the last row pass ran while the solve was still running); graphs; device
// input; float32 (the Gram in float32, added in double).
void test_meat_follows_its_definition() {
  struct Case {
    int64_t features;
    int64_t max_iter;
    uint64_t flags;
    bool device;
  };
  const Case cases[] = {{kFeatures, 100, 0, false},
                        {20, 100, 0, false},
                        {40, 100, 0, true},
                        {kFeatures, 2, 0, false},
                        {20, 100, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS, true}};
  for (const Case& cs : cases) {
    const MeatStream fused = meat_stream<double>(cs.features, cs.max_iter, cs.flags, cs.device);
    const MeatStream fused32 = meat_stream<float>(cs.features, cs.max_iter, cs.flags, cs.device);
    setenv("RH_CUDA_TEST_MEAT_PASS", "separate", 1);
    const MeatStream separate = meat_stream<double>(cs.features, cs.max_iter, cs.flags, cs.device);
    const MeatStream separate32 = meat_stream<float>(cs.features, cs.max_iter, cs.flags, cs.device);
    unsetenv("RH_CUDA_TEST_MEAT_PASS");
    RH_CHECK(fused.ok && separate.ok && fused32.ok && separate32.ok);
    const double rel = max_rel_diff(fused.meat, fused.expected);
    const double rel32 = max_rel_diff(fused32.meat, fused32.expected);
    std::printf(
        "meat (%lld features, max_iter %lld%s%s): last batch %d iterations; vs its "
        "definition rel %.3e (f64) %.3e (f32)\n",
        static_cast<long long>(cs.features), static_cast<long long>(cs.max_iter),
        cs.flags ? ", graphs" : "", cs.device ? ", device input" : "", fused.iterations, rel,
        rel32);
    RH_CHECK(rel < 1e-10);
    RH_CHECK(rel32 < 1e-4);
    RH_CHECK(fused.meat == separate.meat);
    RH_CHECK(fused32.meat == separate32.meat);
  }
}

// Dense solve by Gaussian elimination with partial pivoting, for the OLS reference.
std::vector<double> solve_dense(std::vector<long double> A, std::vector<long double> b, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    int64_t piv = k;
    for (int64_t r = k + 1; r < n; ++r)
      if (fabsl(A[r * n + k]) > fabsl(A[piv * n + k]))
        piv = r;
    for (int64_t c = 0; c < n; ++c)
      std::swap(A[k * n + c], A[piv * n + c]);
    std::swap(b[k], b[piv]);
    for (int64_t r = k + 1; r < n; ++r) {
      const long double f = A[r * n + k] / A[k * n + k];
      for (int64_t c = k; c < n; ++c)
        A[r * n + c] -= f * A[k * n + c];
      b[r] -= f * b[k];
    }
  }
  std::vector<double> x(n);
  for (int64_t r = n - 1; r >= 0; --r) {
    long double acc = b[r];
    for (int64_t c = r + 1; c < n; ++c)
      acc -= A[r * n + c] * x[c];
    x[r] = static_cast<double>(acc / A[r * n + r]);
  }
  return x;
}

// The ways librh_cuda forms and solves a Newton system: the engine's choice (the Gram formed by
// the row pass up to kFusedGramMaxP = 128 parameters, cuBLAS above; the one-block Cholesky up to
// its limit, 160 parameters on an H200, the cluster kernel's factor and solves above it up to its
// limit, 383 on an H200, cuSOLVER's factor beyond, solved by the one-block triangular solves), the
// cluster Cholesky for every P up to its limit, cuSOLVER's factor for every P, the same with the
// solves' right-hand side and block inverses in global memory (as beyond the shared memory, P
// above about 800 on an H200), and cuBLAS's Gram for every P (docs/decisions.md, "The one-block
// Cholesky", "The cluster Cholesky", "The triangular solves" and "The fused row pass"; the test
// build's switches).
struct DensePath {
  const char* name;
  // Set to 0 before the engine is made; none: the engine's choice.
  std::array<const char*, 3> variables{};
};
constexpr DensePath kDensePaths[] = {
    {"engine's choice", {}},
    {"cluster Cholesky", {"RH_CUDA_TEST_SMALL_DENSE_MAX"}},
    {"cuSOLVER", {"RH_CUDA_TEST_SMALL_DENSE_MAX", "RH_CUDA_TEST_CLUSTER_CHOLESKY_MAX"}},
    {"cuSOLVER, global solve",
     {"RH_CUDA_TEST_SMALL_DENSE_MAX", "RH_CUDA_TEST_CLUSTER_CHOLESKY_MAX",
      "RH_CUDA_TEST_CHOLESKY_SHARED"}},
    {"cuBLAS Gram", {"RH_CUDA_TEST_FUSED_GRAM_MAX"}}};

// Sets (on) or clears the path's switches.
void set_path(const DensePath& path, bool on) {
  for (const char* variable : path.variables) {
    if (variable == nullptr)
      continue;
    if (on)
      setenv(variable, "0", 1);
    else
      unsetenv(variable);
  }
}

// One float64 update of `data` (tau = 100: every residual in the quadratic zone, the least
// squares limit) by a new engine on `path` from the empty state without K (so the fused row pass
// forms the Gram up to its limit), with RH_CUDA_TEST_CHUNK=chunk when given; the state lands in
// s.
RhCudaDiagnostics least_squares_update(const DensePath& path, const Batch<double>& data,
                                       int64_t features, HostState<double>& s,
                                       const char* chunk = nullptr) {
  set_path(path, true);
  if (chunk != nullptr)
    setenv("RH_CUDA_TEST_CHUNK", chunk, 1);
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, features + 1);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  set_path(path, false);
  unsetenv("RH_CUDA_TEST_CHUNK");
  RH_CHECK_STATUS(restore_without_k<double>(e, features + 1), RH_CUDA_SUCCESS);
  RhCudaUpdateConfig c = config(features, RH_CUDA_PENALTY_NONE, 100.0);
  RhCudaHostBatch b = data.view();
  RhCudaDiagnostics d = diagnostics();
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &s.view), RH_CUDA_SUCCESS);
  rh_cuda_engine_destroy(e);
  return d;
}

// tau = 100 leaves every residual in the quadratic zone: the first Newton step is the least
// squares solution, computed here in long double. P crosses every instance of the one-block
// kernel (its back substitution's 32-parameter slots and its elements per thread: P = 7-32, 33,
// 50, 64, 70, 80, 91, 97, 110, 128, 129, 150, 160) and its limit (160, 161 on an H200), the
// cluster kernel's tile rows of the bordered matrix [H 0; g' 1] of P + 1 rows (a partial last
// tile, a whole one at P = 63, 191 and 383, row P alone in its tile at P = 32, 64, 128, 160 and
// 192; P = 7 to 161, 257, 289, 321), its cluster shapes (one block per tile row up to 8 rows, 8
// blocks for 9 and 10 rows, so that blocks 0 and 1 hold two rows each, one block per row for 11
// and 12 on an H200) and its limit (383, 384), with the standard wide shape's 257, the fused
// Gram's padded widths (16, 17, 24, 33, 40, 64, 91, 128) and its limit (128, 129), and cuBLAS's
// Gram by column blocks of the upper triangle (two blocks at 512, uneven ones at 600, four at
// 1,025, the large-profile wide shape's P) and, where P is one past whole 64-column tiles
// (65 on the cuBLAS Gram's path, 129, 257, 513, 1,025), its last column from the row pass that
// forms X'u (up to 128 stored columns: 65 and 129) or by a gemv (257 and above); X'u formed by
// the row pass with each width of its column slots (up to 128, 256, 512 and 1,024 stored
// columns: 128, 149, 288, 511, 512, 513, 599, 1,024) and by cuBLAS's gemv beyond (1,025) and
// after the fused row pass (33 to 127 columns).
void test_large_tau_reproduces_ordinary_least_squares() {
  for (int64_t features :
       {kFeatures,    int64_t{15},  int64_t{16},  int64_t{23},   int64_t{31},  int64_t{32},
        int64_t{39},  int64_t{49},  int64_t{62},  int64_t{63},   int64_t{64},  int64_t{69},
        int64_t{79},  int64_t{90},  int64_t{96},  int64_t{109},  int64_t{127}, int64_t{128},
        int64_t{149}, int64_t{159}, int64_t{160}, int64_t{190},  int64_t{191}, int64_t{256},
        int64_t{288}, int64_t{320}, int64_t{382}, int64_t{383},  int64_t{384}, int64_t{511},
        int64_t{512}, int64_t{513}, int64_t{599}, int64_t{1024}, int64_t{1025}}) {
    const int64_t P = features + 1;
    Batch<double> data = make_batch<double>(7, 3000, features, true, true, 0.0);
    std::vector<long double> A(static_cast<size_t>(P * P), 0.0L), rhs(static_cast<size_t>(P));
    for (int64_t i = 0; i < data.n; ++i) {
      const double* x = data.x.data() + i * P;
      for (int64_t j = 0; j < P; ++j) {
        rhs[j] += static_cast<long double>(x[j]) * data.y[i];
        for (int64_t k = 0; k <= j; ++k)
          A[j * P + k] += static_cast<long double>(x[j]) * x[k];
      }
    }
    for (int64_t j = 0; j < P; ++j)
      for (int64_t k = j + 1; k < P; ++k)
        A[j * P + k] = A[k * P + j];
    const std::vector<double> ols = solve_dense(A, rhs, P);
    for (const DensePath& path : kDensePaths) {
      HostState<double> s(P);
      const RhCudaDiagnostics d = least_squares_update(path, data, features, s);
      const double err = max_abs_diff(s.coef.data(), ols.data(), P);
      std::printf("OLS limit (P = %lld, %s): max |beta - beta_ols| = %.3e, iterations %lld\n",
                  static_cast<long long>(P), path.name, err, static_cast<long long>(d.iterations));
      RH_CHECK(err < 1e-10);
      RH_CHECK(d.converged == 1 && d.used_regularized_fallback == 0);
      // Every residual lies inside (-tau + h, tau - h), so the information is exactly X'X.
      double info_err = 0.0;
      for (int64_t j = 0; j < P * P; ++j)
        info_err = std::fmax(info_err, std::fabs(s.info[j] - static_cast<double>(A[j])) /
                                           (1.0 + std::fabs(static_cast<double>(A[j]))));
      RH_CHECK(info_err < 1e-12);
      const double N = 3000.0;
      RH_CHECK(std::fabs(d.bandwidth -
                         1.0 / (std::sqrt(N) * std::log(static_cast<double>(features)))) < 1e-15);
      RH_CHECK(d.lambda_value == 0.0);
    }
  }
}

void test_l1_lambda_follows_the_closed_form() {
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  Batch<double> data = make_batch<double>(3, 500, kFeatures, true, false);
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_L1);
  c.tolerance = 1e-6;  // LAMM's linear rate needs far more than 100 iterations for 1e-10
  RhCudaHostBatch b = data.view(true);
  RhCudaDiagnostics d = diagnostics();
  RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &b, &c, &d), RH_CUDA_SUCCESS);
  const double N = b.batch_weight;
  const double expected = 0.5 * 1.345 * std::sqrt(std::log(6.0) / N);
  RH_CHECK(std::fabs(d.lambda_value - expected) <= 1e-15 * expected);
  RH_CHECK(d.converged == 1);
  HostState<double> s(kP);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &s.view), RH_CUDA_SUCCESS);
  RH_CHECK(s.view.previous_lambda == d.lambda_value && s.view.weight_sum == N &&
           s.view.n_samples_seen == 500);
  rh_cuda_engine_destroy(e);
}

void test_host_and_device_input_agree_bitwise() {
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    Fit h64 = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, penalty, 0, false, false, true);
    Fit d64 = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, penalty, 0, true, false, true);
    Fit h32 = stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, penalty, 0, false, true, false);
    Fit d32 = stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, penalty, 0, true, true, false);
    RH_CHECK(h64.status == RH_CUDA_SUCCESS && d64.status == RH_CUDA_SUCCESS);
    RH_CHECK(h32.status == RH_CUDA_SUCCESS && d32.status == RH_CUDA_SUCCESS);
    RH_CHECK(h64.coef == d64.coef && h64.info == d64.info);
    RH_CHECK(h32.coef == d32.coef && h32.info == d32.info);
  }
  // LAMM's tensor-core trials load a float32 row's columns 16 bytes at a time where every row
  // starts on 16 bytes, one by one where not (host input is staged into the engine's own row
  // buffer, which starts aligned; device input one float past an aligned start is not); both
  // read each column at the same step, so the two give the same bits: 32 and 128 features fill
  // every step.
  for (int64_t features : {32, 128}) {
    const auto fit = [features](bool device, size_t shift) {
      return stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_L1, 0, device, false, true, 3,
                               2000, features, 100, false, 1.0, 1e-10, shift);
    };
    const Fit host = fit(false, 0);
    const Fit aligned = fit(true, 0);
    const Fit shifted = fit(true, 1);
    RH_CHECK(host.status == RH_CUDA_SUCCESS && aligned.status == RH_CUDA_SUCCESS &&
             shifted.status == RH_CUDA_SUCCESS);
    RH_CHECK(host.coef == aligned.coef && host.info == aligned.info);
    RH_CHECK(aligned.coef == shifted.coef && aligned.info == shifted.info);
  }
}

// Device input is checked by the objective at beta0 instead of the validation pass over X
// (BatchConstants::checks_deferred; RH_CUDA_TEST_DEVICE_CHECKS=pass queues the pass as for host
// input). The pass only decides whether a batch is refused, and an unweighted batch's weight is
// its row count either way, so accepted streams must be the same bits with and without it: both
// penalties, with and without weights, both dtypes, on the row passes of 6, 20, 40 and 128
// features (one lane, teams of 8, a warp per row; 128: cuBLAS's Gram) and on the incremental
// Gram's first pass (64,000 x 129), from a new engine and from the empty state without K.
void test_deferred_device_checks_match_the_validation_pass() {
  struct Shape {
    int64_t rows, features;
    int32_t penalty;
    bool weighted;
  };
  std::vector<Shape> shapes;
  for (const int64_t features : {int64_t{6}, int64_t{20}, int64_t{40}, int64_t{128}})
    for (const int32_t penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1})
      for (const bool weighted : {false, true})
        shapes.push_back({2000, features, penalty, weighted});
  shapes.push_back({64000, 128, RH_CUDA_PENALTY_NONE, false});
  for (const Shape& sh : shapes)
    for (const bool without_k : {false, true}) {
      Fit fits[2], fits32[2];
      for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1)
          setenv("RH_CUDA_TEST_DEVICE_CHECKS", "pass", 1);
        fits[pass] = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, sh.penalty, 0, true, false,
                                        sh.weighted, 3, sh.rows, sh.features, 100, without_k);
        fits32[pass] = stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, sh.penalty, 0, true, false,
                                         sh.weighted, 3, sh.rows, sh.features, 100, without_k);
        unsetenv("RH_CUDA_TEST_DEVICE_CHECKS");
      }
      for (const Fit* f : {fits, fits32}) {
        const bool same = f[0].status == RH_CUDA_SUCCESS && f[1].status == RH_CUDA_SUCCESS &&
                          f[0].coef == f[1].coef && f[0].info == f[1].info &&
                          f[0].diag.iterations == f[1].diag.iterations &&
                          f[0].diag.converged == f[1].diag.converged &&
                          f[0].diag.objective == f[1].diag.objective;
        if (!same) {
          std::fprintf(stderr,
                       "  deferred checks differ from the pass: %lld x %lld, %s, %s, %s, %s\n",
                       static_cast<long long>(sh.rows), static_cast<long long>(sh.features),
                       sh.penalty ? "l1" : "none", sh.weighted ? "weighted" : "unweighted",
                       f == fits ? "float64" : "float32", without_k ? "without K" : "new engine");
          ++failures();
        }
      }
    }
  std::printf(
      "deferred device checks: %zu stream shapes x 2 starts x 2 dtypes, the same bits as "
      "with the validation pass\n",
      shapes.size());
}

void test_appended_intercept_matches_expanded_design() {
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    for (bool device : {false, true}) {
      Fit narrow = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, penalty, 0, device, false, true);
      Fit wide = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, penalty, 0, device, true, true);
      const double rel = max_rel_diff(narrow.coef, wide.coef);
      const double rel_info = max_rel_diff(narrow.info, wide.info);
      std::printf("intercept append (%s, %s input): coef rel diff %.2e, info %.2e\n",
                  penalty ? "l1" : "none", device ? "device" : "host", rel, rel_info);
      RH_CHECK(rel < 1e-10 && rel_info < 1e-12);
    }
  }
}

void test_results_are_reproducible() {
  Fit a = stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_NONE, 0, false, false, true, 2,
                            70000);
  Fit b = stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_NONE, 0, false, false, true, 2,
                            70000);
  RH_CHECK(a.coef == b.coef && a.info == b.info && a.diag.objective == b.diag.objective);
}

void test_graphs_on_and_off_agree() {
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    Fit eager = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, penalty, 0, false, false, true);
    Fit graph = stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, penalty, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS,
                                   false, false, true);
    RH_CHECK(eager.status == RH_CUDA_SUCCESS && graph.status == RH_CUDA_SUCCESS);
    RH_CHECK(eager.coef == graph.coef && eager.info == graph.info);
    RH_CHECK(eager.diag.iterations == graph.diag.iterations);
  }
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  Batch<double> data = make_batch<double>(9, 4000, kFeatures, true, false);
  RhCudaHostBatch b = data.view();
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    RhCudaUpdateConfig c = config(kFeatures, penalty);
    RhCudaDiagnostics d = diagnostics();
    RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &b, &c, &d), RH_CUDA_SUCCESS);
  }
  RhCudaEngineFeatures f = abi_struct<RhCudaEngineFeatures>();
  RH_CHECK_STATUS(rh_cuda_engine_features(e, &f), RH_CUDA_SUCCESS);
  std::printf("graphs: requested %llu enabled %llu captures %llu replays %llu fallbacks %llu\n",
              (unsigned long long)f.requested_flags, (unsigned long long)f.enabled_flags,
              (unsigned long long)f.graph_captures, (unsigned long long)f.graph_replays,
              (unsigned long long)f.graph_fallbacks);
  RH_CHECK(f.requested_flags == RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS);
  RH_CHECK(f.graph_captures + f.graph_fallbacks >= 1);
  RH_CHECK(f.graph_captures == 0 || f.graph_replays >= f.graph_captures);
  rh_cuda_engine_destroy(e);
}

// Iterations are queued a chunk at a time and every kernel queued past the end of the solve
// returns at once, so the chunk size (RH_CUDA_TEST_CHUNK; unset: adaptive) must never change a
// result, bit for bit: also when max_iter ends the solve inside a chunk, on every dense path
// (kDensePaths) and with graphs. Each stream runs twice: from a new engine, which keeps
// K (its rows from the row pass at the final beta; the line search at every Newton iteration),
// and from the empty state without K, as the package's streams without inference start (the
// fused row pass's Gram up to 128 parameters, and Newton's speculative whole step from the
// second batch on, whose verdict kernels must also return at once past the end).
// Newton's heavy Gram (2 n P^2 > 2e9) is kept incrementally: after a batch's first Gram only
// the rows whose curvature weight changed are added, or the Gram is formed again in full from
// the recorded weights when too many changed (docs/decisions.md, "The incremental Gram"). Every
// way must give the fit of the Gram formed in full at every row pass (the switch off), up to
// the rounding of a different order of the same sums. Three batches of 12,000 rows x 301
// parameters (the cluster Cholesky's range, where the host adds the changed rows after each
// iteration's synchronisation) and of 64,000 x 129 (the one-block Cholesky's, just above the
// fused row pass's limit, where the host adds them too, or, with the test build's
// RH_CUDA_TEST_GRAM_FLIPS=device, the device after each row pass; only the host forms the Gram
// again): the first batch starts at beta = 0 with most residuals outside tau (the
// majoriser's steps, most rows changing), the later ones from the previous fit (a few rows
// changing). Each stream starts from the empty state without K: with K the engine forms the
// Gram in full and the comparison would hold trivially.
void test_incremental_gram_matches_the_full_gram() {
  struct Mode {
    const char* name;
    std::vector<std::pair<const char*, const char*>> settings;
  };
  const Mode modes[] = {
      {"full Gram at every row pass", {{"RH_CUDA_TEST_INCREMENTAL_GRAM", "off"}}},
      {"incremental", {}},
      {"incremental, changed rows added on the device", {{"RH_CUDA_TEST_GRAM_FLIPS", "device"}}},
      {"formed again from the recorded weights", {{"RH_CUDA_TEST_GRAM_FLIP_MAX", "0"}}},
      {"incremental, at most 64 changed rows added", {{"RH_CUDA_TEST_GRAM_FLIP_MAX", "64"}}}};
  const std::pair<int64_t, int64_t> shapes[] = {{12000, 300}, {64000, 128}};
  for (const auto& [rows, features] : shapes)
    for (const uint64_t flags : {uint64_t{0}, uint64_t{RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS}}) {
      const bool device = flags != 0;
      std::vector<Fit> fits, fits32;
      for (const Mode& mode : modes) {
        for (const auto& [variable, value] : mode.settings)
          setenv(variable, value, 1);
        fits.push_back(stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_NONE, flags,
                                          device, false, true, 3, rows, features, 100, true));
        fits32.push_back(stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_NONE, flags,
                                           device, false, true, 3, rows, features, 100, true));
        for (const auto& [variable, value] : mode.settings)
          unsetenv(variable);
      }
      const Fit& ref = fits.front();
      const Fit& ref32 = fits32.front();
      // The float32 fits against the float64 fit of the full Gram (the most accurate here):
      // the incremental ways may not lose more than the full float32 Gram does.
      const double full32_error = gram_scaled_gap(ref32.info, ref.info);
      for (size_t m = 0; m < fits.size(); ++m) {
        RH_CHECK(fits[m].status == RH_CUDA_SUCCESS && fits32[m].status == RH_CUDA_SUCCESS);
        const double coef = relative_gap(fits[m].coef, ref.coef);
        const double info = relative_gap(fits[m].info, ref.info);
        const double coef32 = relative_gap(fits32[m].coef, ref32.coef);
        const double info32 = gram_scaled_gap(fits32[m].info, ref32.info);
        const double error32 = gram_scaled_gap(fits32[m].info, ref.info);
        std::printf(
            "incremental Gram (P = %lld, %s, %s input): against the full Gram, coefficients "
            "%.3e, information %.3e, last batch %d iterations (float64); %.3e, %.3e on the "
            "Gram's scale, %d (float32); float32 information against float64's full Gram %.3e "
            "(the full float32 Gram's %.3e)\n",
            static_cast<long long>(features + 1), modes[m].name, device ? "device, graphs" : "host",
            coef, info, static_cast<int>(fits[m].diag.iterations), coef32, info32,
            static_cast<int>(fits32[m].diag.iterations), error32, full32_error);
        RH_CHECK(coef < 1e-10 && info < 1e-11);
        RH_CHECK(fits[m].diag.iterations == ref.diag.iterations);
        RH_CHECK(fits[m].diag.converged == 1);
        // float32: each Gram is a float32 sum over up to 192,000 rows, rounded again after each
        // update, and the solve stops at float32's tolerance. Two such sums in different orders
        // part by rounding errors on the Gram's scale (about 170 float32 epsilons allowed), and
        // the incremental ways stay as close to the float64 Gram as the full float32 one.
        RH_CHECK(coef32 < 1e-4 && info32 < 1e-5);
        RH_CHECK(error32 <= 4.0 * full32_error + 1e-6);
      }
    }
}

// The float64 and float32 fits that `fit` makes (a pair) with RH_CUDA_TEST_CHUNK = 1, 3 and 8
// and unset (the engine's adaptive chunks), in that order.
template <class MakeFits>
std::pair<std::vector<Fit>, std::vector<Fit>> fits_by_chunk(MakeFits fit) {
  std::vector<Fit> fits;
  std::vector<Fit> fits32;
  for (const char* chunk : {"1", "3", "8", static_cast<const char*>(nullptr)}) {
    if (chunk != nullptr) {
      setenv("RH_CUDA_TEST_CHUNK", chunk, 1);
    } else {
      unsetenv("RH_CUDA_TEST_CHUNK");
    }
    auto [fit64, fit32] = fit();
    fits.push_back(std::move(fit64));
    fits32.push_back(std::move(fit32));
  }
  unsetenv("RH_CUDA_TEST_CHUNK");
  return {std::move(fits), std::move(fits32)};
}

// Every fit succeeded with the first one's coefficients, information, iterations, convergence
// and objective, bit for bit.
void check_same_bits(const std::vector<Fit>& fits) {
  const Fit& ref = fits.front();
  for (const Fit& f : fits) {
    RH_CHECK(f.status == RH_CUDA_SUCCESS);
    RH_CHECK(f.coef == ref.coef && f.info == ref.info);
    RH_CHECK(f.diag.iterations == ref.diag.iterations && f.diag.converged == ref.diag.converged);
    RH_CHECK(f.diag.objective == ref.diag.objective);
  }
}

void test_chunk_size_never_changes_results() {
  struct Case {
    int32_t penalty;
    int64_t features;
    int64_t max_iter;
    uint64_t flags;
  };
  // 6 features: one lane per row; 20: teams of 8 lanes (X'u in the row pass); 40: a warp per
  // row (cuBLAS's X'u).
  const Case cases[] = {{RH_CUDA_PENALTY_NONE, kFeatures, 100, 0},
                        {RH_CUDA_PENALTY_L1, kFeatures, 100, 0},
                        {RH_CUDA_PENALTY_NONE, 20, 100, 0},
                        {RH_CUDA_PENALTY_L1, 20, 100, 0},
                        {RH_CUDA_PENALTY_NONE, 40, 100, 0},
                        {RH_CUDA_PENALTY_L1, 40, 100, 0},
                        {RH_CUDA_PENALTY_NONE, kFeatures, 3, 0},
                        {RH_CUDA_PENALTY_L1, kFeatures, 5, 0},
                        {RH_CUDA_PENALTY_L1, kFeatures, 100, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS},
                        {RH_CUDA_PENALTY_NONE, 20, 100, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS},
                        {RH_CUDA_PENALTY_NONE, 40, 100, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS}};
  for (const Case& cs : cases)
    for (const DensePath& path : kDensePaths) {
      // Every dense path for the Newton streams of 40 features; the others take the engine's.
      if (&path != &kDensePaths[0] && (cs.penalty != RH_CUDA_PENALTY_NONE || cs.features != 40))
        continue;
      set_path(path, true);
      for (const bool without_k : {false, true}) {
        const auto [fits, fits32] = fits_by_chunk([&] {
          return std::make_pair(
              stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, cs.penalty, cs.flags, false, false, true, 3,
                                 2000, cs.features, cs.max_iter, without_k),
              stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, cs.penalty, cs.flags, true, false, false, 3,
                                2000, cs.features, cs.max_iter, without_k));
        });
        std::printf(
            "chunks (%s, %lld features, max_iter %lld, %s, %s): last batch %lld iterations (f64), "
            "%lld (f32)\n",
            cs.penalty ? "l1" : "none", static_cast<long long>(cs.features),
            static_cast<long long>(cs.max_iter), path.name,
            without_k ? "from the empty state without K" : "new engine, with K",
            static_cast<long long>(fits[0].diag.iterations),
            static_cast<long long>(fits32[0].diag.iterations));
        check_same_bits(fits);
        check_same_bits(fits32);
        if (cs.max_iter <= 5)
          RH_CHECK(fits[0].diag.iterations <= cs.max_iter);
      }
      set_path(path, false);
    }

  // Newton's heavy Gram kept incrementally, its changed rows added on the device after each row
  // pass (RH_CUDA_TEST_GRAM_FLIPS=device; 64,000 x 129, from the empty state without K: the
  // first batch from beta = 0, the later ones speculative; float64 weighted), host and device
  // input, with and without graphs: any chunking, the same bits, including a max_iter that ends
  // the solve inside a chunk.
  setenv("RH_CUDA_TEST_GRAM_FLIPS", "device", 1);
  for (const int64_t max_iter : {int64_t{100}, int64_t{2}})
    for (const uint64_t flags : {uint64_t{0}, uint64_t{RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS}}) {
      const auto [fits, fits32] = fits_by_chunk([&] {
        return std::make_pair(
            stream_fit<double>(RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_NONE, flags, flags != 0,
                               false, true, 3, 64000, 128, max_iter, true),
            stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_NONE, flags, flags == 0, false,
                              false, 3, 64000, 128, max_iter, true));
      });
      std::printf(
          "chunks (none, 128 features, incremental Gram, max_iter %lld, %s): last batch "
          "%lld iterations (f64), %lld (f32)\n",
          static_cast<long long>(max_iter), flags != 0 ? "graphs" : "no graphs",
          static_cast<long long>(fits[0].diag.iterations),
          static_cast<long long>(fits32[0].diag.iterations));
      check_same_bits(fits);
      check_same_bits(fits32);
      RH_CHECK(fits[0].diag.iterations <= max_iter);
    }
  unsetenv("RH_CUDA_TEST_GRAM_FLIPS");
}

// Newton's speculative whole step (the engine's default from a fitted beta0 without K: the row
// pass, Gram and gradient at beta - dir before the step is judged, the 27 trials only after a
// rejection) against the line search at every iteration (RH_CUDA_TEST_NEWTON_STEP=line-search).
// Wherever both accept the whole step the iterates are the same bits: the candidate is
// beta - 1 * dir either way, and the next iteration's F is the same fresh sum. The two can part
// only where their evaluations of f at the whole step straddle F by rounding, next to the
// optimum (measured: on cuSOLVER's path at P = 7 the coefficients of one stream moved by
// 1.4e-11 of their size), where both end on a step that passed the step test: the same
// convergence, coefficients and information within ten times the tolerance (1e-10) of each other
// in float64, and float32's rounding of the committed state. There a whole step that one accepts
// and the other cuts short can end a batch's solve one iteration sooner on either side, so
// each batch's iteration counts are the same or one apart (measured on an H100: cuSOLVER's path
// at P = 201, float32, with the Gram's GEMM in two column blocks, 7+3+2 against 7+2+2
// iterations, the second batch the first with speculative steps, and the same bits; every other
// stream the same counts). Each stream
// starts from a restored state without K (as the package's streams without inference do; K's rows
// would keep the engine on the line search): three batches from the empty state (the first on the
// line search, the next two speculative), and the same rows with y 1,000 above the model after a
// restored beta = 0 with J = 1e-8 I and ridge 1e-8 (the estimator's default), where every residual
// is beyond tau + h, H is about ridge I and its step is rejected at once (premise checked): the
// speculative iteration pauses in kNeedsLineSearch, the row pass at beta is queued again before the
// line search, and the rest of the solve takes the line search, whose iteration graph is then
// captured as well (with CUDA_GRAPHS, one capture more than on the line search alone: the check
// that the speculative path ran). On every dense path, host and device input, with and without
// graphs. Batches of 3,000 rows, and of 64,000 x 129 parameters, whose Gram (2 n P^2 > 2e9 flops)
// is kept incrementally: there the pass at a rejected candidate records the candidate's weights
// and the pass at beta flags them back before the line search's own pass.
template <class T>
Fit speculation_fit(int32_t dtype, uint64_t flags, bool device, int64_t rows, int64_t features,
                    double offset, bool line_search) {
  if (line_search)
    setenv("RH_CUDA_TEST_NEWTON_STEP", "line-search", 1);
  Fit fit;
  const int64_t P = features + 1;
  RhCudaEngineOptions o = options(dtype, P, flags);
  RhCudaEngine* e = nullptr;
  fit.status = rh_cuda_engine_create(&o, &e);
  unsetenv("RH_CUDA_TEST_NEWTON_STEP");
  if (fit.status != RH_CUDA_SUCCESS)
    return fit;
  fit.status = offset != 0.0 ? restore_without_k<T>(e, P, 1e-8, 1.0) : restore_without_k<T>(e, P);
  HostState<T> state(P);
  RhCudaUpdateConfig c = config(features, RH_CUDA_PENALTY_NONE);
  c.ridge = offset != 0.0 ? 1e-8 : 0.0;
  for (int b = 0; b < 3 && fit.status == RH_CUDA_SUCCESS; ++b) {
    Batch<T> data = make_batch<T>(300 + b, rows, features, true, false);
    for (T& y : data.y)
      y = static_cast<T>(static_cast<double>(y) + offset);
    RhCudaHostBatch hb = data.view(true);
    fit.diag = diagnostics();
    if (device) {
      const DeviceBatchCopy copy(hb, sizeof(T), "speculation batch");
      fit.status =
          rh_cuda_engine_update_device_with_state(e, copy.batch(), &c, &fit.diag, &state.view);
    } else {
      fit.status = rh_cuda_engine_update_host_with_state(e, &hb, &c, &fit.diag, &state.view);
    }
    fit.batch_iterations.push_back(static_cast<int>(fit.diag.iterations));
    fit.ok = fit.ok && fit.diag.converged == 1;
  }
  if (fit.status != RH_CUDA_SUCCESS)
    std::fprintf(stderr, "  speculation_fit: %s\n", rh_cuda_engine_last_error(e));
  RhCudaEngineFeatures f = abi_struct<RhCudaEngineFeatures>();
  if (rh_cuda_engine_features(e, &f) == RH_CUDA_SUCCESS)
    fit.graph_captures = static_cast<int64_t>(f.graph_captures);
  fit.coef = widen(state.coef);
  fit.info = widen(state.info);
  rh_cuda_engine_destroy(e);
  return fit;
}

// "4+3+3": a stream's iteration counts, batch by batch.
std::string batch_counts(const Fit& fit) {
  std::string text;
  for (const int count : fit.batch_iterations)
    text += (text.empty() ? "" : "+") + std::to_string(count);
  return text;
}

template <class T>
void speculation_matches_line_search(const DensePath& path, int64_t rows, int64_t features,
                                     double offset, double rtol) {
  const int32_t dtype = sizeof(T) == 4 ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64;
  if (offset != 0.0) {
    // The premise: at beta = 0 every |y| exceeds tau + h by far (h <= tau always).
    const Batch<T> first = make_batch<T>(300, rows, features, true, false);
    double smallest = INFINITY;
    for (const T y : first.y)
      smallest = std::fmin(smallest, std::fabs(static_cast<double>(y) + offset));
    RH_CHECK(smallest > 100.0 * 1.345);
  }
  for (const uint64_t flags : {uint64_t{0}, uint64_t{RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS}}) {
    for (const bool device : {false, true}) {
      set_path(path, true);
      const Fit speculative =
          speculation_fit<T>(dtype, flags, device, rows, features, offset, false);
      const Fit searched = speculation_fit<T>(dtype, flags, device, rows, features, offset, true);
      set_path(path, false);
      RH_CHECK(speculative.status == RH_CUDA_SUCCESS && searched.status == RH_CUDA_SUCCESS);
      const double coef = relative_gap(speculative.coef, searched.coef);
      const double info = relative_gap(speculative.info, searched.info);
      std::printf(
          "speculative step (%s, %lld x %lld, %s, offset %g, %s input%s): %s / %s iterations, "
          "%lld / %lld graph captures, coefficients %.3e, information %.3e%s%s\n",
          path.name, static_cast<long long>(rows), static_cast<long long>(features + 1),
          sizeof(T) == 4 ? "float32" : "float64", offset, device ? "device" : "host",
          flags ? ", graphs" : "", batch_counts(speculative).c_str(),
          batch_counts(searched).c_str(), static_cast<long long>(speculative.graph_captures),
          static_cast<long long>(searched.graph_captures), coef, info,
          speculative.coef == searched.coef && speculative.info == searched.info ? " (same bits)"
                                                                                 : "",
          speculative.ok ? "" : " (a batch not converged)");
      RH_CHECK(speculative.ok == searched.ok);
      // Batch by batch the same count, or one apart: a verdict on the whole step straddled by
      // rounding (see speculation_fit) can take or spare the last iteration of a batch's solve.
      RH_CHECK(speculative.batch_iterations.size() == searched.batch_iterations.size());
      for (size_t b = 0;
           b < speculative.batch_iterations.size() && b < searched.batch_iterations.size(); ++b)
        RH_CHECK(std::abs(speculative.batch_iterations[b] - searched.batch_iterations[b]) <= 1);
      RH_CHECK(coef <= rtol && info <= rtol);
      if (flags != 0 && offset != 0.0)
        RH_CHECK(speculative.graph_captures > searched.graph_captures);
    }
  }
}

void test_speculative_step_matches_the_line_search() {
  // 6 features: one lane per row; 20: the fused Gram's teams; 200: cuBLAS's Gram with the
  // cluster Cholesky (the engine's choice) or cuSOLVER; 128 in batches of 64,000 rows: the
  // incremental Gram with the one-block Cholesky (the engine's choice) or cuSOLVER.
  const std::pair<int64_t, int64_t> shapes[] = {{3000, 6}, {3000, 20}, {3000, 200}, {64000, 128}};
  for (const DensePath& path : {kDensePaths[0], kDensePaths[2]}) {
    for (const auto& [rows, features] : shapes) {
      for (const double offset : {0.0, 1000.0}) {
        speculation_matches_line_search<double>(path, rows, features, offset, 1e-9);
        speculation_matches_line_search<float>(path, rows, features, offset, 1e-5);
      }
    }
  }
}

// With CUDA_GRAPHS the engine keeps one executable graph per solver across updates and updates
// it in place: batches of changing shape (re-instantiation), device pointers and constants
// (in-place updates) must give the eager results bit for bit, batch by batch.
void test_graph_cache_follows_changing_batches() {
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    RhCudaEngine* engines[2] = {nullptr, nullptr};
    const uint64_t flags[2] = {0, RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS};
    for (int i = 0; i < 2; ++i) {
      RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP, flags[i]);
      RH_CHECK_STATUS(rh_cuda_engine_create(&o, &engines[i]), RH_CUDA_SUCCESS);
    }
    const RhCudaUpdateConfig c = config(kFeatures, penalty);
    const int64_t rows[] = {2000, 700, 700, 2000, 2000};
    for (int b = 0; b < 5; ++b) {
      Batch<double> data = make_batch<double>(300 + b, rows[b], kFeatures, true, false);
      const DeviceBatchCopy device_batch(data.view(true), sizeof(double), "graph-cache batch");
      HostState<double> eager(kP);
      HostState<double> graph(kP);
      HostState<double>* out[2] = {&eager, &graph};
      RhCudaDiagnostics d[2] = {diagnostics(), diagnostics()};
      for (int i = 0; i < 2; ++i) {
        RH_CHECK_STATUS(rh_cuda_engine_update_device_with_state(engines[i], device_batch.batch(),
                                                                &c, &d[i], &out[i]->view),
                        RH_CUDA_SUCCESS);
      }
      RH_CHECK(eager.coef == graph.coef && eager.info == graph.info);
      RH_CHECK(d[0].iterations == d[1].iterations && d[0].objective == d[1].objective);
    }
    RhCudaEngineFeatures f = abi_struct<RhCudaEngineFeatures>();
    RH_CHECK_STATUS(rh_cuda_engine_features(engines[1], &f), RH_CUDA_SUCCESS);
    std::printf("graph cache (%s): captures %llu replays %llu fallbacks %llu\n",
                penalty ? "l1" : "none", (unsigned long long)f.graph_captures,
                (unsigned long long)f.graph_replays, (unsigned long long)f.graph_fallbacks);
    RH_CHECK(f.graph_captures == 5 && f.graph_fallbacks == 0);
    RH_CHECK(f.graph_replays >= 5);
    for (RhCudaEngine* e : engines)
      rh_cuda_engine_destroy(e);
  }
}

void test_fast_math_stays_close_to_strict_float32() {
  for (int64_t features : {kFeatures, int64_t{40}}) {
    Fit strict = stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_NONE, 0, false, false,
                                   true, 3, 20000, features);
    Fit fast =
        stream_fit<float>(RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_NONE,
                          RH_CUDA_ENGINE_FLAG_FAST_MATH, false, false, true, 3, 20000, features);
    RH_CHECK(strict.status == RH_CUDA_SUCCESS && fast.status == RH_CUDA_SUCCESS);
    const double coef = max_rel_diff(fast.coef, strict.coef);
    const double info = max_rel_diff(fast.info, strict.info);
    std::printf(
        "FAST_MATH (TF32) vs strict float32, %lld features: coef rel diff %.3e, "
        "information rel diff %.3e\n",
        static_cast<long long>(features), coef, info);
    RH_CHECK(coef < 1e-2 && info < 1e-2);
    // At 41 parameters cuBLAS runs the float32 Gram on TF32 tensor cores (H200, CUDA 13:
    // information rel diff 1.4e-4), which shows the flag reaches cuBLAS; at 7 it picks a
    // kernel without tensor cores and nothing changes.
    if (features == 40)
      RH_CHECK(info > 0.0);
  }
}

void test_singular_system_takes_the_minimum_norm_solution() {
  // Column 1 duplicates column 0: X'X is exactly singular and the minimum-norm solution splits
  // their joint coefficient equally. Every Cholesky attempt is refused, on every Cholesky path,
  // inside whatever chunk of queued iterations it falls: the result must not depend on the
  // chunk size.
  for (int64_t features : {kFeatures, int64_t{40}, int64_t{200}}) {
    const int64_t P = features + 1;
    Batch<double> data = make_batch<double>(21, 400, features, true, true, 0.0);
    for (int64_t i = 0; i < data.n; ++i)
      data.x[i * P + 1] = data.x[i * P + 0];
    // The minimum-norm solution: least squares without column 1 (tau = 100 leaves every
    // residual in the quadratic zone, ridge 0), its column-0 coefficient split in two halves.
    const int64_t R = P - 1;
    std::vector<long double> A(static_cast<size_t>(R * R), 0.0L), rhs(static_cast<size_t>(R), 0.0L);
    for (int64_t i = 0; i < data.n; ++i) {
      for (int64_t a = 0; a < R; ++a) {
        const long double xa = data.x[i * P + (a == 0 ? 0 : a + 1)];
        rhs[a] += xa * data.y[i];
        for (int64_t b = 0; b < R; ++b)
          A[a * R + b] += xa * data.x[i * P + (b == 0 ? 0 : b + 1)];
      }
    }
    const std::vector<double> reduced = solve_dense(A, rhs, R);
    std::vector<double> expected(static_cast<size_t>(P));
    expected[0] = expected[1] = 0.5 * reduced[0];
    for (int64_t j = 2; j < P; ++j)
      expected[j] = reduced[j - 1];
    for (const DensePath& path : kDensePaths) {
      std::vector<std::vector<double>> results;
      for (const char* chunk : {"1", "5"}) {
        HostState<double> s(P);
        const RhCudaDiagnostics d = least_squares_update(path, data, features, s, chunk);
        std::printf(
            "singular (%lld features, %s, chunk %s): fallback %d, beta0 %.12f beta1 %.12f\n",
            static_cast<long long>(features), path.name, chunk, d.used_regularized_fallback,
            s.coef[0], s.coef[1]);
        const double err = max_abs_diff(s.coef.data(), expected.data(), P);
        std::printf("  max |beta - minimum-norm least squares| = %.3e\n", err);
        RH_CHECK(d.used_regularized_fallback == 1);
        RH_CHECK(std::isfinite(s.coef[0]) && std::fabs(s.coef[0] - s.coef[1]) < 1e-8);
        RH_CHECK(err < 1e-7);
        results.push_back(s.coef);
      }
      RH_CHECK(results[0] == results[1]);
    }
  }
}

// A zero Newton step sends the iteration to the majoriser, whose step must then strictly
// decrease f; at an exact optimum none does, the solve ends without moving beta, and the row
// pass after that step does not run. The information must still gain the curvature Gram at
// beta, not the majoriser's Gram, whose scaled rows that iteration wrote (on the cuBLAS path its
// GEMM recomputes the Gram from them; only the sum that skips with the row pass may write it).
// Integers throughout make every sum exact: y = x . beta + e with e in {0, +5, -5} for each x,
// tau = 1, so the rows with e = 0 have c = 1, the others c = 0 and psi = +-1 in pairs that
// cancel: g = 0 exactly, and so is the Newton direction.
void test_rejected_majoriser_step_keeps_the_curvature_gram() {
  constexpr int64_t p = 2;
  constexpr int64_t P = p + 1;
  const double beta[P] = {1.0, 2.0, 3.0};
  std::vector<double> x, y;
  std::vector<long double> expected(P * P, 0.0L);
  for (int a = -3; a <= 3; ++a) {
    for (int bcol = -2; bcol <= 2; ++bcol) {
      const double row[P] = {static_cast<double>(a), static_cast<double>(bcol), 1.0};
      for (double e : {0.0, 5.0, -5.0}) {
        x.push_back(row[0]);
        x.push_back(row[1]);
        y.push_back(row[0] * beta[0] + row[1] * beta[1] + beta[2] + e);
      }
      for (int64_t r = 0; r < P; ++r)
        for (int64_t c = 0; c < P; ++c)
          expected[r * P + c] += static_cast<long double>(row[r]) * row[c];
    }
  }
  const int64_t n = static_cast<int64_t>(y.size());
  for (int64_t j = 0; j < P; ++j)
    expected[j * P + j] += 100.0L;  // the restored information
  for (const DensePath& path : kDensePaths) {
    set_path(path, true);
    RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, P);
    RhCudaEngine* e = nullptr;
    RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
    set_path(path, false);
    HostState<double> in(P);
    for (int64_t j = 0; j < P; ++j) {
      in.coef[j] = beta[j];
      in.info[j * P + j] = 100.0;
    }
    const RhCudaHostStateView v = restore_view(in.coef.data(), in.info.data(), 100, 1, 100.0);
    RH_CHECK_STATUS(rh_cuda_engine_restore(e, &v), RH_CUDA_SUCCESS);
    RhCudaUpdateConfig c = config(p, RH_CUDA_PENALTY_NONE, 1.0);
    RhCudaHostBatch b = host_batch(x.data(), y.data(), nullptr, n, p, static_cast<double>(n));
    RhCudaDiagnostics d = diagnostics();
    HostState<double> out(P);
    RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &out.view),
                    RH_CUDA_SUCCESS);
    double info_err = 0.0;
    for (int64_t j = 0; j < P * P; ++j)
      info_err = std::fmax(info_err, std::fabs(out.info[j] - static_cast<double>(expected[j])));
    std::printf(
        "rejected majoriser step (%s): converged %d, iterations %lld, max |information - "
        "(J + curvature Gram)| = %.3e\n",
        path.name, d.converged, static_cast<long long>(d.iterations), info_err);
    RH_CHECK(d.converged == 1);
    RH_CHECK(std::memcmp(out.coef.data(), beta, P * sizeof(double)) == 0);
    RH_CHECK(info_err == 0.0);
    rh_cuda_engine_destroy(e);
  }
}

void test_asymmetric_restore_round_trips_and_is_kept() {
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  HostState<double> in(kP);
  Rng rng(5);
  for (int64_t j = 0; j < kP; ++j)
    in.coef[j] = rng.normal();
  for (int64_t r = 0; r < kP; ++r) {
    for (int64_t c = 0; c < kP; ++c)
      in.info[r * kP + c] = (r == c ? 800.0 : 0.0) + 3.0 * rng.normal();
  }
  const RhCudaHostStateView v = restore_view(in.coef.data(), in.info.data(), 1000, 2, 1000.0);
  RH_CHECK_STATUS(rh_cuda_engine_restore(e, &v), RH_CUDA_SUCCESS);
  HostState<double> out(kP);
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &out.view), RH_CUDA_SUCCESS);
  RH_CHECK(std::memcmp(in.coef.data(), out.coef.data(), kP * sizeof(double)) == 0);
  RH_CHECK(std::memcmp(in.info.data(), out.info.data(), kP * kP * sizeof(double)) == 0);
  RH_CHECK(out.view.n_samples_seen == 1000 && out.view.batch_count == 2 &&
           out.view.weight_sum == 1000.0);

  Batch<double> data = make_batch<double>(8, 600, kFeatures, true, false);
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = data.view();
  RhCudaDiagnostics d = diagnostics();
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &out.view), RH_CUDA_SUCCESS);
  double asym_drift = 0.0;
  for (int64_t r = 0; r < kP; ++r) {
    for (int64_t col = 0; col < kP; ++col) {
      const double before = in.info[r * kP + col] - in.info[col * kP + r];
      const double after = out.info[r * kP + col] - out.info[col * kP + r];
      asym_drift = std::fmax(asym_drift, std::fabs(after - before));
    }
  }
  RH_CHECK(asym_drift < 1e-9);
  RH_CHECK(d.converged == 1 && std::isfinite(out.coef[0]));
  rh_cuda_engine_destroy(e);
}

void test_injected_solver_failure_rolls_back() {
  setenv("RH_CUDA_TEST_INJECT_FAILURE", "cusolver", 1);
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT64, kP);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  unsetenv("RH_CUDA_TEST_INJECT_FAILURE");
  HostState<double> in(kP);
  for (int64_t j = 0; j < kP; ++j) {
    in.coef[j] = 0.25 * static_cast<double>(j);
    in.info[j * kP + j] = 50.0;
  }
  const RhCudaHostStateView v = restore_view(in.coef.data(), in.info.data(), 50, 1, 50.0);
  RH_CHECK_STATUS(rh_cuda_engine_restore(e, &v), RH_CUDA_SUCCESS);
  Batch<double> data = make_batch<double>(4, 300, kFeatures, true, false);
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = data.view();
  RhCudaDiagnostics d = diagnostics();
  HostState<double> out(kP);
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &out.view),
                  RH_CUDA_CUSOLVER_ERROR);
  RH_CHECK(std::strstr(rh_cuda_engine_last_error(e), "injected") != nullptr);
  RH_CHECK(out.coef == std::vector<double>(kP, 0.0));  // the export target was not written
  RH_CHECK_STATUS(rh_cuda_engine_copy_state(e, &out.view), RH_CUDA_SUCCESS);
  RH_CHECK(out.coef == in.coef && out.info == in.info);
  RH_CHECK(out.view.n_samples_seen == 50 && out.view.batch_count == 1 &&
           out.view.weight_sum == 50.0);
  // The L1 solver needs no linear solve and still works on the same engine afterwards.
  c.penalty = RH_CUDA_PENALTY_L1;
  c.lambda_scale = 0.5;
  RH_CHECK_STATUS(rh_cuda_engine_update_host(e, &b, &c, &d), RH_CUDA_SUCCESS);
  rh_cuda_engine_destroy(e);
}

void test_device_prediction_matches_host_prediction() {
  RhCudaEngineOptions o = options(RH_CUDA_DTYPE_FLOAT32, kP);
  RhCudaEngine* e = nullptr;
  RH_CHECK_STATUS(rh_cuda_engine_create(&o, &e), RH_CUDA_SUCCESS);
  Batch<float> data = make_batch<float>(12, 1000, kFeatures, true, false);
  RhCudaUpdateConfig c = config(kFeatures, RH_CUDA_PENALTY_NONE);
  RhCudaHostBatch b = data.view();
  RhCudaDiagnostics d = diagnostics();
  HostState<float> s(kP);
  RH_CHECK_STATUS(rh_cuda_engine_update_host_with_state(e, &b, &c, &d, &s.view), RH_CUDA_SUCCESS);
  std::vector<float> host_out(1000, -7.0f), device_out(1000, -9.0f);
  RhCudaPrediction p = prediction(data.x.data(), host_out.data(), 1000, kFeatures);
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &p), RH_CUDA_SUCCESS);
  float *dx = nullptr, *dout = nullptr;
  cudaMalloc(&dx, data.x.size() * sizeof(float));
  cudaMalloc(&dout, 1000 * sizeof(float));
  RH_CHECK(upload(dx, data.x.data(), data.x.size() * sizeof(float)) == cudaSuccess);
  p.x_design = dx;
  p.prediction = dout;
  p.input_location = RH_CUDA_MEMORY_DEVICE;
  RH_CHECK_STATUS(rh_cuda_engine_predict(e, &p), RH_CUDA_SUCCESS);
  cudaMemcpy(device_out.data(), dout, 1000 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dout);
  RH_CHECK(host_out == device_out);
  double worst = 0.0;
  for (int64_t i = 0; i < 1000; ++i) {
    double expect = s.coef[kFeatures];
    for (int64_t j = 0; j < kFeatures; ++j)
      expect += static_cast<double>(data.x[i * kFeatures + j]) * s.coef[j];
    worst = std::fmax(worst, std::fabs(expect - host_out[i]) / (1.0 + std::fabs(expect)));
  }
  RH_CHECK(worst < 1e-6);
  rh_cuda_engine_destroy(e);
}

#ifdef RH_CPU_ENGINE_PATH
template <class Fn>
Fn cpu_symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

template <class T>
void compare_with_cpu(void* lib, int32_t dtype, int32_t penalty, double rtol,
                      int64_t features = kFeatures, int64_t rows = 2000, double feature_scale = 1.0,
                      double tolerance = 1e-10) {
  using Create = RhCudaStatus (*)(const RhCudaEngineOptions*, RhCudaEngine**);
  using Update = RhCudaStatus (*)(RhCudaEngine*, const RhCudaHostBatch*, const RhCudaUpdateConfig*,
                                  RhCudaDiagnostics*, RhCudaHostState*);
  using Destroy = RhCudaStatus (*)(RhCudaEngine*);
  auto create = cpu_symbol<Create>(lib, "rh_cuda_engine_create");
  auto update = cpu_symbol<Update>(lib, "rh_cuda_engine_update_host_with_state");
  auto destroy = cpu_symbol<Destroy>(lib, "rh_cuda_engine_destroy");
  RH_CHECK(create && update && destroy);
  if (!create || !update || !destroy)
    return;
  RhCudaEngineOptions o = options(dtype, features + 1);
  o.device_id = -1;
  RhCudaEngine* cpu = nullptr;
  RH_CHECK_STATUS(create(&o, &cpu), RH_CUDA_SUCCESS);
  HostState<T> state(features + 1);
  RhCudaUpdateConfig c = config(features, penalty);
  c.tolerance = tolerance;
  RhCudaDiagnostics d = diagnostics();
  for (int b = 0; b < 3; ++b) {
    Batch<T> data = make_batch<T>(100 + b, rows, features, true, false, 8.0, feature_scale);
    RhCudaHostBatch hb = data.view(true);
    RH_CHECK_STATUS(update(cpu, &hb, &c, &d, &state.view), RH_CUDA_SUCCESS);
  }
  destroy(cpu);
  Fit gpu = stream_fit<T>(dtype, penalty, 0, false, false, true, 3, rows, features, 100, false,
                          feature_scale, tolerance);
  const double coef = max_rel_diff(gpu.coef, widen(state.coef));
  const double info = max_rel_diff(gpu.info, widen(state.info));
  std::printf(
      "vs librh_cpu (%lld x %lld%s, %s, %s): coef rel diff %.3e, info rel diff %.3e, iterations "
      "cuda %lld cpu %lld\n",
      static_cast<long long>(rows), static_cast<long long>(features),
      feature_scale != 1.0 ? " in raw units" : "",
      dtype == RH_CUDA_DTYPE_FLOAT32 ? "float32" : "float64", penalty ? "l1" : "none", coef, info,
      static_cast<long long>(gpu.diag.iterations), static_cast<long long>(d.iterations));
  RH_CHECK(coef < rtol && info < rtol);
  RH_CHECK(gpu.diag.converged == d.converged);
}

void test_agrees_with_the_cpu_engine() {
  void* lib = open_cpu_engine();
  if (lib == nullptr)
    return;
  for (int penalty : {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1}) {
    compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, penalty, 1e-8);
    compare_with_cpu<float>(lib, RH_CUDA_DTYPE_FLOAT32, penalty, 4e-4);
    // Between kNarrowRowColumns and kWideRowColumns: the 8-lane row teams.
    compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, penalty, 1e-8, 16);
    compare_with_cpu<float>(lib, RH_CUDA_DTYPE_FLOAT32, penalty, 4e-4, 16);
    // Wider than kWideRowColumns: the warp-per-row passes.
    compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, penalty, 1e-8, 40);
    compare_with_cpu<float>(lib, RH_CUDA_DTYPE_FLOAT32, penalty, 4e-4, 40);
  }
  // LAMM's trials form their dots on the float64 tensor cores for 9 to 128 stored columns, 4
  // columns a step (32 and 128 fill their steps, 16, 40 and 90 do not), and read the candidates
  // from memory above; and on the CUDA cores (RH_CUDA_TEST_LAMM_TRIALS=cuda-cores: the kernel for
  // devices without those tensor cores, which keeps a row's candidate columns in registers up to
  // 128 columns). On the tensor cores the first group's trials also form X'psi at their
  // candidates, in place of the row pass at the beta they accept (8-column tiles: 16, 32, 40
  // and 128 features fill theirs, the intercept's column in a tile of its own; 90 shares its
  // last tile with it; 129 is past the tensor-core kernel); RH_CUDA_TEST_LAMM_GRADIENT=row-pass
  // leaves X'u to the row pass there.
  struct TrialsMode {
    const char* variable;
    const char* value;
    const char* name;
  };
  for (const TrialsMode& mode :
       {TrialsMode{nullptr, nullptr, "tensor cores, X'psi in the trials"},
        TrialsMode{"RH_CUDA_TEST_LAMM_GRADIENT", "row-pass", "tensor cores, X'u by the row pass"},
        TrialsMode{"RH_CUDA_TEST_LAMM_TRIALS", "cuda-cores", "CUDA cores"}}) {
    if (mode.variable != nullptr)
      setenv(mode.variable, mode.value, 1);
    std::printf("LAMM trials: %s\n", mode.name);
    for (int64_t features : {16, 32, 40, 90, 128, 129}) {
      compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, features);
      compare_with_cpu<float>(lib, RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_L1, 4e-4, features);
    }
    if (mode.variable != nullptr)
      unsetenv(mode.variable);
  }
  // Features in raw units (x 1,000; the intercept's column 1): f's curvature near 1e6, so the
  // first iteration of each batch rejects the first group's 8 attempts (phi 1 to 128) and
  // accepts in the second group (on these batches the NumPy reference accepts at attempts 17 or
  // 18, 20 and 20), whose tensor-core trials take two chunks of 8 candidates a pass over the rows:
  // the accepted attempt lies in the pass's second chunk. With tol 1e-6 (at 1e-10 the solves
  // on data in raw units run to max_iter) each batch converges in 3 or 4 iterations, and the
  // NumPy reference and librh_cpu agree within 2.1e-15 (float64) and 2.3e-7 (float32, 32
  // features). Float32 at 128 features is left out: there the two differ by 2.0e-4 already, half
  // the float32 bound.
  compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, 32, 2000, 1e3,
                           1e-6);
  compare_with_cpu<float>(lib, RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_L1, 4e-4, 32, 2000, 1e3,
                          1e-6);
  compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, 128, 2000, 1e3,
                           1e-6);
  // X'u of rows of 513 to 1,024 columns from the row pass's 32 column slots a lane, of wider
  // rows from cuBLAS's gemv over the scores: LAMM's gradient at every iteration.
  for (int64_t features : {1024, 1025})
    compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, features, 3000);
  // LAMM's finish pass forms the Gram's last column (the intercept's) itself where the GEMM
  // leaves it out (P one past whole 64-column tiles; 128 features at 2,000 rows above, 15 Gram
  // chunks summed a thread per entry): 3,000 rows (23 chunks, a warp per entry) on the split
  // teams, and a warp per row with 8, 16 and 32 column slots (256, 384 and 640 features).
  compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, 128, 3000);
  compare_with_cpu<float>(lib, RH_CUDA_DTYPE_FLOAT32, RH_CUDA_PENALTY_L1, 4e-4, 128, 3000);
  for (int64_t features : {256, 384, 640})
    compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, features, 3000);
  // A Gram above kHeavyGramFlops (2 n P^2 > 2e9): LAMM queues its finish's Gram only after a
  // synchronisation showed the end, Newton one iteration per chunk.
  compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_L1, 1e-8, 256, 20000);
  compare_with_cpu<double>(lib, RH_CUDA_DTYPE_FLOAT64, RH_CUDA_PENALTY_NONE, 1e-8, 256, 20000);
  dlclose(lib);
}
#endif

struct NamedTest {
  const char* name;
  void (*run)();
};
#define RH_NAMED(test) \
  NamedTest {          \
    #test, test        \
  }

// Every test of this binary, in the order a run of all of them takes. ctest runs each as an
// entry of its own (test_cuda_numerics.NAME, listed by --list: CMakeLists.txt), so they run side
// by side; a run without arguments, the one the records keep, runs them all in turn.
constexpr NamedTest kTests[] = {
    RH_NAMED(test_large_tau_reproduces_ordinary_least_squares),
    RH_NAMED(test_l1_lambda_follows_the_closed_form),
    RH_NAMED(test_host_and_device_input_agree_bitwise),
    RH_NAMED(test_deferred_device_checks_match_the_validation_pass),
    RH_NAMED(test_appended_intercept_matches_expanded_design),
    RH_NAMED(test_results_are_reproducible),
    RH_NAMED(test_graphs_on_and_off_agree),
    RH_NAMED(test_chunk_size_never_changes_results),
    RH_NAMED(test_speculative_step_matches_the_line_search),
    RH_NAMED(test_incremental_gram_matches_the_full_gram),
    RH_NAMED(test_graph_cache_follows_changing_batches),
    RH_NAMED(test_fast_math_stays_close_to_strict_float32),
    RH_NAMED(test_singular_system_takes_the_minimum_norm_solution),
    RH_NAMED(test_rejected_majoriser_step_keeps_the_curvature_gram),
    RH_NAMED(test_asymmetric_restore_round_trips_and_is_kept),
    RH_NAMED(test_injected_solver_failure_rolls_back),
    RH_NAMED(test_device_prediction_matches_host_prediction),
    RH_NAMED(test_meat_follows_its_definition),
#ifdef RH_CPU_ENGINE_PATH
    RH_NAMED(test_agrees_with_the_cpu_engine),
#endif
};

// Runs one test and prints its wall time, so a slow test shows in the log.
void run_timed(const NamedTest& test) {
  const auto start = std::chrono::steady_clock::now();
  test.run();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("[%.1f s] %s\n", took.count(), test.name);
}

}  // namespace

//   test_cuda_numerics            every test, in turn
//   test_cuda_numerics NAME...    the named tests (an unknown name: exit 2)
//   test_cuda_numerics --list     the names, one a line (no GPU needed)
int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const NamedTest& test : kTests)
      std::printf("%s\n", test.name);
    return 0;
  }
  std::vector<const NamedTest*> chosen;
  for (int a = 1; a < argc; ++a) {
    const NamedTest* found = nullptr;
    for (const NamedTest& test : kTests)
      found = std::strcmp(test.name, argv[a]) == 0 ? &test : found;
    if (found == nullptr) {
      std::fprintf(stderr, "test_cuda_numerics: no test named '%s' (--list names them)\n", argv[a]);
      return 2;
    }
    chosen.push_back(found);
  }
  if (chosen.empty()) {
    for (const NamedTest& test : kTests)
      chosen.push_back(&test);
#ifndef RH_CPU_ENGINE_PATH
    std::printf("librh_cpu not built: the CPU comparison did not run\n");
#endif
  }
  skip_without_gpu("test_cuda_numerics");
  for (const NamedTest* test : chosen)
    run_timed(*test);
  return finish("test_cuda_numerics");
}
