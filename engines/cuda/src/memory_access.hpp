// How the engine reaches caller memory: host arrays through engine-owned pinned chunks, device
// arrays in place after checking where they live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "engine.hpp"

namespace rh {

// The staging settings at engine creation: pinned chunks with up to 12 host copy threads, never
// more than the CPUs this process may run on. The engine's test build reads RH_CUDA_STAGING and
// RH_CUDA_STAGING_THREADS for A/B measurements (test_switches.hpp).
void configure_staging(Engine& e);

// Host arrays of one batch, row by row: row i is x_row_bytes at x + i * x_row_bytes, and elem
// bytes at y + i * elem and at w + i * elem (y and w may be null).
struct HostRows {
  const void* x;
  const void* y;
  const void* w;
  size_t x_row_bytes;
  size_t elem;
  int64_t n;
};

// Where those rows go in device memory (y and w null where the source's are).
struct DeviceRows {
  void* x;
  void* y;
  void* w;
};

// Queues the copy of src's rows to dst on the engine stream, in chunks of whole multiples of
// `row_grain` rows (the last chunk may be shorter); after each chunk's copies it calls
// landed(first_row, end_row), which may queue work on the engine stream that reads those rows
// (it runs on the GPU while the host copies the next chunk). Pinned staging copies each chunk's
// rows of x, y and w into one of two engine-owned pinned chunks, several host threads per chunk,
// so the host copy of one chunk overlaps the DMA of the previous chunk and the work `landed`
// queued for it; the caller's memory is no longer read once this returns. Plain staging, and
// pinned staging when every source array is page-locked (cudaMallocHost, cudaHostRegister), hand
// the caller's arrays to cudaMemcpyAsync and call landed once for all rows: page-locked memory
// is then read by the DMA engine in place, until the stream passes the copies, so every caller
// waits for its stream before its ABI call returns, on success and on failure.
void stage_rows_to_device(Engine& e, const HostRows& src, const DeviceRows& dst, int64_t row_grain,
                          const std::function<void(int64_t, int64_t)>& landed);

// len bytes of an exported P x P array (information, K) from the engine's pinned buffer, which
// the device wrote, into the caller's array: split over the staging copy threads from 64 KiB per
// thread (a staging chunk's copy from 256 KiB), so a large export is not one thread's copy from
// memory no cache holds.
void copy_export(const Engine& e, void* dst, const void* src, size_t len);

// Called before a synchronisation that the export of the P x P state may follow (the
// information, and K in doubles `with_meat`): where copy_export would split such an array over
// the copy threads, they poll instead of sleeping for the next few hundred microseconds
// (team_standby), so the export after the wait does not start with their wake-up.
void expect_export(const Engine& e, bool with_meat);

// Element `index` of a device (or managed) array of `elem`-byte floats (4: float, 8: double),
// read back with one synchronous copy: for the messages of refused values, after the engine
// stream was waited for.
double device_element(const void* data, int64_t index, size_t elem);

// INVALID_ARGUMENT naming `field` unless `ptr` is aligned to the engine dtype and is device (or
// managed) memory on e's device. host_entry: the entry point that takes host arrays instead,
// named when the pointer is host memory.
void require_device_memory(const Engine& e, const void* ptr, const char* field,
                           const char* host_entry = "rh_cuda_engine_update_host");

}  // namespace rh
