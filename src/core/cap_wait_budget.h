// cap_wait_budget.h — how long a capped process's launches may wait for its
// own cap's tokens.
//
// A vGPU's compute cap is a token bucket in its row of the GPU's pacing
// board (core/pacing_board.h, BoardMember::cap_tokens_ns), and a capped
// launch waits at the gate while the row says the tokens are short. The
// board is writable by every vGPU's processes on the GPU, so a tenant can
// write a neighbour's tokens deep into debt: the neighbour's launches then
// waited for tokens that never came, up to a minute per launch. No process
// can tell forged tokens from real ones: both are words on the board.
//
// So each process bounds its own cap waits by what its cap explains. Over
// any stretch of wall time, an honest capped vGPU waits for its tokens at
// most (1 - cap) of it, plus what paying back a debt costs: a debt of D
// takes D / cap of waiting, of which the cap's (1 - cap) share covers all
// but D. Debts come from a turn's overshoot (its drain, bounded by the
// drain timeout), which the buffer covers (core::CapWaitBufferNs), and from
// work of the process's own that ran on past its turn, which it sees for
// itself (Vouch); a run-on nobody vouches for (a killed process's, charged
// for up to the member timeout) may exceed the buffer, and the process's
// launches then go ahead for a while. So the budget earns (1 - 7/8 cap)
// of every nanosecond, banks at most `buffer_ns` of it, and adds what was
// vouched; each nanosecond a launch waits for its own cap spends one. Once
// spent, launches go ahead of the cap (fail open) until it has earned a
// turn's worth again (`resume_ns`): in runs, not one launch at a time (a
// launch that waits at all sleeps tens of microseconds, so a victim of
// small kernels that waited a little before each launch kept 0.55 of its
// capped rate on an H200, where the budget leaves it seven eighths), and the
// caller says so once.
//
// A forger can therefore keep a capped process waiting for at most the
// buffer once and (1 - 7/8 cap) of its time after that: the process keeps
// seven eighths of the time to launch that its cap gives it. The eighth is
// slack for what an honest process cannot see: charges settled by others,
// and looks that come late on a loaded machine.
// A sibling process's run-on is not vouched here: a vGPU of several
// processes whose queues run on for longer than the buffer may see its other
// processes' launches go ahead (docs/design.md, "Forged board entries").
//
// Wait time is partitioned among threads as core/hold_budget.h's held time
// is: eight threads waiting at once spend each nanosecond once.
//
// Thread-safe: any number of threads call Allows, Spend and Vouch at once;
// lock-free, allocation-free and syscall-free (the launch path's gate).
#ifndef GPUSLICE_CORE_CAP_WAIT_BUDGET_H_
#define GPUSLICE_CORE_CAP_WAIT_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::core {

class CapWaitBudget {
 public:
  // `cap_pct` 1..100 (0: uncapped, the budget never runs out); `buffer_ns`
  // the most credit banked while no launch waits; `resume_ns` the credit a
  // spent budget needs before a launch waits again. Called at every tick: a
  // cap may change while the process runs (the daemon's power-cap budget).
  void Configure(uint32_t cap_pct, uint64_t buffer_ns, uint64_t resume_ns);
  // Work of this process ran on past its vGPU's turn for `ns`: a debt its
  // cap will make it wait for, whoever on the board charged it.
  void Vouch(uint64_t ns);
  // Whether a launch may start to wait for its own cap at `now_ns`.
  bool Allows(uint64_t now_ns) const;
  // A launch waited for its own cap from `from_ns` to `now_ns`. Spends what
  // no other thread's wait has spent yet; false once the budget is spent
  // (the wait ends).
  bool Spend(uint64_t from_ns, uint64_t now_ns);
  // What waits for its cap may still take at `now_ns` (for tests).
  uint64_t CreditNs(uint64_t now_ns) const;

 private:
  // The wall time it takes to earn `ns` of credit.
  uint64_t AtRate(uint64_t ns) const;

  std::atomic<uint32_t> cap_pct_{0};
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

#endif  // GPUSLICE_CORE_CAP_WAIT_BUDGET_H_
