// Engine-owned device and pinned host memory that only ever grows: a workspace sized for the
// largest batch seen is reused, so steady-state updates allocate nothing.
//
// Device buffers are stream-ordered: bind() ties a buffer to its engine's stream and to the
// engine memory pool of that device (engine.cu), and every allocation and free is queued on that
// stream (cudaMallocFromPoolAsync / cudaFreeAsync). Nothing synchronises the device, and a
// buffer freed here is reused by the next allocation from the pool: on the same stream in stream
// order, on another engine's stream only once the free has completed or the allocator has made
// that stream wait for it (the pool's default reuse rules, which never hand out memory that queued
// work may still touch). The engine touches its buffers only from work queued on its own stream,
// which is what makes those rules sufficient. Without pool support on the device (bind() with a
// null pool), cudaMalloc/cudaFree are used instead.
//
// Pinned host buffers use cudaMallocHost/cudaFreeHost; the engine keeps them in its pooled
// resource set (engine.cu), so an engine created from an idle set does not pay for them again.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine_error.hpp"
#include "fault_sites.hpp"

namespace rh {

enum class MemoryKind { Device, PinnedHost };

class GrowingBuffer {
 public:
  explicit GrowingBuffer(MemoryKind kind = MemoryKind::Device) : kind_(kind) {}
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() {
    reset();
  }

  // The stream that orders this buffer's allocations and frees (device buffers), and the pool they
  // come from (null: plain cudaMalloc). Pinned buffers only use the stream for the capture check.
  // Rebinding a buffer that holds memory frees it first, on the old stream.
  void bind(cudaStream_t stream, cudaMemPool_t pool) noexcept {
    if (bound_ && (stream != stream_ || pool != pool_))
      reset();
    stream_ = stream;
    pool_ = pool;
    bound_ = true;
  }

  void reserve(size_t bytes, const char* what) {
    if (bytes <= capacity_)
      return;
    if (kind_ == MemoryKind::Device && !bound_) {
      fail(RH_CUDA_INTERNAL_ERROR,
           "internal error: device buffer for %s is not bound to an engine stream", what);
    }
    if (bound_)
      refuse_during_capture(what);
    reset();
    void* fresh = nullptr;
    cudaError_t rc = cudaSuccess;
    if (fault_injected_here()) {  // test builds only (fault_sites.hpp)
      rc = cudaErrorMemoryAllocation;
    } else if (kind_ == MemoryKind::PinnedHost) {
      rc = cudaMallocHost(&fresh, bytes);
    } else if (pool_ != nullptr) {
      rc = cudaMallocFromPoolAsync(&fresh, bytes, pool_, stream_);
    } else {
      rc = cudaMalloc(&fresh, bytes);
    }
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      fail(RH_CUDA_ALLOCATION_FAILED, "allocating %zu bytes of %s for %s failed: %s", bytes,
           kind_ == MemoryKind::Device ? "device memory" : "pinned host memory", what,
           cudaGetErrorString(rc));
    }
    ptr_ = fresh;
    capacity_ = bytes;
    // Kernels and cuBLAS rely on cudaMalloc's 256-byte alignment; the pool gives at least that.
    if (reinterpret_cast<uintptr_t>(fresh) % 256 != 0) {
      reset();
      fail(RH_CUDA_INTERNAL_ERROR, "internal error: %s allocated at %p, not 256-byte aligned", what,
           fresh);
    }
  }

  // Frees the memory (device buffers: queued on the bound stream) and leaves the buffer empty.
  void reset() noexcept {
    if (ptr_ == nullptr)
      return;
    if (kind_ == MemoryKind::PinnedHost) {
      cudaFreeHost(ptr_);
    } else if (pool_ != nullptr) {
      cudaFreeAsync(ptr_, stream_);
    } else {
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
    capacity_ = 0;
  }

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* data() const {
    return ptr_;
  }
  size_t capacity() const {
    return capacity_;
  }
  MemoryKind kind() const {
    return kind_;
  }
  void swap(GrowingBuffer& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(capacity_, other.capacity_);
    std::swap(kind_, other.kind_);
    std::swap(stream_, other.stream_);
    std::swap(pool_, other.pool_);
    std::swap(bound_, other.bound_);
  }

 private:
  // Graph capture must never see an allocation: workspaces are reserved before the solver loop.
  void refuse_during_capture(const char* what) const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &status) != cudaSuccess) {
      (void)cudaGetLastError();
      return;  // the allocation itself reports a broken stream
    }
    if (status != cudaStreamCaptureStatusNone) {
      fail(RH_CUDA_INTERNAL_ERROR,
           "internal error: %s would grow during CUDA graph capture; workspaces are reserved "
           "before the solver loop",
           what);
    }
  }

  MemoryKind kind_;
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  bool bound_ = false;
};

}  // namespace rh
