#include "k8s/node_view.h"

#include "k8s/json_fields.h"
#include "k8s/names.h"

namespace gpuslice::k8s {

using nlohmann::json;

StatusOr<NodeView> ReadNodeView(const json& node, bool* unresolvable) {
  *unresolvable = true;
  NodeView view;
  const json* metadata = node.is_object() ? JsonFields::FindKey(node, "metadata") : nullptr;
  if (metadata == nullptr || !metadata->is_object()) return Status::Error("a node without metadata");
  if (Status s = JsonFields(*metadata, "node.metadata").RequiredString("name", &view.name); !s.ok()) return s;
  const json* annotations = JsonFields::FindKey(*metadata, "annotations");
  auto annotation = [&](const char* key) -> const json* {
    if (annotations == nullptr || !annotations->is_object()) return nullptr;
    const auto it = annotations->find(key);
    return it == annotations->end() ? nullptr : &*it;
  };
  const std::string who = "node " + view.name;

  const json* topology = annotation(kTopologyAnnotation);
  if (topology == nullptr) {
    return Status::Error(who + " has no " + kTopologyAnnotation +
                         " annotation; run the gpuslice device plugin there (deploy/k8s/device-plugin.yaml)");
  }
  if (!topology->is_string()) return Status::Error(who + ": annotation " + kTopologyAnnotation + " is not a string");
  auto topo = ParseTopology(topology->get<std::string>());
  if (!topo.ok()) {
    return Status::Error(who + ": annotation " + kTopologyAnnotation + ": " + topo.status().message() +
                         "; it must be what `gpuslice devices --json` prints");
  }
  view.topology = std::move(*topo);

  const json* allocated = annotation(kAllocatedAnnotation);
  if (allocated == nullptr) {
    *unresolvable = false;  // the plugin may just not have published yet
    return Status::Error(who + " has no " + kAllocatedAnnotation +
                         " annotation yet; the gpuslice device plugin publishes it when it starts");
  }
  if (!allocated->is_string()) return Status::Error(who + ": annotation " + kAllocatedAnnotation + " is not a string");
  auto usage = ParseNodeUsage(allocated->get<std::string>());
  if (!usage.ok()) return Status::Error(who + ": " + usage.status().message());
  view.usage = std::move(*usage);

  for (const TopologyGpu& g : view.topology.gpus) {
    GpuState state;
    state.index = g.index;
    state.vmemory_total = g.memory_total_bytes / kVmemoryUnitBytes;
    if (const GpuUsage* u = view.usage.GpuByIndex(g.index)) {
      if (!u->uuid.empty() && u->uuid != g.uuid) {
        *unresolvable = false;
        return Status::Error(who + ": GPU " + std::to_string(g.index) + " is " + g.uuid + " in " + kTopologyAnnotation +
                             " but " + u->uuid + " in " + kAllocatedAnnotation +
                             "; the annotations are from different boots: restart the device plugin");
      }
      state.healthy = u->healthy;
      state.vcore_used = u->vcore_used;
      state.vmemory_used = u->vmemory_used;
      if (u->vmemory_total != 0) state.vmemory_total = u->vmemory_total;
    }
    view.gpus.push_back(state);
  }
  *unresolvable = false;
  return view;
}

}  // namespace gpuslice::k8s
