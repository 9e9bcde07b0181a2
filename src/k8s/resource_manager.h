// resource_manager.h — the device plugin's picture of the node: the GPUs
// (fixed at start), their health (polled), and what has been given to which
// container (Assignments). From it come the device lists the kubelet sees,
// the GpuStates the allocator chooses from, and the usage published on the
// node.
//
// Two change counters, each waited on by its own kind of watcher:
//   health  bumped when a GPU's health flips: ListAndWatch streams resend;
//   usage   bumped when an assignment is added or removed (and on health
//           flips): the node publisher re-annotates the node.
//
// Thread-safe: one mutex; gRPC handler threads, the health thread, the
// reclaimer and the publisher all call in. WaitFor* blocks up to its timeout;
// other methods never block beyond the mutex. Methods allocate.
#ifndef GPUSLICE_K8S_RESOURCE_MANAGER_H_
#define GPUSLICE_K8S_RESOURCE_MANAGER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "k8s/allocator.h"
#include "k8s/assignment.h"
#include "k8s/device_ids.h"
#include "k8s/node_usage.h"
#include "k8s/topology.h"
#include "port/mutex.h"

namespace gpuslice::k8s {

class ResourceManager {
 public:
  ResourceManager(NodeTopology topology, std::string node_name);

  const NodeTopology& topology() const { return topology_; }  // immutable
  const std::string& node_name() const { return node_name_; }
  uint64_t VmemoryUnits(uint32_t gpu_index) const;  // the GPU's memory in 256 MiB units

  // Health. Returns true when any GPU changed.
  bool SetHealthy(const std::set<std::string>& healthy_uuids);
  bool IsHealthy(uint32_t gpu_index) const;

  struct Device {
    std::string id;
    bool healthy = true;
  };
  std::vector<Device> Devices(Resource resource) const;
  uint64_t DeviceCount(Resource resource) const;
  // The GPU a device ID of `resource` belongs to, if it is one of ours.
  std::optional<uint32_t> GpuOf(Resource resource, const std::string& device_id) const;

  // What has been given out.
  void Put(const Assignment& assignment);  // adds, or replaces the one with the same vGPU
  void Erase(const std::string& vgpu);
  std::vector<Assignment> Assignments() const;
  std::optional<Assignment> FindContainer(const std::string& pod_uid, const std::string& container) const;
  // The assignment whose `resource` device IDs are exactly `ids` (any order).
  std::optional<Assignment> FindByDeviceIds(Resource resource, std::vector<std::string> ids) const;
  std::vector<GpuState> GpuStates() const;
  NodeUsage Usage() const;

  // Change counters and waiting. WaitFor* return the counter's value once it
  // differs from `seen`, or at the timeout, or at Shutdown().
  uint64_t health_version() const;
  uint64_t usage_version() const;
  uint64_t WaitForHealthChange(uint64_t seen, std::chrono::milliseconds timeout) const;
  uint64_t WaitForUsageChange(uint64_t seen, std::chrono::milliseconds timeout) const;
  void Shutdown();
  bool shut_down() const;

 private:
  std::vector<GpuState> GpuStatesLocked() const REQUIRES(mu_);

  const NodeTopology topology_;
  const std::string node_name_;
  mutable port::Mutex mu_;
  mutable port::CondVar changed_;
  std::map<uint32_t, bool> healthy_ GUARDED_BY(mu_);
  std::map<std::string, Assignment> by_vgpu_ GUARDED_BY(mu_);
  uint64_t health_version_ GUARDED_BY(mu_) = 1;
  uint64_t usage_version_ GUARDED_BY(mu_) = 1;
  bool shut_down_ GUARDED_BY(mu_) = false;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_RESOURCE_MANAGER_H_
