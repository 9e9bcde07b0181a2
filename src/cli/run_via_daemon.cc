#include "cli/run_via_daemon.h"

#include <unistd.h>

#include <iostream>

#include "cli/cli_output.h"
#include "cli/vgpu_session.h"
#include "node/flag_values.h"

namespace gpuslice::cli {
namespace {

namespace pb = control::v1;

// The daemon reaps every vGPU every reap interval (200 ms by default); this
// process only stands in while the daemon is down, so it reaps less often:
// with hundreds of runs on a node, each reaping its ledger every 200 ms would
// be thousands of /proc reads a second. Half a second keeps a dead process's
// memory back within the second promised (at 2 s, issue 11 reported it
// charged 1.7 s at the median after a daemon's death). The library still reaps at once when an
// allocation needs a dead process's memory.
constexpr int kFallbackReapIntervalMs = 500;

StatusOr<pb::CreateVgpuRequest> BuildRequest(const RunOptions& o, const std::string& name) {
  pb::CreateVgpuRequest request;
  request.set_name(name);
  for (const auto& g : o.gpus) request.add_gpus(g);
  if (!o.memory.empty()) {
    auto bytes = node::ParseMemoryFlag("--memory", o.memory);
    if (!bytes.ok()) return bytes.status();
    request.set_memory_limit_bytes(bytes.value());
  }
  if (!o.compute.empty()) {
    auto pct = node::ParsePercentFlag("--compute", o.compute);
    if (!pct.ok()) return pct.status();
    request.set_compute_share_pct(pct.value());
  }
  if (!o.compute_cap.empty()) {
    auto pct = node::ParsePercentFlag("--compute-cap", o.compute_cap);
    if (!pct.ok()) return pct.status();
    request.set_compute_cap_pct(pct.value());
  }
  request.set_priority_level(o.priority);  // "": the daemon's default; resolved by the daemon's levels
  if (!o.power_cap.empty()) {
    auto watts = node::ParsePowerFlag("--power-cap", o.power_cap, /*allow_none=*/false);
    if (!watts.ok()) return watts.status();
    request.set_power_cap_watts(watts.value());
  }
  request.set_suspendable(o.suspendable);
  request.set_join_existing(true);
  request.set_client_pid(static_cast<uint32_t>(getpid()));
  return request;
}

}  // namespace

std::optional<int> RunViaDaemon(daemon::DaemonClient& client, const RunOptions& options, const std::string& name,
                                const ChildEnvironmentFn& environment) {
  auto request = BuildRequest(options, name);
  if (!request.ok()) return Fail(request.status().message());
  auto vgpu = client.CreateVgpu(request.value(), kCreateDeadline);
  if (!vgpu.ok() && client.last_call_unanswered()) {
    // Nothing runs yet, so nothing is lost by running without the daemon,
    // as a run does when no daemon answers at all.
    std::cerr << "gpuslice: warning: " << vgpu.status().message() << "; running vGPU '" << name
              << "' without the daemon\n";
    return std::nullopt;
  }
  if (!vgpu.ok()) return Fail(vgpu.status().message());
  const std::string& dir = vgpu->dir();
  const std::string suffix = "/vgpus/" + name;
  if (dir.size() <= suffix.size() || dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return Fail("the daemon placed vGPU '" + name + "' at " + dir + ", not in a state directory; restart the daemon");
  }
  pb::DeleteVgpuRequest release;
  release.set_name(name);
  release.set_if_unused(true);
  release.set_client_pid(static_cast<uint32_t>(getpid()));
  // The daemon keeps the vGPU for us (client_pid) until the run ends. Best
  // effort: a daemon that is gone (or restarted) collects it later.
  VgpuSession session{dir.substr(0, dir.size() - suffix.size()), name, dir,
                      {vgpu->gpu_uuids().begin(), vgpu->gpu_uuids().end()}, kFallbackReapIntervalMs,
                      [&] { (void)client.DeleteVgpu(release); }};
  return RunInVgpu(session, options, environment);
}

}  // namespace gpuslice::cli
