// How every kernel of the engine is launched and how it starts (docs/decisions.md, "Overlapped
// launches"): on devices of compute capability 9.0 and later each launch allows programmatic
// dependent launch, so the next kernel of the stream is launched, and its blocks placed, while
// this one drains; every kernel's first statement waits for its predecessors to complete. Stream
// order and memory visibility are exactly those of plain launches (no kernel touches memory before
// the wait); what overlaps is the next kernel's launch with this one's last blocks.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <utility>

#include "engine_error.hpp"

namespace rh {

// The first statement of every engine kernel: griddepcontrol.wait returns once every grid this
// one depends on has completed and its writes are visible (at once for a plain launch, and absent
// before sm_90). No kernel signals its dependents early (griddepcontrol.launch_dependents), so
// they launch as its blocks exit: a signal right after the wait made streaming updates without
// a penalty slower and nothing more than 2.5% faster (docs/decisions.md).
__device__ __forceinline__ void enter_stream_order() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device runs programmatic dependent launches (compute capability 9.0 and
// later), asked once per device (engine entry points make the engine's device current). A query
// that fails answers no: the launch is then plain, and the launch itself reports the error.
inline bool overlapped_launches() {
  constexpr int kKnownDevices = 64;
  static std::atomic<signed char> known[kKnownDevices] = {};  // 0 unknown, 1 yes, -1 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::atomic<signed char>* slot = device >= 0 && device < kKnownDevices ? &known[device] : nullptr;
  if (slot != nullptr) {
    const signed char answer = slot->load(std::memory_order_relaxed);
    if (answer != 0)
      return answer > 0;
  }
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const bool yes = major >= 9;
  if (slot != nullptr)
    slot->store(yes ? 1 : -1, std::memory_order_relaxed);
  return yes;
}

// Launch settings beyond the grid: dynamic shared memory and, for the cluster Cholesky, a
// cluster size (0: none).
struct LaunchShape {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  unsigned cluster = 0;
};

// The launch configuration of `shape` on stream s, its attributes alongside: the cluster size
// where there is one, and programmatic stream serialisation when `overlapped`.
struct LaunchConfig {
  cudaLaunchAttribute attributes[2]{};
  cudaLaunchConfig_t config{};
  LaunchConfig(const LaunchShape& shape, cudaStream_t s, bool overlapped) {
    unsigned count = 0;
    if (overlapped) {
      attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attributes[count].val.programmaticStreamSerializationAllowed = 1;
      ++count;
    }
    if (shape.cluster != 0) {
      attributes[count].id = cudaLaunchAttributeClusterDimension;
      attributes[count].val.clusterDim.x = shape.cluster;
      attributes[count].val.clusterDim.y = 1;
      attributes[count].val.clusterDim.z = 1;
      ++count;
    }
    config.gridDim = shape.grid;
    config.blockDim = shape.block;
    config.dynamicSmemBytes = shape.shared_bytes;
    config.stream = s;
    config.attrs = attributes;
    config.numAttrs = count;
  }
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
};

// Launches kernel(args...) on stream s in stream order (the programmatic overlap where the device
// has it) and reports a refused launch, or an error earlier work left in the thread's last error,
// as an EngineError naming `name`: one check (one fault site) per launch.
template <class... Params, class... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), const LaunchShape& shape,
                   cudaStream_t s, Args&&... args) {
  const LaunchConfig launch(shape, s, overlapped_launches());
  const cudaError_t launched =
      cudaLaunchKernelEx(&launch.config, kernel, std::forward<Args>(args)...);
  const cudaError_t last = cudaGetLastError();  // cleared either way
  check_cuda(launched != cudaSuccess ? launched : last, name);
}

// The common case: grid x block threads, no dynamic shared memory.
template <class... Params, class... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), int64_t grid, int block,
                   cudaStream_t s, Args&&... args) {
  launch_kernel(name, kernel, LaunchShape{dim3(static_cast<unsigned>(grid)), dim3(block), 0, 0}, s,
                std::forward<Args>(args)...);
}

}  // namespace rh
