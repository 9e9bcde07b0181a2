#include "cli/session_audit.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <iostream>

#include "daemon/audit_inputs.h"
#include "node/vgpu_view.h"
#include "port/clock.h"

namespace gpuslice::cli {
namespace {

constexpr uint64_t kAuditIntervalNs = 500'000'000;

}  // namespace

bool BecomeChildSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) == 0) return true;
  std::cerr << "gpuslice: warning: cannot become the command's subreaper; a process that leaves the command's tree "
               "escapes the memory audit\n";
  return false;
}

std::optional<audit::AuditConfig> AuditConfigOf(const std::string& flag) {
  auto action = audit::ParseAuditAction(flag);
  if (!action.ok()) return std::nullopt;
  audit::AuditConfig config;
  config.action = action.value();
  return config;
}

SessionAudit::SessionAudit(const core::VgpuHandle* handle, std::optional<audit::AuditConfig> config)
    : handle_(handle) {
  if (config) audit_.emplace(*config, &audit::SystemProcessTable(), &audit::SystemProcessActions());
}

void SessionAudit::Tick() {
  if (!audit_ || failed_) return;
  const uint64_t now = port::MonotonicNanos();
  if (now < next_ns_) return;
  next_ns_ = now + kAuditIntervalNs;
  auto fail = [&](const std::string& why) {
    failed_ = true;
    std::cerr << "gpuslice: warning: the memory audit is off for this run: " << why << "\n";
  };
  if (nvml_ == nullptr) {
    auto nvml = port::NvmlLibrary::Open();
    if (!nvml.ok()) return fail(nvml.status().message());
    auto gpus = nvml.value()->ListGpus();
    if (!gpus.ok()) return fail(gpus.status().message());
    devices_.gpus = gpus.value();
    nvml_ = std::move(nvml.value());
  }
  const node::VgpuView view = node::ReadVgpuView(*handle_, devices_);
  std::vector<uint32_t> gpus;
  for (const auto& d : view.devices) {
    if (d.gpu_index) gpus.push_back(*d.gpu_index);
  }
  auto processes = daemon::GpuProcessesOf(nvml_.get(), gpus);
  if (!processes.ok()) return fail(processes.status().message());
  std::vector<audit::AuditedVgpu> vgpus =
      daemon::AuditedVgpusOf({view}, processes.value(), audit::SystemProcessTable());
  vgpus[0].session_roots = {static_cast<uint32_t>(getpid())};
  for (const audit::Violation& v : audit_->Check(processes.value(), vgpus, now)) {
    // Processes outside this session are the daemon's to judge, not ours.
    if (v.kind == audit::Violation::Kind::kUnmanaged) continue;
    if (v.acted) {
      std::cerr << "gpuslice: memory audit: " << audit::Describe(v) << "\n";
    } else if (v.found) {
      std::cerr << "gpuslice: memory audit: " << audit::DescribeFound(v, audit_->config().grace_ns) << "\n";
    }
  }
}

}  // namespace gpuslice::cli
