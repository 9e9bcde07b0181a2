// occupancy_watch.h — keeps the node schedule's GPU occupancy
// (node/gpu_occupancy.h) current: about once a second the driver's compute
// processes on each GPU (NVML), matched to the vGPUs' ledgers; when that
// differs from the last pass's, a schedule pass, so that beside an LC only
// the best-effort vGPUs with a process on a GPU contend for it there.
//
// A vGPU (or a process of none) seen on a GPU stays on it for kLingerNs after
// it was last seen. A vGPU whose process arrives runs at the slice it would
// have beside the others, but theirs follow only at the next pass (about a
// second): a lone best-effort vGPU at the tiny slice beside the arrival's
// longer one gets little of the GPU meanwhile. Without the linger a tenant
// that starts and ends processes over and over would get that second again
// and again; with it, once per kLingerNs. Jobs that come and go (a script of
// short CUDA runs) keep their neighbours' slices steady the same way. A
// process of no vGPU lingers only while it lives (OccupancyLinger).
//
// A listed process that has run nothing for a while (ProcessActivity: a
// notebook after `import torch`, a server with no traffic) is not on the GPU
// either: an LC beside such a neighbour waited 4.1x longer at p99 on an H200
// (docs/benchmarks.md, "An idle second BE vGPU beside an LC").
//
// Fails open: when NVML cannot list a GPU's processes, the occupancy is
// emptied (every vGPU counts, as without a watch) and that is said once.
//
// Not thread-safe: one thread calls Pass (the daemon's housekeeping thread,
// the only user of its NvmlLibrary). Allocates.
#ifndef GPUSLICE_DAEMON_OCCUPANCY_WATCH_H_
#define GPUSLICE_DAEMON_OCCUPANCY_WATCH_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
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
// audit matches them), and as one of the GPU's other_pids when none does. Every GPU of `gpus` is in the result, those
// with no process too. `claimed`, if given, gets the pids a vGPU on the GPU does claim, per GPU.
using ClaimedPids = std::map<std::array<uint8_t, 16>, std::set<uint32_t>>;
node::GpuOccupancy OccupancyOf(const std::vector<node::VgpuView>& views,
                               const std::vector<audit::GpuProcess>& processes, const audit::ProcessTable& table,
                               const std::vector<port::GpuInfo>& gpus, ClaimedPids* claimed = nullptr);

// `seen` (an OccupancyOf) with everything seen on each of its GPUs within
// `linger_ns` before `now_ns` added; remembers `seen` as of `now_ns`. A
// process of no vGPU that a vGPU now claims (`claimed`: one that had not yet
// joined its ledger, an LC's at its start) no longer lingers as one of none:
// it counts as its vGPU; nor does one that has ended (`alive` says no): a
// process of no vGPU is nobody's to come back.
class OccupancyLinger {
 public:
  explicit OccupancyLinger(uint64_t linger_ns, std::function<bool(uint32_t pid)> alive = nullptr)
      : linger_ns_(linger_ns), alive_(std::move(alive)) {}
  // `idle`: what is on the GPUs but idle (ProcessActivity), which does not
  // linger (the idle window is its own).
  node::GpuOccupancy Apply(const node::GpuOccupancy& seen, const ClaimedPids& claimed, uint64_t now_ns,
                           const node::GpuOccupancy& idle = {});

 private:
  const uint64_t linger_ns_;
  const std::function<bool(uint32_t)> alive_;
  struct LastSeen {
    std::map<std::string, uint64_t> vgpus;  // vGPU name -> when
    std::map<uint32_t, uint64_t> pids;      // a process of none -> when
  };
  std::map<std::array<uint8_t, 16>, LastSeen> last_seen_ns_;  // per GPU
};

// Which listed processes are idle: those the driver has listed for
// `idle_after_ns` and whose SMs it has not seen busy (NVML's per-process
// samples) for as long. What a process runs on the GPU its tenant cannot
// hide from the driver, nor fake idleness with; the samples come 0.2-5.6 s
// apart for a busy process (docs/benchmarks.md, "NVML's raw samples"), so
// the window is seconds. On a GPU whose samples cannot be read, no process
// is idle. idle_after_ns 0: none ever is.
class ProcessActivity {
 public:
  explicit ProcessActivity(uint64_t idle_after_ns) : idle_after_ns_(idle_after_ns) {}
  // The samples NVML gave for GPU `gpu_index` at `now_ns` (nullopt: it could
  // not read them).
  void AddSamples(uint32_t gpu_index, const std::optional<std::vector<port::ProcessUtilization>>& samples,
                  uint64_t now_ns);
  // Splits `listed` (this pass's processes) into active and idle; forgets
  // processes no longer listed.
  void Split(const std::vector<audit::GpuProcess>& listed, uint64_t now_ns, std::vector<audit::GpuProcess>* active,
             std::vector<audit::GpuProcess>* idle);

 private:
  using Key = std::pair<uint32_t, uint32_t>;  // (GPU index, pid)
  const uint64_t idle_after_ns_;
  std::set<uint32_t> unreadable_;     // GPUs whose samples could not be read this pass
  std::map<Key, uint64_t> since_ns_;  // when listed first, then when last seen busy
};

class OccupancyWatch {
 public:
  static constexpr uint64_t kLingerNs = 30'000'000'000;
  // All must outlive the watch. idle_after_ns: ProcessActivity's.
  OccupancyWatch(port::NvmlLibrary* nvml, node::VgpuManager* manager, const audit::ProcessTable* table,
                 node::OccupancyCell* cell, node::ScheduleWorker* schedule, uint64_t idle_after_ns);
  void Pass(uint64_t now_ns);

 private:
  port::NvmlLibrary* const nvml_;
  node::VgpuManager* const manager_;
  const audit::ProcessTable* const table_;
  node::OccupancyCell* const cell_;
  node::ScheduleWorker* const schedule_;
  OccupancyLinger linger_;
  ProcessActivity activity_;
  std::map<uint32_t, uint64_t> samples_seen_us_;  // per GPU index: NVML's newest sample read
  bool warned_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_OCCUPANCY_WATCH_H_
