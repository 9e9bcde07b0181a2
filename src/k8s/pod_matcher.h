// pod_matcher.h — which pod and container an Allocate call is for.
//
// The kubelet's Allocate names device IDs, never a pod. Like GaiaGPU's GPU
// manager, the plugin finds the container itself: among the pods bound to
// this node that are still Pending and ask for gpuslice resources, the first
// (by the extender's bind time, then creation time) with a container that
// asks for exactly this many units of this resource and has not been given
// them yet. The kubelet admits one pod at a time and allocates a pod's
// containers in order, so the first such container is the one being set up.
// Two waiting pods with identical requests may be told apart wrongly; their
// vGPUs are then identical too, only their GPU indices may swap.
//
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_POD_MATCHER_H_
#define GPUSLICE_K8S_POD_MATCHER_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "k8s/device_ids.h"
#include "k8s/pod_request.h"

namespace gpuslice::k8s {

// The pods of `items` (a PodList's items) that wait on `node` for gpuslice
// resources, in the order they will be admitted. Pods whose request cannot
// be read are left out and described in `problems`.
std::vector<PodRequest> WaitingPods(const nlohmann::json& items, const std::string& node,
                                    std::vector<std::string>* problems);

uint64_t Requested(const ContainerRequest& container, Resource resource);

struct ContainerMatch {
  PodRequest pod;
  ContainerRequest container;
};

// `served(pod, container)`: whether the container already has `resource`.
std::optional<ContainerMatch> MatchContainer(
    const std::vector<PodRequest>& pods, Resource resource, uint64_t count,
    const std::function<bool(const PodRequest&, const ContainerRequest&)>& served);

// "default/train [main: 50 vcore, 16 vmemory]; ..." for error messages.
std::string DescribeWaitingPods(const std::vector<PodRequest>& pods);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_POD_MATCHER_H_
