// task_metrics.h — the task API's metrics per level, kept in the vGPU's
// ledger (vgpu_layout.h, TaskLevelRow) so that every process's schedulers
// add to one set of counts that `gpuslice ls`, `top` and `/metrics` read.
//
// Writers: the exported gpuslice_task_record (gpuslice.h), which each
// scheduler calls once per finished task, from any thread of any process of
// the vGPU. A level's row is found by its name; the first process to record
// a name claims a free row with one CAS (state 0 to 1), writes the name and
// publishes it with a release store of 2. Rows are never freed during the
// vGPU's life, so a claim takes no lock, and a kill -9 at any step leaves at
// worst a row at 1 (no name yet), which readers skip and nobody reuses: it
// costs one of the 32 rows, never a count. Two processes claiming rows for
// one name at once both keep theirs; readers add such rows together. Past
// the 32nd name, tasks are counted in `task_levels_other`. Recording is a
// scan of at most 32 names and five atomic adds: no lock, no allocation, no
// syscall.
//
// Readers (the daemon, the CLI) take snapshots from any thread without a
// lock, as of the LC histogram (lc_latency.h), whose buckets and quantile
// estimate these reuse.
#ifndef GPUSLICE_CORE_TASK_METRICS_H_
#define GPUSLICE_CORE_TASK_METRICS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/lc_latency.h"
#include "core/vgpu_layout.h"

namespace gpuslice::core {

// What a finished task was, beside its latency (gpuslice.h's flags).
inline constexpr uint32_t kTaskFailed = 1;   // it ended with an exception
inline constexpr uint32_t kTaskSloMiss = 2;  // it took longer than its SLO

// The name the row of every level past the 32nd is shown under.
inline constexpr std::string_view kOtherTaskLevel = "other";

// A level name as the task API allows it: 1-32 of a-z, 0-9, `_` and `-`.
bool ValidTaskLevelName(std::string_view name);

// Counts one finished task of level `name`. False (and nothing counted) when
// `name` is not a valid level name.
bool RecordTask(Ledger* ledger, std::string_view name, uint64_t latency_ns, uint32_t flags);

struct TaskLevelSnapshot {
  std::string name;  // kOtherTaskLevel for the overflow row
  uint64_t failed = 0;
  uint64_t slo_misses = 0;
  LcLatencySnapshot latency;  // count, sum and buckets
};

// Every level with a task recorded, rows of one name added together, in the
// order their first rows were claimed; the overflow row last, if used.
std::vector<TaskLevelSnapshot> TakeTaskLevelSnapshots(const Ledger& ledger);

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_TASK_METRICS_H_
