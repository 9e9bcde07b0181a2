#include "daemon/power_cap_enforcer.h"

#include <spdlog/spdlog.h>

#include <set>
#include <string>
#include <vector>

namespace gpuslice::daemon {
namespace {

template <typename Map, typename Key>
double At(const Map& map, const Key& key) {
  auto it = map.find(key);
  return it != map.end() ? it->second : 0.0;
}

}  // namespace

void PowerCapEnforcer::Pass(PowerCapController::Clock::time_point now) {
  GpuUsageMeter::Totals totals = meter_->totals();
  std::optional<GpuUsageMeter::Totals> last = std::move(last_);
  last_ = totals;
  std::vector<node::VgpuView> views;
  if (!manager_->List(only_vgpu_, &views).ok()) return;
  std::set<PowerCapController::Key> live;
  for (const auto& v : views) {
    if (!v.power_cap_watts || !v.corrupt.empty()) continue;
    std::vector<uint32_t> budgets;
    bool changed = false;
    for (const auto& d : v.devices) {
      PowerCapTarget target;
      target.cap_watts = *v.power_cap_watts;
      target.ceiling_pct = d.compute_cap_pct == 0 ? 100 : d.compute_cap_pct;
      target.budget_pct = d.power_budget_pct;
      PowerSample sample;
      uint32_t next = target.budget_pct;
      if (d.gpu_index) {
        const uint32_t gpu = *d.gpu_index;
        const auto key = std::make_pair(gpu, v.name);
        if (last) {
          // The measurement since the last pass: what the meter added.
          sample.seconds = At(totals.seconds, gpu) - At(last->seconds, gpu);
          sample.energy_seconds = At(totals.energy_seconds, gpu) - At(last->energy_seconds, gpu);
          sample.gpu_seconds = At(totals.gpu_seconds, key) - At(last->gpu_seconds, key);
          sample.joules = At(totals.joules, key) - At(last->joules, key);
        }
        live.insert({v.name, gpu});
        next = controller_.Update({v.name, gpu}, target, sample, now);
      }
      changed = changed || next != d.power_budget_pct;
      budgets.push_back(next);
    }
    if (!changed) continue;
    if (node::ApiStatus s = manager_->SetPowerBudget(v.name, budgets); !s.ok()) {
      spdlog::warn("power cap of vGPU '{}' not applied: {}", v.name, s.message());
    }
  }
  controller_.Retain(live);
}

}  // namespace gpuslice::daemon
