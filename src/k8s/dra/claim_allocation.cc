#include "k8s/dra/claim_allocation.h"

#include <algorithm>

#include "k8s/dra/names.h"
#include "k8s/dra/quantity.h"
#include "k8s/dra/resource_slice.h"
#include "k8s/names.h"
#include "node/power_cap_file.h"
#include "k8s/priority_level.h"

namespace gpuslice::k8s::dra {

using nlohmann::json;

namespace {

// The member `key` of `object` when it is a string; an error naming `field` otherwise.
StatusOr<std::string> StringAt(const json& object, const char* key, const std::string& field) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get<std::string>().empty()) {
    return Status::Error(field + "." + key + " is missing or not a non-empty string");
  }
  return it->get<std::string>();
}

bool AppliesTo(const json& config, const std::string& request) {
  const auto it = config.find("requests");
  if (it == config.end() || !it->is_array() || it->empty()) return true;
  for (const json& r : *it) {
    if (!r.is_string()) continue;
    const std::string name = r.get<std::string>();
    // "<main request>/<subrequest>" applies to the subrequest only; the main
    // request's name applies to all of its subrequests.
    if (name == request || request.rfind(name + "/", 0) == 0) return true;
  }
  return false;
}

}  // namespace

StatusOr<VgpuConfig> ParseVgpuConfig(const json& parameters, const VgpuConfig& base, const std::string& field) {
  if (!parameters.is_object()) return Status::Error(field + " is not an object; write {\"apiVersion\": \"" +
                                                    std::string(kConfigApiVersion) + "\", \"kind\": \"" +
                                                    kConfigKind + "\", ...}");
  VgpuConfig config = base;
  bool saw_api = false, saw_kind = false;
  for (const auto& [key, value] : parameters.items()) {
    const std::string path = field + "." + key;
    if (key == "apiVersion") {
      if (!value.is_string() || value.get<std::string>() != kConfigApiVersion) {
        return Status::Error(path + " must be \"" + std::string(kConfigApiVersion) + "\", not " + value.dump());
      }
      saw_api = true;
    } else if (key == "kind") {
      if (!value.is_string() || value.get<std::string>() != kConfigKind) {
        return Status::Error(path + " must be \"" + std::string(kConfigKind) + "\", not " + value.dump());
      }
      saw_kind = true;
    } else if (key == "priority") {
      const std::string p = value.is_string() ? value.get<std::string>() : "";
      if (p.empty()) {
        return Status::Error(path + " is " + value.dump().substr(0, 40) +
                             "; use a priority level's name as a string: \"lc\" (latency-critical), \"be\" (best "
                             "effort) or a level of the node's gpuslice daemon config");
      }
      if (Status s = CheckLevelName(p, path); !s.ok()) return s;
      config.priority_level = p;
      config.priority_field = path;
    } else if (key == "computeCap") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 100) {
        return Status::Error(path + " is " + value.dump() +
                             "; use a whole percentage from 1 to 100 (a hard cap), or 0 for no cap");
      }
      config.compute_cap_pct = static_cast<uint32_t>(value.get<int64_t>());
    } else if (key == "powerCapWatts") {
      const std::string why = value.is_number() ? node::PowerCapProblem(value.get<double>()) : "not a number";
      if (!why.empty()) return Status::Error(path + " is " + value.dump() + ": " + why);
      config.power_cap_watts = value.get<double>();
    } else if (key == "suspendable") {
      if (!value.is_boolean()) return Status::Error(path + " is " + value.dump() + "; use true or false");
      config.suspendable = value.get<bool>();
    } else {
      return Status::Error(path + " is not a field of " + std::string(kConfigKind) +
                           "; the fields are apiVersion, kind, priority, computeCap, powerCapWatts and suspendable");
    }
  }
  if (!saw_api || !saw_kind) {
    return Status::Error(field + " needs apiVersion \"" + std::string(kConfigApiVersion) + "\" and kind \"" +
                         kConfigKind + "\"");
  }
  return config;
}

StatusOr<ClaimAllocation> ParseClaimAllocation(const json& claim, const std::string& driver, const std::string& pool,
                                               const NodeTopology& topology) {
  if (!claim.is_object() || !claim.contains("metadata") || !claim["metadata"].is_object()) {
    return Status::Error("the ResourceClaim has no metadata");
  }
  ClaimAllocation out;
  out.uid = claim["metadata"].value("uid", "");
  out.namespace_name = claim["metadata"].value("namespace", "");
  out.name = claim["metadata"].value("name", "");
  const json* devices = nullptr;
  if (const auto s = claim.find("status"); s != claim.end() && s->is_object()) {
    if (const auto a = s->find("allocation"); a != s->end() && a->is_object()) {
      if (const auto d = a->find("devices"); d != a->end() && d->is_object()) devices = &*d;
    }
  }
  if (devices == nullptr) {
    return Status::Error("ResourceClaim " + out.namespace_name + "/" + out.name +
                         " is not allocated (no status.allocation.devices); the scheduler allocates it first");
  }

  // Configs in the order the API gives them: FromClass entries, then FromClaim.
  struct Opaque {
    json parameters;
    json entry;
    std::string field;
  };
  std::vector<Opaque> configs;
  if (const auto c = devices->find("config"); c != devices->end()) {
    if (!c->is_array()) return Status::Error("status.allocation.devices.config is not a list");
    for (size_t i = 0; i < c->size(); ++i) {
      const json& entry = (*c)[i];
      const std::string field = "status.allocation.devices.config[" + std::to_string(i) + "]";
      if (!entry.is_object()) return Status::Error(field + " is not an object");
      const auto opaque = entry.find("opaque");
      if (opaque == entry.end()) continue;  // another kind of config: not ours to judge
      if (!opaque->is_object() || opaque->value("driver", "") != driver) continue;
      if (!opaque->contains("parameters")) return Status::Error(field + ".opaque.parameters is missing");
      configs.push_back({(*opaque)["parameters"], entry, field + ".opaque.parameters"});
    }
  }
  std::stable_sort(configs.begin(), configs.end(), [](const Opaque& a, const Opaque& b) {
    return a.entry.value("source", "") == "FromClass" && b.entry.value("source", "") != "FromClass";
  });

  const auto results = devices->find("results");
  if (results == devices->end() || !results->is_array()) {
    return Status::Error("status.allocation.devices.results is missing or not a list");
  }
  for (size_t i = 0; i < results->size(); ++i) {
    const json& r = (*results)[i];
    const std::string field = "status.allocation.devices.results[" + std::to_string(i) + "]";
    if (!r.is_object()) return Status::Error(field + " is not an object");
    if (r.value("driver", "") != driver) continue;
    if (r.value("pool", "") != pool) continue;  // another node's device
    AllocatedDevice d;
    auto request = StringAt(r, "request", field);
    if (!request.ok()) return request.status();
    auto device = StringAt(r, "device", field);
    if (!device.ok()) return device.status();
    d.request = *request;
    d.pool = pool;
    d.device = *device;
    if (!GpuIndexOf(d.device, &d.gpu_index) || topology.GpuByIndex(d.gpu_index) == nullptr) {
      return Status::Error(field + ".device: \"" + d.device + "\" is not a GPU of pool " + pool +
                           "; the claim was allocated from an older ResourceSlice: delete and recreate the pod");
    }
    d.gpu_uuid = topology.GpuByIndex(d.gpu_index)->uuid;
    if (const auto share = r.find("shareID"); share != r.end() && share->is_string()) d.share_id = share->get<std::string>();
    if (const auto cc = r.find("consumedCapacity"); cc != r.end()) {
      if (!cc->is_object()) return Status::Error(field + ".consumedCapacity is not an object");
      for (const auto& [key, value] : cc->items()) {
        const std::string path = field + ".consumedCapacity." + key;
        if (!value.is_string()) return Status::Error(path + " is not a quantity string");
        auto amount = ParseWholeQuantity(value.get<std::string>(), path);
        if (!amount.ok()) return amount.status();
        if (key == kCoresCapacity) {
          if (*amount < 1 || *amount > kVcorePerGpu) {
            return Status::Error(path + " is " + value.get<std::string>() + "; cores are 1 to 100 per GPU");
          }
          d.cores = static_cast<uint32_t>(*amount);
        } else if (key == kMemoryCapacity) {
          if (*amount == 0 || *amount % kVmemoryUnitBytes != 0) {
            return Status::Error(path + " is " + value.get<std::string>() +
                                 "; memory is a positive multiple of 256Mi");
          }
          d.memory_bytes = *amount;
        } else {
          return Status::Error(path + " is not a capacity of " + driver + "; its capacities are cores and memory");
        }
      }
    }
    for (const Opaque& c : configs) {
      if (!AppliesTo(c.entry, d.request)) continue;
      auto config = ParseVgpuConfig(c.parameters, d.config, c.field);
      if (!config.ok()) return config.status();
      d.config = *config;
    }
    out.devices.push_back(d);
  }
  if (out.devices.empty()) {
    return Status::Error("ResourceClaim " + out.namespace_name + "/" + out.name + " has no device of driver " +
                         driver + " in pool " + pool + "; it was allocated to another node or driver");
  }
  return out;
}

}  // namespace gpuslice::k8s::dra
