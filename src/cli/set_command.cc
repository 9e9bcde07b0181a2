// `gpuslice set NAME --memory 8GiB --compute 50 --priority be`: live resize.
//
// Every process of the vGPU reads its memory limit with an atomic load at
// each allocation, and re-applies its timeslice when the limits' generation
// changes, so the change is in force for all of them when this returns.
// Shrinking memory below what the vGPU holds is refused unless --force,
// which keeps what processes hold and refuses new allocations until usage is
// back under the limit. Through the daemon when one answers; without one,
// on the state directory directly (same code, same checks).
#include <iostream>
#include <memory>

#include "node/flag_values.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "core/vgpu_store.h"
#include "daemon/control_service.h"
#include "daemon/daemon_client.h"
#include "daemon/socket_path.h"
#include "node/standalone_node.h"
#include "node/vgpu_manager.h"

namespace gpuslice::cli {
namespace {

namespace pb = control::v1;

struct SetOptions {
  std::string name;
  std::string memory;
  std::string compute;
  std::string compute_cap;
  std::string priority;
  std::string power_cap;
  bool force = false;
  bool json = false;
  std::string state_dir;
  std::string socket;
};

StatusOr<pb::Vgpu> ResizeStandalone(const std::string& state_dir, const node::ResizeOptions& resize) {
  auto node = node::StandaloneNode::Open(state_dir);
  if (!node.ok()) return node.status();
  node::VgpuView after;
  if (node::ApiStatus s = node.value()->manager().Resize(resize, &after); !s.ok()) return Status::Error(s.message());
  pb::Vgpu out;
  daemon::ToProto(after, &out);
  return out;
}

int RunSet(const SetOptions& o) {
  node::ResizeOptions resize;
  resize.name = o.name;
  resize.force = o.force;
  if (!o.memory.empty()) {
    auto bytes = node::ParseMemoryFlag("--memory", o.memory);
    if (!bytes.ok()) return Fail(bytes.status().message());
    resize.memory_limit_bytes = bytes.value();
  }
  if (!o.compute.empty()) {
    auto pct = node::ParsePercentFlag("--compute", o.compute);
    if (!pct.ok()) return Fail(pct.status().message());
    resize.compute_share_pct = pct.value();
  }
  if (!o.compute_cap.empty()) {
    auto pct = node::ParsePercentFlag("--compute-cap", o.compute_cap);
    if (!pct.ok()) return Fail(pct.status().message());
    resize.compute_cap_pct = pct.value();
  }
  if (!o.power_cap.empty()) {
    auto watts = node::ParsePowerFlag("--power-cap", o.power_cap, /*allow_none=*/true);
    if (!watts.ok()) return Fail(watts.status().message());
    resize.power_cap_watts = watts.value();
  }
  // A level name resolves where the node's levels are: in the daemon, or in
  // the standalone manager (which loads the stored levels).
  resize.priority_level = o.priority;
  if (!resize.memory_limit_bytes && !resize.compute_share_pct && !resize.compute_cap_pct &&
      resize.priority_level.empty() && !resize.power_cap_watts) {
    return Fail("nothing to change; give --memory, --compute, --compute-cap, --priority or --power-cap, e.g. gpuslice set " +
                o.name + " --memory 8GiB");
  }

  StatusOr<pb::Vgpu> result = Status::Error("");
  const std::string socket = o.socket.empty() ? daemon::DefaultSocketPath(o.state_dir) : o.socket;
  if (auto client = daemon::DaemonClient::ConnectIfRunning(socket)) {
    pb::ResizeVgpuRequest request;
    request.set_name(resize.name);
    if (resize.memory_limit_bytes) {
      if (*resize.memory_limit_bytes == core::kUnlimited)
        request.set_memory_unlimited(true);
      else
        request.set_memory_limit_bytes(*resize.memory_limit_bytes);
    }
    if (resize.compute_share_pct) request.set_compute_share_pct(*resize.compute_share_pct);
    if (resize.compute_cap_pct) request.set_compute_cap_pct(*resize.compute_cap_pct);
    request.set_priority_level(resize.priority_level);
    if (resize.power_cap_watts) request.set_power_cap_watts(*resize.power_cap_watts);
    request.set_force(resize.force);
    auto response = client->ResizeVgpu(request);
    if (response.ok())
      result = response->vgpu();
    else
      result = response.status();
  } else {
    if (resize.power_cap_watts && *resize.power_cap_watts > 0) {
      // Stored now; the vGPU's standalone `gpuslice run` holds it from its
      // next second, and a daemon from its start.
      std::cerr << "gpuslice: note: no daemon answers; the power cap is stored, and held by the vGPU's own "
                   "`gpuslice run` (or a daemon, once one runs)\n";
    }
    result = ResizeStandalone(o.state_dir, resize);
  }
  if (!result.ok()) return Fail(result.status().message());
  const pb::Vgpu& v = result.value();
  if (o.json) {
    std::cout << VgpuJson(v).dump() << "\n";
    return 0;
  }
  std::string what;
  if (v.devices_size() > 0) {
    const auto& d = v.devices(0);
    what = "memory " + LimitText(d) + ", compute " + std::to_string(d.compute_share_pct()) + "%" +
           (d.compute_cap_pct() != 0 ? " cap " + std::to_string(d.compute_cap_pct()) + "%" : "") + ", priority " +
           PriorityText(v) + (v.has_power_cap_watts() ? ", power cap " + WattsText(v.power_cap_watts()) : "");
  }
  std::cout << "vGPU '" << v.name() << "': " << what << "; in force for its " << v.processes_size() << " process(es)\n";
  return 0;
}

}  // namespace

void AddSetCommand(CLI::App& app) {
  auto o = std::make_shared<SetOptions>();
  CLI::App* cmd = app.add_subcommand("set", "Change a running vGPU's limits, live (e.g. set NAME --memory 8GiB)");
  cmd->add_option("name", o->name, "The vGPU")->required();
  cmd->add_option("--memory", o->memory, "Device memory limit per GPU (4GiB, 512MiB, ...) or 'unlimited'");
  cmd->add_option("--compute", o->compute, "Compute share in percent (1-100)");
  cmd->add_option("--compute-cap", o->compute_cap, "Hard compute ceiling in percent (1-100; 100 = none)");
  cmd->add_option("--priority", o->priority, "a priority level: lc (latency-critical), be (best-effort) or one of the node's levels "
                  "(default: critical, high, normal, low)");
  cmd->add_option("--power-cap", o->power_cap,
                  "Power cap per GPU in watts (e.g. 150; 'none' removes it): the daemon holds the vGPU's attributed "
                  "power at or below it by tightening its compute cap");
  cmd->add_flag("--force", o->force,
                "Shrink memory below current use anyway: new allocations are refused until usage falls below it");
  cmd->add_flag("--json", o->json, "Print the vGPU after the change as JSON");
  cmd->add_option("--state-dir", o->state_dir, "State directory (default: as for run)");
  cmd->add_option("--socket", o->socket, "The daemon's socket (default: $GPUSLICE_SOCKET, <state-dir>/gpuslice.sock)");
  cmd->callback([cmd, o] {
    if (std::string flag = FlagGivenEmpty(*cmd, {"--memory", "--compute", "--compute-cap", "--priority", "--power-cap"});
        !flag.empty()) {
      ExitCode() = Fail(EmptyFlagMessage(flag));
      return;
    }
    ExitCode() = RunSet(*o);
  });
}

}  // namespace gpuslice::cli
