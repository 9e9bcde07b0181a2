// vgpu_view.h — a snapshot of one vGPU as the control API shows it: limits,
// usage per GPU and per process, lifetime counters.
//
// Read from the vGPU's mapped files with atomic loads, without any lock: a
// snapshot may mix values a few microseconds apart, never torn ones. LC
// latency and task quantiles are over the vGPU's lifetime here; VgpuManager
// narrows them to a recent window from its own samples. Called
// by VgpuManager under its lock, from gRPC and housekeeping threads.
// Allocates; makes one flock probe (HasMembers) per call.
#ifndef GPUSLICE_NODE_VGPU_VIEW_H_
#define GPUSLICE_NODE_VGPU_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/lc_latency.h"
#include "core/memory_wait.h"
#include "core/task_metrics.h"
#include "core/vgpu_layout.h"
#include "core/vgpu_store.h"
#include "node/node_devices.h"

namespace gpuslice::node {

struct VgpuDeviceView {
  std::optional<uint32_t> gpu_index;  // absent: a GPU this node does not have (any more)
  std::string gpu_uuid;               // "GPU-..."
  uint64_t memory_total_bytes = 0;    // the GPU's own size; 0 when unknown
  uint64_t memory_limit_bytes = core::kUnlimited;
  uint64_t memory_used_bytes = 0;
  uint32_t compute_share_pct = 100;
  // The user's hard cap (0: none). With a power cap, the pacer enforces
  // effective_compute_cap_pct = min(this, power_budget_pct) instead.
  uint32_t compute_cap_pct = 0;
  uint32_t effective_compute_cap_pct = 0;  // what the limits hold (0: none)
  uint32_t power_budget_pct = 0;           // the power cap's GPU-time budget (0: none yet / no power cap)
  core::Priority priority = core::Priority::kBestEffort;  // the level's class
  uint32_t priority_rank = 0;                             // its rank in the class (core::LevelRank)
  uint64_t timeslice_us = 0;
  uint64_t timeslice_beside_lc_us = 0;
  // The longest slice its compute and copy channel groups may have here
  // (core/slice_ceiling.h).
  uint64_t slice_ceiling_us = 0;
  uint64_t copy_slice_ceiling_us = 0;
  uint64_t applied_timeslice_us = 0;  // the largest any live process set
  std::optional<double> compute_measured_ratio;
};

// A channel group a process's library published (core::ProcessSlot::
// channel_groups): the tenant's to write, so only a hint of where to look.
struct ChannelGroupView {
  int fd = -1;                // the process's own descriptor number
  uint32_t client = 0;        // RM client handle
  uint32_t handle = 0;        // the group's handle
  uint32_t device_slot = 0;   // index into VgpuView::devices; core::kUnknownDeviceSlot
  uint32_t engine_type = 0;   // 1: compute
};

struct VgpuProcessView {
  uint32_t pid = 0;               // in its own pid namespace
  uint64_t pid_namespace = 0;     // that namespace's inode
  bool same_pid_namespace = true;
  std::vector<uint64_t> memory_used_bytes;  // per device
  std::vector<uint64_t> applied_timeslice_us;  // per device (first ProcessSlot::kApplied)
  std::vector<ChannelGroupView> channel_groups;
};

// The vGPU's LC request latency (core/lc_latency.h).
struct LcLatencyView {
  core::LcLatencySnapshot lifetime;   // every request since the vGPU was made
  std::optional<double> p50_seconds;  // absent: no request to estimate from
  std::optional<double> p99_seconds;
  // Set: the quantiles are over the requests of this recent window (since
  // the daemon's baseline sample, VgpuManager::SampleLcLatency). Absent: over
  // the lifetime, for want of a baseline (a standalone reader, the daemon's
  // first second) or of any request in the window.
  std::optional<double> window_seconds;
  uint64_t window_requests = 0;
};

// Sets `out`'s quantiles from its `lifetime` and, when `baseline` is given
// (a snapshot of the same ledger taken `window_seconds` ago), from the
// requests since then if there were any.
void SetLcLatencyQuantiles(const core::LcLatencySnapshot* baseline, double window_seconds, LcLatencyView* out);

// One level of the task API's tasks, summed over the vGPU's processes
// (core/task_metrics.h).
struct TaskLevelView {
  std::string level;  // its name; "other" for names past the ledger's rows
  uint64_t failed = 0;
  uint64_t slo_misses = 0;
  LcLatencyView latency;  // count, buckets and quantiles, as the LC histogram's
};

struct VgpuView {
  std::string name;
  std::string dir;
  bool persistent = false;
  bool has_members = false;
  uint64_t generation = 0;
  core::Priority priority = core::Priority::kBestEffort;  // the first device's
  uint32_t priority_rank = 0;                             // the first device's
  std::string priority_level;  // its level's name; set by VgpuManager, which knows the node's levels
  std::optional<double> power_cap_watts;  // per GPU; set by VgpuManager (node/power_cap_file.h)
  std::optional<uint32_t> owner_uid;      // set by VgpuManager (node/vgpu_owner.h); unset: none recorded
  std::vector<VgpuDeviceView> devices;
  std::vector<VgpuProcessView> processes;
  uint64_t denied_allocations = 0;
  uint64_t reaped_processes = 0;
  uint64_t timeslice_applications = 0;
  uint64_t timeslice_failures = 0;
  uint64_t gate_waits = 0;
  uint64_t hold_budget_spent = 0;  // core::Ledger::hold_budget_spent
  // Memory overcommit (core/memory_wait.h, node/memory_pressure.h): its
  // processes' unanswered requests for room on a full GPU, and whether it
  // may be suspended to make room for higher levels (set by VgpuManager).
  std::vector<core::MemoryWait> memory_waits;
  bool suspendable = false;
  LcLatencyView lc_latency;  // quantiles over the lifetime, unless the manager had a baseline
  std::vector<TaskLevelView> task_levels;  // likewise
  std::string corrupt;       // why its state cannot be read ("": it can); then only name and dir are set
  // Suspend (suspend_record.h); set by VgpuManager from the vGPU's suspend file.
  std::string suspend_state = "running";  // running, suspending, suspended, resuming
  std::string suspend_detail;             // the last suspend/resume failure; "" when none
  std::string suspended_by;               // SuspendRecord::by
  uint64_t suspended_bytes = 0;           // device memory checkpointed to host, while suspended
  double suspended_seconds_total = 0;     // the current suspended period included
  uint64_t suspend_bytes_moved_total = 0;
  uint64_t suspends = 0;
  uint64_t resumes = 0;
  double last_suspend_seconds = 0;
  double last_resume_seconds = 0;
};

VgpuView ReadVgpuView(const core::VgpuHandle& handle, const NodeDevices& devices);

// True while a `gpuslice run` (or other member) holds the vGPU's members
// lock. Probes with a non-blocking exclusive flock, released at once.
bool HasMembers(const std::string& dir);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", NVML's spelling.
std::string FormatGpuUuid(const uint8_t uuid[16]);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_VGPU_VIEW_H_
