// vgpu_suspender.h — suspend and resume of one vGPU's processes together,
// over the driver's checkpoint API (checkpoint_driver.h). VgpuManager owns
// the vGPU's state and calls these outside its lock.
//
// Suspend is all or nothing, as the operator sees it:
//   1. lock every process, each with `lock_timeout`; if any lock fails
//      (a call in flight that does not finish, a dead process), unlock
//      those already locked: every process runs on, and the error says which
//      process and why;
//   2. checkpoint every process; if any fails, restore and unlock those
//      done (and unlock the rest): again every process runs on.
// Resume is state-driven and so idempotent: every process still
// checkpointed is restored, then every locked one unlocked. It is also how
// a restarted daemon finishes a suspend or resume it was killed in. A
// restore that fails leaves that process's state in the report (each
// process's state, as the driver tells it) and keeps the others locked, so
// that the vGPU is never half running; a later resume retries.
//
// Thread-compatible: one call per vGPU at a time (VgpuManager's state
// machine ensures it). Blocks for as long as the driver does.
#ifndef GPUSLICE_NODE_VGPU_SUSPENDER_H_
#define GPUSLICE_NODE_VGPU_SUSPENDER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "node/api_status.h"
#include "node/checkpoint_driver.h"

namespace gpuslice::node {

// Locks then checkpoints every process of `pids`. On failure, the status
// names the process and the driver's error, and every process is running.
ApiStatus SuspendProcesses(CheckpointDriver* driver, const std::vector<uint32_t>& pids,
                           std::chrono::milliseconds lock_timeout);

// Restores every checkpointed process of `pids`, then unlocks every locked
// one. On failure, the status lists each process's state. With `onto`
// (a migration), each is restored onto the paired GPUs.
ApiStatus ResumeProcesses(CheckpointDriver* driver, const std::vector<uint32_t>& pids,
                          const std::vector<CheckpointDriver::GpuPair>& onto = {});

// "pid 12: checkpointed, pid 13: failed" (the driver's view, now).
std::string DescribeProcessStates(CheckpointDriver* driver, const std::vector<uint32_t>& pids);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_VGPU_SUSPENDER_H_
