#include "k8s/resource_manager.h"

#include <algorithm>

#include "k8s/names.h"

namespace gpuslice::k8s {

ResourceManager::ResourceManager(NodeTopology topology, std::string node_name)
    : topology_(std::move(topology)), node_name_(std::move(node_name)) {
  for (const TopologyGpu& g : topology_.gpus) healthy_[g.index] = true;
}

uint64_t ResourceManager::VmemoryUnits(uint32_t gpu_index) const {
  const TopologyGpu* g = topology_.GpuByIndex(gpu_index);
  return g == nullptr ? 0 : g->memory_total_bytes / kVmemoryUnitBytes;
}

bool ResourceManager::SetHealthy(const std::set<std::string>& healthy_uuids) {
  port::MutexLock lock(&mu_);
  bool changed = false;
  for (const TopologyGpu& g : topology_.gpus) {
    const bool now = healthy_uuids.count(g.uuid) > 0;
    if (healthy_[g.index] != now) {
      healthy_[g.index] = now;
      changed = true;
    }
  }
  if (changed) {
    ++health_version_;
    ++usage_version_;
    changed_.NotifyAll();
  }
  return changed;
}

bool ResourceManager::IsHealthy(uint32_t gpu_index) const {
  port::MutexLock lock(&mu_);
  const auto it = healthy_.find(gpu_index);
  return it != healthy_.end() && it->second;
}

std::vector<ResourceManager::Device> ResourceManager::Devices(Resource resource) const {
  port::MutexLock lock(&mu_);
  std::vector<Device> out;
  for (const TopologyGpu& g : topology_.gpus) {
    const uint64_t units = resource == Resource::kVcore ? kVcorePerGpu : g.memory_total_bytes / kVmemoryUnitBytes;
    const bool healthy = healthy_.at(g.index);
    for (uint64_t u = 0; u < units; ++u)
      out.push_back({MakeDeviceId(resource, g.uuid, static_cast<uint32_t>(u)), healthy});
  }
  return out;
}

uint64_t ResourceManager::DeviceCount(Resource resource) const {
  uint64_t n = 0;
  for (const TopologyGpu& g : topology_.gpus) {
    n += resource == Resource::kVcore ? kVcorePerGpu : g.memory_total_bytes / kVmemoryUnitBytes;
  }
  return n;
}

std::optional<uint32_t> ResourceManager::GpuOf(Resource resource, const std::string& device_id) const {
  const auto parsed = ParseDeviceId(device_id);
  if (!parsed || parsed->resource != resource) return std::nullopt;
  const TopologyGpu* g = topology_.GpuByUuid(parsed->gpu_uuid);
  if (g == nullptr) return std::nullopt;
  if (resource == Resource::kVmemory && parsed->unit >= g->memory_total_bytes / kVmemoryUnitBytes) return std::nullopt;
  return g->index;
}

void ResourceManager::Put(const Assignment& assignment) {
  port::MutexLock lock(&mu_);
  by_vgpu_[assignment.vgpu] = assignment;
  ++usage_version_;
  changed_.NotifyAll();
}

void ResourceManager::Erase(const std::string& vgpu) {
  port::MutexLock lock(&mu_);
  if (by_vgpu_.erase(vgpu) > 0) {
    ++usage_version_;
    changed_.NotifyAll();
  }
}

std::vector<Assignment> ResourceManager::Assignments() const {
  port::MutexLock lock(&mu_);
  std::vector<Assignment> out;
  for (const auto& [name, a] : by_vgpu_) out.push_back(a);
  return out;
}

std::optional<Assignment> ResourceManager::FindContainer(const std::string& pod_uid,
                                                         const std::string& container) const {
  port::MutexLock lock(&mu_);
  for (const auto& [name, a] : by_vgpu_) {
    if (a.pod_uid == pod_uid && a.container == container) return a;
  }
  return std::nullopt;
}

std::optional<Assignment> ResourceManager::FindByDeviceIds(Resource resource, std::vector<std::string> ids) const {
  std::sort(ids.begin(), ids.end());
  port::MutexLock lock(&mu_);
  for (const auto& [name, a] : by_vgpu_) {
    const auto it = a.device_ids.find(resource);
    if (it == a.device_ids.end()) continue;
    std::vector<std::string> mine = it->second;
    std::sort(mine.begin(), mine.end());
    if (mine == ids) return a;
  }
  return std::nullopt;
}

std::vector<GpuState> ResourceManager::GpuStatesLocked() const {
  std::vector<GpuState> out;
  for (const TopologyGpu& g : topology_.gpus) {
    GpuState s;
    s.index = g.index;
    s.healthy = healthy_.at(g.index);
    s.vmemory_total = g.memory_total_bytes / kVmemoryUnitBytes;
    out.push_back(s);
  }
  for (const auto& [name, a] : by_vgpu_) ApplyPlacement(out, a.gpus, a.AsRequest());
  return out;
}

std::vector<GpuState> ResourceManager::GpuStates() const {
  port::MutexLock lock(&mu_);
  return GpuStatesLocked();
}

NodeUsage ResourceManager::Usage() const {
  port::MutexLock lock(&mu_);
  NodeUsage usage;
  usage.node = node_name_;
  for (const GpuState& s : GpuStatesLocked()) {
    GpuUsage u;
    u.index = s.index;
    u.uuid = topology_.GpuByIndex(s.index)->uuid;
    u.healthy = s.healthy;
    u.vcore_used = std::min<uint32_t>(s.vcore_used, kVcorePerGpu);
    u.vmemory_used = s.vmemory_used;
    u.vmemory_total = s.vmemory_total;
    usage.gpus.push_back(u);
  }
  for (const auto& [name, a] : by_vgpu_) usage.pods.push_back(a.pod_uid);
  std::sort(usage.pods.begin(), usage.pods.end());
  usage.pods.erase(std::unique(usage.pods.begin(), usage.pods.end()), usage.pods.end());
  return usage;
}

uint64_t ResourceManager::health_version() const {
  port::MutexLock lock(&mu_);
  return health_version_;
}

uint64_t ResourceManager::usage_version() const {
  port::MutexLock lock(&mu_);
  return usage_version_;
}

uint64_t ResourceManager::WaitForHealthChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  port::MutexLock lock(&mu_);
  changed_.WaitFor(&mu_, timeout, [&] {
    mu_.AssertHeld();
    return shut_down_ || health_version_ != seen;
  });
  return health_version_;
}

uint64_t ResourceManager::WaitForUsageChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  port::MutexLock lock(&mu_);
  changed_.WaitFor(&mu_, timeout, [&] {
    mu_.AssertHeld();
    return shut_down_ || usage_version_ != seen;
  });
  return usage_version_;
}

void ResourceManager::Shutdown() {
  port::MutexLock lock(&mu_);
  shut_down_ = true;
  changed_.NotifyAll();
}

bool ResourceManager::shut_down() const {
  port::MutexLock lock(&mu_);
  return shut_down_;
}

}  // namespace gpuslice::k8s
