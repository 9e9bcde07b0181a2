// suspend_record.h — a vGPU's suspend state and its counters, persisted as
// the file `suspend` in the vGPU's directory so that a restarted daemon
// knows which vGPUs it left suspended, or in the middle of a suspend or a
// resume (VgpuManager::RecoverSuspends finishes those).
//
// States: running (no file, or "running") -> suspending -> suspended ->
// resuming -> running. A failed suspend goes back to running; a failed
// resume stays suspended, with `detail` naming each process's state.
//
// Value type; thread-compatible. Read/Write make syscalls; Write replaces
// the file atomically (rename), so a kill -9 leaves the old or the new.
#ifndef GPUSLICE_NODE_SUSPEND_RECORD_H_
#define GPUSLICE_NODE_SUSPEND_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::node {

enum class SuspendState { kRunning, kSuspending, kSuspended, kResuming };

const char* SuspendStateName(SuspendState s);

struct SuspendRecord {
  SuspendState state = SuspendState::kRunning;
  std::vector<uint32_t> pids;     // the processes suspended (or being), in the daemon's pid namespace
  uint64_t bytes = 0;             // device memory they held when suspended
  int64_t since_unix_ms = 0;      // when the current state began
  std::string detail;             // the last failure, one line; "" when none
  // Who suspended it: "" an operator (`gpuslice suspend`), or
  // kSuspendedByMemoryPressure (node/memory_pressure.h), whose vGPUs the
  // daemon resumes by itself, also after a restart.
  std::string by;
  // While a migration is under way: the GPU its processes were checkpointed
  // on ("GPU-..."), where a resume without the migration's pairs restores
  // them, so that resume puts the vGPU's limits back there first (a daemon
  // killed mid-migration: VgpuManager::Migrate).
  std::string migrating_from;
  // Lifetime counters (metrics).
  double suspended_seconds_total = 0;  // closed suspended periods only
  uint64_t bytes_moved_total = 0;      // checkpointed plus restored
  uint64_t suspends = 0;
  uint64_t resumes = 0;
  double last_suspend_seconds = 0;
  double last_resume_seconds = 0;
};

inline constexpr char kSuspendedByMemoryPressure[] = "memory_pressure";

// The file's name in the vGPU's directory.
inline constexpr char kSuspendFile[] = "suspend";

// Reads `dir`/suspend; a missing file is a running vGPU with no history.
StatusOr<SuspendRecord> ReadSuspendRecord(const std::string& dir);
Status WriteSuspendRecord(const std::string& dir, const SuspendRecord& record);

// The text form (exposed for tests).
std::string FormatSuspendRecord(const SuspendRecord& record);
StatusOr<SuspendRecord> ParseSuspendRecord(const std::string& text);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_SUSPEND_RECORD_H_
