// How the engine reaches caller memory: host arrays through engine-owned pinned chunks, device
// arrays in place after checking where they live.
#pragma once

#include <cstddef>

#include "engine.hpp"

namespace rh {

// Queues a copy of `bytes` host bytes to device memory `dst` on the engine stream. Pageable
// memory goes through two pinned chunks so the CPU copy of one chunk overlaps the DMA of the
// other; the call returns once the last chunk is queued.
void stage_to_device(Engine& e, void* dst, const void* src, size_t bytes);

// INVALID_ARGUMENT naming `field` unless `ptr` is device (or managed) memory on e's device.
void require_device_memory(const Engine& e, const void* ptr, const char* field);

}  // namespace rh
