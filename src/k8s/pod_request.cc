#include "k8s/pod_request.h"

#include <charconv>
#include <cstdlib>

#include "k8s/json_fields.h"
#include "k8s/names.h"
#include "node/power_cap_file.h"
#include "k8s/priority_level.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxQuantity = 1ull << 40;

// Extended resources are whole numbers; the API server writes them as
// strings ("50"). A hand-made object may use a JSON number.
StatusOr<uint64_t> ParseQuantity(const json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size() && n <= kMaxQuantity) return n;
    return Status::Error(where + ": \"" + text + "\" is not a whole number; extended resources take integers");
  }
  return Status::Error(where + " must be a whole number");
}

// limits win; requests alone count too (for extended resources they must be equal).
Status ReadResource(const json& container, const std::string& where, const char* resource, uint64_t* out) {
  *out = 0;
  const json* resources = JsonFields::FindKey(container, "resources");
  if (resources == nullptr || !resources->is_object()) return Status::Ok();
  for (const char* kind : {"limits", "requests"}) {
    const json* table = JsonFields::FindKey(*resources, kind);
    if (table == nullptr || !table->is_object()) continue;
    const auto it = table->find(resource);
    if (it == table->end()) continue;
    auto n = ParseQuantity(*it, where + ".resources." + kind + "[" + resource + "]");
    if (!n.ok()) return n.status();
    *out = *n;
    return Status::Ok();
  }
  return Status::Ok();
}

Status CheckContainer(const ContainerRequest& c, const std::string& who) {
  const std::string fix_vcore =
      "; request gpuslice.io/vcore from 1 to 100 for a share of one GPU, or a multiple of 100 for whole GPUs";
  if (c.vcore == 0) {
    return Status::Error(who + " asks for gpuslice.io/vmemory without gpuslice.io/vcore" + fix_vcore);
  }
  if (c.vcore > 100 && c.vcore % 100 != 0) {
    return Status::Error(who + " asks for " + std::to_string(c.vcore) + " gpuslice.io/vcore" + fix_vcore);
  }
  if (c.vcore > 100 * core::kMaxDevices) {
    return Status::Error(who + " asks for " + std::to_string(c.vcore / 100) + " GPUs; a node has at most " +
                         std::to_string(core::kMaxDevices));
  }
  if (c.vcore < 100 && c.vmemory_units == 0) {
    return Status::Error(who + " asks for a " + std::to_string(c.vcore) +
                         "% share of a GPU without gpuslice.io/vmemory; a shared GPU needs a memory cap: request "
                         "gpuslice.io/vmemory too (256 MiB units, e.g. 16 for 4 GiB)");
  }
  if (c.vmemory_units % c.GpuCount() != 0) {
    return Status::Error(who + " asks for " + std::to_string(c.vmemory_units) + " gpuslice.io/vmemory over " +
                         std::to_string(c.GpuCount()) + " GPUs; it is split evenly, so make it a multiple of " +
                         std::to_string(c.GpuCount()));
  }
  return Status::Ok();
}

}  // namespace

const ContainerRequest* PodRequest::Container(const std::string& container_name) const {
  for (const ContainerRequest& c : containers) {
    if (c.name == container_name) return &c;
  }
  return nullptr;
}

std::string BoundGpusToJson(const std::map<std::string, std::vector<uint32_t>>& gpus) { return json(gpus).dump(); }

StatusOr<std::map<std::string, std::vector<uint32_t>>> ParseBoundGpus(const std::string& text) {
  const std::string fix =
      "; it is written by the gpuslice scheduler extender: remove the annotation to let the "
      "node choose, or reschedule the pod";
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Error(std::string(kGpusAnnotation) + " must be a JSON object of container name to GPU indices" +
                         fix);
  }
  std::map<std::string, std::vector<uint32_t>> out;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it.value().is_array() || it.value().empty()) {
      return Status::Error(std::string(kGpusAnnotation) + "[" + it.key() + "] must be a non-empty array" + fix);
    }
    std::vector<uint32_t> indices;
    for (const json& i : it.value()) {
      if (!i.is_number_unsigned() || i.get<uint64_t>() >= core::kMaxDevices) {
        return Status::Error(std::string(kGpusAnnotation) + "[" + it.key() + "] holds " + i.dump() +
                             ", not a GPU index" + fix);
      }
      indices.push_back(i.get<uint32_t>());
    }
    out[it.key()] = std::move(indices);
  }
  return out;
}

StatusOr<PodRequest> ParsePodRequest(const json& pod) {
  if (!pod.is_object()) return Status::Error("the pod must be a JSON object");
  PodRequest req;
  const json* metadata = nullptr;
  const json* spec = nullptr;
  JsonFields top(pod, "pod");
  if (Status s = top.RequiredObject("metadata", &metadata); !s.ok()) return s;
  if (Status s = top.RequiredObject("spec", &spec); !s.ok()) return s;
  JsonFields meta(*metadata, "pod.metadata");
  if (Status s = meta.RequiredString("name", &req.name); !s.ok()) return s;
  if (Status s = meta.OptionalString("namespace", &req.namespace_name); !s.ok()) return s;
  if (req.namespace_name.empty()) req.namespace_name = "default";
  if (Status s = meta.OptionalString("uid", &req.uid); !s.ok()) return s;
  if (Status s = meta.OptionalString("creationTimestamp", &req.creation_timestamp); !s.ok()) return s;
  const json* deletion = JsonFields::FindKey(*metadata, "deletionTimestamp");
  req.deleting = deletion != nullptr && !deletion->is_null();
  if (Status s = JsonFields(*spec, "pod.spec").OptionalString("nodeName", &req.node_name); !s.ok()) return s;
  if (const json* status = JsonFields::FindKey(pod, "status"); status != nullptr && status->is_object()) {
    if (Status s = JsonFields(*status, "pod.status").OptionalString("phase", &req.phase); !s.ok()) return s;
  }

  const std::string who_pod = "pod " + req.namespace_name + "/" + req.name;
  const json* annotations = nullptr;
  if (Status s = meta.OptionalObject("annotations", &annotations); !s.ok()) return s;
  if (annotations != nullptr) {
    auto text = [&](const char* key) -> std::string {
      const auto it = annotations->find(key);
      return it != annotations->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    req.priority_level = text(kPriorityAnnotation);
    if (Status s = CheckLevelName(req.priority_level, who_pod + ": annotation " + kPriorityAnnotation); !s.ok()) {
      return s;
    }
    if (const std::string watts = text(kPowerCapAnnotation); !watts.empty()) {
      char* end = nullptr;
      req.power_cap_watts = strtod(watts.c_str(), &end);
      const std::string why = end == watts.c_str() || *end != '\0' ? "it is not a number"
                                                                    : node::PowerCapProblem(req.power_cap_watts);
      if (!why.empty()) {
        return Status::Error(who_pod + ": annotation " + kPowerCapAnnotation + " is \"" + watts + "\": " + why +
                             "; set it to the watts per GPU, e.g. \"150\"");
      }
    }
    if (const std::string s = text(kSuspendableAnnotation); !s.empty()) {
      if (s != "true" && s != "false") {
        return Status::Error(who_pod + ": annotation " + kSuspendableAnnotation + " is \"" + s +
                             "\"; set it to \"true\" (the node may suspend the pod's vGPUs for memory) or \"false\"");
      }
      req.suspendable = s == "true";
      if (req.suspendable && req.priority_level == "lc") {
        return Status::Error(who_pod + ": annotation " + kSuspendableAnnotation +
                             " is for best-effort pods; a latency-critical one is never suspended: remove it or drop " +
                             kPriorityAnnotation + ": lc");
      }
    }
    const std::string slo = text(kLcSloP99Annotation);
    const std::string alone = text(kLcAloneP99Annotation);
    if (!slo.empty() || !alone.empty()) {
      auto micros = [&](const char* key, const std::string& value, uint64_t* out) -> Status {
        const char* end = value.data() + value.size();
        auto [ptr, ec] = std::from_chars(value.data(), end, *out);
        if (ec != std::errc() || ptr != end || *out == 0) {
          return Status::Error(who_pod + ": annotation " + key + " is \"" + value +
                               "\"; set it to a whole number of microseconds above 0, e.g. \"800\"");
        }
        return Status::Ok();
      };
      // A level's class is the node's to say (priority_level.h); without a
      // level, or at `be`, the pod is best-effort on every node.
      if (req.priority_level.empty() || req.priority_level == "be") {
        return Status::Error(who_pod + ": annotations " + kLcSloP99Annotation + " and " + kLcAloneP99Annotation +
                             " are for latency-critical pods; add " + kPriorityAnnotation +
                             ": lc (or another latency-critical level) or remove them");
      }
      if (slo.empty() || alone.empty()) {
        return Status::Error(who_pod + ": an LC latency SLO needs both " + kLcSloP99Annotation + " and " +
                             kLcAloneP99Annotation + " (the pod's p99 measured alone, in microseconds)");
      }
      if (Status s = micros(kLcSloP99Annotation, slo, &req.lc_slo_p99_us); !s.ok()) return s;
      if (Status s = micros(kLcAloneP99Annotation, alone, &req.lc_alone_p99_us); !s.ok()) return s;
    }
    if (const std::string gpus = text(kGpusAnnotation); !gpus.empty()) {
      auto parsed = ParseBoundGpus(gpus);
      if (!parsed.ok()) return Status::Error(who_pod + ": " + parsed.status().message());
      req.bound_gpus = std::move(*parsed);
    }
    req.bound_node = text(kBindNodeAnnotation);
    if (const std::string t = text(kBindTimeAnnotation); !t.empty()) {
      std::from_chars(t.data(), t.data() + t.size(), req.bind_time_ns);
    }
  }

  uint32_t ordinal = 0;
  for (const char* list : {"initContainers", "containers"}) {
    const json* containers = nullptr;
    if (Status s = JsonFields(*spec, "pod.spec").OptionalArray(list, &containers); !s.ok()) return s;
    for (size_t i = 0; containers != nullptr && i < containers->size(); ++i) {
      const json& c = (*containers)[i];
      const std::string where = std::string("pod.spec.") + list + "[" + std::to_string(i) + "]";
      if (!c.is_object()) return Status::Error(where + " must be an object");
      ContainerRequest cr;
      cr.ordinal = ordinal++;
      cr.init = list[0] == 'i';
      if (Status s = JsonFields(c, where).RequiredString("name", &cr.name); !s.ok()) return s;
      uint64_t vcore = 0, vmemory = 0;
      if (Status s = ReadResource(c, where, kVcoreResource, &vcore); !s.ok()) return s;
      if (Status s = ReadResource(c, where, kVmemoryResource, &vmemory); !s.ok()) return s;
      if (vcore == 0 && vmemory == 0) continue;
      cr.vcore = static_cast<uint32_t>(std::min<uint64_t>(vcore, 1u << 30));
      cr.vmemory_units = vmemory;
      if (Status s = CheckContainer(cr, who_pod + " container " + cr.name); !s.ok()) return s;
      req.containers.push_back(std::move(cr));
    }
  }
  return req;
}

}  // namespace gpuslice::k8s
