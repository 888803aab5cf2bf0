// Engine-owned device and pinned host memory that only ever grows: a workspace sized for the
// largest batch seen is reused, so steady-state updates allocate nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "engine_error.hpp"

namespace rh {

enum class MemoryKind { Device, PinnedHost };

class GrowingBuffer {
 public:
  explicit GrowingBuffer(MemoryKind kind = MemoryKind::Device) : kind_(kind) {}
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() { release(); }

  void reserve(size_t bytes, const char* what) {
    if (bytes <= capacity_) return;
    release();
    void* fresh = nullptr;
    cudaError_t rc = kind_ == MemoryKind::Device ? cudaMalloc(&fresh, bytes)
                                                 : cudaMallocHost(&fresh, bytes);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      fail(RH_CUDA_ALLOCATION_FAILED, "allocating %zu bytes of %s for %s failed: %s", bytes,
           kind_ == MemoryKind::Device ? "device memory" : "pinned host memory", what,
           cudaGetErrorString(rc));
    }
    ptr_ = fresh;
    capacity_ = bytes;
  }

  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  void* data() const { return ptr_; }
  size_t capacity() const { return capacity_; }
  void swap(GrowingBuffer& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(capacity_, other.capacity_);
    std::swap(kind_, other.kind_);
  }

 private:
  void release() noexcept {
    if (ptr_ == nullptr) return;
    if (kind_ == MemoryKind::Device) {
      cudaFree(ptr_);
    } else {
      cudaFreeHost(ptr_);
    }
    ptr_ = nullptr;
    capacity_ = 0;
  }

  MemoryKind kind_;
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace rh
