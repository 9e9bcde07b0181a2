#include "k8s/dra/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "k8s/dra/cdi_spec.h"

namespace gpuslice::k8s::dra {

using nlohmann::json;

namespace {

constexpr int kVersion = 1;

json ToJson(const ClaimRecord& r) {
  json devices = json::array();
  for (const PreparedDevice& d : r.devices) {
    json j = {{"requests", d.requests}, {"pool", d.pool}, {"device", d.device}, {"cdiDeviceIDs", d.cdi_device_ids}};
    if (d.share_id) j["shareID"] = *d.share_id;
    devices.push_back(j);
  }
  return {{"namespace", r.namespace_name},
          {"name", r.name},
          {"state", r.state == ClaimRecord::State::kPrepared ? "prepared" : "preparing"},
          {"vgpu", r.vgpu},
          {"devices", devices}};
}

ClaimRecord FromJson(const json& j) {  // throws json::exception on a bad shape
  ClaimRecord r;
  r.namespace_name = j.at("namespace").get<std::string>();
  r.name = j.at("name").get<std::string>();
  const std::string state = j.at("state").get<std::string>();
  if (state != "prepared" && state != "preparing") throw std::invalid_argument("state " + state);
  r.state = state == "prepared" ? ClaimRecord::State::kPrepared : ClaimRecord::State::kPreparing;
  r.vgpu = j.at("vgpu").get<std::string>();
  for (const json& d : j.at("devices")) {
    PreparedDevice p;
    p.requests = d.at("requests").get<std::vector<std::string>>();
    p.pool = d.at("pool").get<std::string>();
    p.device = d.at("device").get<std::string>();
    p.cdi_device_ids = d.at("cdiDeviceIDs").get<std::vector<std::string>>();
    if (d.contains("shareID")) p.share_id = d["shareID"].get<std::string>();
    r.devices.push_back(p);
  }
  return r;
}

}  // namespace

StatusOr<Checkpoint> Checkpoint::Load(const std::string& path) {
  Checkpoint c;
  c.path_ = path;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ifstream in(path);
  if (!in) return c;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const json j = json::parse(ss.str());
    if (j.at("version").get<int>() != kVersion) throw std::invalid_argument("version");
    for (const auto& [uid, record] : j.at("claims").items()) c.claims_[uid] = FromJson(record);
  } catch (const std::exception& e) {
    return Status::Error("the DRA checkpoint " + path + " is unreadable (" + e.what() +
                         "); it lists the claims this node prepared: inspect it, then move it aside to start over");
  }
  return c;
}

const ClaimRecord* Checkpoint::Find(const std::string& uid) const {
  const auto it = claims_.find(uid);
  return it == claims_.end() ? nullptr : &it->second;
}

Status Checkpoint::Put(const std::string& uid, const ClaimRecord& record) {
  claims_[uid] = record;
  return Save();
}

Status Checkpoint::Erase(const std::string& uid) {
  claims_.erase(uid);
  return Save();
}

Status Checkpoint::Save() const {
  json claims = json::object();
  for (const auto& [uid, record] : claims_) claims[uid] = ToJson(record);
  return WriteJsonAtomically(path_, {{"version", kVersion}, {"claims", claims}}, 0600);
}

}  // namespace gpuslice::k8s::dra
