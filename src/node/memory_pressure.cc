#include "node/memory_pressure.h"

#include <algorithm>
#include <tuple>

namespace gpuslice::node {
namespace {

uint32_t Order(const VgpuView& v) { return core::LevelOrder(core::LevelWord(v.priority, v.priority_rank)); }

// The view's device on GPU `uuid`, or nullptr.
const VgpuDeviceView* DeviceOn(const VgpuView& v, const std::string& uuid) {
  for (const VgpuDeviceView& d : v.devices) {
    if (d.gpu_uuid == uuid) return &d;
  }
  return nullptr;
}

struct Request {
  const VgpuView* vgpu;
  core::MemoryWait wait;
  uint32_t order;
};

}  // namespace

bool HasMemoryWaits(const std::vector<VgpuView>& vgpus) {
  return std::any_of(vgpus.begin(), vgpus.end(), [](const VgpuView& v) { return !v.memory_waits.empty(); });
}

bool MemoryPressurePolicy::RecentlyResumed(const std::string& vgpu, Clock::time_point now) const {
  auto it = last_resumed_.find(vgpu);
  return it != last_resumed_.end() && now - it->second < options_.min_run_after_resume;
}

uint32_t MemoryPressurePolicy::SuspendsInLastMinute(Clock::time_point now) {
  while (!suspends_.empty() && now - suspends_.front() >= std::chrono::minutes(1)) suspends_.pop_front();
  return static_cast<uint32_t>(suspends_.size());
}

MemoryPressurePolicy::Decision MemoryPressurePolicy::Decide(const std::vector<VgpuView>& vgpus,
                                                            const std::map<std::string, uint64_t>& free_bytes,
                                                            Clock::time_point now) {
  Decision decision;
  // Requests by GPU, the highest level first: it is served first.
  std::map<std::string, std::vector<Request>> by_gpu;
  for (const VgpuView& v : vgpus) {
    if (!v.corrupt.empty() || v.suspend_state != "running") continue;
    for (const core::MemoryWait& w : v.memory_waits) {
      if (w.device >= v.devices.size()) continue;
      by_gpu[v.devices[w.device].gpu_uuid].push_back({&v, w, Order(v)});
    }
  }
  uint32_t budget =
      options_.max_suspends_per_minute - std::min(options_.max_suspends_per_minute, SuspendsInLastMinute(now));
  std::set<std::string> chosen;
  for (auto& [gpu, requests] : by_gpu) {
    auto free_it = free_bytes.find(gpu);
    if (free_it == free_bytes.end()) continue;
    std::stable_sort(requests.begin(), requests.end(),
                     [](const Request& a, const Request& b) { return a.order > b.order; });
    uint64_t free = free_it->second;
    for (const Request& r : requests) {
      if (r.wait.bytes <= free) {  // room already: its next retry succeeds
        free -= r.wait.bytes;
        continue;
      }
      const uint64_t needed = r.wait.bytes - free;
      // Candidates strictly below the requester, running, opted in.
      struct Candidate {
        const VgpuView* v;
        uint64_t bytes;
        bool waits_out;  // anti-thrash keeps it running for now
      };
      std::vector<Candidate> candidates;
      for (const VgpuView& v : vgpus) {
        if (!v.suspendable || v.priority != core::Priority::kBestEffort || !v.corrupt.empty() ||
            v.suspend_state != "running" || Order(v) >= r.order || chosen.count(v.name) > 0 ||
            !v.memory_waits.empty()) {
          continue;
        }
        const VgpuDeviceView* d = DeviceOn(v, gpu);
        if (d == nullptr || d->memory_used_bytes == 0) continue;
        candidates.push_back({&v, d->memory_used_bytes, RecentlyResumed(v.name, now)});
      }
      std::sort(candidates.begin(), candidates.end(), [&gpu](const Candidate& a, const Candidate& b) {
        const double ra = DeviceOn(*a.v, gpu)->compute_measured_ratio.value_or(0);
        const double rb = DeviceOn(*b.v, gpu)->compute_measured_ratio.value_or(0);
        return std::make_tuple(Order(*a.v), ra, ~a.bytes, a.v->name) <
               std::make_tuple(Order(*b.v), rb, ~b.bytes, b.v->name);
      });
      uint64_t all = 0, ready = 0;
      for (const Candidate& c : candidates) {
        all += c.bytes;
        if (!c.waits_out) ready += c.bytes;
      }
      if (all < needed) {  // nothing this node may do makes the room
        decision.refuse.push_back({r.vgpu->name, r.wait});
        continue;
      }
      if (ready < needed) continue;  // only anti-thrash stands in the way: let it wait
      std::vector<std::string> victims;
      uint64_t freed = 0;
      for (const Candidate& c : candidates) {
        if (freed >= needed) break;
        if (c.waits_out) continue;
        victims.push_back(c.v->name);
        freed += c.bytes;
      }
      if (victims.size() > budget) continue;  // the rate bound: wait for it
      budget -= static_cast<uint32_t>(victims.size());
      for (const std::string& name : victims) {
        chosen.insert(name);
        decision.suspend.push_back(name);
      }
      free = free + freed - r.wait.bytes;
    }
  }
  if (!decision.suspend.empty()) return decision;
  // Resume one of ours whose GPUs have room again and no request waiting.
  for (const VgpuView& v : vgpus) {
    if (ours_.count(v.name) == 0 || v.suspend_state != "suspended") continue;
    bool fits = true;
    for (const VgpuDeviceView& d : v.devices) {
      auto free_it = free_bytes.find(d.gpu_uuid);
      if (by_gpu.count(d.gpu_uuid) > 0 || free_it == free_bytes.end() ||
          free_it->second < v.suspended_bytes + options_.resume_headroom_bytes) {
        fits = false;
        break;
      }
    }
    if (fits) {
      decision.resume.push_back(v.name);
      break;
    }
  }
  return decision;
}

void MemoryPressurePolicy::Suspended(const std::string& vgpu, Clock::time_point now) {
  ours_.insert(vgpu);
  suspends_.push_back(now);
}

void MemoryPressurePolicy::Resumed(const std::string& vgpu, Clock::time_point now) {
  ours_.erase(vgpu);
  last_resumed_[vgpu] = now;
}

void MemoryPressurePolicy::Forget(const std::string& vgpu) {
  ours_.erase(vgpu);
  last_resumed_.erase(vgpu);
}

}  // namespace gpuslice::node
