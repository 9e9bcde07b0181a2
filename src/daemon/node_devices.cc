#include "daemon/node_devices.h"

#include <unistd.h>

#include <cstring>

namespace gpuslice::daemon {

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
      // Clip what we echo: the name comes from the request.
      const std::string shown = w.size() > 64 ? w.substr(0, 64) + "..." : w;
      return Status::Error("no GPU '" + shown + "' on this node (it has " + have +
                           "); name GPUs by one of those indices or by UUID");
    }
    for (const auto& c : chosen) {
      if (c.index == match->index) return Status::Error("GPU '" + w + "' is named twice");
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

}  // namespace gpuslice::daemon
