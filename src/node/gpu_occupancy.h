// gpu_occupancy.h — which vGPUs have a process on each GPU, as the driver
// itself lists them: an input of the node schedule (node_schedule.h) that no
// tenant can write. The daemon leaves out processes that have run nothing
// lately, and keeps what it saw for a while (daemon/occupancy_watch.h).
//
// Why the schedule wants it: beside an LC, two best-effort vGPUs on a GPU
// split a short period (1000 us each by default) where a lone one takes the
// tiny slice (50 us), and the LC waits up to that slice. Counted by vGPUs
// alone, a neighbour with nothing on the GPU (a pod between jobs, a notebook
// not yet started, a multi-GPU vGPU using another of its GPUs) cost an LC
// 4.3x at p99 on an H200 (docs/benchmarks.md, "An idle second BE vGPU beside
// an LC").
//
// Why the driver's list (NVML's compute processes, which name every process
// with a context on the GPU), matched to the vGPUs' ledgers: a ledger is its
// tenant's to write, so it can only add claims, never hide another vGPU's
// process. A process that no ledger of a vGPU on that GPU claims (not
// gpuslice's, or not yet joined) counts as a contender of its own
// (`other_pids`), so a tenant that hides its processes from its ledger
// makes the others take longer slices, never shorter ones.
//
// GpuOccupancy is a value. OccupancyCell is thread-safe: the daemon's
// housekeeping thread sets it, schedule passes read it.
#ifndef GPUSLICE_NODE_GPU_OCCUPANCY_H_
#define GPUSLICE_NODE_GPU_OCCUPANCY_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "port/mutex.h"

namespace gpuslice::node {

struct GpuOccupancy {
  struct OnGpu {
    std::set<std::string> vgpus;    // vGPUs with at least one process there
    std::set<uint32_t> other_pids;  // processes there in no ledger of a vGPU on it
    bool operator==(const OnGpu&) const = default;
  };
  // By GPU UUID. A GPU that is not here is not known: every vGPU on it
  // counts as on it, as before there was a list.
  std::map<std::array<uint8_t, 16>, OnGpu> gpus;
  bool operator==(const GpuOccupancy&) const = default;
};

class OccupancyCell {
 public:
  // Stores `now`; true when it differs from what was stored.
  bool Set(GpuOccupancy now) EXCLUDES(mu_);
  // What was stored last; nullopt before the first Set.
  std::optional<GpuOccupancy> Get() const EXCLUDES(mu_);

 private:
  mutable port::Mutex mu_;
  std::optional<GpuOccupancy> value_ GUARDED_BY(mu_);
};

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_GPU_OCCUPANCY_H_
