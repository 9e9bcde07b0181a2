#include "daemon/utilization_sampler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpuslice::daemon {

void UtilizationSampler::Sample() {
  // pid -> (vGPU, device index) per GPU index.
  std::map<uint32_t, std::map<uint32_t, std::pair<std::string, uint32_t>>> by_gpu;
  for (const auto& view_pid : manager_->ProcessesInDaemonNamespace()) {
    by_gpu[view_pid.gpu_index][view_pid.pid] = {view_pid.vgpu, view_pid.device};
  }
  std::map<std::string, std::vector<std::optional<double>>> ratios;
  std::vector<VgpuView> views;
  if (manager_->List("", &views).ok()) {
    for (const auto& v : views) ratios[v.name].assign(v.devices.size(), std::nullopt);
  }
  for (const auto& gpu : manager_->devices().gpus) {
    auto samples = nvml_->ProcessUtilizations(gpu.index, last_seen_us_[gpu.index]);
    if (!samples.ok()) {
      if (!warned_) spdlog::warn("measured compute shares unavailable: {}", samples.status().message());
      warned_ = true;
      continue;
    }
    // Known: every vGPU with a process on this GPU starts at 0.
    for (const auto& v : views) {
      for (size_t i = 0; i < v.devices.size(); ++i) {
        if (v.devices[i].gpu_index == gpu.index && !v.processes.empty()) {
          bool any_here = false;
          for (const auto& p : v.processes) any_here = any_here || p.same_pid_namespace;
          if (any_here) ratios[v.name][i] = 0.0;
        }
      }
    }
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> per_pid;  // pid -> (sum of sm%, samples)
    for (const auto& s : samples.value()) {
      last_seen_us_[gpu.index] = std::max(last_seen_us_[gpu.index], s.timestamp_us);
      auto& acc = per_pid[s.pid];
      acc.first += s.sm_percent;
      acc.second += 1;
    }
    const auto& owners = by_gpu[gpu.index];
    for (const auto& [pid, acc] : per_pid) {
      auto it = owners.find(pid);
      if (it == owners.end() || acc.second == 0) continue;  // not a process of any vGPU
      auto& slot = ratios[it->second.first];
      if (slot.size() <= it->second.second) slot.resize(it->second.second + 1);
      const double mean = static_cast<double>(acc.first) / static_cast<double>(acc.second) / 100.0;
      slot[it->second.second] = std::min(1.0, slot[it->second.second].value_or(0.0) + mean);
    }
  }
  manager_->SetMeasuredRatios(ratios);
}

}  // namespace gpuslice::daemon
