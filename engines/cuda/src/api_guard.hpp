// Every exported function runs its body through guarded(): nothing thrown inside the engine
// crosses the C ABI, and every failure leaves a status plus a message in the right buffer.
#pragma once

#include <new>

#include "engine_error.hpp"
#include "fault_sites.hpp"
#include "rh_common.h"

namespace rh {

template <class Body>
RhCudaStatus guarded(RhErrorBuffer* err, Body&& body) noexcept {
  fault_injection_call_begin();  // test builds only (fault_sites.hpp)
  try {
    body();
    return RH_CUDA_SUCCESS;
  } catch (const EngineError& e) {
    return rh_fail(err, e.status(), "%s", e.what());
  } catch (const std::bad_alloc&) {
    return rh_fail(err, RH_CUDA_ALLOCATION_FAILED, "host memory allocation failed");
  } catch (const std::exception& e) {
    return rh_fail(err, RH_CUDA_INTERNAL_ERROR, "internal error: %s", e.what());
  } catch (...) {
    return rh_fail(err, RH_CUDA_INTERNAL_ERROR, "internal error: unknown exception");
  }
}

// Turns a validator's status (message already in `scratch`) into an exception.
inline void require(RhCudaStatus status, const RhErrorBuffer& scratch) {
  if (status != RH_CUDA_SUCCESS)
    throw EngineError(status, scratch.text);
}

}  // namespace rh
