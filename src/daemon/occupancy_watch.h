// occupancy_watch.h — keeps the node schedule's GPU occupancy
// (node/gpu_occupancy.h) current: about once a second the driver's compute
// processes on each GPU (NVML), matched to the vGPUs' ledgers; when that
// differs from the last pass's, a schedule pass, so that beside an LC only
// the best-effort vGPUs with a process on a GPU contend for it there.
//
// Fails open: when NVML cannot list a GPU's processes, the occupancy is
// emptied (every vGPU counts, as without a watch) and that is said once.
//
// Not thread-safe: one thread calls Pass (the daemon's housekeeping thread,
// the only user of its NvmlLibrary). Allocates.
#ifndef GPUSLICE_DAEMON_OCCUPANCY_WATCH_H_
#define GPUSLICE_DAEMON_OCCUPANCY_WATCH_H_

#include <vector>

#include "audit/memory_audit.h"
#include "node/gpu_occupancy.h"
#include "node/schedule_worker.h"
#include "node/vgpu_manager.h"
#include "node/vgpu_view.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {

// Which of `views` have a process of `processes` (NVML's, this namespace's
// pids) on each of `gpus`. A process counts for every vGPU on that GPU whose
// ledger has a slot naming it (ProcessTable::InNamespace, as the memory
// audit matches them), and as one of the GPU's other_processes when none
// does. Every GPU of `gpus` is in the result, those with no process too.
node::GpuOccupancy OccupancyOf(const std::vector<node::VgpuView>& views,
                               const std::vector<audit::GpuProcess>& processes, const audit::ProcessTable& table,
                               const std::vector<port::GpuInfo>& gpus);

class OccupancyWatch {
 public:
  // All must outlive the watch.
  OccupancyWatch(port::NvmlLibrary* nvml, node::VgpuManager* manager, const audit::ProcessTable* table,
                 node::OccupancyCell* cell, node::ScheduleWorker* schedule);
  void Pass();

 private:
  port::NvmlLibrary* const nvml_;
  node::VgpuManager* const manager_;
  const audit::ProcessTable* const table_;
  node::OccupancyCell* const cell_;
  node::ScheduleWorker* const schedule_;
  bool warned_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_OCCUPANCY_WATCH_H_
