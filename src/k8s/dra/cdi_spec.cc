#include "k8s/dra/cdi_spec.h"

#include <set>

#include "k8s/assignment.h"
#include "k8s/gpu_sources.h"

namespace gpuslice::k8s::dra {

using nlohmann::json;

std::string CdiDeviceName(const std::string& claim_uid, uint32_t gpu_index) {
  return claim_uid + "-" + std::to_string(gpu_index);
}

StatusOr<json> BuildCdiSpec(const ClaimAllocation& claim, const std::string& vgpu_name, const std::string& vgpu_dir,
                            const NodeTopology& topology, const ContainerEnvironment& env,
                            const std::string& preload_file) {
  // The device plugin's setup, computed for the same GPUs, is the one source
  // of what a container needs.
  Assignment a;
  a.vgpu = vgpu_name;
  for (const AllocatedDevice& d : claim.devices) {
    a.gpus.push_back(d.gpu_index);
    a.uuids.push_back(d.gpu_uuid);
  }
  ContainerEnvironment preload_env = env;
  preload_env.inject = InjectMode::kPreload;
  auto setup = BuildContainerResponse(a, vgpu_dir, topology, preload_env);
  if (!setup.ok()) return setup.status();

  // Each device adds its own GPU's node; the rest is claim-wide.
  json common = CdiEdits(*setup, vgpu_name, preload_file);
  const json nodes = std::move(common["deviceNodes"]);
  common["deviceNodes"] = json::array();
  std::set<std::string> per_gpu_nodes;
  json devices = json::array();
  for (const AllocatedDevice& d : claim.devices) {
    const TopologyGpu* gpu = topology.GpuByIndex(d.gpu_index);
    const std::string node = "/dev/nvidia" + std::to_string(DeviceMinor(*gpu, env.proc_root));
    per_gpu_nodes.insert(node);
    json own = json::array();
    for (const json& n : nodes) {
      if (n["path"] == node) own.push_back(n);
    }
    devices.push_back({{"name", CdiDeviceName(claim.uid, d.gpu_index)},
                       {"annotations", {{"gpu.gpuslice.io/uuid", d.gpu_uuid}}},
                       {"containerEdits", {{"deviceNodes", own}}}});
  }
  for (const json& n : nodes) {
    if (per_gpu_nodes.count(n["path"].get<std::string>()) == 0) common["deviceNodes"].push_back(n);
  }
  return json{{"cdiVersion", kCdiVersion},
              {"kind", kCdiKind},
              {"annotations", {{"gpu.gpuslice.io/claim", claim.namespace_name + "/" + claim.name}}},
              {"devices", devices},
              {"containerEdits", common}};
}

}  // namespace gpuslice::k8s::dra
