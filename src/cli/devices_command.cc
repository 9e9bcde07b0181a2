// `gpuslice devices`: the node's GPUs and how they are connected, from the
// daemon when one answers, else from NVML directly.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/node_snapshot.h"
#include "daemon/socket_path.h"

namespace gpuslice::cli {
namespace {

struct DevicesOptions {
  bool json = false;
  bool clear_health = false;
  std::vector<std::string> gpus;  // for --clear-health; empty: all
  std::string state_dir;
  std::string socket;
};

int RunDevices(const DevicesOptions& o) {
  const std::string socket = o.socket.empty() ? daemon::DefaultSocketPath(o.state_dir) : o.socket;
  auto client = daemon::DaemonClient::ConnectIfRunning(socket);
  if (o.clear_health) {
    // Health lives in the daemon (XID events): nothing to clear without one.
    if (client == nullptr) {
      std::cerr << "gpuslice: --clear-health: no daemon answers on " << socket
                << "; GPU health is tracked by `gpuslice daemon`, start it (or give --socket)\n";
      return 2;
    }
    control::v1::ClearGpuHealthRequest request;
    for (const auto& g : o.gpus) request.add_gpus(g);
    auto cleared = client->ClearGpuHealth(request);
    if (!cleared.ok()) {
      std::cerr << "gpuslice: " << cleared.status().message() << "\n";
      return 2;
    }
  }
  auto snapshot = TakeNodeSnapshot(client.get(), o.state_dir, "", /*with_vgpus=*/false);
  if (!snapshot.ok()) {
    std::cerr << "gpuslice: " << snapshot.status().message() << "\n";
    return 2;
  }
  if (o.json)
    std::cout << DevicesJson(snapshot->devices).dump() << "\n";
  else
    std::cout << DevicesTable(snapshot->devices);
  return 0;
}

}  // namespace

void AddDevicesCommand(CLI::App& app) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand("devices", "List the node's GPUs and how they are connected (NVLink, PCIe)");
  cmd->add_flag("--json", o->json, "Print JSON: {node, driver_version, gpus: [...], links: [...]}");
  cmd->add_flag("--clear-health", o->clear_health,
                "Mark GPUs healthy again after critical XID errors (all, or those of --gpu), then list");
  cmd->add_option("--gpu", o->gpus, "With --clear-health: GPUs by index or UUID (default: all)")->delimiter(',');
  cmd->add_option("--state-dir", o->state_dir, "State directory whose daemon to ask (default as for run)");
  cmd->add_option("--socket", o->socket, "The daemon's socket (default: $GPUSLICE_SOCKET, <state-dir>/gpuslice.sock)");
  cmd->callback([o] { ExitCode() = RunDevices(*o); });
}

}  // namespace gpuslice::cli
