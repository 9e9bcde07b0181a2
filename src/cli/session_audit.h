// session_audit.h — `gpuslice run`'s supervisor audits its own session with
// the memory audit (audit/memory_audit.h): every GPU process that descends
// from it against its vGPU's ledger and limits.
//
// The supervisor makes itself its descendants' child subreaper before it
// starts the command, so a descendant that double-forks or calls setsid is
// still its descendant: the session root is the supervisor itself. What
// this cannot see: a descendant after the supervisor itself was killed (the
// tenant can kill it: it is the tenant's own process), which the daemon's
// audit then finds as a GPU process of no vGPU.
//
// Runs on the supervising thread (Tick, from ChildProcess::Supervise);
// opens NVML at the first tick. Fails open: if NVML cannot list processes'
// memory, it says so once and audits nothing.
#ifndef GPUSLICE_CLI_SESSION_AUDIT_H_
#define GPUSLICE_CLI_SESSION_AUDIT_H_

#include <memory>
#include <optional>

#include "audit/memory_audit.h"
#include "core/vgpu_store.h"
#include "node/node_devices.h"
#include "port/nvml_library.h"

namespace gpuslice::cli {

// PR_SET_CHILD_SUBREAPER on this process; false (and a warning) when refused.
bool BecomeChildSubreaper();

// `gpuslice run --audit`: report, deny or kill (the audit's action), or off
// (nullopt). Anything else was refused by the flag's check.
std::optional<audit::AuditConfig> AuditConfigOf(const std::string& flag);

class SessionAudit {
 public:
  // `handle` must outlive the audit. No `config`: auditing is off.
  SessionAudit(const core::VgpuHandle* handle, std::optional<audit::AuditConfig> config);
  // One audit pass, at most every 500 ms.
  void Tick();

 private:
  const core::VgpuHandle* const handle_;
  std::optional<audit::MemoryAudit> audit_;
  std::unique_ptr<port::NvmlLibrary> nvml_;
  node::NodeDevices devices_;
  uint64_t next_ns_ = 0;
  bool failed_ = false;
};

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_SESSION_AUDIT_H_
