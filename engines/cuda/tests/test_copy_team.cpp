// The host copy team behind librh_cuda's staging and state export (copy_team.cpp), alone: no
// GPU needed. Every byte of a copy lands at its destination and nothing around it is written,
// for lengths around the cache line, the streaming-store threshold and a staging chunk, source
// and destination at every alignment within a cache line, and 1 to 64 slices; two threads
// copying at once share the team's workers and each gets its own bytes.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "copy_team.hpp"
#include "test_support.hpp"

namespace {

unsigned char pattern(size_t i, unsigned seed) {
  return static_cast<unsigned char>((i * 2654435761u + seed) >> 7);
}

// Copies `len` patterned bytes at offset `src_at` of the source to offset `dst_at` of a guarded
// destination in `parts` slices and checks every byte of the destination.
void copy_and_check(size_t len, size_t src_at, size_t dst_at, int parts, unsigned seed) {
  constexpr size_t kGuard = 4099;
  std::vector<unsigned char> src(src_at + len + kGuard);
  std::vector<unsigned char> dst(kGuard + dst_at + len + kGuard, 0xA5);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = pattern(i, seed);
  const size_t begin = kGuard + dst_at;
  rh::team_copy(reinterpret_cast<char*>(dst.data() + begin),
                reinterpret_cast<const char*>(src.data() + src_at), len, parts);
  bool inside = true;
  bool outside = true;
  for (size_t i = 0; i < dst.size(); ++i) {
    if (i >= begin && i < begin + len)
      inside = inside && dst[i] == src[src_at + i - begin];
    else
      outside = outside && dst[i] == 0xA5;
  }
  if (!inside || !outside) {
    ++rhtest::failures();
    std::fprintf(stderr, "FAIL: %s (length %zu, offsets %zu / %zu, %d parts)\n",
                 inside ? "a byte outside the copy was written" : "a byte was not copied", len,
                 src_at, dst_at, parts);
  }
}

}  // namespace

int main() {
  const size_t lengths[] = {0,     1,     63,    64,     65,           4096,
                            65535, 65536, 65537, 300001, 1048576 + 13, 3 * 1048576 + 7};
  const int parts_list[] = {1, 2, 3, 7, 12, 64};
  unsigned seed = 1;
  for (int parts : parts_list) {
    for (size_t len : lengths) {
      for (size_t src_at : {size_t{0}, size_t{8}, size_t{33}}) {
        for (size_t dst_at : {size_t{0}, size_t{8}, size_t{61}})
          copy_and_check(len, src_at, dst_at, parts, seed++);
      }
    }
  }
  std::thread other([] {
    for (unsigned s = 1000; s < 1040; ++s)
      copy_and_check(1048576 + 5, 0, 0, 12, s);
  });
  for (unsigned s = 2000; s < 2040; ++s)
    copy_and_check(524288 + 3, 8, 16, 8, s);
  other.join();

  // team_standby: with one part it does nothing; with more the workers poll until its deadline
  // and then sleep again. Copies stay exact under a standby, after one has run out, and while
  // another thread keeps extending the deadline (which must neither deadlock nor lose a wake-up).
  using std::chrono::microseconds;
  rh::team_standby(1, microseconds(1000));
  copy_and_check(300001, 8, 61, 1, 3000);
  rh::team_standby(16, microseconds(2000));
  for (int parts : parts_list)
    copy_and_check(1048576 + 13, 33, 8, parts, 3100 + static_cast<unsigned>(parts));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the deadline: asleep
  copy_and_check(3 * 1048576 + 7, 0, 0, 12, 3200);
  std::thread standby([] {
    for (int i = 0; i < 2000; ++i)
      rh::team_standby(1 + i % 20, microseconds(i % 7 == 0 ? 0 : 50));
  });
  for (unsigned s = 3300; s < 3340; ++s)
    copy_and_check(65536 * (1 + s % 5) + s % 3, s % 2 ? 8 : 0, s % 3 ? 61 : 0, 2 + s % 11, s);
  standby.join();
  copy_and_check(1048576 + 13, 0, 8, 7, 3400);
  return rhtest::finish("test_copy_team");
}
