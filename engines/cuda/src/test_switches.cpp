#include "test_switches.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine_error.hpp"

namespace rh {

#if defined(RH_CUDA_TESTING)

InjectedFailure injected_failure_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_INJECT_FAILURE");
  if (value != nullptr && std::strcmp(value, "cusolver") == 0)
    return InjectedFailure::Cusolver;
  return InjectedFailure::None;
}

namespace {

// A positive count from the environment variable `name`; 0 (the engine's own choice) when it is
// unset or not a positive number.
int64_t positive_count_setting(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr)
    return 0;
  const long long parsed = std::strtoll(value, nullptr, 10);
  return parsed > 0 ? parsed : 0;
}

}  // namespace

int64_t forced_chunk_setting() {
  return positive_count_setting("RH_CUDA_TEST_CHUNK");
}

int64_t statistics_chunk_rows_setting() {
  return positive_count_setting("RH_CUDA_TEST_STATISTICS_ROWS");
}

bool separate_meat_pass_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_MEAT_PASS");
  return value != nullptr && std::strcmp(value, "separate") == 0;
}

namespace {

// A limit the tests may lower: min(N, limit) for RH_... = N >= 0, else limit.
int64_t lowered_limit_setting(const char* name, int64_t limit) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0')
    return limit;
  const long long parsed = std::strtoll(value, nullptr, 10);
  return parsed < 0 ? limit : std::min<int64_t>(parsed, limit);
}

}  // namespace

int64_t small_dense_limit_setting(int64_t device_limit) {
  return lowered_limit_setting("RH_CUDA_TEST_SMALL_DENSE_MAX", device_limit);
}

bool incremental_gram_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_INCREMENTAL_GRAM");
  return value == nullptr || std::strcmp(value, "off") != 0;
}

bool device_gram_flips_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_GRAM_FLIPS");
  return value != nullptr && std::strcmp(value, "device") == 0;
}

bool newton_speculation_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_NEWTON_STEP");
  return value == nullptr || std::strcmp(value, "line-search") != 0;
}

bool lamm_mma_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_LAMM_TRIALS");
  return value == nullptr || std::strcmp(value, "cuda-cores") != 0;
}

bool lamm_trials_gradient_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_LAMM_GRADIENT");
  return value == nullptr || std::strcmp(value, "row-pass") != 0;
}

bool deferred_device_checks_setting() {
  const char* value = std::getenv("RH_CUDA_TEST_DEVICE_CHECKS");
  return value == nullptr || std::strcmp(value, "pass") != 0;
}

int64_t gram_flip_limit_setting(int64_t limit) {
  return lowered_limit_setting("RH_CUDA_TEST_GRAM_FLIP_MAX", limit);
}

int64_t cluster_cholesky_limit_setting(int64_t device_limit) {
  return lowered_limit_setting("RH_CUDA_TEST_CLUSTER_CHOLESKY_MAX", device_limit);
}

int cholesky_solve_shared_setting(int device_limit) {
  return static_cast<int>(lowered_limit_setting("RH_CUDA_TEST_CHOLESKY_SHARED", device_limit));
}

int64_t fused_gram_limit_setting(int64_t device_limit) {
  return lowered_limit_setting("RH_CUDA_TEST_FUSED_GRAM_MAX", device_limit);
}

StagingMode staging_mode_setting() {
  const char* mode = std::getenv("RH_CUDA_STAGING");
  if (mode == nullptr || mode[0] == '\0' || std::strcmp(mode, "pinned") == 0) {
    return StagingMode::Pinned;
  }
  if (std::strcmp(mode, "plain") == 0)
    return StagingMode::Plain;
  fail(RH_CUDA_INVALID_ARGUMENT,
       "environment variable RH_CUDA_STAGING is '%.64s': expected 'pinned' (the default) or "
       "'plain'",
       mode);
}

int staging_threads_setting(int fallback, int max_setting) {
  const char* asked = std::getenv("RH_CUDA_STAGING_THREADS");
  if (asked == nullptr || asked[0] == '\0')
    return fallback;
  char* end = nullptr;
  const long n = std::strtol(asked, &end, 10);
  if (end == asked || *end != '\0' || n < 1 || n > max_setting) {
    fail(RH_CUDA_INVALID_ARGUMENT,
         "environment variable RH_CUDA_STAGING_THREADS is '%.64s': expected an integer from 1 "
         "to %d",
         asked, max_setting);
  }
  return static_cast<int>(n);
}

#endif

#if defined(RH_CUDA_TESTING) && defined(RH_FAULT_INJECTION)

namespace {
// Per thread, like the ABI calls they count (engines may run in distinct threads).
thread_local long long fault_sites_left = 0;
thread_local FaultKind fault_kind = FaultKind::Allocation;
}  // namespace

void fault_injection_call_begin() {
  const char* setting = std::getenv("RH_CUDA_TEST_FAIL_CALL");
  const long long k = setting != nullptr ? std::strtoll(setting, nullptr, 10) : 0;
  fault_sites_left = k > 0 ? k : 0;
  const char* kind = std::getenv("RH_CUDA_TEST_FAIL_KIND");
  fault_kind =
      kind != nullptr && std::strcmp(kind, "error") == 0 ? FaultKind::Error : FaultKind::Allocation;
}

bool fault_injected_here() {
  if (fault_sites_left == 0)
    return false;
  return --fault_sites_left == 0;
}

FaultKind fault_injection_kind() {
  return fault_kind;
}

#else

void fault_injection_call_begin() {}
bool fault_injected_here() {
  return false;
}
FaultKind fault_injection_kind() {
  return FaultKind::Allocation;
}

#endif

#if !defined(RH_CUDA_TESTING)

InjectedFailure injected_failure_setting() {
  return InjectedFailure::None;
}
int64_t forced_chunk_setting() {
  return 0;
}
bool separate_meat_pass_setting() {
  return false;
}

int64_t statistics_chunk_rows_setting() {
  return 0;
}
int64_t small_dense_limit_setting(int64_t device_limit) {
  return device_limit;
}
bool incremental_gram_setting() {
  return true;
}
bool device_gram_flips_setting() {
  return false;
}
bool newton_speculation_setting() {
  return true;
}
bool lamm_mma_setting() {
  return true;
}
bool lamm_trials_gradient_setting() {
  return true;
}
bool deferred_device_checks_setting() {
  return true;
}
int64_t gram_flip_limit_setting(int64_t limit) {
  return limit;
}
int64_t cluster_cholesky_limit_setting(int64_t device_limit) {
  return device_limit;
}
int cholesky_solve_shared_setting(int device_limit) {
  return device_limit;
}
int64_t fused_gram_limit_setting(int64_t device_limit) {
  return device_limit;
}
StagingMode staging_mode_setting() {
  return StagingMode::Pinned;
}
int staging_threads_setting(int fallback, int) {
  return fallback;
}

#endif

}  // namespace rh
