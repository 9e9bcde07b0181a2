// kubelet_registrar.h — keeps the plugin's sockets served and registered
// with whichever kubelet is running.
//
// A restarting kubelet empties its device-plugins directory (our sockets
// included) and creates a new kubelet.sock; it forgets every plugin until
// they register again. So this loop watches the directory (inotify) and, on
// any change, reconciles:
//   - a resource whose socket file is gone (or replaced) gets a new server;
//   - a resource not registered with the current kubelet.sock (a new file,
//     or a new server) registers, retrying every second while it fails.
// Each server restart forces a new registration, so the kubelet reconnects.
//
// Run() blocks its calling thread until `stop` is set (it wakes at least
// once a second to look); it owns the servers and stops them on return.
#ifndef GPUSLICE_K8S_KUBELET_REGISTRAR_H_
#define GPUSLICE_K8S_KUBELET_REGISTRAR_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "k8s/allocation_service.h"
#include "k8s/device_ids.h"
#include "k8s/resource_manager.h"

namespace gpuslice::k8s {

class KubeletRegistrar {
 public:
  KubeletRegistrar(std::string plugin_dir, std::vector<Resource> resources, ResourceManager* manager,
                   AllocationService* allocations);

  void Run(const std::atomic<bool>& stop);

  // Counts successful registrations (for tests and logs).
  uint64_t registrations() const { return registrations_.load(); }

 private:
  std::string plugin_dir_;
  std::vector<Resource> resources_;
  ResourceManager* manager_;
  AllocationService* allocations_;
  std::atomic<uint64_t> registrations_{0};
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_KUBELET_REGISTRAR_H_
