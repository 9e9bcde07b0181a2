// utilization_sampler.h — measured compute share per vGPU and GPU, from
// NVML's per-process SM utilisation (nvmlDeviceGetProcessUtilization),
// mapping each sampled pid to its vGPU through the ledgers.
//
// A vGPU's measured ratio on a GPU is the sum, over its processes, of each
// process's mean SM utilisation over the samples NVML took since the last
// pass, as a fraction of the GPU (capped at 1). Processes of other pid
// namespaces (containers) cannot be matched, since NVML reports host pids;
// their vGPUs show no measurement (nullopt) rather than a wrong 0.
//
// Called from the daemon's housekeeping thread only, which is the only user
// of the NvmlLibrary after start. Blocks in NVML (about a millisecond per
// GPU); allocates.
#ifndef GPUSLICE_DAEMON_UTILIZATION_SAMPLER_H_
#define GPUSLICE_DAEMON_UTILIZATION_SAMPLER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/vgpu_manager.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {

class UtilizationSampler {
 public:
  // Both must outlive the sampler.
  UtilizationSampler(port::NvmlLibrary* nvml, VgpuManager* manager) : nvml_(nvml), manager_(manager) {}

  // One pass: sample every GPU, store the ratios in the manager.
  void Sample();

 private:
  port::NvmlLibrary* const nvml_;
  VgpuManager* const manager_;
  std::map<uint32_t, uint64_t> last_seen_us_;  // per GPU index: newest sample so far
  bool warned_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_UTILIZATION_SAMPLER_H_
