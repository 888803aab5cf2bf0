// The process-wide team of host copy threads that fills pinned staging chunks and copies
// exported states out of pinned memory (memory_access.cu): shared by every engine of the process,
// started on first use, never stopped. Plain host C++, no CUDA.
#pragma once

#include <cstddef>

namespace rh {

// The most threads one copy may use, the caller included (the team holds at most
// kMaxCopyThreads - 1 workers); also the ceiling of the staging-threads setting.
constexpr int kMaxCopyThreads = 64;

// The CPUs this process may run on (its affinity mask; else the hardware's count; at least 1).
int usable_cpus();

// Copies len bytes from src to dst (host memory into a pinned chunk, or out of one) in `parts`
// slices of whole cache lines: the caller copies slices itself until none is left unclaimed,
// the team's workers take the others, and it returns once every slice is copied. parts <= 1:
// the caller copies alone, without touching the team. Always completes, even when no worker
// could be started.
void team_copy(char* dst, const char* src, size_t len, int parts);

}  // namespace rh
