// The fault sites of the fault-injection sweep, defined with the other test switches in
// test_switches.cpp (so only librh_cuda_testing built with RH_FAULT_INJECTION injects anything).
#pragma once

namespace rh {

// Fault injection (test builds with RH_FAULT_INJECTION): RH_CUDA_TEST_FAIL_CALL=k makes the
// k-th fault site of each ABI call fail, a fault site being every checked CUDA runtime, cuBLAS
// or cuSOLVER call (check_cuda / check_cublas / check_cusolver, a kernel launch) and every buffer
// allocation (GrowingBuffer::reserve, failed before it allocates). RH_CUDA_TEST_FAIL_KIND picks
// what a checked call then reports: "allocation" (the default: cudaErrorMemoryAllocation,
// CUBLAS_STATUS_ALLOC_FAILED, CUSOLVER_STATUS_ALLOC_FAILED) or "error" (cudaErrorUnknown,
// CUBLAS_STATUS_EXECUTION_FAILED, CUSOLVER_STATUS_EXECUTION_FAILED). A checked call fails after
// it ran (its result is replaced), so the engine's handling of the failure is what is tested.
// The shipped librh_cuda compiles these to "never" and reads no environment.
enum class FaultKind { Allocation, Error };
// Called when an ABI call begins (guarded()): restarts the call's count of fault sites.
void fault_injection_call_begin();
// true when this fault site is the one to fail.
bool fault_injected_here();
FaultKind fault_injection_kind();

}  // namespace rh
