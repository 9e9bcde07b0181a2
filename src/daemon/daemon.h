// daemon.h — `gpuslice daemon`: the node's GPU manager, wired together.
//
// Start-up, in order, each step failing with a one-line error that names
// the fix: the state directory and its instance lock (one daemon per state
// directory), the control socket's path (a live daemon there is refused, a
// stale socket removed), NVML and the device registry, adoption of every
// vGPU already in the store, the gRPC control API, the metrics server. Then
// it serves until SIGTERM or SIGINT, while a housekeeping thread reaps dead
// processes and unused vGPUs every reap interval and samples compute use.
//
// Nothing here is state of record: killing the daemon (even with -9) loses
// nothing, and the next one re-adopts the store.
//
// Called from the CLI's main thread; blocks until the daemon stops.
#ifndef GPUSLICE_DAEMON_DAEMON_H_
#define GPUSLICE_DAEMON_DAEMON_H_

#include "config/daemon_config.h"

namespace gpuslice::daemon {

// Returns the process exit code: 0 after a clean stop, 2 when it could not
// start (after logging why).
int RunDaemon(const config::DaemonConfig& config);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_DAEMON_H_
