#include "k8s/node_usage.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "k8s/json_fields.h"
#include "k8s/names.h"

namespace gpuslice::k8s {

using nlohmann::json;

const GpuUsage* NodeUsage::GpuByIndex(uint32_t index) const {
  for (const GpuUsage& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

bool NodeUsage::HasPod(std::string_view uid) const { return std::binary_search(pods.begin(), pods.end(), uid); }

std::string NodeUsageToJson(const NodeUsage& usage) {
  json doc;
  doc["version"] = kNodeUsageVersion;
  doc["node"] = usage.node;
  doc["gpus"] = json::array();
  for (const GpuUsage& g : usage.gpus) {
    doc["gpus"].push_back({{"index", g.index},
                           {"uuid", g.uuid},
                           {"healthy", g.healthy},
                           {"vcore_used", g.vcore_used},
                           {"vmemory_used", g.vmemory_used},
                           {"vmemory_total", g.vmemory_total}});
  }
  doc["pods"] = usage.pods;
  return doc.dump();
}

StatusOr<NodeUsage> ParseNodeUsage(std::string_view json_text) {
  const std::string what = kAllocatedAnnotation;
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::Error(what + " is not a JSON object");
  JsonFields top(doc, what);
  uint64_t version = 0;
  if (Status s = top.RequiredUint("version", &version); !s.ok()) return s;
  if (version != kNodeUsageVersion) {
    return Status::Error(what + ": version " + std::to_string(version) + " is not supported (this build reads " +
                         std::to_string(kNodeUsageVersion) + "); run the same gpuslice version on nodes and scheduler");
  }
  NodeUsage usage;
  if (Status s = top.OptionalString("node", &usage.node); !s.ok()) return s;
  const json* gpus = nullptr;
  if (Status s = top.RequiredArray("gpus", &gpus); !s.ok()) return s;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string where = what + ".gpus[" + std::to_string(i) + "]";
    if (!(*gpus)[i].is_object()) return Status::Error(where + " must be an object");
    JsonFields f((*gpus)[i], where);
    GpuUsage g;
    uint64_t index = 0, vcore = 0;
    if (Status s = f.RequiredUint("index", &index); !s.ok()) return s;
    if (Status s = f.OptionalString("uuid", &g.uuid); !s.ok()) return s;
    if (Status s = f.OptionalBool("healthy", &g.healthy); !s.ok()) return s;
    if (Status s = f.RequiredUint("vcore_used", &vcore); !s.ok()) return s;
    if (Status s = f.RequiredUint("vmemory_used", &g.vmemory_used); !s.ok()) return s;
    if (Status s = f.OptionalUint("vmemory_total", &g.vmemory_total); !s.ok()) return s;
    if (vcore > kVcorePerGpu) return Status::Error(where + ".vcore_used: " + std::to_string(vcore) + " exceeds 100");
    g.index = static_cast<uint32_t>(index);
    g.vcore_used = static_cast<uint32_t>(vcore);
    usage.gpus.push_back(std::move(g));
  }
  const json* pods = nullptr;
  if (Status s = top.OptionalArray("pods", &pods); !s.ok()) return s;
  for (size_t i = 0; pods != nullptr && i < pods->size(); ++i) {
    if (!(*pods)[i].is_string()) return Status::Error(what + ".pods[" + std::to_string(i) + "] must be a string");
    usage.pods.push_back((*pods)[i].get<std::string>());
  }
  std::sort(usage.pods.begin(), usage.pods.end());
  return usage;
}

}  // namespace gpuslice::k8s
