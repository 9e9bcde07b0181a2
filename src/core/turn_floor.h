// turn_floor.h — a best-effort vGPU's own check that the pacing board gives
// it the turns it is owed.
//
// Under backfill turns (core/pacing_board.h) a vGPU that does not hold the
// turn runs its channel groups at the short backfill slice, so the holder
// gets the GPU whenever it has work. That makes the turn word, and the
// virtual times that choose the next holder, worth forging: every process on
// the GPU can write them, and a tenant that keeps its own `vtime` low (or
// writes itself into the turn) holds every turn, while its victims backfill
// at 50 µs beside a GPU-bound holder and get a percent or two of the GPU.
// The roster (core/board_roster.h) cannot stop that: those words are the
// board's working state, written by everyone.
//
// So each process watches what it gets. Its *floor* is the part of the turn
// time its vGPU is owed whatever the others do: its weight over the sum of
// the weights of every best-effort vGPU the roster lists at its level on
// the GPU (idle ones included, so the floor is a lower bound), and none when
// a higher best-effort level is listed (a lower level may rightly get only
// the starvation guard's turns). While its vGPU wants the GPU (it holds the
// turn, or it has work queued), the compute thread samples whether it holds
// the turn. (Counting only time with work queued would read a launch-bound
// vGPU as starved: its queue is empty most of its own turns and full behind
// the holder's work in everyone else's.) Each sample stands for the time
// since the previous one (the compute thread looks four times as often while
// it holds the turn, so counting samples would overstate its turns). Over a
// window of such time, a vGPU that held the turn less than half its floor is
// *starved*: its channel groups
// then keep the policy's slice (the share-proportional one the schedule
// writes into `limits`) instead of the backfill slice, which bounds what
// turn forgery can take from it to what hardware time-slicing would give,
// until a window shows it getting its turns again.
//
// Not thread-safe: one watch per device, fed by the compute thread only;
// `starved()` may be read from any thread.
#ifndef GPUSLICE_CORE_TURN_FLOOR_H_
#define GPUSLICE_CORE_TURN_FLOOR_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/board_roster.h"

namespace gpuslice::core {

// `self`'s floor on GPU `gpu`, in permille of the turn time; 0 when `self`
// is not listed there, is latency-critical, or a higher best-effort level is
// listed.
uint32_t TurnFloorPermille(const std::vector<RosterEntry>& roster, const uint8_t gpu[16], uint64_t self);

// The share of the turn time, in permille, that `self` is owed on GPU `gpu`
// whatever the others write on the board while it waits for turns
// (core/gate_wait_budget.h): half its floor, as the starved verdict below
// (an honest vGPU's turns fall short of its floor for a while: idle
// holders keep their turn through short pauses, turns come in quanta),
// less what the capped latency-critical vGPUs listed there may take (they
// take turns, and win each by their level; an uncapped one takes none).
// 0 where it has no floor.
uint32_t OwedTurnPermille(const std::vector<RosterEntry>& roster, const uint8_t gpu[16], uint64_t self);

class TurnFloorWatch {
 public:
  // Time the vGPU wanted the GPU, per verdict.
  static constexpr uint64_t kWindowNs = 1'000'000'000;
  // The most one sample stands for: a compute thread descheduled longer than
  // this did not see what happened meanwhile.
  static constexpr uint64_t kMaxSampleNs = 10'000'000;

  void SetFloor(uint32_t permille) { floor_permille_ = permille; }
  // One observation, standing for the `elapsed_ns` since the previous one:
  // whether the vGPU wants the GPU (holds the turn or has work queued; other
  // time is not counted), and whether it holds the turn. Returns true when
  // it ends a window whose verdict differs from the last one.
  bool Sample(bool wants_gpu, bool holds_turn, uint64_t elapsed_ns);
  bool starved() const { return starved_.load(std::memory_order_relaxed); }
  uint32_t floor_permille() const { return floor_permille_; }
  // What the last window held, in permille of its time.
  uint32_t held_permille() const { return held_permille_; }

 private:
  uint32_t floor_permille_ = 0;
  uint64_t wanted_ns_ = 0;
  uint64_t held_ns_ = 0;
  uint32_t held_permille_ = 0;
  std::atomic<bool> starved_{false};
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_TURN_FLOOR_H_
