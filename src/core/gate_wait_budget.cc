#include "core/gate_wait_budget.h"

#include <algorithm>

namespace gpuslice::core {

namespace {
// Credit per nanosecond of wall time is (kEighths - 7 owed) / kEighths, the
// owed share in permille: (1 - owed) plus an eighth of it.
constexpr uint64_t kEighths = 8000;
}  // namespace

void GateWaitBudget::Configure(uint32_t owed_permille, uint64_t buffer_ns, uint64_t resume_ns) {
  owed_permille_.store(std::min<uint32_t>(owed_permille, 1000), std::memory_order_relaxed);
  buffer_ns_.store(buffer_ns, std::memory_order_relaxed);
  resume_ns_.store(std::min(resume_ns, buffer_ns), std::memory_order_relaxed);
}

uint64_t GateWaitBudget::AtRate(uint64_t ns) const {
  return ns * kEighths / (kEighths - 7 * owed_permille_.load(std::memory_order_relaxed));
}

uint64_t GateWaitBudget::Earned(uint64_t ns) const {
  return ns * (kEighths - 7 * owed_permille_.load(std::memory_order_relaxed)) / kEighths;
}

void GateWaitBudget::Vouch(uint64_t ns) { vouched_ns_.fetch_add(ns, std::memory_order_acq_rel); }

bool GateWaitBudget::Allows(uint64_t now) const {
  return owed_permille_.load(std::memory_order_relaxed) == 0 || vouched_ns_.load(std::memory_order_acquire) > 0 ||
         empty_at_ns_.load(std::memory_order_acquire) + AtRate(resume_ns_.load(std::memory_order_relaxed)) <= now;
}

uint64_t GateWaitBudget::CreditNs(uint64_t now) const {
  const uint64_t empty_at = empty_at_ns_.load(std::memory_order_acquire);
  const uint64_t buffer = buffer_ns_.load(std::memory_order_relaxed);
  const uint64_t earned = now > empty_at ? std::min(buffer, Earned(now - empty_at)) : 0;
  return earned + vouched_ns_.load(std::memory_order_acquire);
}

bool GateWaitBudget::Spend(uint64_t from, uint64_t now) {
  if (owed_permille_.load(std::memory_order_relaxed) == 0) return true;
  // Raised, never lowered: each thread spends only the stretch it raised
  // it over, so no nanosecond is spent twice however threads interleave.
  uint64_t counted = counted_until_ns_.load(std::memory_order_acquire);
  while (counted < now && !counted_until_ns_.compare_exchange_weak(counted, now, std::memory_order_acq_rel)) {
  }
  const uint64_t start = std::max(from, counted);
  if (now <= start) {  // another thread's wait spent it: spent out, or not
    return vouched_ns_.load(std::memory_order_acquire) > 0 || empty_at_ns_.load(std::memory_order_acquire) < now;
  }
  const uint64_t wait = now - start;
  const uint64_t full = AtRate(buffer_ns_.load(std::memory_order_relaxed));
  uint64_t empty_at = empty_at_ns_.load(std::memory_order_acquire);
  uint64_t unpaid = 0;  // what the earned credit did not cover
  for (;;) {
    // Credit beyond the buffer was never banked.
    const uint64_t base = now > full ? std::max(empty_at, now - full) : empty_at;
    const uint64_t earned = base < now ? Earned(now - base) : 0;
    unpaid = wait > earned ? wait - earned : 0;
    // Spent to empty (and earning again from now on) when it did not cover.
    if (empty_at_ns_.compare_exchange_weak(empty_at, unpaid == 0 ? base + AtRate(wait) : std::max(base, now),
                                           std::memory_order_acq_rel)) {
      break;
    }
  }
  // Then what was vouched for: earned credit first, so that what the cap
  // earns while a run-on is paid back is not lost beyond the buffer.
  uint64_t vouched = vouched_ns_.load(std::memory_order_acquire);
  while (unpaid > 0 && vouched > 0) {
    const uint64_t take = std::min(vouched, unpaid);
    if (vouched_ns_.compare_exchange_weak(vouched, vouched - take, std::memory_order_acq_rel)) unpaid -= take;
  }
  return unpaid == 0;
}

}  // namespace gpuslice::core
