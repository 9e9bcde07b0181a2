// gate_wait_budget.h — how long a process's launches may wait at the gate
// for what the pacing board says, before they stop believing it.
//
// A paced launch waits at the gate (interposer/pacer.h) while its vGPU's
// compute cap is short of tokens, and, where the vGPU waits for turns
// (capped, or under exclusive turns), while another vGPU holds the GPU's
// turn. Both are words on the GPU's pacing board (core/pacing_board.h),
// which every vGPU's processes on the GPU can write: a tenant could write a
// neighbour's tokens deep into debt, or write itself into the turn for
// good, and the neighbour's launches then waited for tokens or turns that
// never came (up to a minute per launch for tokens, the gate's 2 s
// fail-open bound for turns). No process can tell forged words from real
// ones.
//
// So each process bounds those waits by the share of the time it is owed:
// its cap, and where it waits for turns, also half its floor (its weight's
// share among the vGPUs the node's roster lists at its level, halved for
// the slack honest turns need: core::OwedTurnPermille), whichever is less.
// Over any stretch of wall time, an honest process that is owed a share `g`
// waits at most (1 - g) of it, plus what paying back a debt costs: a debt
// of D takes D / cap of waiting, of which the cap's (1 - cap) share covers
// all but D. Debts come from a turn's overshoot (its drain, bounded by the
// drain timeout), which the buffer covers
// (core::GateWaitBufferNs), and from work of the process's own that ran on
// past its turn, which it sees for itself (Vouch); a run-on nobody vouches
// for (a killed process's, charged for up to the member timeout) may
// exceed the buffer, and the process's launches then go ahead for a while.
// So the budget earns (1 - 7/8 g) of every nanosecond, banks at most
// `buffer_ns` of it, and adds what was vouched; each nanosecond a launch
// waits for tokens or another's turn spends one. Once spent, launches go
// ahead (fail open) until it has earned a turn's worth again
// (`resume_ns`): in runs, not one launch at a time (a launch that waits at
// all sleeps tens of microseconds, so a victim of small kernels that
// waited a little before each launch kept 0.55 of its capped rate on an
// H200, where the budget leaves it seven eighths), and the caller says so
// once.
//
// A forger can therefore keep a process waiting for at most the buffer
// once and (1 - 7/8 g) of its time after that: the process keeps seven
// eighths of the time to launch that its share gives it. The eighth is
// slack for what an honest process cannot see: charges settled by others,
// turns that come in quanta, a lower level's starvation-guard turns, and
// looks that come late on a loaded machine.
// A sibling process's run-on is not vouched here: a vGPU of several
// processes whose queues run on for longer than the buffer may see its other
// processes' launches go ahead (docs/design.md, "Forged board entries").
//
// Wait time is partitioned among threads as core/hold_budget.h's held time
// is: eight threads waiting at once spend each nanosecond once.
//
// Thread-safe: any number of threads call Allows, Spend and Vouch at once;
// lock-free, allocation-free and syscall-free (the launch path's gate).
#ifndef GPUSLICE_CORE_GATE_WAIT_BUDGET_H_
#define GPUSLICE_CORE_GATE_WAIT_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::core {

// The share of the time, in permille, a process is owed: its vGPU's cap
// (`cap_pct`, 0 for none) and the share of the turns it is owed
// (`owed_turn_permille`: core::OwedTurnPermille, 0 for none), whichever is
// less. 0: neither, and the budget never runs out.
constexpr uint32_t OwedPermille(uint32_t cap_pct, uint32_t owed_turn_permille) {
  const uint32_t cap = cap_pct * 10;
  if (cap == 0 || owed_turn_permille == 0) return cap + owed_turn_permille;
  return cap < owed_turn_permille ? cap : owed_turn_permille;
}

class GateWaitBudget {
 public:
  // `owed_permille` 1..1000: the share of the time the process is owed
  // (0: it waits for nothing the budget covers, which never runs out);
  // `buffer_ns` the most credit banked while no launch waits; `resume_ns`
  // the credit a spent budget needs before a launch waits again. Called at
  // every tick: a cap may change while the process runs (the daemon's
  // power-cap budget), and a floor with the roster.
  void Configure(uint32_t owed_permille, uint64_t buffer_ns, uint64_t resume_ns);
  // Work of this process ran on past its vGPU's turn for `ns`: a debt its
  // cap will make it wait for, whoever on the board charged it.
  void Vouch(uint64_t ns);
  // Whether a launch may start to wait at `now_ns`.
  bool Allows(uint64_t now_ns) const;
  // A launch waited from `from_ns` to `now_ns`. Spends what no other
  // thread's wait has spent yet; false once the budget is spent (the wait
  // ends).
  bool Spend(uint64_t from_ns, uint64_t now_ns);
  // What waits may still take at `now_ns` (for tests).
  uint64_t CreditNs(uint64_t now_ns) const;

 private:
  // The wall time it takes to earn `ns` of credit.
  uint64_t AtRate(uint64_t ns) const;
  // Credit earned per `ns` of wall time.
  uint64_t Earned(uint64_t ns) const;

  std::atomic<uint32_t> owed_permille_{0};
  std::atomic<uint64_t> buffer_ns_{0};
  std::atomic<uint64_t> resume_ns_{0};
  // When the earned credit was (or will be) zero: credit at `now` is
  // (now - empty_at) at the earning rate, at most buffer_ns (GCRA's
  // theoretical arrival time). 0: full.
  std::atomic<uint64_t> empty_at_ns_{0};
  std::atomic<uint64_t> vouched_ns_{0};  // spent once the earned credit is
  std::atomic<uint64_t> counted_until_ns_{0};
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_GATE_WAIT_BUDGET_H_
