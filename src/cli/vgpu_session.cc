#include "cli/vgpu_session.h"

#include <unistd.h>

#include <iostream>

#include "cli/child_process.h"
#include "cli/cli_output.h"
#include "cli/session_audit.h"
#include "core/memory_ledger.h"
#include "core/vgpu_store.h"
#include "port/clock.h"
#include "port/process.h"

namespace gpuslice::cli {

int RunInVgpu(const VgpuSession& session, const RunOptions& options, const ChildEnvironmentFn& environment) {
  core::VgpuStore store(session.state_root);
  auto membership = store.HoldMembership(session.name);
  if (!membership.ok()) {
    session.release();
    return Fail(membership.status().message());
  }
  auto handle = core::VgpuHandle::Open(session.dir, port::MappedFile::Access::kReadOnly);
  if (!handle.ok()) {
    close(membership.value());
    session.release();
    return Fail(handle.status().message());
  }
  std::vector<port::GpuInfo> gpus;
  for (const std::string& uuid : session.gpu_uuids) gpus.emplace_back().uuid_text = uuid;
  auto child = ChildProcess::Spawn(options.command, environment(session.dir, gpus));
  if (!child.ok()) {
    close(membership.value());
    session.release();
    std::cerr << "gpuslice: " << child.status().message() << "\n";
    return 127;
  }
  core::MemoryLedger ledger(&handle->limits(), &handle->ledger());
  SessionAudit audit(&handle.value(), AuditConfigOf(options.audit));
  uint64_t next_reap_ns = 0;
  uint64_t next_second_ns = 0;
  const int status = child->Supervise(session.reap_interval_ms, [&] {
    const uint64_t now = port::MonotonicNanos();
    if (now >= next_reap_ns) {
      ledger.ReapDeadProcesses(port::SystemProcessProbe());
      next_reap_ns = now + core::ReapSpacingNs(session.reap_interval_ms * 1'000'000ull, ledger.LiveProcessCount());
    }
    audit.Tick();
    if (session.each_second && now >= next_second_ns) {
      session.each_second();
      next_second_ns = now + 1'000'000'000;
    }
  });
  ledger.ReapDeadProcesses(port::SystemProcessProbe());
  close(membership.value());
  session.release();
  return status;
}

}  // namespace gpuslice::cli
