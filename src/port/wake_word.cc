#include "port/wake_word.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace gpuslice::port {
namespace {
long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}
}  // namespace

bool WakeWord::SleepArmed(uint64_t timeout_ns) {
  // FUTEX_WAIT is relative and restarts from the full timeout after a
  // signal; the deadline keeps an interrupted sleep from growing.
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t deadline = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + now.tv_nsec + timeout_ns;
  for (;;) {
    if (word_.load(std::memory_order_seq_cst) != 1) return true;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const uint64_t at = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + now.tv_nsec;
    if (at >= deadline) break;
    const uint64_t left = deadline - at;
    const timespec ts{static_cast<time_t>(left / 1'000'000'000ull), static_cast<long>(left % 1'000'000'000ull)};
    Futex(&word_, FUTEX_WAIT_PRIVATE, 1, &ts);
  }
  return word_.exchange(0, std::memory_order_seq_cst) != 1;  // a wake may have landed at the deadline
}

void WakeWord::WakeSleeper() { Futex(&word_, FUTEX_WAKE_PRIVATE, 1, nullptr); }

}  // namespace gpuslice::port
