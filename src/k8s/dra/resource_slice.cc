#include "k8s/dra/resource_slice.h"

#include "k8s/dra/names.h"
#include "k8s/dra/quantity.h"
#include "k8s/names.h"

namespace gpuslice::k8s::dra {

using nlohmann::json;

std::string DeviceNameOf(uint32_t gpu_index) { return "gpu-" + std::to_string(gpu_index); }

bool GpuIndexOf(const std::string& device_name, uint32_t* gpu_index) {
  if (device_name.rfind("gpu-", 0) != 0 || device_name.size() == 4 || device_name.size() > 8) return false;
  uint32_t value = 0;
  for (size_t i = 4; i < device_name.size(); ++i) {
    if (device_name[i] < '0' || device_name[i] > '9') return false;
    value = value * 10 + static_cast<uint32_t>(device_name[i] - '0');
  }
  *gpu_index = value;
  return true;
}

std::string ResourceSliceName(const std::string& node) { return node + "-" + kDriverName; }

namespace {

std::string NvlinkPeers(const NodeTopology& topology, uint32_t index) {
  std::string peers;
  for (const TopologyGpu& other : topology.gpus) {
    if (other.index == index) continue;
    const auto link = topology.LinkBetween(index, other.index);
    if (!link || (link->type != LinkType::kNvlink && link->type != LinkType::kBoard)) continue;
    peers += (peers.empty() ? "" : ",") + std::to_string(other.index);
  }
  return peers;
}

json Device(const NodeTopology& topology, const TopologyGpu& gpu, const std::string& levels) {
  const uint64_t step = kVmemoryUnitBytes;
  const uint64_t usable = gpu.memory_total_bytes / step * step;
  json memory_policy = {{"default", FormatQuantity(usable)},
                        {"validRange", {{"min", FormatQuantity(step)}, {"step", FormatQuantity(step)}}}};
  if (usable >= step) memory_policy["validRange"]["max"] = FormatQuantity(usable);
  // A string attribute holds at most 64 characters: a model name longer
  // than that is cut rather than refused by the API server.
  return {{"name", DeviceNameOf(gpu.index)},
          {"attributes",
           {{"uuid", {{"string", gpu.uuid}}},
            {"model", {{"string", gpu.name.substr(0, 64)}}},
            {"index", {{"int", gpu.index}}},
            {"nvlinkPeers", {{"string", NvlinkPeers(topology, gpu.index)}}},
            {"priorityLevels", {{"string", levels}}}}},
          {"capacity",
           {{kCoresCapacity,
             {{"value", std::to_string(kVcorePerGpu)},
              {"requestPolicy",
               {{"default", std::to_string(kVcorePerGpu)},
                {"validRange", {{"min", "1"}, {"max", std::to_string(kVcorePerGpu)}, {"step", "1"}}}}}}},
            {kMemoryCapacity, {{"value", FormatQuantity(usable)}, {"requestPolicy", memory_policy}}}}},
          {"allowMultipleAllocations", true}};
}

}  // namespace

std::string PriorityLevelsAttribute(const task::LevelTable& levels) {
  constexpr size_t kMaxStringAttribute = 64;
  std::string out;
  for (const task::Level& level : levels.levels()) {
    const std::string next = out.empty() ? level.name : out + "," + level.name;
    if (next.size() > kMaxStringAttribute) break;
    out = next;
  }
  return out;
}

json BuildResourceSlice(const std::string& node, const NodeTopology& topology, const std::set<std::string>& healthy,
                        int64_t generation, const task::LevelTable& levels) {
  const std::string level_names = PriorityLevelsAttribute(levels);
  json devices = json::array();
  for (const TopologyGpu& gpu : topology.gpus) {
    if (healthy.count(gpu.uuid) != 0) devices.push_back(Device(topology, gpu, level_names));
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", ResourceSliceName(node)}}},
          {"spec",
           {{"driver", kDriverName},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

}  // namespace gpuslice::k8s::dra
