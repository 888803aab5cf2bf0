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
// DMA instead of staging it. Then the whole pipeline, pageable source to device memory, for
// rings of 2-4 pinned slots of 0.5-4 MiB: each slice copied by a team of spinning threads
// (memcpy or streaming stores), its DMA queued, the slot reused after that DMA's event; the
// source rotates over 8 buffers of MB megabytes, so it is not in any cache (as a stream's next
// batch is not). Small slots that stay in the last-level cache spare the DRAM the copy's writes
// and the DMA's reads, where the CPU serves device reads from that cache.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
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

// Persistent spinning workers for the pipeline table: a slice costs no wake-up.
class SpinTeam {
 public:
  explicit SpinTeam(int workers) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this] { work(); });
  }
  ~SpinTeam() {
    stop_.store(true);
    for (auto& th : threads_)
      th.join();
  }
  void copy(char* dst, const char* src, size_t len, int parts, bool nt) {
    dst_ = dst;
    src_ = src;
    len_ = len;
    nt_ = nt;
    parts_ = parts;
    slice_ = ((len + parts - 1) / parts + 63) & ~size_t{63};
    next_.store(0);
    done_.store(0);
    generation_.fetch_add(1, std::memory_order_release);
    run();
    while (done_.load(std::memory_order_acquire) != parts)
      std::this_thread::yield();
  }

 private:
  void run() {
    for (;;) {
      const int part = next_.fetch_add(1);
      if (part >= parts_)
        return;
      const size_t off = static_cast<size_t>(part) * slice_;
      if (off < len_) {
        const size_t n = std::min(slice_, len_ - off);
        if (nt_)
          rh::copy_streaming(dst_ + off, src_ + off, n);
        else
          std::memcpy(dst_ + off, src_ + off, n);
      }
      done_.fetch_add(1, std::memory_order_release);
    }
  }
  void work() {
    unsigned seen = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      const unsigned g = generation_.load(std::memory_order_acquire);
      if (g == seen) {
        std::this_thread::yield();
        continue;
      }
      seen = g;
      run();
    }
  }
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<unsigned> generation_{0};
  std::atomic<int> next_{0}, done_{0};
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t len_ = 0, slice_ = 0;
  int parts_ = 0;
  bool nt_ = false;
};

// Pageable src -> pinned ring of `slots` slices of `slice` bytes -> dev, end to end (us).
double pipeline(SpinTeam& team, char* dev, const char* src, size_t bytes, char* ring, size_t slice,
                int slots, int threads, bool nt, cudaStream_t s, cudaEvent_t* events) {
  const double t0 = now_us();
  int slot = 0;
  for (size_t off = 0; off < bytes; off += slice, slot = (slot + 1) % slots) {
    const size_t len = std::min(slice, bytes - off);
    cudaEventSynchronize(events[slot]);
    char* pinned = ring + static_cast<size_t>(slot) * slice;
    team.copy(pinned, src + off, len, threads, nt);
    cudaMemcpyAsync(dev + off, pinned, len, cudaMemcpyHostToDevice, s);
    cudaEventRecord(events[slot], s);
  }
  cudaStreamSynchronize(s);
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

  // The pipeline, end to end, from 8 rotating sources.
  constexpr int kSources = 8;
  std::vector<char> sources(bytes * kSources);
  for (size_t i = 0; i < sources.size(); i += 4096)
    sources[i] = static_cast<char>(i);
  constexpr size_t kMaxSlice = size_t{4} << 20;
  constexpr int kMaxSlots = 4;
  char* ring = nullptr;
  cudaHostAlloc(&ring, kMaxSlice * kMaxSlots, cudaHostAllocDefault);
  std::memset(ring, 0, kMaxSlice * kMaxSlots);
  cudaEvent_t events[kMaxSlots];
  for (cudaEvent_t& ev : events)
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  SpinTeam team(15);
  std::printf("pipeline, %zu MB pageable -> device (GB/s, median of %d; floor: DMA alone %.1f)\n",
              mb, reps, gb / median(dma));
  std::printf("%8s %6s %8s %12s %12s\n", "slice", "slots", "threads", "memcpy", "stream");
  int rotation = 0;
  for (size_t slice :
       {size_t{512} << 10, size_t{1} << 20, size_t{2} << 20, size_t{3} << 20, size_t{4} << 20}) {
    for (int slots : {2, 3, 4}) {
      for (int threads : {8, 12, 16}) {
        double result[2] = {0, 0};
        for (int variant = 0; variant < 2; ++variant) {
          const bool nt = variant == 1;
          if (nt && !avx2)
            continue;
          std::vector<double> times;
          for (int r = 0; r < reps; ++r) {
            const char* from = sources.data() + bytes * (rotation++ % kSources);
            times.push_back(
                pipeline(team, dev, from, bytes, ring, slice, slots, threads, nt, s, events));
          }
          result[variant] = gb / median(times);
        }
        std::printf("%6zuK %6d %8d %12.1f %12.1f\n", slice >> 10, slots, threads, result[0],
                    result[1]);
      }
    }
  }
  cudaFreeHost(ring);
  cudaFree(dev);
  cudaFreeHost(pinned);
  cudaFreeHost(pinned2);
  return 0;
}
