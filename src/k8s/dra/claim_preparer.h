// claim_preparer.h — what NodePrepareResources and NodeUnprepareResources do
// for one claim, apart from gRPC.
//
// Prepare: fetch the ResourceClaim, take this node's allocation results and
// opaque config (claim_allocation.h), resolve each device's priority level
// among the node's (k8s/priority_level.h: a level the node does not have is
// an error listing the ones it has), create the claim's vGPU (one device
// per allocated GPU, with the claimed cores and memory) through the same
// VgpuProvisioner the device plugin uses, write its CDI spec (cdi_spec.h),
// and record it (checkpoint.h). Unprepare: remove the CDI spec, release the
// vGPU once no process uses it, forget the claim.
//
// Both are idempotent: a claim already prepared is answered from the
// checkpoint (its CDI spec rewritten if it went missing), and unpreparing an
// unknown claim succeeds. A claim that cannot be parsed changes nothing.
//
// Thread-safe: one mutex serialises claims (the kubelet sends few, and the
// vGPU store takes its own file lock anyway). Calls block on the API server
// and the disk, and allocate.
#ifndef GPUSLICE_K8S_DRA_CLAIM_PREPARER_H_
#define GPUSLICE_K8S_DRA_CLAIM_PREPARER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "k8s/container_setup.h"
#include "k8s/dra/checkpoint.h"
#include "k8s/host_process_probe.h"
#include "k8s/kube_api.h"
#include "k8s/topology.h"
#include "k8s/vgpu_provisioner.h"
#include "port/mutex.h"

namespace gpuslice::k8s::dra {

struct PreparerOptions {
  std::string driver;
  std::string pool;             // this node's pool: the node name
  std::string cdi_dir;          // where CDI specs go (/var/run/cdi)
  std::string vgpu_state_dir;   // the vGPU store's root (the device plugin's --state-dir)
  std::string plugin_state_dir; // checkpoint.json and ld.so.preload
  ContainerEnvironment container;
  std::string proc_root = "/proc";
};

class ClaimPreparer {
 public:
  // Loads the checkpoint and writes the ld.so.preload file. `api` and
  // `provisioner` outlive the preparer.
  static StatusOr<std::unique_ptr<ClaimPreparer>> Open(PreparerOptions options, NodeTopology topology, KubeApi* api,
                                                       VgpuProvisioner* provisioner);

  StatusOr<std::vector<PreparedDevice>> Prepare(const std::string& namespace_name, const std::string& uid,
                                                const std::string& name) EXCLUDES(mu_);
  Status Unprepare(const std::string& uid) EXCLUDES(mu_);

  // The vGPU name of a claim: "dra-<claim uid>".
  static std::string VgpuNameFor(const std::string& uid);
  size_t prepared() const EXCLUDES(mu_);

 private:
  ClaimPreparer(PreparerOptions options, NodeTopology topology, KubeApi* api, VgpuProvisioner* provisioner,
                Checkpoint checkpoint);

  const PreparerOptions options_;
  const NodeTopology topology_;
  KubeApi* const api_;
  VgpuProvisioner* const provisioner_;
  mutable port::Mutex mu_;
  Checkpoint checkpoint_ GUARDED_BY(mu_);
  HostProcessProbe probe_ GUARDED_BY(mu_);
};

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_CLAIM_PREPARER_H_
