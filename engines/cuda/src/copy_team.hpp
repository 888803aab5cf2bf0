// The process-wide team of host copy threads that fills pinned staging chunks and copies
// exported states out of pinned memory (memory_access.cu): shared by every engine of the process,
// started on first use, never stopped. Plain host C++, no CUDA.
#pragma once

#include <chrono>
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

// Keeps the team awake for `hold` from now (starting the workers a copy of `parts` slices uses,
// if need be): they poll for work until then instead of sleeping, so a copy queued in that time
// does not wait for their wake-up (a futex wake costs about as long as a 64 KiB slice's copy).
// For a copy the caller knows is coming, such as a state export right after the synchronisation
// it is about to wait in. A later call extends the deadline, never shortens it. parts <= 1: no
// effect.
void team_standby(int parts, std::chrono::microseconds hold);

}  // namespace rh
