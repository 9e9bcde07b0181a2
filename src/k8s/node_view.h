// node_view.h — one node as the scheduler extender sees it: its topology and
// usage, read from the annotations the node's device plugin publishes, as a
// list of GpuState ready for the allocator.
//
// Pure function; thread-safe; allocates.
#ifndef GPUSLICE_K8S_NODE_VIEW_H_
#define GPUSLICE_K8S_NODE_VIEW_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "k8s/allocator.h"
#include "k8s/node_usage.h"
#include "k8s/topology.h"

namespace gpuslice::k8s {

struct NodeView {
  std::string name;
  NodeTopology topology;
  NodeUsage usage;
  std::vector<GpuState> gpus;
};

// Reads a v1 Node object. A node without gpuslice's annotations, or with
// malformed ones, is an error naming the node, the annotation and the fix.
// `*unresolvable` is set when the node cannot serve gpuslice at all (as
// opposed to being full), so that preemption is not tried on it.
StatusOr<NodeView> ReadNodeView(const nlohmann::json& node, bool* unresolvable);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_NODE_VIEW_H_
