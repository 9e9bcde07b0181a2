// topology.h — a node's GPUs and the links between them, as node daemons
// publish them in the node annotation gpuslice.io/topology. The annotation's
// value is exactly what `gpuslice devices --json` prints:
//
//   {"node": "<hostname>", "driver_version": "...",
//    "gpus": [{"index": 0, "uuid": "GPU-...", "name": "NVIDIA H200",
//              "memory_total_bytes": N, "pci_bus_id": "00000000:19:00.0"}],
//    "links": [{"a": 0, "b": 1, "type": "nvlink", "nvlinks": 18}]}
//
// One link per unordered pair (a < b); its type is the closest connection,
// ranked best first: board, nvlink, pcie_single_switch,
// pcie_multiple_switches, pcie_host_bridge, numa_node, system. Keys this
// parser does not know are ignored, so the daemon may add fields.
//
// Used by the scheduler extender (per request) and the device plugin (at
// start). Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_TOPOLOGY_H_
#define GPUSLICE_K8S_TOPOLOGY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuslice::k8s {

enum class LinkType {
  kBoard,
  kNvlink,
  kPcieSingleSwitch,
  kPcieMultipleSwitches,
  kPcieHostBridge,
  kNumaNode,
  kSystem,
};

const char* LinkTypeName(LinkType type);
std::optional<LinkType> LinkTypeFromName(std::string_view name);

// How good a link is for collective traffic between two GPUs, in (0, 1].
// The rank order is the contract; the values only need to keep it, and to
// make more NVLinks between a pair count a little (18 links on H200 beat 4).
double LinkQuality(LinkType type, uint32_t nvlinks);

struct TopologyGpu {
  uint32_t index = 0;
  std::string uuid;
  std::string name;
  uint64_t memory_total_bytes = 0;
  std::string pci_bus_id;  // may be empty
};

struct TopologyLink {
  uint32_t a = 0;  // a < b
  uint32_t b = 0;
  LinkType type = LinkType::kSystem;
  uint32_t nvlinks = 0;
};

struct NodeTopology {
  std::string node;
  std::string driver_version;
  std::vector<TopologyGpu> gpus;  // sorted by index
  std::vector<TopologyLink> links;

  const TopologyGpu* GpuByIndex(uint32_t index) const;
  const TopologyGpu* GpuByUuid(std::string_view uuid) const;
  // The link between two GPUs in either order; nullopt when none is published.
  std::optional<TopologyLink> LinkBetween(uint32_t x, uint32_t y) const;
};

// Parses and checks a topology document. Errors name the field and what is
// wrong with it ("gpus[1].index: 3 is listed twice").
StatusOr<NodeTopology> ParseTopology(std::string_view json_text);

// The document for `topology`, in the same shape (used when the plugin has
// to describe GPUs itself because `gpuslice devices --json` is unavailable).
std::string TopologyToJson(const NodeTopology& topology);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_TOPOLOGY_H_
