// dra_plugin.h — the kubelet DRA plugin of driver gpu.gpuslice.io, assembled:
//   - pluginregistration.Registration on <registry dir>/<driver>-reg.sock
//     (type DRAPlugin, versions v1.DRAPlugin and v1beta1.DRAPlugin);
//   - k8s.io.kubelet.pkg.apis.dra.{v1,v1beta1}.DRAPlugin on
//     <plugins dir>/<driver>/dra.sock, answered by a ClaimPreparer;
//   - the node's ResourceSlice (resource_slice.h), published at start and
//     again whenever the set of healthy GPUs changes (polled every
//     health_interval), retried until the API server takes it.
// Both sockets are owner-only (0600).
//
// Everything it talks to comes in through DraPluginParts, so tests run the
// whole plugin against fake GPUs and a fake API server. `gpuslice
// dra-plugin` (commands.cc) passes the real ones.
//
// Start() refuses to run while gpuslice's device plugin serves this node
// (its socket in device_plugin_dir accepts a connection). It returns once the sockets are served and the first publication was
// tried; Stop() (or destruction) stops the servers and the health thread.
#ifndef GPUSLICE_K8S_DRA_DRA_PLUGIN_H_
#define GPUSLICE_K8S_DRA_DRA_PLUGIN_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "k8s/cdi.h"
#include "k8s/dra/claim_preparer.h"
#include "k8s/dra/names.h"
#include "k8s/gpu_sources.h"
#include "k8s/kube_api.h"
#include "k8s/vgpu_provisioner.h"
#include "port/mutex.h"

namespace gpuslice::k8s::dra {

struct DraPluginOptions {
  std::string driver = kDriverName;
  std::string node_name;
  std::string registry_dir = kDefaultRegistryDir;
  std::string plugins_dir = kDefaultPluginsDir;  // the DRA socket goes in <plugins_dir>/<driver>/
  std::string cdi_dir = kDefaultCdiDir;
  std::string state_dir;  // the vGPU store's root; the plugin's own files go in <state_dir>/dra
  ContainerEnvironment container;
  std::chrono::milliseconds health_interval{10000};
  // The kubelet's device-plugins directory: if gpuslice's device plugin
  // answers there, Start refuses (one node's GPUs must not be offered twice).
  // Empty: not checked.
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
};

struct DraPluginParts {
  std::unique_ptr<GpuDiscovery> discovery;
  std::unique_ptr<HealthSource> health;
  std::unique_ptr<KubeApi> api;
  std::unique_ptr<VgpuProvisioner> provisioner;
};

class DraPlugin {
 public:
  static StatusOr<std::unique_ptr<DraPlugin>> Start(DraPluginOptions options, DraPluginParts parts);
  ~DraPlugin();
  void Stop();

  std::string registration_socket() const;
  std::string dra_socket() const;
  ClaimPreparer& preparer() { return *preparer_; }
  // Successful ResourceSlice publications, and the kubelet's last word on
  // the registration (for tests and logs).
  uint64_t publications() const { return publications_.load(); }
  bool registered() const { return registered_.load(); }

 private:
  class RegistrationService;
  class V1Service;
  class V1beta1Service;

  DraPlugin() = default;
  void HealthLoop();
  Status Publish(const std::set<std::string>& healthy);

  DraPluginOptions options_;
  DraPluginParts parts_;
  NodeTopology topology_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<RegistrationService> registration_service_;
  std::unique_ptr<V1Service> v1_service_;
  std::unique_ptr<V1beta1Service> v1beta1_service_;
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> registration_server_;
  std::atomic<uint64_t> publications_{0};
  std::atomic<bool> registered_{false};
  int64_t generation_ = 0;  // the pool's generation; health thread only (and Start)
  port::Mutex stop_mu_;
  port::CondVar stop_cv_;
  bool stop_ GUARDED_BY(stop_mu_) = false;
  std::thread health_thread_;
};

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_DRA_PLUGIN_H_
