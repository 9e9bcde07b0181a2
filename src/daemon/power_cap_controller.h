// power_cap_controller.h — the rule that turns a vGPU's measured power into
// the GPU-time budget that holds it at or below its power cap.
//
// A power cap (`--power-cap WATTS`, per GPU) is enforced with the same token
// bucket as `--compute-cap`: the daemon writes min(user's compute cap,
// budget) into the vGPU's limits as its compute cap, and the interposer's
// pacer holds the vGPU's GPU time to it (docs/design.md, "Power caps"). This
// class decides the budget, one (vGPU, GPU) at a time, from the samples the
// daemon hands in: each covers the time since the previous one and gives
// the vGPU's GPU time and attributed energy in it (gpu_usage_meter.h), so
// its watts W and its busy fraction f over the evidence, and its draw per
// GPU-second W / f. With P the cap, B the budget in force and C the ceiling
// (the user's compute cap, or 100):
//   - evidence is what was measured since B was set, less the first sample
//     (it straddles the change, and NVML's samples and the pacer's bucket
//     lag), and at most the newest kMaxEvidence; nothing is decided on less
//     than kMinEvidence;
//   - W > P: multiplicative decrease, at once, to
//     min(B * P / W, fit) * kMargin, at least 1 below B (fit: the budget
//     at which the vGPU, running all of it, draws P);
//   - W < kRaiseBelow * P, and B has held for kRaiseHold: additive increase
//     by kRaiseStepPct, never past the fit nor C;
//   - in between: hold (the hysteresis band), and with no GPU time
//     measured: hold (its draw per GPU-second is unknown, and raising blind
//     would let its next burst run over the cap);
//   - always within [kFloorPct, C]: elastic toward zero, never above C.
//
// Pure: no clock, no I/O; time comes in with each call. Not thread-safe: one
// caller (the daemon's housekeeping thread, power_cap_enforcer.h).
// Allocates (one map entry per capped vGPU and GPU).
#ifndef GPUSLICE_DAEMON_POWER_CAP_CONTROLLER_H_
#define GPUSLICE_DAEMON_POWER_CAP_CONTROLLER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace gpuslice::daemon {

// What the controller knows of one vGPU on one GPU now.
struct PowerCapTarget {
  double cap_watts = 0;      // P, > 0
  uint32_t ceiling_pct = 100;  // C: the user's compute cap, 100 when none
  uint32_t budget_pct = 0;   // B in force (1..100); 0: none yet, start at C
};

// One measurement interval of that vGPU on that GPU.
struct PowerSample {
  double seconds = 0;         // the time it covers
  double gpu_seconds = 0;     // the vGPU's GPU time in it
  double energy_seconds = 0;  // the part of `seconds` with a known device energy
  double joules = 0;          // the vGPU's attributed energy over energy_seconds
};

class PowerCapController {
 public:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<std::string, uint32_t>;  // (vGPU, GPU index)

  static constexpr double kMargin = 0.95;       // a decrease aims 5% under the cap
  static constexpr double kRaiseBelow = 0.85;   // raise only below 85% of the cap
  static constexpr uint32_t kRaiseStepPct = 3;  // per raise
  static constexpr Clock::duration kRaiseHold = std::chrono::seconds(3);
  static constexpr double kMinEvidenceSeconds = 1.5;
  static constexpr double kMaxEvidenceSeconds = 6;
  static constexpr double kMinBusyFraction = 0.005;  // below: no GPU time worth judging
  static constexpr uint32_t kFloorPct = 1;  // the token bucket's resolution; 0 would mean "no cap"

  // Adds `sample` to the key's evidence and returns the budget to hold from
  // `now` on, in kFloorPct..target.ceiling_pct. A budget in force that is
  // not the one this controller last returned (a daemon restart, a `set`)
  // starts the evidence afresh.
  uint32_t Update(const Key& key, const PowerCapTarget& target, const PowerSample& sample, Clock::time_point now);

  // Drops the state of every key not in `live` (vGPUs gone or uncapped).
  void Retain(const std::set<Key>& live);

 private:
  struct State {
    uint32_t budget_pct = 0;  // what Update last returned
    Clock::time_point since;  // when it was first returned
    bool settled = false;     // the first sample after the change was dropped
    std::deque<PowerSample> evidence;
  };
  std::map<Key, State> states_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_POWER_CAP_CONTROLLER_H_
