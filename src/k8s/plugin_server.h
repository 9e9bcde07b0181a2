// plugin_server.h — the kubelet-facing gRPC service for one resource
// (gpuslice.io/vcore or gpuslice.io/vmemory) on its own unix socket in the
// kubelet's device-plugins directory, and the Register call that announces it.
//
//   GetDevicePluginOptions  GetPreferredAllocation available; no PreStart
//   ListAndWatch            the resource's device IDs with health, then again
//                           whenever a GPU's health flips, until the kubelet
//                           hangs up or the server stops
//   GetPreferredAllocation, Allocate   AllocationService
//   PreStartContainer       nothing to do
//
// The socket is owner-only (0600): only root (the kubelet) may connect.
//
// Start() returns once the socket accepts calls; gRPC's threads serve them.
// Stop() (or destruction) ends streams within ~250 ms and blocks until the
// server is down.
#ifndef GPUSLICE_K8S_PLUGIN_SERVER_H_
#define GPUSLICE_K8S_PLUGIN_SERVER_H_

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "k8s/allocation_service.h"
#include "k8s/device_ids.h"
#include "k8s/resource_manager.h"

namespace gpuslice::k8s {

class PluginServer {
 public:
  // Removes a stale file at `socket_path` first.
  static StatusOr<std::unique_ptr<PluginServer>> Start(Resource resource, const std::string& socket_path,
                                                       ResourceManager* resources, AllocationService* allocations);
  ~PluginServer();
  void Stop();
  Resource resource() const { return resource_; }
  const std::string& socket_path() const { return socket_path_; }
  // The socket file's inode when created: if the file is later missing or
  // another inode, the kubelet removed it and the server must be restarted.
  uint64_t socket_inode() const { return socket_inode_; }

 private:
  struct Impl;
  PluginServer() = default;
  std::unique_ptr<Impl> impl_;
  Resource resource_ = Resource::kVcore;
  std::string socket_path_;
  uint64_t socket_inode_ = 0;
};

// The socket name a resource's plugin listens on, inside the plugin dir.
std::string PluginSocketName(Resource resource);  // "gpuslice-vcore.sock", ...

// Calls Registration.Register on the kubelet's socket. Blocks up to `timeout`.
Status RegisterWithKubelet(const std::string& kubelet_socket, Resource resource, std::chrono::milliseconds timeout);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_PLUGIN_SERVER_H_
