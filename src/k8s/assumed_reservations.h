// assumed_reservations.h — the scheduler extender's memory of pods it has
// bound but whose node has not yet reported them.
//
// Between the extender's bind and the device plugin's next update of the
// node's gpuslice.io/allocated annotation there is a window (the kubelet
// has to admit the pod and call Allocate first). Without this, a second pod
// scheduled in that window would be placed on capacity the first already
// holds. A reservation is dropped once the node's annotation lists the pod,
// or when it expires (the pod was deleted before it ever started).
//
// Thread-safe (one mutex); called from the extender's HTTP handler threads.
// Never blocks beyond the mutex; allocates.
#ifndef GPUSLICE_K8S_ASSUMED_RESERVATIONS_H_
#define GPUSLICE_K8S_ASSUMED_RESERVATIONS_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "k8s/allocator.h"
#include "k8s/node_usage.h"
#include "k8s/pod_request.h"
#include "port/mutex.h"

namespace gpuslice::k8s {

class AssumedReservations {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AssumedReservations(Clock::duration ttl) : ttl_(ttl) {}

  // Records that `pod` now holds `placement` on `node` (replacing any earlier
  // reservation of the same pod).
  void Add(const PodRequest& pod, const std::string& node, const PodPlacement& placement, Clock::time_point now);
  void Remove(const std::string& pod_uid);

  // Adds to `gpus` what pods reserved on `node` hold and `usage` does not yet
  // include. Drops reservations that the usage includes or that expired.
  void ApplyTo(const std::string& node, const NodeUsage& usage, std::vector<GpuState>& gpus, Clock::time_point now);

  size_t size() const;

 private:
  struct Reservation {
    std::string node;
    std::vector<std::pair<ContainerRequest, std::vector<uint32_t>>> containers;
    Clock::time_point expires;
  };
  const Clock::duration ttl_;
  mutable port::Mutex mu_;
  std::map<std::string, Reservation> by_pod_ GUARDED_BY(mu_);
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_ASSUMED_RESERVATIONS_H_
