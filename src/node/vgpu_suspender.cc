// Suspend and resume of a vGPU's processes (vgpu_suspender.h).
#include "node/vgpu_suspender.h"

#include <spdlog/spdlog.h>

namespace gpuslice::node {
namespace {

std::string Pid(uint32_t pid) { return "pid " + std::to_string(pid); }

// Back to running after a failed suspend: restores what was checkpointed,
// unlocks what was locked. Returns "" or what could not be undone.
std::string RollBack(CheckpointDriver* driver, const std::vector<uint32_t>& checkpointed,
                     const std::vector<uint32_t>& locked) {
  std::string problems;
  for (uint32_t pid : checkpointed) {
    if (CheckpointResult r = driver->Restore(pid); !r.ok()) {
      problems += "; restore of " + Pid(pid) + " failed (" + r.error + ")";
    }
  }
  for (auto it = locked.rbegin(); it != locked.rend(); ++it) {
    if (CheckpointResult r = driver->Unlock(*it); !r.ok()) {
      problems += "; unlock of " + Pid(*it) + " failed (" + r.error + ")";
    }
  }
  return problems;
}

}  // namespace

std::string DescribeProcessStates(CheckpointDriver* driver, const std::vector<uint32_t>& pids) {
  std::string out;
  for (uint32_t pid : pids) {
    if (!out.empty()) out += ", ";
    out += Pid(pid) + ": " + ProcessCheckpointStateName(driver->State(pid));
  }
  return out;
}

ApiStatus SuspendProcesses(CheckpointDriver* driver, const std::vector<uint32_t>& pids,
                           std::chrono::milliseconds lock_timeout) {
  std::vector<uint32_t> locked;
  for (uint32_t pid : pids) {
    CheckpointResult r = driver->Lock(pid, lock_timeout);
    if (r.ok()) {
      locked.push_back(pid);
      continue;
    }
    const std::string undo = RollBack(driver, {}, locked);
    std::string why = r.timed_out() ? "timed out after " + std::to_string(lock_timeout.count()) +
                                          " ms (a CUDA call of it did not finish; retry, or give a longer "
                                          "--lock-timeout)"
                                    : "failed (" + r.error + ")";
    if (undo.empty()) {
      return {ApiCode::kFailedPrecondition,
              "lock of " + Pid(pid) + " " + why + "; nothing suspended, every process left running"};
    }
    return {ApiCode::kInternal, "lock of " + Pid(pid) + " " + why + undo + "; processes: " +
                                    DescribeProcessStates(driver, pids)};
  }
  std::vector<uint32_t> checkpointed;
  for (uint32_t pid : pids) {
    CheckpointResult r = driver->Checkpoint(pid);
    if (r.ok()) {
      checkpointed.push_back(pid);
      continue;
    }
    const std::string undo = RollBack(driver, checkpointed, locked);
    if (undo.empty()) {
      return {ApiCode::kInternal, "checkpoint of " + Pid(pid) + " failed (" + r.error +
                                      "); nothing suspended, every process left running"};
    }
    return {ApiCode::kInternal, "checkpoint of " + Pid(pid) + " failed (" + r.error + ")" + undo +
                                    "; processes: " + DescribeProcessStates(driver, pids)};
  }
  return ApiStatus::Ok();
}

ApiStatus ResumeProcesses(CheckpointDriver* driver, const std::vector<uint32_t>& pids,
                          const std::vector<CheckpointDriver::GpuPair>& onto) {
  // Restore all before unlocking any: the vGPU runs again as a whole.
  for (uint32_t pid : pids) {
    if (driver->State(pid) != ProcessCheckpointState::kCheckpointed) continue;
    if (CheckpointResult r = onto.empty() ? driver->Restore(pid) : driver->RestoreOnto(pid, onto); !r.ok()) {
      const std::string states = DescribeProcessStates(driver, pids);
      spdlog::error("restore of pid {} failed ({}); the vGPU stays suspended; processes: {}", pid, r.error, states);
      return {ApiCode::kInternal, "RESTORE FAILED: restore of " + Pid(pid) + " failed (" + r.error +
                                      "); the vGPU stays suspended, its restored processes locked; processes: " +
                                      states + "; retry `gpuslice resume`, or kill the failed process"};
    }
  }
  for (uint32_t pid : pids) {
    if (driver->State(pid) != ProcessCheckpointState::kLocked) continue;
    if (CheckpointResult r = driver->Unlock(pid); !r.ok()) {
      const std::string states = DescribeProcessStates(driver, pids);
      spdlog::error("unlock of pid {} failed ({}); processes: {}", pid, r.error, states);
      return {ApiCode::kInternal, "unlock of " + Pid(pid) + " failed (" + r.error + "); processes: " + states +
                                      "; retry `gpuslice resume`"};
    }
  }
  return ApiStatus::Ok();
}

}  // namespace gpuslice::node
