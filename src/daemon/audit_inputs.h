// audit_inputs.h — what the memory audit (audit/memory_audit.h) is given:
// a vGPU's view as an AuditedVgpu, and the driver's per-process memory on the
// node's GPUs. Shared by the daemon and `gpuslice run`'s supervisor.
//
// Pure conversion (AuditedVgpuOf) and one NVML pass (GpuProcessesOf); not
// thread-safe (NvmlLibrary is not); allocates.
#ifndef GPUSLICE_DAEMON_AUDIT_INPUTS_H_
#define GPUSLICE_DAEMON_AUDIT_INPUTS_H_

#include <cstdint>
#include <vector>

#include "audit/memory_audit.h"
#include "core/status.h"
#include "node/vgpu_view.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {

// Each vGPU's limits per GPU index and its ledger, keyed by pids as NVML
// gives them (this namespace's). A slot names its process by its own pid
// namespace and pid there; it is matched to the GPU process that has both
// (ProcessTable::InNamespace), so processes of containers are matched too.
// `session_roots` are left to the caller.
std::vector<audit::AuditedVgpu> AuditedVgpusOf(const std::vector<node::VgpuView>& views,
                                               const std::vector<audit::GpuProcess>& processes,
                                               const audit::ProcessTable& table);

// True when process `pid` (this namespace's) maps vGPU `view`'s ledger: the
// daemon's sealed memfd, or the ledger file of a vGPU made before it. No
// other process can have it, so a ledger slot that names a process which
// does not is not believed: a tenant cannot point an audit's actions at
// another tenant's process. Reads /proc/PID/maps.
bool MapsLedgerOf(uint32_t pid, const node::VgpuView& view);

// Every compute process on each of `gpus`, with its memory there.
StatusOr<std::vector<audit::GpuProcess>> GpuProcessesOf(port::NvmlLibrary* nvml, const std::vector<uint32_t>& gpus);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_AUDIT_INPUTS_H_
