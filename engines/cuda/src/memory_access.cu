#include "memory_access.hpp"

#include "test_switches.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "copy_team.hpp"
#include "engine_error.hpp"

namespace rh {

namespace {

constexpr int kDefaultMaxThreads = 12;
// Below this much per thread, waking another thread costs more than the copy it would do.
constexpr size_t kMinBytesPerThread = size_t{256} << 10;
// The same for an export (the state out of pinned memory the device wrote, which no cache
// holds). Measured on an H200 host: one thread reads it at about 21 GB/s, 1.3-1.4x slower than
// pinned memory the CPU wrote; at 518 KiB the team and one thread took the same time per update,
// and at 8.4 MB (P = 1,025) the team saved about 0.6 ms (benchmarks/records/gpu-2026-12-04-h200-e).
constexpr size_t kMinExportBytesPerThread = size_t{64} << 10;
// How long the copy threads poll for an export expected after a synchronisation
// (expect_export): longer than one chunk's wait on the standard shapes (about 110-230 us at
// P = 257 on an H100). A longer wait finds them asleep again, as without the call.
constexpr auto kExportStandby = std::chrono::microseconds(400);
constexpr size_t kMinChunk = size_t{1} << 20;
constexpr size_t kMaxChunk = size_t{16} << 20;
constexpr size_t kChunkGrain = size_t{64} << 10;

// The chunk length for a transfer of `bytes`. Each chunk costs a hand-off to the copy threads,
// an event wait and a DMA launch (~10 us), and the last chunk's DMA overlaps nothing: about
// sqrt(bytes * 512 KiB) balances the two (23.6 MB -> 3.5 MB chunks, 256 MB -> 11.3 MB).
size_t chunk_bytes(size_t bytes) {
  if (bytes <= kMinChunk)
    return bytes;
  size_t chunk = static_cast<size_t>(std::sqrt(static_cast<double>(bytes) * 524288.0));
  chunk = (chunk + kChunkGrain - 1) / kChunkGrain * kChunkGrain;
  if (chunk < kMinChunk)
    chunk = kMinChunk;
  if (chunk > kMaxChunk)
    chunk = kMaxChunk;
  return chunk;
}

// Pinned chunks grow in powers of two from 1 MiB, so a set's chunks reach their size after a
// few transfers and are not reallocated for every new batch size.
size_t chunk_capacity(size_t chunk) {
  size_t capacity = kMinChunk;
  while (capacity < chunk)
    capacity <<= 1;
  return capacity;
}

int copy_parts(const Engine& e, size_t len, size_t min_bytes_per_thread = kMinBytesPerThread) {
  const size_t by_size = len / min_bytes_per_thread;
  if (by_size <= 1 || e.staging_threads <= 1)
    return 1;
  return by_size < static_cast<size_t>(e.staging_threads) ? static_cast<int>(by_size)
                                                          : e.staging_threads;
}

// Whether the `bytes` at `p` are page-locked host memory (cudaMallocHost, cudaHostAlloc,
// cudaHostRegister): their first and last bytes both are. The DMA engine reads such memory in
// place, at the link's rate, with no copy through the pinned chunks.
bool page_locked(const void* p, size_t bytes) {
  const char* first = static_cast<const char*>(p);
  for (const char* at : {first, first + bytes - 1}) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, at) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    if (attributes.type != cudaMemoryTypeHost)
      return false;
  }
  return true;
}

}  // namespace

void configure_staging(Engine& e) {
  e.staging = staging_mode_setting();
  const int cpus = usable_cpus();
  const int threads = staging_threads_setting(cpus < kDefaultMaxThreads ? cpus : kDefaultMaxThreads,
                                              kMaxCopyThreads);
  e.staging_threads = threads < cpus ? threads : cpus;
}

void stage_rows_to_device(Engine& e, const HostRows& src, const DeviceRows& dst, int64_t row_grain,
                          const std::function<void(int64_t, int64_t)>& landed) {
  if (src.n <= 0)
    return;
  // Per row: x_row_bytes of x, then one element of y and of w where given.
  struct Piece {
    void* to;
    const void* from;
    size_t row_bytes;
  };
  const Piece pieces[3] = {{dst.x, src.x, src.x_row_bytes},
                           {dst.y, src.y, src.y != nullptr ? src.elem : 0},
                           {dst.w, src.w, src.w != nullptr ? src.elem : 0}};
  // Queues the DMA of rows [first, first + rows) of `piece` from `from` (the caller's array in
  // plain mode, a pinned chunk otherwise).
  auto dma = [&](const Piece& piece, const void* from, int64_t first, size_t rows) {
    check_cuda(
        cudaMemcpyAsync(static_cast<char*>(piece.to) + static_cast<size_t>(first) * piece.row_bytes,
                        from, rows * piece.row_bytes, cudaMemcpyHostToDevice, e.stream),
        "cudaMemcpyAsync (host batch)");
  };
  // The caller's arrays themselves go to the DMA engine in plain mode (pageable memory: the
  // runtime copies it through its own staging before returning) and when every one of them is
  // page-locked (read in place; the update waits for its stream before it returns, while the
  // caller still holds them).
  bool in_place = e.staging == StagingMode::Plain;
  if (!in_place) {
    in_place = true;
    for (const Piece& piece : pieces) {
      if (piece.row_bytes > 0 && !page_locked(piece.from, piece.row_bytes * src.n))
        in_place = false;
    }
  }
  if (in_place) {
    for (const Piece& piece : pieces) {
      if (piece.row_bytes > 0)
        dma(piece, piece.from, 0, static_cast<size_t>(src.n));
    }
    landed(0, src.n);
    return;
  }
  // Chunks of whole grains of rows, about chunk_bytes(total) each.
  size_t row_bytes = 0;
  for (const Piece& piece : pieces)
    row_bytes += piece.row_bytes;
  const int64_t grain = row_grain > 0 ? row_grain : 1;
  const size_t target = chunk_bytes(row_bytes * static_cast<size_t>(src.n));
  int64_t chunk_rows = static_cast<int64_t>(target / row_bytes) / grain * grain;
  if (chunk_rows < grain)
    chunk_rows = grain;
  if (chunk_rows > src.n)
    chunk_rows = src.n;
  const size_t capacity = chunk_capacity(static_cast<size_t>(chunk_rows) * row_bytes);
  e.ws.host_chunks[0].reserve(capacity, "pinned staging chunk");
  e.ws.host_chunks[1].reserve(capacity, "pinned staging chunk");
  int slot = 0;
  for (int64_t first = 0; first < src.n; first += chunk_rows, slot ^= 1) {
    const size_t rows = static_cast<size_t>(std::min(chunk_rows, src.n - first));
    // The chunk is reused only after the DMAs that last read it have finished.
    check_cuda(cudaEventSynchronize(e.chunk_events[slot]), "cudaEventSynchronize");
    char* pinned = e.ws.host_chunks[slot].as<char>();
    for (const Piece& piece : pieces) {
      if (piece.row_bytes == 0)
        continue;
      const size_t len = rows * piece.row_bytes;
      const char* from =
          static_cast<const char*>(piece.from) + static_cast<size_t>(first) * piece.row_bytes;
      team_copy(pinned, from, len, copy_parts(e, len));
      dma(piece, pinned, first, rows);
      pinned += len;
    }
    check_cuda(cudaEventRecord(e.chunk_events[slot], e.stream), "cudaEventRecord");
    landed(first, first + static_cast<int64_t>(rows));
  }
}

void copy_export(const Engine& e, void* dst, const void* src, size_t len) {
  team_copy(static_cast<char*>(dst), static_cast<const char*>(src), len,
            copy_parts(e, len, kMinExportBytesPerThread));
}

void expect_export(const Engine& e, bool with_meat) {
  const size_t largest =
      static_cast<size_t>(e.P * e.P) * (with_meat ? sizeof(double) : e.elem_size);
  team_standby(copy_parts(e, largest, kMinExportBytesPerThread), kExportStandby);
}

double device_element(const void* data, int64_t index, size_t elem) {
  const char* at = static_cast<const char*>(data) + static_cast<size_t>(index) * elem;
  if (elem == sizeof(float)) {
    float value = 0.0f;
    check_cuda(cudaMemcpy(&value, at, sizeof value, cudaMemcpyDefault),
               "cudaMemcpy (the refused value)");
    return static_cast<double>(value);
  }
  double value = 0.0;
  check_cuda(cudaMemcpy(&value, at, sizeof value, cudaMemcpyDefault),
             "cudaMemcpy (the refused value)");
  return value;
}

void require_device_memory(const Engine& e, const void* ptr, const char* field,
                           const char* host_entry) {
  // Before anything touches the pointer: a kernel's misaligned access is a sticky error that
  // leaves the whole process's CUDA context unusable.
  if (reinterpret_cast<uintptr_t>(ptr) % e.elem_size != 0) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s (%p) is not aligned to its %zu-byte elements", field, ptr,
         e.elem_size);
  }
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
         "through %s",
         field, ptr, static_cast<int>(attributes.type), host_entry);
  }
  if (attributes.device != e.device) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s (%p) lives on device %d, the engine on device %d", field,
         ptr, attributes.device, e.device);
  }
}

}  // namespace rh
