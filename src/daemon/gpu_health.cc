#include "daemon/gpu_health.h"

#include <spdlog/spdlog.h>

#include <ctime>

namespace gpuslice::daemon {
namespace {

std::string Iso(GpuHealth::Clock::time_point t) {
  const std::time_t s = GpuHealth::Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void MarkUnhealthy(GpuHealth::State& s, uint64_t xid, GpuHealth::Clock::time_point at) {
  s.healthy = false;
  s.last_xid = xid;
  s.last_critical = at;
  s.detail = "XID " + std::to_string(xid) + " at " + Iso(at);
}

}  // namespace

bool IsCriticalXid(uint64_t xid) {
  // The NVIDIA device plugin's application XIDs (its health check's
  // skipped list): faults of one application, after which the GPU works.
  switch (xid) {
    case 13: case 31: case 43: case 45: case 68: case 109: return false;
    default: return true;
  }
}

void GpuHealth::OnXid(uint32_t gpu_index, uint64_t xid, Clock::time_point at) {
  {
    port::MutexLock lock(&mu_);
    State& s = gpus_[gpu_index];
    ++s.xid_counts[xid];
    if (!IsCriticalXid(xid)) {
      spdlog::info("GPU {}: XID {} (an application error; the GPU stays healthy)", gpu_index, xid);
      return;
    }
    if (s.healthy) spdlog::warn("GPU {}: critical XID {}; marked unhealthy", gpu_index, xid);
    MarkUnhealthy(s, xid, at);
  }
  Changed();
}

void GpuHealth::Restore(uint32_t gpu_index, uint64_t xid, Clock::time_point at) {
  port::MutexLock lock(&mu_);
  spdlog::warn("GPU {}: unhealthy since before this daemon started (XID {}); clear it with gpuslice devices "
               "--clear-health once the GPU is reset",
               gpu_index, xid);
  MarkUnhealthy(gpus_[gpu_index], xid, at);
}

void GpuHealth::Tick(Clock::time_point now) {
  if (quiet_period_.count() == 0) return;
  bool changed = false;
  {
    port::MutexLock lock(&mu_);
    for (auto& [gpu, s] : gpus_) {
      if (!s.healthy && now - s.last_critical >= quiet_period_) {
        spdlog::info("GPU {}: no critical XID for {} s since XID {}; healthy again", gpu, quiet_period_.count(),
                     s.last_xid);
        s.healthy = true;
        s.detail.clear();
        changed = true;
      }
    }
  }
  if (changed) Changed();
}

void GpuHealth::Clear(const std::vector<uint32_t>& gpu_indices) {
  bool changed = false;
  {
    port::MutexLock lock(&mu_);
    for (auto& [gpu, s] : gpus_) {
      bool named = gpu_indices.empty();
      for (uint32_t i : gpu_indices) named = named || i == gpu;
      if (!named || s.healthy) continue;
      spdlog::info("GPU {}: health cleared by the operator (last XID {})", gpu, s.last_xid);
      s.healthy = true;
      s.detail.clear();
      changed = true;
    }
  }
  if (changed) Changed();
}

void GpuHealth::Changed() {
  if (!on_change_) return;
  port::MutexLock lock(&change_mu_);
  on_change_(Snapshot());
}

std::map<uint32_t, GpuHealth::State> GpuHealth::Snapshot() const {
  port::MutexLock lock(&mu_);
  return gpus_;
}

}  // namespace gpuslice::daemon
