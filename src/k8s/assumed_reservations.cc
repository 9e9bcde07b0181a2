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
  port::MutexLock lock(&mu_);
  by_pod_[pod.uid] = std::move(r);
}

void AssumedReservations::Remove(const std::string& pod_uid) {
  port::MutexLock lock(&mu_);
  by_pod_.erase(pod_uid);
}

void AssumedReservations::ApplyTo(const std::string& node, const NodeUsage& usage, std::vector<GpuState>& gpus,
                                  Clock::time_point now) {
  port::MutexLock lock(&mu_);
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
  port::MutexLock lock(&mu_);
  return by_pod_.size();
}

}  // namespace gpuslice::k8s
