// The host copy into a pinned staging chunk: AVX2 non-temporal (streaming) stores where the CPU
// has them. The chunk is read next by the DMA engine, not by this CPU, so its cache lines need
// not be fetched before they are written. Shared by the engine (copy_team.cpp) and the
// staging_copy_bandwidth tool, which measures it against memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rh {

#if defined(__x86_64__)
inline bool cpu_has_streaming_copy() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

// Callers check cpu_has_streaming_copy() first.
__attribute__((target("avx2"))) inline void copy_streaming(char* dst, const char* src, size_t len) {
  size_t head = (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32;
  if (head > len)
    head = len;
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 128 <= len; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  _mm_sfence();  // the streamed lines are globally visible before anyone queues the DMA
  std::memcpy(dst + i, src + i, len - i);
}
#else
inline bool cpu_has_streaming_copy() {
  return false;
}
inline void copy_streaming(char* dst, const char* src, size_t len) {
  std::memcpy(dst, src, len);
}
#endif

}  // namespace rh
