// node_devices.h — the daemon's device registry: the node's GPUs and how
// they are connected, discovered once through NVML at start.
//
// GPUs do not come and go while the driver is loaded, so the registry is a
// value built once by DiscoverNodeDevices() (main thread, at start) and then
// only read, from any thread, without locking. Tests and the fuzz target
// build one by hand.
#ifndef GPUSLICE_NODE_NODE_DEVICES_H_
#define GPUSLICE_NODE_NODE_DEVICES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "port/nvml_library.h"

namespace gpuslice::node {

struct NodeDevices {
  std::string node;            // hostname
  std::string driver_version;  // "" when NVML does not say
  std::vector<port::GpuInfo> gpus;
  std::vector<port::GpuLink> links;  // one per unordered pair, a < b

  // The GPU with this UUID, or nullptr.
  const port::GpuInfo* Find(const uint8_t uuid[16]) const;
  // GPUs named by index or UUID, in the order given; every GPU when empty.
  // The error names the unknown GPU and lists the ones there are.
  StatusOr<std::vector<port::GpuInfo>> Select(const std::vector<std::string>& wanted) const;
};

// Blocks in NVML (tens of milliseconds). Errors name the fix.
StatusOr<NodeDevices> DiscoverNodeDevices(port::NvmlLibrary& nvml);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_NODE_DEVICES_H_
