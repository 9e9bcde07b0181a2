// node_usage.h — what a node's GPUs have given out, as the device plugin
// publishes it in the node annotation gpuslice.io/allocated:
//
//   {"version": 1, "node": "node-a",
//    "gpus": [{"index": 0, "uuid": "GPU-...", "healthy": true,
//              "vcore_used": 50, "vmemory_used": 16, "vmemory_total": 564}],
//    "pods": ["<pod UID>", ...]}
//
// vcore is out of 100 per GPU; vmemory is in 256 MiB units. "pods" lists the
// pods whose containers the numbers include, so that the scheduler extender
// can drop its own reservation for a pod once the node reports it.
//
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_NODE_USAGE_H_
#define GPUSLICE_K8S_NODE_USAGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuslice::k8s {

inline constexpr int kNodeUsageVersion = 1;

struct GpuUsage {
  uint32_t index = 0;
  std::string uuid;
  bool healthy = true;
  uint32_t vcore_used = 0;
  uint64_t vmemory_used = 0;   // units
  uint64_t vmemory_total = 0;  // units
};

struct NodeUsage {
  std::string node;
  std::vector<GpuUsage> gpus;
  std::vector<std::string> pods;  // sorted
  const GpuUsage* GpuByIndex(uint32_t index) const;
  bool HasPod(std::string_view uid) const;
};

std::string NodeUsageToJson(const NodeUsage& usage);
StatusOr<NodeUsage> ParseNodeUsage(std::string_view json_text);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_NODE_USAGE_H_
