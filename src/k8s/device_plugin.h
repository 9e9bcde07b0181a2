// device_plugin.h — the device plugin, assembled: GPU discovery, the
// resource manager, the allocation service, one gRPC server per resource
// kept registered with the kubelet, and the background loops (health polls,
// node annotations, reclaiming gone pods' vGPUs).
//
// Everything it talks to comes in through DevicePluginParts, so tests run
// the whole plugin against fake GPUs, a fake API server and fake liveness.
// `gpuslice device-plugin` (commands.cc) passes the real ones.
//
// Start() returns once the GPUs are known and the threads run; Stop() (or
// destruction) stops them and waits, within about a second.
#ifndef GPUSLICE_K8S_DEVICE_PLUGIN_H_
#define GPUSLICE_K8S_DEVICE_PLUGIN_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "k8s/allocation_service.h"
#include "k8s/assignment.h"
#include "k8s/container_setup.h"
#include "k8s/dra/names.h"
#include "k8s/gpu_sources.h"
#include "k8s/host_process_probe.h"
#include "k8s/kube_api.h"
#include "k8s/kubelet_registrar.h"
#include "k8s/names.h"
#include "k8s/node_publisher.h"
#include "k8s/pod_liveness.h"
#include "k8s/reclaimer.h"
#include "k8s/resource_manager.h"
#include "k8s/vgpu_provisioner.h"

namespace gpuslice::k8s {

struct DevicePluginOptions {
  std::string node_name;
  std::string plugin_dir = kDefaultDevicePluginDir;
  // Where gpuslice's DRA plugin registers: Start refuses while it answers
  // there, since both would hand out the same GPUs. Empty: no check.
  std::string dra_registry_dir = dra::kDefaultRegistryDir;
  std::string state_dir;  // the vGPU state root (core::VgpuStore)
  ContainerEnvironment container;
  PackingPolicy policy = PackingPolicy::kBinpack;
  std::chrono::milliseconds health_interval{10000};
  std::chrono::milliseconds reclaim_interval{30000};
  std::chrono::seconds reclaim_grace{60};
  std::string proc_root = "/proc";  // the host's, for judging containers' processes
};

struct DevicePluginParts {
  std::unique_ptr<GpuDiscovery> discovery;
  std::unique_ptr<HealthSource> health;
  std::unique_ptr<KubeApi> api;  // null: no pod lookup, no node annotations
  std::unique_ptr<PodLiveness> liveness;
  std::unique_ptr<VgpuProvisioner> provisioner;
};

class DevicePlugin {
 public:
  static StatusOr<std::unique_ptr<DevicePlugin>> Start(DevicePluginOptions options, DevicePluginParts parts);
  ~DevicePlugin();
  void Stop();

  ResourceManager& resources() { return *resources_; }
  uint64_t registrations() const { return registrar_->registrations(); }
  uint64_t publications() const { return publisher_ ? publisher_->publications() : 0; }

 private:
  DevicePlugin() = default;
  void HealthLoop();

  DevicePluginOptions options_;
  DevicePluginParts parts_;
  std::unique_ptr<ResourceManager> resources_;
  std::unique_ptr<AssignmentStore> store_;
  std::unique_ptr<AllocationService> allocations_;
  std::unique_ptr<KubeletRegistrar> registrar_;
  std::unique_ptr<NodePublisher> publisher_;
  std::unique_ptr<HostProcessProbe> probe_;
  std::unique_ptr<Reclaimer> reclaimer_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_DEVICE_PLUGIN_H_
