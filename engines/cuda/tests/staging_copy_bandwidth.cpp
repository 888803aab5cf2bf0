// Host-side bandwidth of the copy from pageable memory into pinned memory, the first half of
// librh_cuda's host-input staging, on the machine it runs on. A measurement tool, not a test: it
// prints a table and asserts nothing.
//
//   staging_copy_bandwidth [MB [REPS]]
//
// For 1..16 threads, each copying a contiguous share of MB megabytes: memcpy, and the engine's
// streaming-store copy (streaming_copy.hpp; where the CPU has AVX2), alone and while the DMA
// engine reads another pinned buffer of the same size (the contention the staging pipeline
// sees). Also the
// pinned -> device DMA alone, and registering the pageable source (cudaHostRegister) for one
// DMA instead of staging it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "streaming_copy.hpp"
#include "test_support.hpp"

using rhtest::median;
using rhtest::now_us;

namespace {

double threaded_copy(char* dst, const char* src, size_t bytes, int threads, bool nt) {
  const size_t share = (bytes / threads + 63) & ~size_t{63};
  std::vector<std::thread> team;
  const double t0 = now_us();
  for (int t = 0; t < threads; ++t) {
    const size_t off = std::min(bytes, share * t);
    const size_t len = std::min(share, bytes - off);
    team.emplace_back([=] {
      if (nt) {
        rh::copy_streaming(dst + off, src + off, len);
      } else {
        std::memcpy(dst + off, src + off, len);
      }
    });
  }
  for (auto& th : team)
    th.join();
  return now_us() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mb = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 24;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  const size_t bytes = mb << 20;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("staging_copy_bandwidth: no CUDA device\n");
    return 77;
  }
  std::vector<char> src(bytes);
  for (size_t i = 0; i < bytes; ++i)
    src[i] = static_cast<char>(i * 131);
  char *pinned = nullptr, *pinned2 = nullptr, *dev = nullptr;
  cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault);
  cudaHostAlloc(&pinned2, bytes, cudaHostAllocDefault);
  cudaMalloc(&dev, bytes);
  std::memset(pinned, 1, bytes);
  std::memset(pinned2, 1, bytes);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<double> dma;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_us();
    cudaMemcpyAsync(dev, pinned2, bytes, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    dma.push_back(now_us() - t0);
  }
  std::vector<double> pageable;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_us();
    cudaMemcpy(dev, src.data(), bytes, cudaMemcpyHostToDevice);
    pageable.push_back(now_us() - t0);
  }
  // Pinning the caller's pages for the copy instead of staging them.
  std::vector<double> registered;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_us();
    if (cudaHostRegister(src.data(), bytes, cudaHostRegisterDefault) != cudaSuccess)
      break;
    cudaMemcpyAsync(dev, src.data(), bytes, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    cudaHostUnregister(src.data());
    registered.push_back(now_us() - t0);
  }
  const double gb = static_cast<double>(bytes) / 1e3;  // bytes / us = MB/s; / 1e3 -> GB/s
  std::printf(
      "%zu MB: DMA pinned->device %.1f us (%.1f GB/s); pageable cudaMemcpy %.1f us (%.1f GB/s)\n",
      mb, median(dma), gb / median(dma), median(pageable), gb / median(pageable));
  if (!registered.empty()) {
    std::printf("  cudaHostRegister + DMA + cudaHostUnregister %.1f us (%.1f GB/s)\n",
                median(registered), gb / median(registered));
  }
  const bool avx2 = rh::cpu_has_streaming_copy();
  std::printf("%8s %22s %22s %22s %22s\n", "threads", "memcpy GB/s", "memcpy +DMA GB/s",
              avx2 ? "stream GB/s" : "stream (no AVX2)", "stream +DMA GB/s");
  for (int threads : {1, 2, 4, 6, 8, 12, 16}) {
    double result[4] = {0, 0, 0, 0};
    for (int variant = 0; variant < 4; ++variant) {
      const bool nt = variant >= 2;
      const bool with_dma = variant % 2 == 1;
      if (nt && !avx2)
        continue;
      std::vector<double> times;
      for (int r = 0; r < reps; ++r) {
        if (with_dma)
          cudaMemcpyAsync(dev, pinned2, bytes, cudaMemcpyHostToDevice, s);
        times.push_back(threaded_copy(pinned, src.data(), bytes, threads, nt));
        cudaStreamSynchronize(s);
      }
      result[variant] = gb / median(times);
    }
    std::printf("%8d %22.1f %22.1f %22.1f %22.1f\n", threads, result[0], result[1], result[2],
                result[3]);
  }
  if (std::memcmp(pinned, src.data(), bytes) != 0)
    std::printf("COPY MISMATCH\n");
  cudaFree(dev);
  cudaFreeHost(pinned);
  cudaFreeHost(pinned2);
  return 0;
}
