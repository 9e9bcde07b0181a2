// gpu_sources.h — where the device plugin learns about the node's GPUs, as
// two small interfaces so that tests hand in scripted GPUs:
//   GpuDiscovery  the GPUs and their links, once at start (and the document
//                 published as the node's gpuslice.io/topology annotation);
//   HealthSource  which GPUs answer now, polled.
//
// The real discovery runs `gpuslice devices --json` (the node daemon's
// command, so the annotation is exactly its output) and, when that command
// is unavailable or fails, describes the GPUs from NVML itself (no links).
// The real health source asks NVML which GPUs it can see: a GPU that fell off
// the bus, or an NVML that no longer answers, is unhealthy. Given the
// gpuslice binary, it also asks the node daemon (`gpuslice devices --json`)
// which GPUs a critical XID error marked unhealthy (daemon/gpu_health.h),
// and takes those out too; without a daemon (or when the command fails) the
// NVML answer stands alone, since XIDs are watched by the daemon only.
//
// Implementations are called from one thread at a time (the plugin's start,
// then its health thread). They block (NVML, a child process: at most 30 s)
// and allocate.
#ifndef GPUSLICE_K8S_GPU_SOURCES_H_
#define GPUSLICE_K8S_GPU_SOURCES_H_

#include <memory>
#include <set>
#include <string>

#include "core/status.h"
#include "k8s/topology.h"

namespace gpuslice::k8s {

class GpuDiscovery {
 public:
  virtual ~GpuDiscovery() = default;
  // Fills `document` with the JSON to publish (it parses to the result).
  virtual StatusOr<NodeTopology> Discover(std::string* document) = 0;
};

class HealthSource {
 public:
  virtual ~HealthSource() = default;
  // UUIDs of the GPUs that answer. An error means nothing can be told: the
  // caller marks every GPU unhealthy until a poll succeeds again.
  virtual StatusOr<std::set<std::string>> HealthyGpus() = 0;
};

// `gpuslice_exe`: the gpuslice binary to run `devices --json --state-dir
// <state_dir>` with (empty: skip it and use NVML directly). `node_name` fills
// "node" in NVML's document.
std::unique_ptr<GpuDiscovery> NewGpuDiscovery(std::string gpuslice_exe, std::string node_name, std::string state_dir);
// `gpuslice_exe` (empty: NVML only) and `state_dir` find the node daemon.
std::unique_ptr<HealthSource> NewNvmlHealthSource(std::string gpuslice_exe = "", std::string state_dir = "");

// The UUIDs of the GPUs that `gpuslice devices --json` reports with
// "healthy": false (a critical XID). A document it cannot read names none.
std::set<std::string> UnhealthyGpusInDevicesJson(const std::string& document);

// The GPU's /dev/nvidiaN number: the driver's "Device Minor" from
// <proc_root>/driver/nvidia/gpus/<PCI bus id>/information, which need not be
// NVML's index; the index when that file cannot be read.
uint32_t DeviceMinor(const TopologyGpu& gpu, const std::string& proc_root);

// The path of the running executable (/proc/self/exe), or "".
std::string SelfExecutable();

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_GPU_SOURCES_H_
