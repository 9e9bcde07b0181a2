// utilization_sampler.h — measured GPU time per vGPU and GPU, from every
// sample of NVML's per-process SM utilisation (nvmlDeviceGetProcessUtilization),
// mapping each sampled pid to its vGPU through the ledgers; and each GPU's
// energy, for the GpuUsageMeter.
//
// Each sample says what fraction of its sampling period a process had work
// running on the GPU. A pass integrates every sample NVML took since the
// last pass over the time it covers (since the process's previous sample,
// or the last pass), so no sample is dropped: the GPU-seconds of each vGPU
// in the interval go to the meter, and their share of the interval is the
// vGPU's measured ratio (capped at 1). Processes of other pid namespaces
// (containers) cannot be matched, since NVML reports host pids; their vGPUs
// show no measurement (nullopt) rather than a wrong 0, and their GPU time
// counts under "" (no vGPU).
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

#include "daemon/gpu_usage_meter.h"
#include "node/vgpu_manager.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {

class UtilizationSampler {
 public:
  // All must outlive the sampler; `meter` may be null.
  UtilizationSampler(port::NvmlLibrary* nvml, node::VgpuManager* manager, GpuUsageMeter* meter = nullptr)
      : nvml_(nvml), manager_(manager), meter_(meter) {}

  // One pass: sample every GPU, store the ratios in the manager, add the
  // interval to the meter.
  void Sample();

 private:
  // One GPU's pass: GPU-seconds per (vGPU, device index) since the last pass.
  struct GpuPass;
  port::NvmlLibrary* const nvml_;
  node::VgpuManager* const manager_;
  GpuUsageMeter* const meter_;
  std::map<uint32_t, uint64_t> last_seen_us_;  // per GPU index: newest sample so far
  std::map<uint32_t, uint64_t> last_pass_us_;  // per GPU index: when the last pass read it
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> last_sample_us_;  // (GPU, pid): its newest sample
  bool warned_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_UTILIZATION_SAMPLER_H_
