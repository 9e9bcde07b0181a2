// wake_word.h — one thread sleeps with a timeout; any thread may cut the
// sleep short. A futex on one word of the process's own memory.
//
// The sleeper announces the sleep (Arm), checks its own reason to stay
// awake, then sleeps (SleepArmed) or calls the sleep off (Disarm). A waker
// that runs after Arm either sees the word armed and wakes the sleeper, or
// the sleeper's check sees what the waker did before calling Wake: both use
// sequentially consistent operations, so no wake-up is lost between the
// check and the sleep.
//
// Thread-safety: one sleeper at a time; Wake from any thread. Wake costs one
// atomic load and no system call unless the word is armed, so the launch
// path may call it (docs/design.md, "The hot path").
#ifndef GPUSLICE_PORT_WAKE_WORD_H_
#define GPUSLICE_PORT_WAKE_WORD_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::port {

class WakeWord {
 public:
  void Arm() { word_.store(1, std::memory_order_seq_cst); }
  void Disarm() { word_.store(0, std::memory_order_seq_cst); }
  // Sleeps up to `timeout_ns` unless Wake was called since Arm. Returns
  // true when woken (or the wake came first), false at the timeout.
  // Disarms either way.
  bool SleepArmed(uint64_t timeout_ns);
  void Wake() {
    if (word_.load(std::memory_order_seq_cst) == 1 && word_.exchange(0, std::memory_order_seq_cst) == 1) WakeSleeper();
  }
  bool armed() const { return word_.load(std::memory_order_seq_cst) == 1; }

 private:
  void WakeSleeper();
  std::atomic<uint32_t> word_{0};  // 1 = armed: a sleeper is or is about to be asleep
};

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_WAKE_WORD_H_
