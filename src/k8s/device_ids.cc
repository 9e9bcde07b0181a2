#include "k8s/device_ids.h"

#include <charconv>

#include "k8s/names.h"

namespace gpuslice::k8s {
namespace {

constexpr std::string_view kVcoreTag = "-vcore-";
constexpr std::string_view kVmemoryTag = "-vmem-";

std::string_view Tag(Resource resource) { return resource == Resource::kVcore ? kVcoreTag : kVmemoryTag; }

}  // namespace

const char* ResourceName(Resource resource) { return resource == Resource::kVcore ? kVcoreResource : kVmemoryResource; }

std::optional<Resource> ResourceFromName(std::string_view name) {
  if (name == kVcoreResource) return Resource::kVcore;
  if (name == kVmemoryResource) return Resource::kVmemory;
  return std::nullopt;
}

std::string MakeDeviceId(Resource resource, std::string_view gpu_uuid, uint32_t unit) {
  std::string id(gpu_uuid);
  id += Tag(resource);
  id += std::to_string(unit);
  return id;
}

std::optional<DeviceId> ParseDeviceId(std::string_view id) {
  if (id.empty() || id.size() > kMaxDeviceIdLength) return std::nullopt;
  for (Resource resource : {Resource::kVcore, Resource::kVmemory}) {
    const size_t at = id.rfind(Tag(resource));
    if (at == std::string_view::npos || at == 0) continue;
    const std::string_view digits = id.substr(at + Tag(resource).size());
    if (digits.empty() || digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    uint32_t unit = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), unit);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    if (resource == Resource::kVcore && unit >= kVcorePerGpu) return std::nullopt;
    DeviceId parsed;
    parsed.resource = resource;
    parsed.gpu_uuid = std::string(id.substr(0, at));
    parsed.unit = unit;
    return parsed;
  }
  return std::nullopt;
}

}  // namespace gpuslice::k8s
