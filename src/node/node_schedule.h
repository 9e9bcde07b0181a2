// node_schedule.h — writes every vGPU's per-GPU hardware timeslice into its
// limits, from the set of vGPUs that share each GPU; and the one writer of a
// vGPU's limits after it is created (a resize, a power budget: LimitsChange).
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
// The limits file is 0444 so that no application can open it for writing.
// Its owner (the user running the daemon or the standalone CLI) lifts the
// owner's write bit for the instant it takes to open the mapping, then puts
// the mode back; root needs no such step. Group and other bits are never
// touched.
//
// Serialised node-wide by flock(<root>/.schedule.lock), so the last caller
// always computes from the latest set and concurrent callers cannot leave a
// stale schedule behind. Waits for that lock (held only for the computation,
// a few ms) at most port::kStateLockWait, then returns an error naming its
// holder: a stopped daemon must not hang a standalone run. Allocates; makes
// syscalls. Call from any thread of the CLI or
// daemon, never from the interposer.
#ifndef GPUSLICE_NODE_NODE_SCHEDULE_H_
#define GPUSLICE_NODE_NODE_SCHEDULE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/vgpu_store.h"
#include "node/gpu_occupancy.h"
#include "policy/timeslice_policy.h"

namespace gpuslice::node {

// A change to one vGPU's limits. A pass writes it under its lock before it
// reads any vGPU, so the slices follow from the new values, no other pass can
// see it half done, and the vGPU's processes see the change and its slices
// with one generation bump, whether or not its slices moved. Unset fields
// keep their values.
struct LimitsChange {
  std::string vgpu;
  std::optional<uint64_t> memory_limit_bytes;  // every device
  std::optional<uint32_t> compute_share_pct;   // every device
  std::optional<uint32_t> priority;            // every device (core::LevelOf)
  std::vector<uint32_t> compute_cap_pct;       // one per device; empty: unchanged
  // One per device; empty: unchanged. A vGPU moved to other GPUs (a
  // migration: VgpuManager::Migrate) while its processes are suspended.
  std::vector<std::array<uint8_t, 16>> gpu_uuids;
  bool written = false;                        // set by the pass once the values are stored
};

struct NodeScheduleResult {
  std::vector<std::string> changed;  // vGPUs whose limits were rewritten (generation bumped)
};

// For every GPU (by UUID), gathers the vGPUs in `store` that include it,
// computes their slices with policy::ComputeTimeslices, and stores each vGPU's slice
// into its limits' DeviceLimit::timeslice_us, with the node's share mode
// (kDeviceFlagShareTurns), bumping `generation` once per vGPU and only when
// one of these changed. vGPUs that cannot be opened
// (being removed, corrupted) are left out of the computation; the first such
// problem, or a limits file that cannot be written, is returned after every
// other vGPU has been scheduled.
//
// `change`, if given, is written first; if it cannot be, nothing else is done
// and the error is returned (`change->written` stays false).
//
// `occupancy`, if given, says which vGPUs have a process running on each
// GPU it knows (gpu_occupancy.h): beside an LC, only those contend for the GPU
// (policy::VgpuOnGpu::on_gpu). Without it, every vGPU on a GPU counts.
Status ApplyNodeSchedule(const core::VgpuStore& store, const policy::TimeslicePolicyConfig& config = {},
                         NodeScheduleResult* result = nullptr, LimitsChange* change = nullptr,
                         const GpuOccupancy* occupancy = nullptr);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_NODE_SCHEDULE_H_
