// The process-wide team of host copy threads behind pinned staging (copy_team.hpp).
#include "copy_team.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "streaming_copy.hpp"

namespace rh {

namespace {

// Idle workers poll for the next chunk this long before they sleep: the gap between two chunks
// of one transfer is an event wait plus a DMA launch, shorter than a futex wake-up.
constexpr auto kWorkerSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Below this, a plain memcpy (the destination lines are few and may stay cached).
constexpr size_t kMinStreamingCopy = size_t{64} << 10;

// Host memory into a pinned staging chunk. Streaming stores gave 1.0-1.5x memcpy's bandwidth
// with 6-16 threads on the H200 host (staging_copy_bandwidth).
void copy_to_pinned(char* dst, const char* src, size_t len) {
  if (len >= kMinStreamingCopy && cpu_has_streaming_copy()) {
    copy_streaming(dst, src, len);
  } else {
    std::memcpy(dst, src, len);
  }
}

// A process-wide team of copy threads shared by all engines (at most 63, started on first use,
// never stopped; in practice at most 11: 12 threads per chunk less the caller). A copy is split
// into slices; the calling thread queues the job, copies slices itself until none is left
// unclaimed, then waits for the slices workers took. So a copy always completes, even when every
// worker is busy with another engine's chunk or none could be started, and concurrent engines
// share the workers instead of each owning a team. Leaked on purpose (no joins at exit).
class CopyWorkers {
 public:
  static CopyWorkers& instance() {
    static CopyWorkers* workers = new CopyWorkers();
    return *workers;
  }

  void standby(int parts, std::chrono::microseconds hold) {
    if (parts <= 1)
      return;
    start_workers(parts - 1);
    const int64_t until = ticks(std::chrono::steady_clock::now() + hold);
    int64_t current = standby_until_.load(std::memory_order_relaxed);
    while (current < until &&
           !standby_until_.compare_exchange_weak(current, until, std::memory_order_release)) {
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++standby_calls_;
    }
    wake_.notify_all();
  }

  // One part: the caller copies alone, without touching the team.
  void copy(char* dst, const char* src, size_t len, int parts) {
    if (parts <= 1) {
      copy_to_pinned(dst, src, len);
      return;
    }
    start_workers(parts - 1);
    Job job;
    job.dst = dst;
    job.src = src;
    job.len = len;
    job.parts = parts;
    // Slices are whole cache lines, so two threads never write one line.
    job.slice =
        ((len + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts) + 63) & ~size_t{63};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(&job);
      queued_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (;;) {
      int part = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (job.claimed == job.parts)
          break;
        part = job.claimed++;
        if (job.claimed == job.parts)
          unqueue(&job);
      }
      job.run(part);
    }
    // The slices workers claimed take about as long as the caller's own.
    while (job.finished.load(std::memory_order_acquire) != job.parts)
      cpu_relax();
  }

 private:
  struct Job {
    char* dst = nullptr;
    const char* src = nullptr;
    size_t len = 0;
    size_t slice = 0;
    int parts = 0;
    int claimed = 0;  // guarded by mutex_
    std::atomic<int> finished{0};

    // The last touch of the job by a worker is the increment: the caller may return after it.
    void run(int part) {
      const size_t offset = static_cast<size_t>(part) * slice;
      if (offset < len) {
        const size_t n = len - offset < slice ? len - offset : slice;
        copy_to_pinned(dst + offset, src + offset, n);
      }
      finished.fetch_add(1, std::memory_order_release);
    }
  };

  CopyWorkers() = default;

  // Caller holds mutex_.
  void unqueue(Job* job) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (*it == job) {
        queue_.erase(it);
        queued_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
    }
  }

  void start_workers(int wanted) {
    if (wanted > kMaxCopyThreads - 1)
      wanted = kMaxCopyThreads - 1;
    if (started_.load(std::memory_order_acquire) >= wanted)
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    while (!spawn_failed_ && started_.load(std::memory_order_relaxed) < wanted) {
      try {
        std::thread(&CopyWorkers::work, this).detach();
      } catch (const std::system_error&) {
        spawn_failed_ = true;  // the callers copy the slices themselves
        break;
      }
      started_.fetch_add(1, std::memory_order_release);
    }
  }

  static int64_t ticks(std::chrono::steady_clock::time_point t) {
    return t.time_since_epoch().count();
  }

  // An idle worker polls until kWorkerSpin after its last slice or the standby deadline,
  // whichever is later, then sleeps until a job or a standby call wakes it.
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (queue_.empty()) {
        const unsigned standby_seen = standby_calls_;
        lock.unlock();
        const int64_t spin_end = ticks(std::chrono::steady_clock::now() + kWorkerSpin);
        while (queued_.load(std::memory_order_acquire) == 0) {
          const int64_t now = ticks(std::chrono::steady_clock::now());
          if (now >= spin_end && now >= standby_until_.load(std::memory_order_acquire))
            break;
          cpu_relax();
        }
        lock.lock();
        wake_.wait(lock, [&] { return !queue_.empty() || standby_calls_ != standby_seen; });
        if (queue_.empty())
          continue;  // a standby call: poll again
      }
      Job* job = queue_.front();
      const int part = job->claimed++;
      if (job->claimed == job->parts)
        unqueue(job);
      lock.unlock();
      job->run(part);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job*> queue_;      // jobs with unclaimed slices
  std::atomic<int> queued_{0};  // queue_.size(), read without the lock while spinning
  std::atomic<int> started_{0};
  bool spawn_failed_ = false;              // guarded by mutex_
  std::atomic<int64_t> standby_until_{0};  // steady_clock ticks: poll, do not sleep, until then
  unsigned standby_calls_ = 0;             // guarded by mutex_; wakes sleeping workers
};

}  // namespace

int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0)
      return n;
  }
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

void team_copy(char* dst, const char* src, size_t len, int parts) {
  CopyWorkers::instance().copy(dst, src, len, parts);
}

void team_standby(int parts, std::chrono::microseconds hold) {
  CopyWorkers::instance().standby(parts, hold);
}

}  // namespace rh
