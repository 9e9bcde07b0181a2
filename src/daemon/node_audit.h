// node_audit.h — the daemon's memory audit (audit/memory_audit.h) over every
// vGPU of the node: once a second, the driver's per-process memory on every
// GPU against every vGPU's ledger and limit.
//
// The daemon knows no session roots (a `gpuslice run` supervisor audits its
// own session, cli/session_audit.h); it finds vGPUs over their limits (a
// process that rewrote its own ledger slot), and GPU processes in no vGPU's
// ledger, containers' included (matched by pid namespace): `unmanaged`,
// whose action is its own (config audit.unmanaged, report by default); and
// GPUs holding memory that no process holds (`unattributed`, always only
// reported: an exported descriptor that outlived its exporter).
// Each violation acted on is logged as a warning and counted in
// gpuslice_vgpu_violations_total.
//
// Called from the daemon's housekeeping thread only, which is the only user
// of the NvmlLibrary after start. Fails open: when NVML cannot list
// processes, it warns once and audits nothing.
#ifndef GPUSLICE_DAEMON_NODE_AUDIT_H_
#define GPUSLICE_DAEMON_NODE_AUDIT_H_

#include <functional>
#include <string>

#include "audit/memory_audit.h"
#include "node/vgpu_manager.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {

class NodeAudit {
 public:
  // Called for each violation acted on (the metrics' counter).
  using OnViolation = std::function<void(const audit::Violation&)>;
  // All must outlive the audit.
  NodeAudit(const audit::AuditConfig& config, port::NvmlLibrary* nvml, node::VgpuManager* manager,
            const audit::ProcessTable* table, audit::ProcessActions* actions, OnViolation on_violation);
  void Pass(uint64_t now_ns);

 private:
  audit::MemoryAudit audit_;
  port::NvmlLibrary* const nvml_;
  node::VgpuManager* const manager_;
  const audit::ProcessTable* const table_;
  OnViolation on_violation_;
  bool warned_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_NODE_AUDIT_H_
