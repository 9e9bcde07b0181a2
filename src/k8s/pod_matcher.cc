#include "k8s/pod_matcher.h"

#include <algorithm>
#include <tuple>

namespace gpuslice::k8s {

std::vector<PodRequest> WaitingPods(const nlohmann::json& items, const std::string& node,
                                    std::vector<std::string>* problems) {
  std::vector<PodRequest> pods;
  if (!items.is_array()) return pods;
  for (const nlohmann::json& item : items) {
    auto pod = ParsePodRequest(item);
    if (!pod.ok()) {
      if (problems != nullptr) problems->push_back(pod.status().message());
      continue;
    }
    if (pod->node_name != node || pod->deleting || !pod->wants_gpuslice()) continue;
    if (!pod->phase.empty() && pod->phase != "Pending") continue;
    pods.push_back(std::move(*pod));
  }
  std::stable_sort(pods.begin(), pods.end(), [](const PodRequest& x, const PodRequest& y) {
    // Pods the extender bound first, in bind order; then the rest by age.
    return std::make_tuple(x.bind_time_ns == 0, x.bind_time_ns, x.creation_timestamp, x.namespace_name, x.name) <
           std::make_tuple(y.bind_time_ns == 0, y.bind_time_ns, y.creation_timestamp, y.namespace_name, y.name);
  });
  return pods;
}

uint64_t Requested(const ContainerRequest& container, Resource resource) {
  return resource == Resource::kVcore ? container.vcore : container.vmemory_units;
}

std::optional<ContainerMatch> MatchContainer(
    const std::vector<PodRequest>& pods, Resource resource, uint64_t count,
    const std::function<bool(const PodRequest&, const ContainerRequest&)>& served) {
  for (const PodRequest& pod : pods) {
    for (const ContainerRequest& c : pod.containers) {
      if (Requested(c, resource) != count || served(pod, c)) continue;
      return ContainerMatch{pod, c};
    }
  }
  return std::nullopt;
}

std::string DescribeWaitingPods(const std::vector<PodRequest>& pods) {
  if (pods.empty()) return "none";
  std::string out;
  for (const PodRequest& pod : pods) {
    out += (out.empty() ? "" : "; ") + pod.Describe() + " [";
    for (size_t i = 0; i < pod.containers.size(); ++i) {
      const ContainerRequest& c = pod.containers[i];
      out += (i ? ", " : "") + c.name + ": " + std::to_string(c.vcore) + " vcore, " + std::to_string(c.vmemory_units) +
             " vmemory";
    }
    out += "]";
  }
  return out;
}

}  // namespace gpuslice::k8s
