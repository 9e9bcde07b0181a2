// `gpuslice daemon`: loads the configuration (flag, then environment, then
// file, then defaults: docs/configuration.md) and runs the node daemon
// (src/daemon/daemon.h) until SIGTERM or SIGINT.
#include <sys/stat.h>

#include <iostream>
#include <memory>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "config/daemon_config.h"
#include "daemon/daemon.h"

namespace gpuslice::cli {
namespace {

struct DaemonFlags {
  std::string config_path;
  std::string state_dir;
  std::string socket;
  std::string socket_group;
  std::string metrics_address;
  bool no_metrics = false;
  std::string log_level;
};

int RunDaemonCommand(const DaemonFlags& f) {
  config::DaemonConfig config;
  struct stat st;
  if (!f.config_path.empty() || stat(config::kDefaultConfigPath, &st) == 0) {
    auto loaded = config::LoadDaemonConfig(f.config_path.empty() ? config::kDefaultConfigPath : f.config_path);
    if (!loaded.ok()) return Fail("daemon", loaded.status().message());
    config = std::move(loaded.value());
  }
  if (Status s = config::ApplyEnvironment(config); !s.ok()) return Fail("daemon", s.message());
  if (!f.state_dir.empty()) config.state_dir = f.state_dir;
  if (!f.socket.empty()) config.socket.path = f.socket;
  if (!f.socket_group.empty()) config.socket.group = f.socket_group;
  if (!f.metrics_address.empty()) config.metrics.address = f.metrics_address;
  if (f.no_metrics) config.metrics.enabled = false;
  if (!f.log_level.empty()) config.log_level = f.log_level;
  if (Status s = config::ValidateDaemonConfig(config, "command line"); !s.ok()) return Fail("daemon", s.message());
  return daemon::RunDaemon(config);
}

}  // namespace

void AddDaemonCommand(CLI::App& app) {
  auto f = std::make_shared<DaemonFlags>();
  CLI::App* cmd = app.add_subcommand("daemon", "Run the node daemon: vGPU lifecycle, live resize, metrics");
  cmd->add_option("--config", f->config_path, "YAML config file (default: /etc/gpuslice/config.yaml if present)");
  cmd->add_option("--state-dir", f->state_dir, "State directory (overrides state_dir)");
  cmd->add_option("--socket", f->socket, "Control socket path (overrides socket.path)");
  cmd->add_option("--socket-group", f->socket_group, "Group allowed to use the socket (overrides socket.group)");
  cmd->add_option("--metrics-address", f->metrics_address,
                  "host:port for /metrics (overrides metrics.address; port 0 picks a free one)");
  cmd->add_flag("--no-metrics", f->no_metrics, "Serve no metrics (overrides metrics.enabled)");
  cmd->add_option("--log-level", f->log_level, "trace, debug, info, warn, error or off (overrides log_level)");
  cmd->callback([f] { ExitCode() = RunDaemonCommand(*f); });
}

}  // namespace gpuslice::cli
