// priority_level.h — a pod's or a claim's priority level: from the name it
// gives (the gpuslice.io/priority annotation, a VgpuConfig's `priority`) to
// the level word its vGPU gets (core::LevelWord).
//
// The names are the node's levels (task/task_levels.h): the built-in `lc`
// and `be`, and those of the gpuslice daemon config's `levels:`, which the
// daemon stores in the state directory (node/policy_file.h) — without one,
// the default critical, high, normal and low. A name the node does not have
// is refused on that node, with the node's levels listed: silently running a
// pod at another level than it asked for would break its SLO or someone
// else's.
//
// Who checks what:
//   - the scheduler extender, which does not know a node's levels, checks
//     only that a name could be a level (CheckLevelName, in
//     ParsePodRequest);
//   - the device plugin (Allocate) and the DRA driver (NodePrepareResources)
//     resolve it against their node's levels (ResolveLevel, ResolvePodLevel).
//
// Pure functions; thread-safe; they allocate.
#ifndef GPUSLICE_K8S_PRIORITY_LEVEL_H_
#define GPUSLICE_K8S_PRIORITY_LEVEL_H_

#include <cstdint>
#include <string>

#include "core/status.h"
#include "k8s/pod_request.h"
#include "task/task_levels.h"

namespace gpuslice::k8s {

// OK when `name` is "" (the default) or could name a level. `where` names
// the annotation or field in the error, which says how names are written.
Status CheckLevelName(const std::string& name, const std::string& where);

struct ResolvedLevel {
  std::string name;   // as the node calls it; "be" for the default
  uint32_t word = 0;  // core::LevelWord
};

// `name` ("" = `be`) among `levels`, the levels of node `node`. The error
// names `where`, the name given, the node and every level it has.
StatusOr<ResolvedLevel> ResolveLevel(const task::LevelTable& levels, const std::string& name, const std::string& node,
                                     const std::string& where);

// The pod's level on node `node`. Also refuses an LC latency SLO
// (gpuslice.io/lc-slo-p99-us) on a pod whose level is best-effort there.
StatusOr<ResolvedLevel> ResolvePodLevel(const PodRequest& pod, const task::LevelTable& levels, const std::string& node);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_PRIORITY_LEVEL_H_
