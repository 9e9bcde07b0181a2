// child_process.h — running the user's command and standing by it.
//
// Spawn() forks and execs the command with the given environment, this
// process being the child subreaper of all its descendants (so none leaves
// its tree: cli/session_audit.h). Supervise() waits for it while forwarding
// SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it, reaps the orphaned
// descendants handed to it, and calls `tick` every `tick_ms` meanwhile (the
// vGPU's dead-process reaper and the memory audit run there). It returns the
// exit code a shell would give: the command's own status, or 128 + the
// signal that killed it.
//
// Called from the CLI's main thread only. Blocks until the child exits.
#ifndef GPUSLICE_CLI_CHILD_PROCESS_H_
#define GPUSLICE_CLI_CHILD_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::cli {

// Blocks, in the calling thread, the signals Supervise() forwards. Threads
// started afterwards inherit the mask, so none of them can take (and die of)
// a SIGTERM meant for the command: call it before anything starts threads
// (the gRPC client of `gpuslice run` through the daemon).
void BlockSupervisedSignals();

class ChildProcess {
 public:
  // `env` entries are "NAME=value". Signals are blocked in the parent from
  // here on, so none is lost between spawn and supervision.
  static StatusOr<ChildProcess> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env);

  int Supervise(int tick_ms, const std::function<void()>& tick);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_CHILD_PROCESS_H_
