/*
 * Every buffer librh_cpu owns is allocated and released here. The shipped library forwards to
 * malloc/calloc/free; the fault-injection test build (RH_FAULT_INJECTION, librh_cpu_faults)
 * can make the k-th allocation of an ABI call fail, so the tests can prove each failure
 * returns ALLOCATION_FAILED, leaves the committed state alone and leaks nothing.
 */
#ifndef RH_CPU_ALLOCATION_H
#define RH_CPU_ALLOCATION_H

#include <stddef.h>

void* rh_allocate(size_t bytes);
void* rh_allocate_zeroed(size_t bytes);
void rh_release(void* memory);

#if defined(RH_FAULT_INJECTION)
/* Called by every ABI entry point: restarts the call's allocation count and reads
 * RH_CPU_TEST_FAIL_ALLOCATION (k >= 1: the call's k-th allocation returns NULL). */
void rh_allocation_call_begin(void);
#else
static inline void rh_allocation_call_begin(void) {}
#endif

#endif /* RH_CPU_ALLOCATION_H */
