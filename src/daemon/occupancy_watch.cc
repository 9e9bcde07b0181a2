#include "daemon/occupancy_watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "daemon/audit_inputs.h"

namespace gpuslice::daemon {

node::GpuOccupancy OccupancyOf(const std::vector<node::VgpuView>& views,
                               const std::vector<audit::GpuProcess>& processes, const audit::ProcessTable& table,
                               const std::vector<port::GpuInfo>& gpus, ClaimedPids* claimed_pids) {
  node::GpuOccupancy out;
  std::map<uint32_t, const port::GpuInfo*> by_index;
  for (const port::GpuInfo& g : gpus) {
    by_index[g.index] = &g;
    out.gpus[g.uuid];
  }
  // (pid namespace, pid there) of every ledger slot -> the vGPUs naming it.
  // Several may: a ledger is its tenant's to write, so each claim is taken,
  // and a forged one only adds a contender.
  std::map<std::pair<uint64_t, uint32_t>, std::vector<const node::VgpuView*>> claims;
  for (const node::VgpuView& v : views) {
    for (const node::VgpuProcessView& p : v.processes) claims[{p.pid_namespace, p.pid}].push_back(&v);
  }
  for (const audit::GpuProcess& gp : processes) {
    auto gpu = by_index.find(gp.gpu_index);
    if (gpu == by_index.end()) continue;
    node::GpuOccupancy::OnGpu& on = out.gpus[gpu->second->uuid];
    bool claimed = false;
    const auto id = table.InNamespace(gp.pid);
    const auto it = id ? claims.find({id->pid_namespace, id->pid}) : claims.end();
    if (it != claims.end()) {
      for (const node::VgpuView* v : it->second) {
        for (const node::VgpuDeviceView& d : v->devices) {
          if (d.gpu_index != gp.gpu_index) continue;
          on.vgpus.insert(v->name);
          claimed = true;
        }
      }
    }
    if (!claimed) {
      on.other_pids.insert(gp.pid);
    } else if (claimed_pids != nullptr) {
      (*claimed_pids)[gpu->second->uuid].insert(gp.pid);
    }
  }
  return out;
}

node::GpuOccupancy OccupancyLinger::Apply(const node::GpuOccupancy& seen, const ClaimedPids& claimed, uint64_t now_ns,
                                          const node::GpuOccupancy& idle) {
  node::GpuOccupancy out = seen;
  for (auto& [uuid, on] : out.gpus) {
    LastSeen& last = last_seen_ns_[uuid];
    for (const std::string& name : on.vgpus) last.vgpus[name] = now_ns;
    for (uint32_t pid : on.other_pids) last.pids[pid] = now_ns;
    if (auto it = claimed.find(uuid); it != claimed.end()) {
      for (uint32_t pid : it->second) last.pids.erase(pid);
    }
    if (auto it = idle.gpus.find(uuid); it != idle.gpus.end()) {
      for (const std::string& name : it->second.vgpus) {
        if (on.vgpus.count(name) == 0) last.vgpus.erase(name);
      }
      for (uint32_t pid : it->second.other_pids) last.pids.erase(pid);
    }
    std::erase_if(last.vgpus, [&](const auto& e) { return now_ns - e.second >= linger_ns_; });
    std::erase_if(last.pids,
                  [&](const auto& e) { return now_ns - e.second >= linger_ns_ || (alive_ && !alive_(e.first)); });
    for (const auto& [name, at] : last.vgpus) on.vgpus.insert(name);
    for (const auto& [pid, at] : last.pids) on.other_pids.insert(pid);
  }
  return out;
}

void ProcessActivity::AddSamples(uint32_t gpu_index,
                                 const std::optional<std::vector<port::ProcessUtilization>>& samples, uint64_t now_ns) {
  if (!samples) {
    unreadable_.insert(gpu_index);
    return;
  }
  unreadable_.erase(gpu_index);
  for (const port::ProcessUtilization& s : *samples) {
    if (s.sm_percent > 0) since_ns_[{gpu_index, s.pid}] = now_ns;
  }
}

void ProcessActivity::Split(const std::vector<audit::GpuProcess>& listed, uint64_t now_ns,
                            std::vector<audit::GpuProcess>* active, std::vector<audit::GpuProcess>* idle) {
  std::set<Key> now_listed;
  for (const audit::GpuProcess& gp : listed) {
    const Key key{gp.gpu_index, gp.pid};
    now_listed.insert(key);
    const uint64_t since = since_ns_.try_emplace(key, now_ns).first->second;
    const bool is_idle =
        idle_after_ns_ != 0 && unreadable_.count(gp.gpu_index) == 0 && now_ns - since >= idle_after_ns_;
    (is_idle ? idle : active)->push_back(gp);
  }
  std::erase_if(since_ns_, [&](const auto& e) { return now_listed.count(e.first) == 0; });
}

OccupancyWatch::OccupancyWatch(port::NvmlLibrary* nvml, node::VgpuManager* manager, const audit::ProcessTable* table,
                               node::OccupancyCell* cell, node::ScheduleWorker* schedule, uint64_t idle_after_ns)
    : nvml_(nvml),
      manager_(manager),
      table_(table),
      cell_(cell),
      schedule_(schedule),
      linger_(kLingerNs, [table](uint32_t pid) { return table->InNamespace(pid).has_value(); }),
      activity_(idle_after_ns) {}

void OccupancyWatch::Pass(uint64_t now_ns) {
  const std::vector<port::GpuInfo>& gpus = manager_->devices().gpus;
  std::vector<uint32_t> indices;
  for (const port::GpuInfo& g : gpus) indices.push_back(g.index);
  auto processes = GpuProcessesOf(nvml_, indices);
  std::vector<node::VgpuView> views;
  node::GpuOccupancy now;
  if (!processes.ok()) {
    if (!warned_) {
      spdlog::warn(
          "cannot list the GPUs' processes ({}); beside an LC, every best-effort vGPU on a GPU counts as "
          "contending for it, busy or not",
          processes.status().message());
    }
    warned_ = true;
  } else if (manager_->List("", &views).ok()) {
    for (const port::GpuInfo& g : gpus) {
      auto samples = nvml_->ProcessUtilizations(g.index, samples_seen_us_[g.index]);
      if (samples.ok()) {
        for (const port::ProcessUtilization& s : samples.value()) {
          samples_seen_us_[g.index] = std::max(samples_seen_us_[g.index], s.timestamp_us);
        }
      }
      activity_.AddSamples(g.index, samples.ok() ? std::optional(samples.value()) : std::nullopt, now_ns);
    }
    std::vector<audit::GpuProcess> active, idle;
    activity_.Split(processes.value(), now_ns, &active, &idle);
    ClaimedPids claimed;
    const node::GpuOccupancy on = OccupancyOf(views, active, *table_, gpus, &claimed);
    now = linger_.Apply(on, claimed, now_ns, OccupancyOf(views, idle, *table_, gpus));
  } else {
    return;  // keep what the schedule has
  }
  if (!cell_->Set(now)) return;
  for (const port::GpuInfo& g : gpus) {
    auto it = now.gpus.find(g.uuid);
    if (it == now.gpus.end()) continue;
    spdlog::debug("GPU {}: {} vGPU(s) and {} other process(es) on it", g.uuid_text, it->second.vgpus.size(),
                  it->second.other_pids.size());
  }
  schedule_->Request();
}

}  // namespace gpuslice::daemon
