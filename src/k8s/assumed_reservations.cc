#include "k8s/assumed_reservations.h"

namespace gpuslice::k8s {

void AssumedReservations::Add(const PodRequest& pod, const std::string& node, const PodPlacement& placement,
                              Clock::time_point now) {
  Reservation r;
  r.node = node;
  r.expires = now + ttl_;
  for (const ContainerRequest& c : pod.containers) {
    const auto it = placement.gpus.find(c.name);
    if (it != placement.gpus.end()) r.containers.emplace_back(c, it->second);
  }
  std::lock_guard<std::mutex> lock(mu_);
  by_pod_[pod.uid] = std::move(r);
}

void AssumedReservations::Remove(const std::string& pod_uid) {
  std::lock_guard<std::mutex> lock(mu_);
  by_pod_.erase(pod_uid);
}

void AssumedReservations::ApplyTo(const std::string& node, const NodeUsage& usage, std::vector<GpuState>& gpus,
                                  Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = by_pod_.begin(); it != by_pod_.end();) {
    const Reservation& r = it->second;
    if (r.expires <= now || (r.node == node && usage.HasPod(it->first))) {
      it = by_pod_.erase(it);
      continue;
    }
    if (r.node == node) {
      for (const auto& [request, chosen] : r.containers) ApplyPlacement(gpus, chosen, request);
    }
    ++it;
  }
}

size_t AssumedReservations::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_pod_.size();
}

}  // namespace gpuslice::k8s
