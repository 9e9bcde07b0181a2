// device_ids.h — the device IDs the plugin advertises to the kubelet, one per
// unit of a resource: "<GPU UUID>-vcore-<n>" (n < 100) and
// "<GPU UUID>-vmem-<n>" (n < the GPU's memory in 256 MiB units).
//
// The kubelet counts these IDs; it has no idea what a GPU is. Encoding the
// GPU in each ID lets Allocate and GetPreferredAllocation tell which GPU a
// unit belongs to, and the count tells how much. Pure functions; thread-safe.
#ifndef GPUSLICE_K8S_DEVICE_IDS_H_
#define GPUSLICE_K8S_DEVICE_IDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuslice::k8s {

enum class Resource { kVcore, kVmemory };

const char* ResourceName(Resource resource);  // "gpuslice.io/vcore", ...
std::optional<Resource> ResourceFromName(std::string_view name);

// The kubelet limits a device ID to 63 characters; a GPU UUID is 40.
inline constexpr size_t kMaxDeviceIdLength = 63;

std::string MakeDeviceId(Resource resource, std::string_view gpu_uuid, uint32_t unit);

struct DeviceId {
  Resource resource = Resource::kVcore;
  std::string gpu_uuid;
  uint32_t unit = 0;
};
// nullopt for anything MakeDeviceId could not have produced.
std::optional<DeviceId> ParseDeviceId(std::string_view id);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_DEVICE_IDS_H_
