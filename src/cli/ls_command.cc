// `gpuslice ls [NAME]`: vGPUs with their limits, usage and processes, from
// the daemon when one answers, else from the state directory directly.
#include <iostream>
#include <memory>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/node_snapshot.h"
#include "daemon/socket_path.h"

namespace gpuslice::cli {
namespace {

struct LsOptions {
  std::string name;
  bool json = false;
  std::string state_dir;
  std::string socket;
};

int RunLs(const LsOptions& o) {
  const std::string socket = o.socket.empty() ? daemon::DefaultSocketPath(o.state_dir) : o.socket;
  auto client = daemon::DaemonClient::ConnectIfRunning(socket);
  auto snapshot = TakeNodeSnapshot(client.get(), o.state_dir, o.name, /*with_vgpus=*/true);
  if (!snapshot.ok()) {
    std::cerr << "gpuslice: " << snapshot.status().message() << "\n";
    return 2;
  }
  if (o.json) {
    Json out;
    out["vgpus"] = Json::array();
    for (const auto& v : snapshot->vgpus) out["vgpus"].push_back(VgpuJson(v));
    std::cout << out.dump() << "\n";
  } else {
    std::cout << VgpuTable(snapshot->vgpus, snapshot->devices);
  }
  return 0;
}

}  // namespace

void AddLsCommand(CLI::App& app) {
  auto o = std::make_shared<LsOptions>();
  CLI::App* cmd = app.add_subcommand("ls", "List vGPUs: limits, usage, compute shares and processes");
  cmd->add_option("name", o->name, "Only this vGPU");
  cmd->add_flag("--json", o->json, "Print JSON: {vgpus: [...]}");
  cmd->add_option("--state-dir", o->state_dir, "State directory (default: as for run)");
  cmd->add_option("--socket", o->socket, "The daemon's socket (default: $GPUSLICE_SOCKET, <state-dir>/gpuslice.sock)");
  cmd->callback([o] { ExitCode() = RunLs(*o); });
}

}  // namespace gpuslice::cli
