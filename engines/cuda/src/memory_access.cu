#include "memory_access.hpp"

#include <cstring>

#include "engine_error.hpp"

namespace rh {

namespace {
constexpr size_t kChunkBytes = size_t{8} << 20;
}

void stage_to_device(Engine& e, void* dst, const void* src, size_t bytes) {
  const size_t chunk = bytes < kChunkBytes ? bytes : kChunkBytes;
  e.ws.host_chunks[0].reserve(chunk, "pinned staging chunk");
  e.ws.host_chunks[1].reserve(chunk, "pinned staging chunk");
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  int slot = 0;
  for (size_t offset = 0; offset < bytes; offset += chunk, slot ^= 1) {
    const size_t len = bytes - offset < chunk ? bytes - offset : chunk;
    // The chunk is reused only after the DMA that last read it has finished.
    check_cuda(cudaEventSynchronize(e.chunk_events[slot]), "cudaEventSynchronize");
    std::memcpy(e.ws.host_chunks[slot].data(), from + offset, len);
    check_cuda(cudaMemcpyAsync(to + offset, e.ws.host_chunks[slot].data(), len,
                               cudaMemcpyHostToDevice, e.stream),
               "cudaMemcpyAsync (host batch)");
    check_cuda(cudaEventRecord(e.chunk_events[slot], e.stream), "cudaEventRecord");
  }
}

void require_device_memory(const Engine& e, const void* ptr, const char* field) {
  cudaPointerAttributes attributes{};
  const cudaError_t rc = cudaPointerGetAttributes(&attributes, ptr);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    fail(RH_CUDA_INVALID_ARGUMENT, "%s (%p) is not device memory: %s", field, ptr,
         cudaGetErrorString(rc));
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    fail(RH_CUDA_INVALID_ARGUMENT,
         "%s (%p) is not device memory (cudaPointerGetAttributes type %d); host arrays go "
         "through rh_cuda_engine_update_host",
         field, ptr, static_cast<int>(attributes.type));
  }
  if (attributes.device != e.device) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s (%p) lives on device %d, the engine on device %d", field,
         ptr, attributes.device, e.device);
  }
}

}  // namespace rh
