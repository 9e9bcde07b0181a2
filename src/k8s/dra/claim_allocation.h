// claim_allocation.h — what a ResourceClaim (resource.k8s.io/v1) gives this
// driver on this node: the allocated devices with the capacity the scheduler
// recorded for each (status.allocation.devices.results[].consumedCapacity),
// and the opaque configuration of kind VgpuConfig that applies to them
// (status.allocation.devices.config[], class configs first, then the
// claim's; a later one overrides an earlier one field by field).
//
//   opaque.parameters: {"apiVersion": "gpu.gpuslice.io/v1alpha1",
//                       "kind": "VgpuConfig",
//                       "priority": a level name,       (default be)
//                       "computeCap": 0..100,           (0: no cap, the default)
//                       "powerCapWatts": > 0,           (per GPU; absent: none;
//                                                        docs/design.md, "Power caps")
//                       "suspendable": true|false}      (best-effort only; default
//                                                        false; docs/design.md,
//                                                        "Memory overcommit")
//
// Parsing is strict: an unknown field, a wrong type or an out-of-range value
// is an error that names the field (as a JSON path into the claim) and the
// fix. `priority` is one of the node's priority levels (lc, be, or a level
// of the node's gpuslice daemon config); here only its spelling is checked,
// and the claim preparer resolves it against the node's levels
// (k8s/priority_level.h). A result without consumedCapacity had the whole device (cores 100, no
// memory cap).
//
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_DRA_CLAIM_ALLOCATION_H_
#define GPUSLICE_K8S_DRA_CLAIM_ALLOCATION_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/vgpu_layout.h"
#include "k8s/topology.h"

namespace gpuslice::k8s::dra {

struct VgpuConfig {
  std::string priority_level;  // "": not given (be)
  std::string priority_field;  // the JSON path that set it, for the node's errors
  uint32_t compute_cap_pct = 0;
  double power_cap_watts = 0;  // 0: no power cap
  bool suspendable = false;    // the node may suspend it for memory (docs/design.md, "Memory overcommit")
};

struct AllocatedDevice {
  std::string request;  // the claim's request name
  std::string pool;
  std::string device;  // gpu-<index>
  uint32_t gpu_index = 0;
  std::string gpu_uuid;
  uint32_t cores = 100;       // out of 100
  uint64_t memory_bytes = 0;  // 0: no memory cap
  std::optional<std::string> share_id;
  VgpuConfig config;
};

struct ClaimAllocation {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::vector<AllocatedDevice> devices;  // only this driver's, on this node's pool
};

// `claim` is the ResourceClaim object; `pool` is this node's pool name.
// `topology` resolves device names to GPUs: a device this node does not
// have is an error.
StatusOr<ClaimAllocation> ParseClaimAllocation(const nlohmann::json& claim, const std::string& driver,
                                               const std::string& pool, const NodeTopology& topology);

// Parses one opaque parameters object over `base` (fields it omits keep
// base's values). `field` is its JSON path, for errors.
StatusOr<VgpuConfig> ParseVgpuConfig(const nlohmann::json& parameters, const VgpuConfig& base,
                                     const std::string& field);

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_CLAIM_ALLOCATION_H_
