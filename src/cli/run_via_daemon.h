// run_via_daemon.h — `gpuslice run` when a daemon answers on the socket.
//
// The daemon, not this process, creates (or joins) the vGPU: it owns the
// state directory, applies its configured defaults, and schedules compute.
// This process then does what a standalone run does: holds the vGPU's
// membership lock while the command runs and supervises the command; the
// daemon reaps dead processes (this process only every 0.5 s, as a fallback
// for while the daemon is down). On exit it asks the daemon to remove the vGPU if
// it is unused (the daemon's own GC removes it otherwise, e.g. when this
// process is killed). The daemon dying mid-run changes nothing for the
// command: its limits and accounting live in the vGPU's files.
//
// A daemon that does not answer the creation within kCreateDeadline
// (restarting, or hung) is taken for absent: the run goes on standalone,
// with a warning, rather than failing a command that has not started.
//
// Called from RunCommand on the CLI's main thread; blocks until the command
// exits.
#ifndef GPUSLICE_CLI_RUN_VIA_DAEMON_H_
#define GPUSLICE_CLI_RUN_VIA_DAEMON_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "daemon/daemon_client.h"
#include "port/nvml_library.h"

namespace gpuslice::cli {

// The child's environment for a vGPU directory and its GPUs (only
// uuid_text is set), built by run_command.cc exactly as standalone.
using ChildEnvironmentFn =
    std::function<std::vector<std::string>(const std::string& vgpu_dir, const std::vector<port::GpuInfo>& gpus)>;

// Returns the process exit code, as RunCommand; or nothing when the daemon
// did not answer the vGPU's creation within kCreateDeadline (restarting or
// hung), so that the caller runs standalone instead of failing.
inline constexpr std::chrono::seconds kCreateDeadline{5};
std::optional<int> RunViaDaemon(daemon::DaemonClient& client, const RunOptions& options, const std::string& name,
                                const ChildEnvironmentFn& environment);

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_RUN_VIA_DAEMON_H_
