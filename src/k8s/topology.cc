#include "k8s/topology.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/vgpu_layout.h"
#include "k8s/json_fields.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;

struct LinkName {
  LinkType type;
  const char* name;
};
constexpr LinkName kLinkNames[] = {
    {LinkType::kBoard, "board"},
    {LinkType::kNvlink, "nvlink"},
    {LinkType::kPcieSingleSwitch, "pcie_single_switch"},
    {LinkType::kPcieMultipleSwitches, "pcie_multiple_switches"},
    {LinkType::kPcieHostBridge, "pcie_host_bridge"},
    {LinkType::kNumaNode, "numa_node"},
    {LinkType::kSystem, "system"},
};

std::string KnownLinkTypes() {
  std::string out;
  for (const LinkName& l : kLinkNames) out += std::string(out.empty() ? "" : ", ") + l.name;
  return out;
}

}  // namespace

const char* LinkTypeName(LinkType type) {
  for (const LinkName& l : kLinkNames) {
    if (l.type == type) return l.name;
  }
  return "system";
}

std::optional<LinkType> LinkTypeFromName(std::string_view name) {
  for (const LinkName& l : kLinkNames) {
    if (name == l.name) return l.type;
  }
  return std::nullopt;
}

double LinkQuality(LinkType type, uint32_t nvlinks) {
  switch (type) {
    case LinkType::kBoard:
      return 1.0;
    case LinkType::kNvlink:
      // 0.80 for one link up to 0.95 for 18 (a full H100/H200 NVLink set).
      return 0.80 + 0.15 * std::min<uint32_t>(std::max<uint32_t>(nvlinks, 1), 18) / 18.0;
    case LinkType::kPcieSingleSwitch:
      return 0.60;
    case LinkType::kPcieMultipleSwitches:
      return 0.50;
    case LinkType::kPcieHostBridge:
      return 0.40;
    case LinkType::kNumaNode:
      return 0.25;
    case LinkType::kSystem:
      return 0.10;
  }
  return 0.10;
}

const TopologyGpu* NodeTopology::GpuByIndex(uint32_t index) const {
  for (const TopologyGpu& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

const TopologyGpu* NodeTopology::GpuByUuid(std::string_view uuid) const {
  for (const TopologyGpu& g : gpus) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

std::optional<TopologyLink> NodeTopology::LinkBetween(uint32_t x, uint32_t y) const {
  const uint32_t a = std::min(x, y), b = std::max(x, y);
  for (const TopologyLink& l : links) {
    if (l.a == a && l.b == b) return l;
  }
  return std::nullopt;
}

StatusOr<NodeTopology> ParseTopology(std::string_view json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Error("topology is not valid JSON");
  if (!doc.is_object()) return Status::Error("topology must be a JSON object with \"gpus\" and \"links\"");
  NodeTopology topo;
  JsonFields top(doc, "topology");
  if (Status s = top.OptionalString("node", &topo.node); !s.ok()) return s;
  if (Status s = top.OptionalString("driver_version", &topo.driver_version); !s.ok()) return s;

  const json* gpus = nullptr;
  if (Status s = top.RequiredArray("gpus", &gpus); !s.ok()) return s;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string where = "gpus[" + std::to_string(i) + "]";
    const json& g = (*gpus)[i];
    if (!g.is_object()) return Status::Error(where + " must be an object");
    JsonFields f(g, where);
    TopologyGpu gpu;
    uint64_t index = 0;
    if (Status s = f.RequiredUint("index", &index); !s.ok()) return s;
    if (index >= core::kMaxDevices) {
      return Status::Error(where + ".index: " + std::to_string(index) + " is out of range (a node has at most " +
                           std::to_string(core::kMaxDevices) + " GPUs)");
    }
    gpu.index = static_cast<uint32_t>(index);
    if (Status s = f.RequiredString("uuid", &gpu.uuid); !s.ok()) return s;
    if (gpu.uuid.empty()) return Status::Error(where + ".uuid is empty");
    if (Status s = f.OptionalString("name", &gpu.name); !s.ok()) return s;
    if (Status s = f.RequiredUint("memory_total_bytes", &gpu.memory_total_bytes); !s.ok()) return s;
    if (gpu.memory_total_bytes == 0) return Status::Error(where + ".memory_total_bytes must be positive");
    if (Status s = f.OptionalString("pci_bus_id", &gpu.pci_bus_id); !s.ok()) return s;
    for (const TopologyGpu& other : topo.gpus) {
      if (other.index == gpu.index)
        return Status::Error(where + ".index: " + std::to_string(index) + " is listed twice");
      if (other.uuid == gpu.uuid) return Status::Error(where + ".uuid: " + gpu.uuid + " is listed twice");
    }
    topo.gpus.push_back(std::move(gpu));
  }
  std::sort(topo.gpus.begin(), topo.gpus.end(),
            [](const TopologyGpu& x, const TopologyGpu& y) { return x.index < y.index; });

  const json* links = nullptr;
  if (Status s = top.OptionalArray("links", &links); !s.ok()) return s;
  for (size_t i = 0; links != nullptr && i < links->size(); ++i) {
    const std::string where = "links[" + std::to_string(i) + "]";
    const json& l = (*links)[i];
    if (!l.is_object()) return Status::Error(where + " must be an object");
    JsonFields f(l, where);
    uint64_t a = 0, b = 0, nvlinks = 0;
    std::string type;
    if (Status s = f.RequiredUint("a", &a); !s.ok()) return s;
    if (Status s = f.RequiredUint("b", &b); !s.ok()) return s;
    if (Status s = f.RequiredString("type", &type); !s.ok()) return s;
    if (Status s = f.OptionalUint("nvlinks", &nvlinks); !s.ok()) return s;
    if (a >= b) return Status::Error(where + ": a must be less than b (one link per unordered pair)");
    if (topo.GpuByIndex(static_cast<uint32_t>(a)) == nullptr || topo.GpuByIndex(static_cast<uint32_t>(b)) == nullptr) {
      return Status::Error(where + ": links GPU " + std::to_string(a) + " and " + std::to_string(b) +
                           ", which are not both in \"gpus\"");
    }
    const auto link_type = LinkTypeFromName(type);
    if (!link_type) {
      return Status::Error(where + ".type: unknown link type \"" + type + "\"; expected one of " + KnownLinkTypes());
    }
    if (topo.LinkBetween(static_cast<uint32_t>(a), static_cast<uint32_t>(b))) {
      return Status::Error(where + ": GPUs " + std::to_string(a) + " and " + std::to_string(b) + " are linked twice");
    }
    topo.links.push_back({static_cast<uint32_t>(a), static_cast<uint32_t>(b), *link_type,
                          static_cast<uint32_t>(std::min<uint64_t>(nvlinks, 1024))});
  }
  return topo;
}

std::string TopologyToJson(const NodeTopology& topology) {
  json doc;
  doc["node"] = topology.node;
  doc["driver_version"] = topology.driver_version;
  doc["gpus"] = json::array();
  for (const TopologyGpu& g : topology.gpus) {
    doc["gpus"].push_back({{"index", g.index},
                           {"uuid", g.uuid},
                           {"name", g.name},
                           {"memory_total_bytes", g.memory_total_bytes},
                           {"pci_bus_id", g.pci_bus_id}});
  }
  doc["links"] = json::array();
  for (const TopologyLink& l : topology.links) {
    json link = {{"a", l.a}, {"b", l.b}, {"type", LinkTypeName(l.type)}};
    if (l.type == LinkType::kNvlink) link["nvlinks"] = l.nvlinks;
    doc["links"].push_back(std::move(link));
  }
  return doc.dump();
}

}  // namespace gpuslice::k8s
