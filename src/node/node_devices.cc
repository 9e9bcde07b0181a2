#include "node/node_devices.h"

#include <unistd.h>

#include <cstring>

namespace gpuslice::node {
namespace {

// A GPU name from a request, safe to echo on one line.
std::string Shown(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 64)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return text.size() > 64 ? out + "..." : out;
}

}  // namespace

const port::GpuInfo* NodeDevices::Find(const uint8_t uuid[16]) const {
  for (const auto& g : gpus) {
    if (memcmp(g.uuid.data(), uuid, 16) == 0) return &g;
  }
  return nullptr;
}

StatusOr<std::vector<port::GpuInfo>> NodeDevices::Select(const std::vector<std::string>& wanted) const {
  if (gpus.empty()) return Status::Error("the NVIDIA driver reports no GPUs on this node; check nvidia-smi");
  if (wanted.empty()) return gpus;
  std::string have;
  for (const auto& g : gpus) have += (have.empty() ? "" : ", ") + std::to_string(g.index);
  std::vector<port::GpuInfo> chosen;
  for (const std::string& w : wanted) {
    const port::GpuInfo* match = nullptr;
    for (const auto& g : gpus) {
      if (w == std::to_string(g.index) || w == g.uuid_text) match = &g;
    }
    if (match == nullptr) {
      return Status::Error("no GPU '" + Shown(w) + "' on this node (it has " + have +
                           "); name GPUs by one of those indices or by UUID");
    }
    for (const auto& c : chosen) {
      if (c.index == match->index) return Status::Error("GPU '" + Shown(w) + "' is named twice");
    }
    chosen.push_back(*match);
  }
  return chosen;
}

StatusOr<NodeDevices> DiscoverNodeDevices(port::NvmlLibrary& nvml) {
  NodeDevices devices;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) devices.node = host;
  devices.driver_version = nvml.DriverVersion();
  auto gpus = nvml.ListGpus();
  if (!gpus.ok()) return gpus.status();
  devices.gpus = std::move(gpus.value());
  devices.links = nvml.ListLinks(devices.gpus);
  return devices;
}

}  // namespace gpuslice::node
