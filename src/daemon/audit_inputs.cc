#include "daemon/audit_inputs.h"

#include <string>

namespace gpuslice::daemon {

audit::AuditedVgpu AuditedVgpuOf(const VgpuView& view) {
  audit::AuditedVgpu v;
  v.name = view.name;
  for (const VgpuDeviceView& d : view.devices) {
    if (d.gpu_index && d.memory_limit_bytes != core::kUnlimited) v.limit_bytes[*d.gpu_index] = d.memory_limit_bytes;
  }
  for (const VgpuProcessView& p : view.processes) {
    if (!p.same_pid_namespace) continue;
    auto& charged = v.ledger[p.pid];
    for (size_t i = 0; i < view.devices.size() && i < p.memory_used_bytes.size(); ++i) {
      if (view.devices[i].gpu_index) charged[*view.devices[i].gpu_index] += p.memory_used_bytes[i];
    }
  }
  return v;
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

}  // namespace gpuslice::daemon
