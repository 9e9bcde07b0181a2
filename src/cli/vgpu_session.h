// vgpu_session.h — one `gpuslice run` command inside a vGPU that exists:
// what a standalone run and a run through the daemon do alike once the vGPU
// is made (run_command.cc, run_via_daemon.cc).
//
// It holds the vGPU's membership lock while the command runs (so nobody
// removes the vGPU under it), spawns the command with the vGPU's environment,
// supervises it (reaps the vGPU's dead processes every `reap_interval_ms`,
// less often when many processes share the vGPU: core::ReapSpacingNs; and
// runs the memory audit, session_audit.h), reaps once more when it exits,
// and finally calls `release` (which gives up this run's claim on the vGPU;
// how depends on who made it). `release` runs on every path, failures
// included, once.
//
// Called on the CLI's main thread; blocks until the command exits. Returns
// the process exit code for `gpuslice run`: the command's status, 127 when it
// could not start, or the Fail() code with its message printed.
#ifndef GPUSLICE_CLI_VGPU_SESSION_H_
#define GPUSLICE_CLI_VGPU_SESSION_H_

#include <functional>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "cli/run_via_daemon.h"

namespace gpuslice::cli {

struct VgpuSession {
  std::string state_root;  // the state directory the vGPU is in
  std::string name;
  std::string dir;
  std::vector<std::string> gpu_uuids;
  int reap_interval_ms = 0;
  std::function<void()> release;
  // Called about once a second while the command runs (a standalone run's
  // power cap); may be empty.
  std::function<void()> each_second;
};

int RunInVgpu(const VgpuSession& session, const RunOptions& options, const ChildEnvironmentFn& environment);

}  // namespace gpuslice::cli

#endif  // GPUSLICE_CLI_VGPU_SESSION_H_
