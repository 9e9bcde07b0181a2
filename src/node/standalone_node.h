// standalone_node.h — the node's state opened by a command that runs while
// no daemon answers (`gpuslice set`): the same VgpuManager the daemon
// serves, with the node's stored policy (policy_file.h), so that a change
// made standalone writes exactly what the daemon would have. (A standalone
// `gpuslice run` shares node's parsers, GPU selection and stored policy but
// still creates through core::VgpuStore itself; FIXME(issue 14): route it
// here too.)
//
// What differs from the daemon is only what a short-lived process needs:
// schedule passes run inline (ScheduleWorker::Passes::kInline) rather than
// on a worker the process would exit before, and no grace period is kept
// for clients on their way in (there is no later GC pass to honour it).
//
// The manager logs through spdlog; a command's stdout is its output (or its
// child's), so Open sends those logs to stderr, warnings and worse only.
//
// Owned by one thread of the CLI; the manager inside is thread-safe.
#ifndef GPUSLICE_NODE_STANDALONE_NODE_H_
#define GPUSLICE_NODE_STANDALONE_NODE_H_

#include <memory>
#include <string>

#include "core/status.h"
#include "node/node_devices.h"
#include "node/schedule_worker.h"
#include "node/vgpu_manager.h"

namespace gpuslice::node {

class StandaloneNode {
 public:
  // `state_dir` "" = the default root. Without NVML, `devices` is empty:
  // resize and delete still work (GPUs are then named by UUID); create
  // fails with Select()'s error, which names the fix.
  static StatusOr<std::unique_ptr<StandaloneNode>> Open(const std::string& state_dir);

  // Why NVML named no GPUs (a line naming the fix), or "" when it did.
  const std::string& devices_problem() const { return devices_problem_; }

  VgpuManager& manager() { return *manager_; }
  const NodeDevices& devices() const { return devices_; }
  const core::VgpuStore& store() const { return manager_->store(); }

 private:
  StandaloneNode() = default;
  NodeDevices devices_;
  std::string devices_problem_;
  std::unique_ptr<ScheduleWorker> schedule_;
  std::unique_ptr<VgpuManager> manager_;
};

// Sends spdlog's default logger to stderr at warn level, once per process:
// for commands whose stdout is their output. Idempotent.
void LogToStderrForCommand();

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_STANDALONE_NODE_H_
