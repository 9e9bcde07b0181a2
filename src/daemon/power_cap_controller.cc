#include "daemon/power_cap_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpuslice::daemon {

uint32_t NextPowerBudget(const PowerBudgetInput& in) {
  const uint32_t ceiling = in.user_cap_pct == 0 ? 100 : in.user_cap_pct;
  const uint32_t current = in.current_pct == 0 ? ceiling : std::min(in.current_pct, ceiling);
  const auto clamp = [ceiling](double pct) {
    return static_cast<uint32_t>(std::clamp(std::floor(pct), 1.0, static_cast<double>(ceiling)));
  };
  // No (or too little) GPU time: its watts per GPU-second are unknown, and
  // it draws nothing worth capping. Keep the budget for when it runs again.
  if (in.window_seconds <= 0 || in.gpu_seconds < kMinBusyFraction * in.window_seconds || in.joules <= 0) {
    return current;
  }
  const double watts = in.joules / in.window_seconds;
  const double busy_watts = in.joules / in.gpu_seconds;
  const double fit = 100.0 * in.cap_watts / busy_watts * kPowerMargin;
  if (watts > in.cap_watts) {
    return clamp(std::min(fit, static_cast<double>(current) * in.cap_watts / watts));
  }
  return clamp(std::min(fit, static_cast<double>(current + kRaiseStepPct)));
}

void PowerCapController::Pass() {
  std::vector<node::VgpuView> views;
  if (!manager_->List("", &views).ok()) return;
  bool any = false;
  for (const auto& v : views) any = any || v.power_cap_watts.has_value();
  if (!any) return;  // a node without power caps costs one listing a second
  const GpuUsageMeter::Window window = meter_->Recent(window_us_);
  const auto at = [](const auto& map, const auto& key) {
    auto it = map.find(key);
    return it != map.end() ? it->second : 0.0;
  };
  for (const auto& v : views) {
    if (!v.power_cap_watts || !v.corrupt.empty()) continue;
    std::vector<uint32_t> budgets;
    bool changed = false;
    for (const auto& d : v.devices) {
      PowerBudgetInput in;
      in.cap_watts = *v.power_cap_watts;
      in.user_cap_pct = d.compute_cap_pct;
      in.current_pct = d.power_budget_pct;
      if (d.gpu_index) {
        in.window_seconds = at(window.seconds, *d.gpu_index);
        in.gpu_seconds = at(window.gpu_seconds, std::make_pair(*d.gpu_index, v.name));
        in.joules = at(window.joules, std::make_pair(*d.gpu_index, v.name));
      }
      const uint32_t next = NextPowerBudget(in);
      changed = changed || next != d.power_budget_pct;
      budgets.push_back(next);
    }
    if (!changed) continue;
    if (node::ApiStatus s = manager_->SetPowerBudget(v.name, budgets); !s.ok()) {
      spdlog::warn("power cap of vGPU '{}' not applied: {}", v.name, s.message());
    }
  }
}

}  // namespace gpuslice::daemon
