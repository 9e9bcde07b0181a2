// commands.h — the Kubernetes subcommands of `gpuslice`:
//   gpuslice device-plugin       (DaemonSet on GPU nodes; device_plugin.h)
//   gpuslice scheduler-extender  (beside kube-scheduler; extender_server.h)
//   gpuslice dra-plugin          (DaemonSet on GPU nodes, DRA mode; dra/dra_plugin.h)
//   gpuslice install-library     (the plugins' init container; library_install.h)
// Flags are parsed here and nothing else: the logic lives in the modules.
//
// AddCommands is called from main() only. Each server blocks until SIGINT
// or SIGTERM, then shuts down cleanly and exits 0 (2 on a startup error,
// printed as one line naming the fix).
#ifndef GPUSLICE_K8S_COMMANDS_H_
#define GPUSLICE_K8S_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace gpuslice::k8s {

void AddCommands(CLI::App& app);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_COMMANDS_H_
