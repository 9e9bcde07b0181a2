// hold_budget.h — how much of a process's time latency-critical holds may
// take.
//
// A latency-critical (LC) vGPU holds the launches of lower levels while its
// requests run (core/pacing_board.h: spans, hints, the automatic hold). The
// holds are written on the GPU's pacing board, which every vGPU's processes
// can write. The roster (core/board_roster.h) makes a row's level believed
// only as the node says, but a tenant can still write the hold fields of a
// row the roster does list as LC: the row of a real LC vGPU on the same GPU.
// Kept fresh, such a forged hold held every best-effort vGPU on the GPU for
// as long as the LC vGPU existed (each launch waited the gate's 2 s bound).
// No process can tell a forged hold from a real one: both are words on the
// board.
//
// So each process bounds what holds can take from it, forged or real: in
// every window (1 s), its launches obey holds until they have been held for
// `max_held_pct` of the window, and go ahead of holds for the rest of it.
// The bound is the most any LC vGPU may take from a lower level's process,
// and so the most a forger can. A real LC whose requests keep a lower level
// held for more than that share of the time is protected for that share of
// each window, and the rest of its requests meet the short slices only
// (docs/design.md, "Threat model: shared state").
//
// Held time is wall time in which at least one of the process's launches was
// held: the threads' notes partition time among them (each raises the last
// note's time and counts what it raised), so eight threads held at once
// count once. A thread's
// first note of a wait counts nothing (the time before it was not held);
// each later one counts the time since the process's previous note, at most
// kMaxStepNs (a note after a long unheld spell is a new wait).
//
// Thread-safe: any number of threads call Holds and NoteHeld at once;
// lock-free, allocation-free and syscall-free (the launch path's gate).
#ifndef GPUSLICE_CORE_HOLD_BUDGET_H_
#define GPUSLICE_CORE_HOLD_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::core {

inline constexpr uint64_t kHoldBudgetWindowNs = 1'000'000'000;
inline constexpr uint32_t kDefaultMaxHeldPct = 50;

class HoldBudget {
 public:
  // The most time counted for one note: longer than any gap between a held
  // launch's checks of the gate (tens of microseconds).
  static constexpr uint64_t kMaxStepNs = 1'000'000;

  // `max_held_pct` 1..100; 100 = holds always obeyed (no bound).
  void Configure(uint32_t max_held_pct, uint64_t window_ns = kHoldBudgetWindowNs);

  // Whether this process's launches still obey holds at `now_ns`.
  bool Holds(uint64_t now_ns);
  // A launch of this process is held at `now_ns`; `first` for the first note
  // of its wait. Returns true once per window: when this note spends the
  // budget (the caller counts it: core::Ledger::hold_budget_spent).
  bool NoteHeld(uint64_t now_ns, bool first);

  uint64_t held_ns() const { return held_ns_.load(std::memory_order_relaxed); }  // this window's, for tests

 private:
  void Roll(uint64_t now_ns);
  uint64_t limit_ns() const { return limit_ns_.load(std::memory_order_relaxed); }

  std::atomic<uint64_t> window_ns_{kHoldBudgetWindowNs};
  std::atomic<uint64_t> limit_ns_{kHoldBudgetWindowNs * kDefaultMaxHeldPct / 100};
  std::atomic<uint64_t> window_start_ns_{0};
  std::atomic<uint64_t> held_ns_{0};
  std::atomic<uint64_t> last_note_ns_{0};
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_HOLD_BUDGET_H_
