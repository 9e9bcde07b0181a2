#include "k8s/assignment.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "k8s/json_fields.h"

namespace gpuslice::k8s {

using nlohmann::json;

ContainerRequest Assignment::AsRequest() const {
  ContainerRequest r;
  r.name = container;
  const uint32_t n = static_cast<uint32_t>(std::max<size_t>(gpus.size(), 1));
  r.vcore = n == 1 ? vcore_per_gpu : 100 * n;
  r.vmemory_units = vmemory_units_per_gpu * n;
  return r;
}

std::string VgpuNameFor(const std::string& pod_uid, uint32_t container_ordinal) {
  std::string clean;
  for (char c : pod_uid) {
    if (isalnum(static_cast<unsigned char>(c)) || c == '-') clean += c;
  }
  if (clean.size() > 48) clean.resize(48);
  return "k8s-" + clean + "-" + std::to_string(container_ordinal);
}

std::string AssignmentToJson(const Assignment& a) {
  json doc = {{"version", 1},
              {"vgpu", a.vgpu},
              {"pod_uid", a.pod_uid},
              {"namespace", a.namespace_name},
              {"pod", a.pod},
              {"container", a.container},
              {"gpus", a.gpus},
              {"uuids", a.uuids},
              {"vcore_per_gpu", a.vcore_per_gpu},
              {"vmemory_units_per_gpu", a.vmemory_units_per_gpu},
              // The class as records before named levels wrote it, then the rank within it.
              {"priority", core::LevelClass(a.level) == core::Priority::kLatencyCritical ? "lc" : "be"},
              {"priority_rank", core::LevelRank(a.level)},
              {"priority_level", a.level_name},
              {"created_unix_s", a.created_unix_s}};
  if (a.power_cap_watts > 0) doc["power_cap_watts"] = a.power_cap_watts;
  if (a.suspendable) doc["suspendable"] = true;
  json ids = json::object();
  for (const auto& [resource, list] : a.device_ids) ids[ResourceName(resource)] = list;
  doc["device_ids"] = ids;
  return doc.dump(2);
}

StatusOr<Assignment> ParseAssignment(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::Error("not a JSON object");
  Assignment a;
  JsonFields f(doc, "");
  uint64_t vcore = 0, created = 0;
  std::string priority;
  for (auto [key, out] :
       {std::pair{"vgpu", &a.vgpu}, std::pair{"pod_uid", &a.pod_uid}, std::pair{"namespace", &a.namespace_name},
        std::pair{"pod", &a.pod}, std::pair{"container", &a.container}, std::pair{"priority", &priority}}) {
    if (Status s = f.RequiredString(key, out); !s.ok()) return s;
  }
  if (Status s = f.RequiredUint("vcore_per_gpu", &vcore); !s.ok()) return s;
  if (Status s = f.RequiredUint("vmemory_units_per_gpu", &a.vmemory_units_per_gpu); !s.ok()) return s;
  if (Status s = f.OptionalUint("created_unix_s", &created); !s.ok()) return s;
  a.vcore_per_gpu = static_cast<uint32_t>(std::min<uint64_t>(vcore, 100));
  a.created_unix_s = static_cast<int64_t>(created);
  // Records written before named levels have the class alone: rank 0, named after it.
  uint64_t rank = 0;
  if (Status s = f.OptionalUint("priority_rank", &rank); !s.ok()) return s;
  if (priority != "lc" && priority != "be") return Status::Error("priority is \"" + priority + "\", not lc or be");
  if (rank > core::kMaxLevelRank) return Status::Error("priority_rank " + std::to_string(rank) + " is above 255");
  a.level = core::LevelWord(priority == "lc" ? core::Priority::kLatencyCritical : core::Priority::kBestEffort,
                            static_cast<uint32_t>(rank));
  a.level_name = priority;
  if (Status s = f.OptionalString("priority_level", &a.level_name); !s.ok()) return s;
  if (const auto w = doc.find("power_cap_watts"); w != doc.end()) {
    if (!w->is_number() || w->get<double>() <= 0) return Status::Error("power_cap_watts holds " + w->dump());
    a.power_cap_watts = w->get<double>();
  }
  if (const auto s = doc.find("suspendable"); s != doc.end()) {
    if (!s->is_boolean()) return Status::Error("suspendable holds " + s->dump());
    a.suspendable = s->get<bool>();
  }
  const json* gpus = nullptr;
  const json* uuids = nullptr;
  if (Status s = f.RequiredArray("gpus", &gpus); !s.ok()) return s;
  if (Status s = f.RequiredArray("uuids", &uuids); !s.ok()) return s;
  for (const json& g : *gpus) {
    if (!g.is_number_unsigned() || g.get<uint64_t>() >= core::kMaxDevices)
      return Status::Error("gpus holds " + g.dump());
    a.gpus.push_back(g.get<uint32_t>());
  }
  for (const json& u : *uuids) {
    if (!u.is_string()) return Status::Error("uuids holds " + u.dump());
    a.uuids.push_back(u.get<std::string>());
  }
  if (a.gpus.empty() || a.gpus.size() != a.uuids.size()) return Status::Error("gpus and uuids differ in length");
  const json* ids = nullptr;
  if (Status s = f.OptionalObject("device_ids", &ids); !s.ok()) return s;
  if (ids == nullptr) return a;
  for (auto it = ids->begin(); it != ids->end(); ++it) {
    const auto resource = ResourceFromName(it.key());
    if (!resource || !it.value().is_array()) return Status::Error("device_ids." + it.key() + " is not understood");
    for (const json& id : it.value()) {
      if (!id.is_string()) return Status::Error("device_ids." + it.key() + " holds " + id.dump());
      a.device_ids[*resource].push_back(id.get<std::string>());
    }
  }
  return a;
}

Status AssignmentStore::Save(const Assignment& assignment) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::Error("cannot create " + dir_ + ": " + ec.message());
  const std::string path = dir_ + "/" + assignment.vgpu + ".json";
  const std::string tmp = path + ".tmp";
  const std::string text = AssignmentToJson(assignment);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Error("cannot write " + tmp + ": " + strerror(errno));
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + strerror(errno));
  }
  return Status::Ok();
}

Status AssignmentStore::Remove(const std::string& vgpu) {
  const std::string path = dir_ + "/" + vgpu + ".json";
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::Error("cannot remove " + path + ": " + strerror(errno));
  }
  return Status::Ok();
}

std::vector<Assignment> AssignmentStore::LoadAll(std::vector<std::string>* problems) const {
  std::vector<Assignment> out;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto a = ParseAssignment(ss.str());
    if (!a.ok() || a->vgpu + ".json" != path.filename().string()) {
      if (problems != nullptr) {
        problems->push_back("assignment record " + path.string() + " is unreadable (" +
                            (a.ok() ? std::string("its vgpu field names another file") : a.status().message()) +
                            "); it is ignored: remove it once its pod is gone");
      }
      continue;
    }
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace gpuslice::k8s
