#include "k8s/node_publisher.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "k8s/names.h"
#include "k8s/node_usage.h"

namespace gpuslice::k8s {

NodePublisher::NodePublisher(KubeApi* api, ResourceManager* resources, std::string topology_document,
                             std::chrono::milliseconds retry_interval, std::chrono::milliseconds resync_interval)
    : api_(api),
      resources_(resources),
      topology_document_(std::move(topology_document)),
      retry_interval_(retry_interval),
      resync_interval_(resync_interval) {}

Status NodePublisher::PublishOnce() {
  Status s = api_->AnnotateNode(
      resources_->node_name(),
      {{kTopologyAnnotation, topology_document_}, {kAllocatedAnnotation, NodeUsageToJson(resources_->Usage())}});
  if (s.ok()) publications_.fetch_add(1);
  return s;
}

void NodePublisher::Run(const std::atomic<bool>& stop) {
  using Clock = std::chrono::steady_clock;
  uint64_t published_version = 0;
  bool failing = false;
  Clock::time_point next_due = Clock::now();
  while (!stop.load() && !resources_->shut_down()) {
    const uint64_t version = resources_->usage_version();
    // While the API fails, only retry when due, so as not to hammer it.
    if (Clock::now() >= next_due || (!failing && version != published_version)) {
      Status s = PublishOnce();
      if (s.ok()) {
        if (failing) spdlog::info("node annotations published again");
        failing = false;
        published_version = version;
        next_due = Clock::now() + resync_interval_;
      } else {
        if (!failing) spdlog::warn("cannot annotate the node: {}", s.message());
        failing = true;
        next_due = Clock::now() + retry_interval_;
      }
    }
    // Wait for a usage change (or the next due time, at most 1 s so that
    // `stop` is noticed).
    const auto until_due = std::chrono::duration_cast<std::chrono::milliseconds>(next_due - Clock::now());
    const auto wait = std::clamp(until_due, std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
    resources_->WaitForUsageChange(failing ? resources_->usage_version() : published_version, wait);
  }
}

}  // namespace gpuslice::k8s
