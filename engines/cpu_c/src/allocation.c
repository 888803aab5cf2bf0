#include "allocation.h"

#include <stdlib.h>

#if defined(RH_FAULT_INJECTION)

/* Per thread, like the calls it counts: distinct engines may run in distinct threads. */
static _Thread_local long long allocations_left_before_failure;

void rh_allocation_call_begin(void) {
  const char* setting = getenv("RH_CPU_TEST_FAIL_ALLOCATION");
  long long k = setting != NULL ? strtoll(setting, NULL, 10) : 0;
  allocations_left_before_failure = k > 0 ? k : 0;
}

/* 1 when this allocation is the one the test asked to fail. */
static int injected_failure(void) {
  if (allocations_left_before_failure == 0) {
    return 0;
  }
  return --allocations_left_before_failure == 0;
}

#else

static int injected_failure(void) {
  return 0;
}

#endif

void* rh_allocate(size_t bytes) {
  return injected_failure() ? NULL : malloc(bytes);
}

void* rh_allocate_zeroed(size_t bytes) {
  return injected_failure() ? NULL : calloc(1, bytes);
}

void rh_release(void* memory) {
  free(memory);
}
