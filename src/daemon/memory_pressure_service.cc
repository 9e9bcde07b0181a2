#include "daemon/memory_pressure_service.h"

#include <spdlog/spdlog.h>

#include <set>
#include <vector>

#include "node/suspend_record.h"

namespace gpuslice::daemon {

MemoryPressureService::MemoryPressureService(node::VgpuManager* manager, FreeMemory free_memory,
                                             node::MemoryPressureOptions options, std::chrono::milliseconds interval,
                                             bool start_thread)
    : manager_(manager), free_memory_(std::move(free_memory)), interval_(interval), policy_(options) {
  if (start_thread) thread_ = std::thread([this] { Loop(); });
}

MemoryPressureService::~MemoryPressureService() {
  {
    port::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void MemoryPressureService::Loop() {
  port::MutexLock lock(&mu_);
  while (!stop_) {
    lock.Unlock();
    Pass();
    lock.Lock();
    cv_.WaitFor(&mu_, interval_, [this] {
      mu_.AssertHeld();
      return stop_;
    });
  }
}

node::MemoryPressurePolicy::Decision MemoryPressureService::Pass() {
  // Most passes find nothing to do: a scan of the ledgers says so without
  // a view of every vGPU (which costs ten times as much: docs/benchmarks.md,
  // "Memory overcommit"). Passes that may resume or adopt read the views.
  const auto now_steady = node::MemoryPressurePolicy::Clock::now();
  if (!policy_.HasSuspended() && now_steady < next_full_pass_ && !manager_->AnyMemoryWaits()) return {};
  next_full_pass_ = now_steady + kFullPassInterval;
  std::vector<node::VgpuView> views;
  if (!manager_->List("", &views).ok()) return {};
  // vGPUs the policy suspended that are gone, or that an operator resumed,
  // are no longer the policy's to resume.
  bool ours_suspended = false;
  for (const node::VgpuView& v : views) {
    // One suspended for memory by an earlier daemon is this one's to resume.
    if (v.suspend_state == "suspended" && v.suspended_by == node::kSuspendedByMemoryPressure) policy_.Adopt(v.name);
    if (!policy_.SuspendedByPolicy(v.name)) continue;
    if (v.suspend_state == "running")
      policy_.Forget(v.name);
    else
      ours_suspended = true;
  }
  if (!ours_suspended && !node::HasMemoryWaits(views)) return {};
  const auto now = node::MemoryPressurePolicy::Clock::now();
  node::MemoryPressurePolicy::Decision d = policy_.Decide(views, free_memory_(), now);
  for (const auto& refusal : d.refuse) {
    spdlog::info(
        "vGPU '{}' asked for {} bytes on a full GPU, and no vGPU of a lower level may be suspended for "
        "it (none is --suspendable, or all together hold too little): its allocation fails",
        refusal.vgpu, refusal.wait.bytes);
    (void)manager_->AnswerMemoryWait(refusal.vgpu, refusal.wait);
  }
  for (const std::string& name : d.suspend) {
    node::VgpuView after;
    const node::ApiStatus s = manager_->Suspend({name, std::nullopt, node::kSuspendedByMemoryPressure}, &after);
    if (s.ok()) {
      policy_.Suspended(name, node::MemoryPressurePolicy::Clock::now());
      spdlog::info("suspended vGPU '{}' ({} bytes to host memory) to make room for a higher level", name,
                   after.suspended_bytes);
    } else {
      spdlog::warn("could not suspend vGPU '{}' to make room for a higher level: {}", name, s.message());
    }
  }
  for (const std::string& name : d.resume) {
    node::VgpuView after;
    const node::ApiStatus s = manager_->Resume(name, &after);
    if (s.ok()) {
      policy_.Resumed(name, node::MemoryPressurePolicy::Clock::now());
      spdlog::info("resumed vGPU '{}': its GPUs have room again", name);
    } else {
      spdlog::warn("could not resume vGPU '{}' after a suspend for memory: {}", name, s.message());
    }
  }
  return d;
}

}  // namespace gpuslice::daemon
