// allocation_service.h — the device plugin's decisions: GetPreferredAllocation
// (which device IDs the kubelet should pick) and Allocate (make the
// container's vGPU and say how to set the container up). The gRPC service
// (plugin_server.h) only forwards to these, so they are tested as tables of
// request -> response without a socket.
//
// Allocate, for one resource's device IDs:
//   1. checks the IDs: known, of this resource, no duplicates, a valid amount
//      (INVALID_ARGUMENT naming the ID and the fix otherwise);
//   2. finds the pod and container (pod_matcher.h) through the API server;
//   3. if the container's other resource already made its vGPU, adds these
//      IDs to it; otherwise resolves the pod's priority level among the
//      node's (priority_level.h; FAILED_PRECONDITION listing the node's
//      levels for a name it does not have) and picks its GPUs, in this
//      order: the extender's choice recorded in the pod's gpuslice.io/gpus
//      annotation, the GPUs of the IDs (the kubelet followed our
//      preference), the allocator's choice;
//   4. provisions the vGPU, records the assignment, returns the container's
//      mounts, environment and device nodes (container_setup.h), and, with
//      a CDI directory in preload mode, writes the container's CDI spec and
//      names its device in cdi_devices (cdi.h: a runtime with CDI also
//      puts the library in /etc/ld.so.preload). A spec that cannot be
//      written is said and left out: the mounts and env still hold.
// Nothing is recorded unless every step succeeds; a vGPU made for a failed
// call is removed again. The same IDs allocated twice for a container that
// is still waiting get the same answer; IDs the kubelet hands out again
// after their pod ended make a new vGPU.
//
// Thread-safe: calls are serialised by one mutex (the kubelet allocates one
// container at a time anyway). Calls block on the API server and the state
// directory, and allocate.
#ifndef GPUSLICE_K8S_ALLOCATION_SERVICE_H_
#define GPUSLICE_K8S_ALLOCATION_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "k8s/allocator.h"
#include "k8s/assignment.h"
#include "k8s/container_setup.h"
#include "k8s/deviceplugin/v1beta1/api.pb.h"
#include "k8s/kube_api.h"
#include "k8s/resource_manager.h"
#include "k8s/vgpu_provisioner.h"
#include "port/mutex.h"

namespace gpuslice::k8s {

class AllocationService {
 public:
  // All pointers must outlive the service. `api` may be null: Allocate then
  // fails with FAILED_PRECONDITION naming the missing API access.
  AllocationService(ResourceManager* resources, KubeApi* api, VgpuProvisioner* provisioner, AssignmentStore* store,
                    ContainerEnvironment environment, PackingPolicy policy,
                    std::function<int64_t()> now_unix_s = nullptr);

  grpc::Status GetPreferredAllocation(Resource resource, const v1beta1::PreferredAllocationRequest& request,
                                      v1beta1::PreferredAllocationResponse* response) EXCLUDES(mu_);
  grpc::Status Allocate(Resource resource, const v1beta1::AllocateRequest& request, v1beta1::AllocateResponse* response)
      EXCLUDES(mu_);

 private:
  grpc::Status AllocateContainer(Resource resource, const v1beta1::ContainerAllocateRequest& request,
                                 v1beta1::ContainerAllocateResponse* response) REQUIRES(mu_);
  grpc::Status PreferContainer(Resource resource, const v1beta1::ContainerPreferredAllocationRequest& request,
                               v1beta1::ContainerPreferredAllocationResponse* response) REQUIRES(mu_);
  Status AddCdiDevice(const Assignment& a, const std::string& vgpu_dir, v1beta1::ContainerAllocateResponse* response);
  // The container's GPUs if it is known to be waiting (nullopt otherwise).
  std::optional<std::vector<uint32_t>> TargetGpus(Resource resource, uint64_t count);

  ResourceManager* resources_;
  KubeApi* api_;
  VgpuProvisioner* provisioner_;
  AssignmentStore* store_;
  const ContainerEnvironment environment_;
  const PackingPolicy policy_;
  std::function<int64_t()> now_unix_s_;
  port::Mutex mu_;  // one call at a time
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_ALLOCATION_SERVICE_H_
