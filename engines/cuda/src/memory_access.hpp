// How the engine reaches caller memory: host arrays through engine-owned pinned chunks, device
// arrays in place after checking where they live.
#pragma once

#include <cstddef>

#include "engine.hpp"

namespace rh {

// Reads the staging settings at engine creation: RH_CUDA_STAGING = pinned (default) | plain,
// RH_CUDA_STAGING_THREADS = 1..64 host threads per chunk copy (default: up to 8, never more
// than the CPUs this process may run on). Both exist for A/B measurements; an unknown value is
// INVALID_ARGUMENT naming the variable.
void configure_staging(Engine& e);

// Queues a copy of `bytes` host bytes to device memory `dst` on the engine stream; the caller's
// memory is no longer read once this returns. Pinned staging copies pageable memory into two
// pinned chunks, each chunk split over several host threads, so the CPU copy of one chunk
// overlaps the DMA of the other; plain staging passes the pageable memory to cudaMemcpyAsync.
void stage_to_device(Engine& e, void* dst, const void* src, size_t bytes);

// INVALID_ARGUMENT naming `field` unless `ptr` is device (or managed) memory on e's device.
void require_device_memory(const Engine& e, const void* ptr, const char* field);

}  // namespace rh
