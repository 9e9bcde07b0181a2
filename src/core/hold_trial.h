// hold_trial.h — whether a latency-critical process's automatic hold
// (interposer/lc_activity.h) pays, found by trying it both ways.
//
// The automatic hold keeps best-effort launches back during an eager LC's
// bursts, so that the LC's gaps do not hand the GPU to a busy neighbour.
// What it buys the LC depends on the GPU and the neighbour, and it always
// costs the neighbour. On an H100 it bought the matrix's eager LC about 30%
// of its p50; on an H200, over ten runs, nothing, while a launch-bound
// best-effort job beside it lost 10-24 points of its rate
// (docs/benchmarks.md, runs 2, 15, 56 and 57). No constant serves both, so
// each LC process measures its own requests with the hold on and off, in
// alternating epochs, and keeps the hold only where it shortens them.
//
// A trial: epochs of `epoch_bursts` requests (bursts of launches with a
// synchronisation, as lc_activity measures them), the hold on in even
// epochs and off in odd ones; the first `settle_bursts_per_epoch` of each
// epoch are dropped (the neighbour's queue still reflects the last epoch).
// After `pairs` pairs, the median over pairs of (held p50 / unheld p50)
// decides: the hold is kept if that is at most 1 - `min_gain`, else dropped.
// Pairs, not pooled samples, so that a drift of the LC's own speed (the
// eager LC's p50 moved by up to 50% within one device call) falls on both
// arms alike. The verdict stands for `verdict_bursts` requests, then the
// trial runs again: the neighbours, and what the hold is worth, change.
// A request begun under one arm and measured in the next epoch is dropped.
//
// Until requests are measured at all (an LC that never synchronises, or
// whose requests are never apart by a pause), the hold stays on, as it was
// before trials: latency-critical work first.
//
// Thread-compatible: one thread (the LC process's compute thread) calls
// everything. No allocation after construction.
#ifndef GPUSLICE_CORE_HOLD_TRIAL_H_
#define GPUSLICE_CORE_HOLD_TRIAL_H_

#include <cstdint>

namespace gpuslice::core {

class HoldTrial {
 public:
  struct Options {
    uint32_t epoch_bursts = 16;            // measured requests per epoch
    uint32_t settle_bursts_per_epoch = 2;  // dropped at an epoch's start
    uint32_t pairs = 8;                    // on/off epoch pairs per trial
    // The hold is kept only if it shortens the LC's p50 by at least this
    // much: below it, a trial's pairs cannot tell a gain from noise, and the
    // neighbour's loss is certain.
    double min_gain = 0.05;
    uint32_t verdict_bursts = 2000;  // requests a verdict stands for
  };
  enum class Phase { kTrying, kHolding, kNotHolding };

  HoldTrial() : HoldTrial(Options{}) {}
  explicit HoldTrial(const Options& options);

  // Whether the hold is on now.
  bool HoldOn() const { return hold_on_; }
  Phase phase() const { return phase_; }
  // An epoch or verdict count that changes whenever HoldOn() may have:
  // a request is measured against the arm it began under.
  uint32_t arm_generation() const { return generation_; }

  // One request's latency (first launch to the end of its last
  // synchronisation), begun under `generation`. Returns true when this
  // note ended a trial (the caller logs the verdict).
  bool NoteRequest(uint32_t generation, uint64_t latency_ns);

  // The last trial's verdict, for the log: held and unheld p50 (the
  // medians of the epochs' p50s) and the median ratio over pairs.
  struct Verdict {
    uint64_t held_p50_ns = 0;
    uint64_t unheld_p50_ns = 0;
    double ratio = 0;
    uint32_t pairs = 0;
  };
  const Verdict& last_verdict() const { return verdict_; }

  // Back to a fresh trial (the LC's neighbours changed).
  void Restart();

 private:
  static constexpr uint32_t kMaxEpochBursts = 64;
  static constexpr uint32_t kMaxPairs = 32;
  void EndEpoch();
  void Decide();

  Options options_;
  Phase phase_ = Phase::kTrying;
  bool hold_on_ = true;
  uint32_t generation_ = 0;
  uint32_t epoch_ = 0;  // in this trial; even epochs hold
  uint32_t seen_ = 0;   // requests noted this epoch, settling ones included
  uint32_t count_ = 0;  // of them kept in epoch_samples_
  uint32_t verdict_left_ = 0;
  uint64_t epoch_samples_[kMaxEpochBursts] = {};
  uint64_t held_p50_[kMaxPairs] = {};
  uint64_t unheld_p50_[kMaxPairs] = {};
  uint32_t pairs_done_ = 0;
  Verdict verdict_;
};

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_HOLD_TRIAL_H_
