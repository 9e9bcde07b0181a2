#include "core/hold_budget.h"

#include <algorithm>
#include <limits>

namespace gpuslice::core {

void HoldBudget::Configure(uint32_t max_held_pct, uint64_t window_ns) {
  max_held_pct = std::clamp<uint32_t>(max_held_pct, 1, 100);
  window_ns_.store(window_ns, std::memory_order_relaxed);
  limit_ns_.store(max_held_pct == 100 ? std::numeric_limits<uint64_t>::max() : window_ns * max_held_pct / 100,
                  std::memory_order_relaxed);
}

void HoldBudget::Roll(uint64_t now) {
  uint64_t start = window_start_ns_.load(std::memory_order_acquire);
  if (now < start + window_ns_.load(std::memory_order_relaxed)) return;
  // One thread starts the new window; a note racing with it may land in
  // either window (a step at most: kMaxStepNs).
  if (window_start_ns_.compare_exchange_strong(start, now, std::memory_order_acq_rel)) {
    held_ns_.store(0, std::memory_order_release);
  }
}

bool HoldBudget::Holds(uint64_t now) {
  Roll(now);
  return held_ns_.load(std::memory_order_acquire) < limit_ns();
}

bool HoldBudget::NoteHeld(uint64_t now, bool first) {
  Roll(now);
  // Raised, never lowered: each note that raises it counts (previous, now],
  // so no stretch of time is counted twice, however threads interleave.
  uint64_t previous = last_note_ns_.load(std::memory_order_acquire);
  while (previous < now && !last_note_ns_.compare_exchange_weak(previous, now, std::memory_order_acq_rel)) {
  }
  if (first || now <= previous) return false;
  const uint64_t step = std::min(now - previous, kMaxStepNs);
  const uint64_t before = held_ns_.fetch_add(step, std::memory_order_acq_rel);
  return before < limit_ns() && before + step >= limit_ns();
}

}  // namespace gpuslice::core
