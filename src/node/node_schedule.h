// node_schedule.h — writes every vGPU's per-GPU hardware timeslice into its
// limits, from the set of vGPUs that share each GPU.
//
// The schedule is a node-wide fact: a vGPU's slice depends on which other
// vGPUs (and of what class and share) are on the same GPU. Whoever changes
// that set calls ApplyNodeSchedule afterwards:
//   - the `gpuslice run` supervisor, after it creates/joins a vGPU and after
//     the vGPU is removed (src/cli/run_command.cc);
//   - the node daemon, on every create, resize and removal.
// Each process of each vGPU notices the bumped `generation` and re-applies
// the slice to its channel groups (src/interposer/compute_thread.cc).
// The same pass writes the node's roster (core/board_roster.h) into every
// vGPU's directory: which vGPUs are on each GPU, and at what level, weight
// and cap, the only source from which a process believes another vGPU's
// pacing-board row.
//
// Serialised node-wide by flock(<root>/.schedule.lock), so the last caller
// always computes from the latest set and concurrent callers cannot leave a
// stale schedule behind. Blocks on that lock (held only for the computation,
// a few ms); allocates; makes syscalls. Call from any thread of the CLI or
// daemon, never from the interposer.
#ifndef GPUSLICE_NODE_NODE_SCHEDULE_H_
#define GPUSLICE_NODE_NODE_SCHEDULE_H_

#include <string>
#include <vector>

#include "core/status.h"
#include "core/vgpu_store.h"
#include "policy/timeslice_policy.h"

namespace gpuslice::node {

struct NodeScheduleResult {
  std::vector<std::string> changed;  // vGPUs whose limits were rewritten (generation bumped)
};

// For every GPU (by UUID), gathers the vGPUs in `store` that include it,
// computes their slices with policy::ComputeTimeslices, and stores each vGPU's slice
// into its limits' DeviceLimit::timeslice_us, bumping `generation` once per
// vGPU and only when one of its slices changed. vGPUs that cannot be opened
// (being removed, corrupted) are left out of the computation; the first such
// problem, or a limits file that cannot be written, is returned after every
// other vGPU has been scheduled.
//
// `also_bump`: a vGPU whose limits the caller has just changed without
// bumping their generation (VgpuManager::Resize); its generation is bumped
// here even if its slices stay the same, so that one change is one bump.
Status ApplyNodeSchedule(const core::VgpuStore& store, const policy::TimeslicePolicyConfig& config = {},
                         NodeScheduleResult* result = nullptr, const std::string& also_bump = "");

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_NODE_SCHEDULE_H_
