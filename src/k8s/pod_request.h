// pod_request.h — what a pod asks of gpuslice, read from its Kubernetes
// object: each container's gpuslice.io/vcore and gpuslice.io/vmemory, the
// priority annotation (and an LC's latency SLO), and what the scheduler
// extender's bind recorded.
//
// The rules (docs/kubernetes.md), checked here once for the extender and the
// device plugin alike (the priority level's name is checked against the
// node's levels on the node: priority_level.h):
//   - vcore 1..100 is a share of one GPU; a multiple of 100 is that many
//     whole GPUs (at most 16); anything else is refused;
//   - vmemory is the container's total in 256 MiB units, split evenly over
//     its GPUs, so it must divide by the GPU count;
//   - vmemory needs vcore: a container without vcore has no GPU to put its
//     memory on;
//   - a share of a GPU (vcore below 100) needs vmemory: a shared GPU without
//     a memory cap is not shared safely;
//   - whole GPUs without vmemory get no memory cap (nobody else can be given
//     vcore on them).
//
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_POD_REQUEST_H_
#define GPUSLICE_K8S_POD_REQUEST_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/vgpu_layout.h"

namespace gpuslice::k8s {

struct ContainerRequest {
  std::string name;
  uint32_t ordinal = 0;  // position in kubelet admission order: init containers, then containers
  bool init = false;
  uint32_t vcore = 0;
  uint64_t vmemory_units = 0;

  uint32_t GpuCount() const { return vcore <= 100 ? 1 : vcore / 100; }
  uint32_t VcorePerGpu() const { return vcore <= 100 ? vcore : 100; }
  uint64_t VmemoryUnitsPerGpu() const { return vmemory_units / GpuCount(); }
};

struct PodRequest {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::string node_name;  // spec.nodeName; empty before binding
  std::string phase;      // status.phase
  bool deleting = false;  // metadata.deletionTimestamp is set
  std::string creation_timestamp;
  // The gpuslice.io/priority annotation: a level's name ("" = not given: be).
  // Only its spelling is checked here; the node resolves it against its own
  // levels (priority_level.h).
  std::string priority_level;
  double power_cap_watts = 0;  // per GPU, for each container's vGPU; 0 = none
  bool suspendable = false;    // the gpuslice.io/suspendable annotation
  // A latency-critical pod's p99 SLO and its p99 alone (µs); 0 = none.
  uint64_t lc_slo_p99_us = 0;
  uint64_t lc_alone_p99_us = 0;
  // Only containers that ask for a gpuslice resource, in admission order.
  std::vector<ContainerRequest> containers;
  // From the extender's bind; empty when the pod was not bound by it.
  std::map<std::string, std::vector<uint32_t>> bound_gpus;
  std::string bound_node;
  int64_t bind_time_ns = 0;

  bool wants_gpuslice() const { return !containers.empty(); }
  const ContainerRequest* Container(const std::string& name) const;
  std::string Describe() const { return namespace_name + "/" + name; }
};

// Reads a v1 Pod object. Errors name the pod, the container and the fix.
StatusOr<PodRequest> ParsePodRequest(const nlohmann::json& pod);

// The value of the gpus annotation, and its parser.
std::string BoundGpusToJson(const std::map<std::string, std::vector<uint32_t>>& gpus);
StatusOr<std::map<std::string, std::vector<uint32_t>>> ParseBoundGpus(const std::string& text);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_POD_REQUEST_H_
