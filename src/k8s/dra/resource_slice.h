// resource_slice.h — the node's GPUs as a resource.k8s.io/v1 ResourceSlice
// of driver gpu.gpuslice.io: one device per healthy GPU, named gpu-<index>,
// in one pool named after the node.
//
// Each device carries
//   attributes  uuid, model, index, nvlinkPeers (indices, comma-separated,
//               from the topology's nvlink/board links; "" when none) and
//               priorityLevels (the node's priority levels, comma-separated,
//               highest first: what a claim's opaque config may ask; at most
//               64 characters, so a long list is cut after a whole name)
//   capacity    cores  = 100, requests of 1..100 in steps of 1 (default 100)
//               memory = the GPU's bytes, requests in 256 MiB steps (default:
//                        all of it, rounded down to a step)
//   allowMultipleAllocations: true, so several claims share one GPU and the
//   scheduler records each one's consumedCapacity.
//
// An unhealthy GPU is left out of the slice, so nothing new is placed on it.
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_DRA_RESOURCE_SLICE_H_
#define GPUSLICE_K8S_DRA_RESOURCE_SLICE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "k8s/topology.h"
#include "task/task_levels.h"

namespace gpuslice::k8s::dra {

// The device name of a GPU in the slice, and the reverse (false when `name`
// is not one of ours).
std::string DeviceNameOf(uint32_t gpu_index);
bool GpuIndexOf(const std::string& device_name, uint32_t* gpu_index);

// The slice's metadata.name: "<node>-gpu.gpuslice.io".
std::string ResourceSliceName(const std::string& node);

// The whole ResourceSlice object. `healthy` holds GPU UUIDs; `generation` is
// the pool's generation (raise it whenever the devices change); `levels`,
// the node's priority levels (VgpuProvisioner::Levels).
nlohmann::json BuildResourceSlice(const std::string& node, const NodeTopology& topology,
                                  const std::set<std::string>& healthy, int64_t generation,
                                  const task::LevelTable& levels);

// The priorityLevels attribute: level names, highest first, comma-separated,
// cut after the last whole name that fits an attribute's 64 characters.
std::string PriorityLevelsAttribute(const task::LevelTable& levels);

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_RESOURCE_SLICE_H_
