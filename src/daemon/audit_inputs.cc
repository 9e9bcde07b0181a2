#include "daemon/audit_inputs.h"

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace gpuslice::daemon {

std::vector<audit::AuditedVgpu> AuditedVgpusOf(const std::vector<node::VgpuView>& views,
                                               const std::vector<audit::GpuProcess>& processes,
                                               const audit::ProcessTable& table) {
  std::vector<audit::AuditedVgpu> out(views.size());
  // (pid namespace, pid there) of every ledger slot -> (vGPU, slot).
  std::map<std::pair<uint64_t, uint32_t>, std::pair<size_t, const node::VgpuProcessView*>> slots;
  for (size_t i = 0; i < views.size(); ++i) {
    out[i].name = views[i].name;
    for (const node::VgpuDeviceView& d : views[i].devices) {
      if (d.gpu_index && d.memory_limit_bytes != core::kUnlimited) {
        out[i].limit_bytes[*d.gpu_index] = d.memory_limit_bytes;
      }
    }
    for (const node::VgpuProcessView& p : views[i].processes) slots[{p.pid_namespace, p.pid}] = {i, &p};
  }
  std::set<uint32_t> seen;
  for (const audit::GpuProcess& gp : processes) {
    if (!seen.insert(gp.pid).second) continue;  // one process on several GPUs
    const auto id = table.InNamespace(gp.pid);
    if (!id) continue;
    auto it = slots.find({id->pid_namespace, id->pid});
    if (it == slots.end()) continue;
    const auto& [i, p] = it->second;
    auto& charged = out[i].ledger[gp.pid];
    for (size_t d = 0; d < views[i].devices.size() && d < p->memory_used_bytes.size(); ++d) {
      if (views[i].devices[d].gpu_index) charged[*views[i].devices[d].gpu_index] += p->memory_used_bytes[d];
    }
  }
  return out;
}

StatusOr<std::vector<audit::GpuProcess>> GpuProcessesOf(port::NvmlLibrary* nvml, const std::vector<uint32_t>& gpus) {
  std::vector<audit::GpuProcess> out;
  for (uint32_t index : gpus) {
    auto processes = nvml->ComputeProcesses(index);
    if (!processes.ok()) return processes.status();
    for (const port::ProcessMemory& p : processes.value()) out.push_back({index, p.pid, p.used_bytes});
  }
  return out;
}

bool MapsLedgerOf(uint32_t pid, const node::VgpuView& view) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  const std::string memfd = " /memfd:gpuslice-ledger-" + view.name + " (deleted)";
  const std::string file = " " + view.dir + "/ledger";
  for (std::string line; std::getline(maps, line);) {
    if (line.ends_with(memfd) || line.ends_with(file)) return true;
  }
  return false;
}

}  // namespace gpuslice::daemon
