// pod_liveness.h — which pods still exist on this node, for the reclaimer.
// Two sources, behind one interface (tests hand in fakes):
//   pod-resources  the kubelet's PodResourcesLister.List on
//                  /var/lib/kubelet/pod-resources/kubelet.sock: pods by
//                  namespace/name, with the device IDs each container holds;
//   cgroups        the kubelet's pod cgroups, by pod UID, under cgroup v1
//                  (<root>/<controller>/kubepods/.../pod<UID>) or v2
//                  (<root>/kubepods.slice/.../kubepods-...-pod<UID_>.slice,
//                  or <root>/kubepods/.../pod<UID> with the cgroupfs driver).
// A pod is alive while its cgroup exists, i.e. until its last container and
// sandbox are gone, which is when its vGPU may go.
//
// List() blocks (a gRPC call of at most 10 s, or a directory walk) and
// allocates; implementations are used from the reclaimer's thread only.
#ifndef GPUSLICE_K8S_POD_LIVENESS_H_
#define GPUSLICE_K8S_POD_LIVENESS_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "k8s/assignment.h"

namespace gpuslice::k8s {

struct LivePod {
  std::string namespace_name;        // pod-resources only
  std::string name;                  // pod-resources only
  std::string uid;                   // cgroups only
  std::set<std::string> device_ids;  // pod-resources: every device ID its containers hold
};

class PodLiveness {
 public:
  virtual ~PodLiveness() = default;
  // Every pod on the node. An error means "cannot tell": reclaim nothing.
  virtual StatusOr<std::vector<LivePod>> List() = 0;
};

std::unique_ptr<PodLiveness> NewPodResourcesLiveness(const std::string& socket_path);
std::unique_ptr<PodLiveness> NewCgroupLiveness(const std::string& cgroup_root);

// Whether the assignment's pod is among `pods`. By UID when the source knows
// UIDs; else by namespace/name, and — when the source lists device IDs — only
// if the pod holds one of the assignment's IDs (a same-named replacement pod,
// as a StatefulSet makes, does not keep the old vGPU).
bool IsAlive(const Assignment& assignment, const std::vector<LivePod>& pods);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_POD_LIVENESS_H_
