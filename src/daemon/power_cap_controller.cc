#include "daemon/power_cap_controller.h"

#include <algorithm>
#include <cmath>

namespace gpuslice::daemon {
namespace {

uint32_t FloorPct(double pct) {
  if (!std::isfinite(pct) || pct <= 0) return 0;
  return pct >= 100 ? 100u : static_cast<uint32_t>(std::floor(pct));
}

}  // namespace

uint32_t PowerCapController::Update(const Key& key, const PowerCapTarget& target, const PowerSample& sample,
                                    Clock::time_point now) {
  const uint32_t ceiling = std::clamp(target.ceiling_pct, kFloorPct, 100u);
  const uint32_t in_force = target.budget_pct == 0 ? ceiling : std::clamp(target.budget_pct, kFloorPct, ceiling);
  State& s = states_[key];
  if (s.budget_pct != in_force) {
    // New, or changed by someone else: what was measured so far ran under
    // another budget and says nothing about this one.
    s = State{in_force, now, false, {}};
    return in_force;
  }
  if (!s.settled) {
    // This sample began before the budget did (and NVML's utilisation
    // samples and the pacer's bucket trail a change): not evidence.
    s.settled = true;
    return s.budget_pct;
  }
  if (sample.seconds > 0) s.evidence.push_back(sample);
  // The newest kMaxEvidenceSeconds: a load that changes is seen within it.
  double kept = 0;
  for (const PowerSample& e : s.evidence) kept += e.seconds;
  while (!s.evidence.empty() && kept - s.evidence.front().seconds >= kMaxEvidenceSeconds) {
    kept -= s.evidence.front().seconds;
    s.evidence.pop_front();
  }
  PowerSample sum;
  for (const PowerSample& e : s.evidence) {
    sum.seconds += e.seconds;
    sum.gpu_seconds += e.gpu_seconds;
    sum.energy_seconds += e.energy_seconds;
    sum.joules += e.joules;
  }
  const uint32_t budget = s.budget_pct;
  if (sum.seconds < kMinEvidenceSeconds || sum.energy_seconds < kMinEvidenceSeconds) return budget;
  const double busy = std::min(1.0, sum.gpu_seconds / sum.seconds);
  // Without GPU time its draw per GPU-second is unknown: hold, lest its
  // next burst run over the cap.
  if (busy < kMinBusyFraction) return budget;
  const double watts = sum.joules / sum.energy_seconds;  // W: attributed, over wall time
  const double busy_watts = watts / busy;                 // its draw per GPU-second
  // The budget at which the vGPU, running all of it, would draw the cap.
  const double fit = busy_watts > 0 ? 100.0 * target.cap_watts / busy_watts : 100.0;
  uint32_t next = budget;
  if (watts > target.cap_watts) {
    // Multiplicative: B * P / W is where it would have drawn P at the same
    // efficiency; the fit covers a vGPU that was not using all of B.
    const uint32_t aim = FloorPct(std::min(budget * target.cap_watts / watts, fit) * kMargin);
    next = std::max(kFloorPct, std::min(aim, budget - std::min(budget, 1u)));
  } else if (watts < kRaiseBelow * target.cap_watts && now - s.since >= kRaiseHold) {
    const uint32_t room = FloorPct(fit * kMargin);
    next = std::max(budget, std::min({budget + kRaiseStepPct, ceiling, room}));
  }
  if (next != budget) s = State{next, now, false, {}};
  return next;
}

void PowerCapController::Retain(const std::set<Key>& live) {
  for (auto it = states_.begin(); it != states_.end();) {
    it = live.contains(it->first) ? std::next(it) : states_.erase(it);
  }
}

}  // namespace gpuslice::daemon
