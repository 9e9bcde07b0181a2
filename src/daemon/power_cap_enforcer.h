// power_cap_enforcer.h — holds every power-capped vGPU to its cap: once a
// second, after the sampler's pass, it hands each (vGPU, GPU)'s newest
// measurement (the change of the meter's totals since the last pass) to the
// PowerCapController and writes the budgets it decides through
// VgpuManager::SetPowerBudget, which makes them the vGPU's effective compute
// cap (the pacer's token bucket; docs/design.md, "Power caps").
//
// Called from the daemon's housekeeping thread only. Takes the meter's and
// the manager's locks (through their calls), allocates, and writes a vGPU's
// limits when its budget changes. A node without power caps costs one
// listing per pass.
#ifndef GPUSLICE_DAEMON_POWER_CAP_ENFORCER_H_
#define GPUSLICE_DAEMON_POWER_CAP_ENFORCER_H_

#include <optional>
#include <string>

#include "daemon/gpu_usage_meter.h"
#include "daemon/power_cap_controller.h"
#include "node/vgpu_manager.h"

namespace gpuslice::daemon {

class PowerCapEnforcer {
 public:
  // Both must outlive the enforcer. `only_vgpu` (a standalone `gpuslice
  // run`'s own vGPU): that one alone is held; "": every capped vGPU.
  PowerCapEnforcer(const GpuUsageMeter* meter, node::VgpuManager* manager, std::string only_vgpu = "")
      : meter_(meter), manager_(manager), only_vgpu_(std::move(only_vgpu)) {}

  // One pass at `now` (steady clock): every capped vGPU's budget decided,
  // changed ones written.
  void Pass(PowerCapController::Clock::time_point now);

 private:
  const GpuUsageMeter* const meter_;
  node::VgpuManager* const manager_;
  const std::string only_vgpu_;
  PowerCapController controller_;
  std::optional<GpuUsageMeter::Totals> last_;  // the meter at the previous pass
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_POWER_CAP_ENFORCER_H_
