// reclaimer.h — removes the vGPUs of pods that are gone.
//
// A pass: ask PodLiveness for the node's pods (an error: do nothing, never
// reclaim on a guess); for each assignment older than the grace period
// whose pod is not alive (pod_liveness.h IsAlive), release its vGPU (which
// waits until no process of any namespace uses it), then forget the
// assignment. vGPUs named k8s-* that have no assignment (the plugin died
// between creating one and recording it) are released the same way once
// older than the grace period.
//
// The grace period covers the window between Allocate and the kubelet
// listing the new pod. Used from one thread (the plugin's reclaim loop);
// ReclaimOnce blocks on the liveness source and the state directory.
#ifndef GPUSLICE_K8S_RECLAIMER_H_
#define GPUSLICE_K8S_RECLAIMER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "k8s/assignment.h"
#include "k8s/host_process_probe.h"
#include "k8s/pod_liveness.h"
#include "k8s/resource_manager.h"
#include "k8s/vgpu_provisioner.h"

namespace gpuslice::k8s {

class Reclaimer {
 public:
  Reclaimer(ResourceManager* resources, AssignmentStore* store, VgpuProvisioner* provisioner, PodLiveness* liveness,
            HostProcessProbe* probe, std::string state_root, std::string cdi_dir, std::chrono::seconds grace,
            std::function<int64_t()> now_unix_s = nullptr);

  // Returns how many vGPUs were removed, or why nothing could be judged.
  StatusOr<uint32_t> ReclaimOnce();
  // Runs a pass every `interval` until `stop`.
  void Run(const std::atomic<bool>& stop, std::chrono::milliseconds interval);

 private:
  ResourceManager* resources_;
  AssignmentStore* store_;
  VgpuProvisioner* provisioner_;
  PodLiveness* liveness_;
  HostProcessProbe* probe_;
  // The device plugin's CDI spec of a removed vGPU goes with it (cdi.h).
  void ForgetCdiSpec(const std::string& vgpu);

  std::string state_root_;
  std::string cdi_dir_;  // empty: the plugin writes no CDI specs
  std::chrono::seconds grace_;
  std::function<int64_t()> now_unix_s_;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_RECLAIMER_H_
