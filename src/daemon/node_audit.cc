#include "daemon/node_audit.h"

#include <spdlog/spdlog.h>

#include <map>
#include <optional>

#include "daemon/audit_inputs.h"

namespace gpuslice::daemon {

NodeAudit::NodeAudit(const audit::AuditConfig& config, port::NvmlLibrary* nvml, node::VgpuManager* manager,
                     const audit::ProcessTable* table, audit::ProcessActions* actions, OnViolation on_violation)
    : audit_(config, table, actions),
      nvml_(nvml),
      manager_(manager),
      table_(table),
      on_violation_(std::move(on_violation)) {}

void NodeAudit::Pass(uint64_t now_ns) {
  std::vector<uint32_t> gpus;
  for (const auto& g : manager_->devices().gpus) gpus.push_back(g.index);
  auto processes = GpuProcessesOf(nvml_, gpus);
  if (!processes.ok()) {
    if (!warned_) spdlog::warn("the memory audit is off: {}", processes.status().message());
    warned_ = true;
    return;
  }
  std::vector<node::VgpuView> views;
  if (!manager_->List("", &views).ok()) return;
  const std::vector<audit::AuditedVgpu> vgpus = AuditedVgpusOf(views, processes.value(), *table_);
  // Each GPU's used memory, for memory that no process holds any longer.
  std::map<uint32_t, uint64_t> device_used;
  for (const auto& g : manager_->devices().gpus) {
    if (const std::optional<uint64_t> used = nvml_->UsedMemoryBytes(g.index)) device_used[g.index] = *used;
  }
  for (const audit::Violation& v : audit_.Check(processes.value(), vgpus, now_ns, device_used)) {
    if (v.found && !v.acted) spdlog::warn("memory audit: {}", audit::DescribeFound(v, audit_.config().grace_ns));
    if (!v.acted) continue;
    spdlog::warn("memory audit: {}", audit::Describe(v));
    if (on_violation_) on_violation_(v);
  }
}

}  // namespace gpuslice::daemon
