#include "daemon/utilization_sampler.h"

#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>

#include "daemon/busy_split.h"

namespace gpuslice::daemon {
namespace {

// NVML stamps samples with the CPU's wall clock, in µs.
uint64_t WallMicros() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<uint64_t>(tv.tv_sec) * 1'000'000 + static_cast<uint64_t>(tv.tv_usec);
}

// A sample covers at most this much time: a process seen again after a
// long silence (NVML keeps a bounded history) is not credited for all of it.
constexpr uint64_t kMaxSampleSpanUs = 1'000'000;

}  // namespace

std::optional<double> UtilizationSampler::DeviceBusySeconds(uint32_t index, uint64_t pass_start_us) {
  auto samples = nvml_->DeviceUtilizations(index, last_device_us_[index]);
  if (!samples.ok()) {
    if (!warned_device_) {
      spdlog::warn(
          "GPU busy time unavailable, so vGPUs sharing a GPU are measured by NVML's per-process samples "
          "alone: {}",
          samples.status().message());
    }
    warned_device_ = true;
    return std::nullopt;
  }
  // None since the last pass (NVML_ERROR_NOT_FOUND): unknown, not idle.
  if (samples.value().empty()) return std::nullopt;
  double busy = 0;
  for (const auto& s : samples.value()) {
    uint64_t& previous = last_device_us_[index];
    const uint64_t from = previous != 0 ? previous : pass_start_us;
    const uint64_t span = s.timestamp_us > from ? std::min(s.timestamp_us - from, kMaxSampleSpanUs) : 0;
    previous = std::max(previous, s.timestamp_us);
    busy += static_cast<double>(span) / 1e6 * s.percent / 100.0;
  }
  return busy;
}

void UtilizationSampler::Sample() {
  // pid -> (vGPU, device index) per GPU index.
  std::map<uint32_t, std::map<uint32_t, std::pair<std::string, uint32_t>>> by_gpu;
  for (const auto& view_pid : manager_->ProcessesInDaemonNamespace()) {
    by_gpu[view_pid.gpu_index][view_pid.pid] = {view_pid.vgpu, view_pid.device};
  }
  std::map<std::string, std::vector<std::optional<double>>> ratios;
  std::vector<node::VgpuView> views;
  if (manager_->List("", &views).ok()) {
    for (const auto& v : views) ratios[v.name].assign(v.devices.size(), std::nullopt);
  }
  const uint64_t now_us = WallMicros();
  last_pass_.clear();
  for (const auto& gpu : manager_->devices().gpus) {
    const uint64_t pass_start = last_pass_us_.count(gpu.index) ? last_pass_us_[gpu.index] : now_us;
    last_pass_us_[gpu.index] = now_us;
    GpuUsageMeter::Interval interval;
    interval.gpu_index = gpu.index;
    interval.start_us = pass_start;
    interval.end_us = now_us;
    interval.energy_mj = nvml_->TotalEnergyMillijoules(gpu.index);
    if (!interval.energy_mj) interval.power_mw = nvml_->PowerMilliwatts(gpu.index);

    auto samples = nvml_->ProcessUtilizations(gpu.index, last_seen_us_[gpu.index]);
    if (!samples.ok()) {
      if (!warned_) spdlog::warn("measured compute shares unavailable: {}", samples.status().message());
      warned_ = true;
      if (meter_ != nullptr) meter_->Add(interval);
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
    std::vector<port::ProcessUtilization> sorted = samples.value();
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.timestamp_us < b.timestamp_us; });
    const auto& owners = by_gpu[gpu.index];
    std::map<std::pair<std::string, uint32_t>, double> seconds;  // (vGPU, device index) -> GPU-seconds
    SampledPass& pass = last_pass_.emplace_back();
    pass.gpu_index = gpu.index;
    pass.start_us = pass_start;
    pass.end_us = now_us;
    for (const auto& s : sorted) {
      last_seen_us_[gpu.index] = std::max(last_seen_us_[gpu.index], s.timestamp_us);
      uint64_t& previous = last_sample_us_[{gpu.index, s.pid}];
      const uint64_t from = previous != 0 ? previous : pass_start;
      const uint64_t span = s.timestamp_us > from ? std::min(s.timestamp_us - from, kMaxSampleSpanUs) : 0;
      previous = std::max(previous, s.timestamp_us);
      const double ran = static_cast<double>(span) / 1e6 * static_cast<double>(s.sm_percent) / 100.0;
      pass.pid_seconds[s.pid] += ran;
      auto it = owners.find(s.pid);
      if (it == owners.end()) {
        interval.gpu_seconds[""] += ran;  // a process of no vGPU (or of a container)
        continue;
      }
      seconds[it->second] += ran;
      interval.gpu_seconds[it->second.first] += ran;
    }
    // The GPU's busy time, split by what the boards saw (paced vGPUs that
    // shared it) and the samples (busy_split.h).
    const std::map<std::string, double> board =
        boards_ != nullptr ? boards_->Take(gpu.index) : std::map<std::string, double>{};
    const std::optional<double> busy = DeviceBusySeconds(gpu.index, pass_start);
    if (busy) {
      interval.gpu_seconds = SplitBusyTime(*busy, board, interval.gpu_seconds);
      seconds.clear();
      for (const auto& v : views) {
        const auto it = interval.gpu_seconds.find(v.name);
        if (it == interval.gpu_seconds.end()) continue;
        for (uint32_t i = 0; i < v.devices.size(); ++i) {
          if (v.devices[i].gpu_index == gpu.index) seconds[{v.name, i}] = it->second;
        }
      }
    }
    const double window = static_cast<double>(now_us - pass_start) / 1e6;
    for (const auto& [where, s] : seconds) {
      auto& slot = ratios[where.first];
      if (slot.size() <= where.second) slot.resize(where.second + 1);
      if (window > 0) slot[where.second] = std::min(1.0, slot[where.second].value_or(0.0) + s / window);
    }
    if (meter_ != nullptr) meter_->Add(interval);
  }
  manager_->SetMeasuredRatios(ratios);
}

}  // namespace gpuslice::daemon
