// node_publisher.h — keeps the node's gpuslice annotations current, for the
// scheduler extender to read:
//   gpuslice.io/topology   the discovery document (once; again after errors)
//   gpuslice.io/allocated  ResourceManager::Usage(), whenever it changes
//
// Run() blocks its thread until `stop`: it publishes at start, then after
// every usage change (coalescing bursts), retries failures every
// `retry_interval`, and republishes every `resync_interval` in case someone
// edited the node.
#ifndef GPUSLICE_K8S_NODE_PUBLISHER_H_
#define GPUSLICE_K8S_NODE_PUBLISHER_H_

#include <atomic>
#include <chrono>
#include <string>

#include "k8s/kube_api.h"
#include "k8s/resource_manager.h"

namespace gpuslice::k8s {

class NodePublisher {
 public:
  NodePublisher(KubeApi* api, ResourceManager* resources, std::string topology_document,
                std::chrono::milliseconds retry_interval = std::chrono::seconds(10),
                std::chrono::milliseconds resync_interval = std::chrono::minutes(5));

  void Run(const std::atomic<bool>& stop);
  // One publication now (what Run does each time). Errors name the API call.
  Status PublishOnce();
  uint64_t publications() const { return publications_.load(); }

 private:
  KubeApi* api_;
  ResourceManager* resources_;
  const std::string topology_document_;
  const std::chrono::milliseconds retry_interval_;
  const std::chrono::milliseconds resync_interval_;
  std::atomic<uint64_t> publications_{0};
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_NODE_PUBLISHER_H_
