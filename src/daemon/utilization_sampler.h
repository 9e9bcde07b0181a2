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
// Where NVML reports the GPU's own busy time (its device samples, integrated
// the same way), that is the interval's total, divided by what the boards
// say ran (board_sampler.h: paced vGPUs that shared the GPU, whose
// per-process samples overlap and cannot split it) and by the samples
// (busy_split.h); a vGPU the boards saw running is measured even in another
// pid namespace.
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

#include "daemon/board_sampler.h"
#include "daemon/gpu_usage_meter.h"
#include "node/vgpu_manager.h"
#include "port/nvml_library.h"

namespace gpuslice::daemon {

// One GPU's per-process samples over one pass, as integrated above: what
// the compute-cap audit (cap_audit.h) measures from.
struct SampledPass {
  uint32_t gpu_index = 0;
  uint64_t start_us = 0;  // the pass's interval, NVML's clock (µs)
  uint64_t end_us = 0;
  std::map<uint32_t, double> pid_seconds;  // host pid -> GPU-seconds its samples say it ran
};

class UtilizationSampler {
 public:
  // All must outlive the sampler; `meter` and `boards` may be null.
  UtilizationSampler(port::NvmlLibrary* nvml, node::VgpuManager* manager, GpuUsageMeter* meter = nullptr,
                     BoardSampler* boards = nullptr)
      : nvml_(nvml), manager_(manager), meter_(meter), boards_(boards) {}

  // One pass: sample every GPU, store the ratios in the manager, add the
  // interval to the meter.
  void Sample();
  // The last pass's samples, per GPU whose samples NVML could report.
  const std::vector<SampledPass>& last_pass() const { return last_pass_; }

 private:
  // GPU `index`'s busy seconds in its device samples since the last pass;
  // nullopt where NVML cannot tell or took no sample since.
  std::optional<double> DeviceBusySeconds(uint32_t index, uint64_t pass_start_us);
  port::NvmlLibrary* const nvml_;
  node::VgpuManager* const manager_;
  GpuUsageMeter* const meter_;
  BoardSampler* const boards_;
  std::map<uint32_t, uint64_t> last_seen_us_;  // per GPU index: newest sample so far
  std::map<uint32_t, uint64_t> last_pass_us_;  // per GPU index: when the last pass read it
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> last_sample_us_;  // (GPU, pid): its newest sample
  std::map<uint32_t, uint64_t> last_device_us_;                       // per GPU index: its newest device sample
  std::vector<SampledPass> last_pass_;
  bool warned_ = false;
  bool warned_device_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_UTILIZATION_SAMPLER_H_
