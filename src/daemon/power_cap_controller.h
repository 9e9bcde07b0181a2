// power_cap_controller.h — keeps each power-capped vGPU's attributed power
// (gpu_usage_meter.h) at or below its cap by tightening its GPU-time budget:
// the compute cap the interposer's pacer enforces (the `--compute-cap` token
// bucket, read from the vGPU's limits), set to min(user's cap, derived cap).
//
// Why a GPU-time budget works: the meter gives a vGPU the device's energy
// above the idle line in proportion to its GPU time, so a vGPU that runs a
// fraction f of the time draws busy_watts * f, where busy_watts is its
// attributed energy per GPU-second. The cap that holds it at P watts is
// f = P / busy_watts, whatever the vGPU's demand. The controller
// (docs/design.md, "Power caps") each pass, per vGPU and GPU, over a recent
// window:
//   - fit = P / busy_watts (with a 5% margin): the budget at which the vGPU,
//     running all of it, would draw just the cap;
//   - above the cap: decrease at once, multiplicatively,
//     to min(fit, current * P / watts) (the integral correction covers the
//     pacer's own error and a busy_watts that changes with the budget);
//   - at or below: increase additively (kRaiseStepPct per pass), never past
//     fit nor past the user's compute cap: elastic toward zero, never
//     deliberately above the cap;
//   - no GPU time in the window: no evidence, keep the budget.
//
// NextPowerBudget is pure. PowerCapController is called from the daemon's
// housekeeping thread only, after each sampler pass; it allocates and takes
// the manager's lock (through VgpuManager) for its writes.
#ifndef GPUSLICE_DAEMON_POWER_CAP_CONTROLLER_H_
#define GPUSLICE_DAEMON_POWER_CAP_CONTROLLER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "daemon/gpu_usage_meter.h"
#include "node/vgpu_manager.h"

namespace gpuslice::daemon {

struct PowerBudgetInput {
  double cap_watts = 0;        // > 0
  uint32_t user_cap_pct = 0;   // the user's --compute-cap; 0 = none (100)
  uint32_t current_pct = 0;    // the budget now in force; 0 = none yet (starts at the user's)
  double window_seconds = 0;   // the measurement window
  double gpu_seconds = 0;      // the vGPU's GPU time in it
  double joules = 0;           // its attributed energy in it
};

inline constexpr uint32_t kRaiseStepPct = 5;
inline constexpr double kPowerMargin = 0.95;
// Below this share of the window the vGPU's watts per GPU-second are noise.
inline constexpr double kMinBusyFraction = 0.005;

// The next compute budget, 1..ceiling (ceiling = the user's cap or 100).
uint32_t NextPowerBudget(const PowerBudgetInput& in);

class PowerCapController {
 public:
  // Both must outlive the controller.
  PowerCapController(const GpuUsageMeter* meter, node::VgpuManager* manager, uint64_t window_us = 5'000'000)
      : meter_(meter), manager_(manager), window_us_(window_us) {}

  // One pass over every power-capped vGPU; writes changed budgets.
  void Pass();

 private:
  const GpuUsageMeter* const meter_;
  node::VgpuManager* const manager_;
  const uint64_t window_us_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_POWER_CAP_CONTROLLER_H_
