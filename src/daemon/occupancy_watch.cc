#include "daemon/occupancy_watch.h"

#include <spdlog/spdlog.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "daemon/audit_inputs.h"

namespace gpuslice::daemon {

node::GpuOccupancy OccupancyOf(const std::vector<node::VgpuView>& views,
                               const std::vector<audit::GpuProcess>& processes, const audit::ProcessTable& table,
                               const std::vector<port::GpuInfo>& gpus) {
  node::GpuOccupancy out;
  std::map<uint32_t, node::GpuOccupancy::OnGpu*> by_index;
  for (const port::GpuInfo& g : gpus) by_index[g.index] = &out.gpus[g.uuid];
  // (pid namespace, pid there) of every ledger slot -> the vGPUs naming it.
  // Several may: a ledger is its tenant's to write, so each claim is taken,
  // and a forged one only adds a contender.
  std::map<std::pair<uint64_t, uint32_t>, std::vector<const node::VgpuView*>> claims;
  for (const node::VgpuView& v : views) {
    for (const node::VgpuProcessView& p : v.processes) claims[{p.pid_namespace, p.pid}].push_back(&v);
  }
  std::set<std::pair<uint32_t, uint32_t>> seen;  // (GPU index, pid)
  for (const audit::GpuProcess& gp : processes) {
    auto gpu = by_index.find(gp.gpu_index);
    if (gpu == by_index.end() || !seen.insert({gp.gpu_index, gp.pid}).second) continue;
    bool claimed = false;
    const auto id = table.InNamespace(gp.pid);
    const auto it = id ? claims.find({id->pid_namespace, id->pid}) : claims.end();
    if (it != claims.end()) {
      for (const node::VgpuView* v : it->second) {
        for (const node::VgpuDeviceView& d : v->devices) {
          if (d.gpu_index != gp.gpu_index) continue;
          gpu->second->vgpus.insert(v->name);
          claimed = true;
        }
      }
    }
    if (!claimed) ++gpu->second->other_processes;
  }
  return out;
}

OccupancyWatch::OccupancyWatch(port::NvmlLibrary* nvml, node::VgpuManager* manager, const audit::ProcessTable* table,
                               node::OccupancyCell* cell, node::ScheduleWorker* schedule)
    : nvml_(nvml), manager_(manager), table_(table), cell_(cell), schedule_(schedule) {}

void OccupancyWatch::Pass() {
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
    now = OccupancyOf(views, processes.value(), *table_, gpus);
  } else {
    return;  // keep what the schedule has
  }
  if (!cell_->Set(now)) return;
  for (const port::GpuInfo& g : gpus) {
    auto it = now.gpus.find(g.uuid);
    if (it == now.gpus.end()) continue;
    spdlog::debug("GPU {}: {} vGPU(s) and {} other process(es) on it", g.uuid_text, it->second.vgpus.size(),
                  it->second.other_processes);
  }
  schedule_->Request();
}

}  // namespace gpuslice::daemon
