// hooks_nvml.cc — NVML's view of memory, for tools run inside a vGPU
// (nvidia-smi, framework memory probes).
//
// Read-only and fail-open: only the memory queries are replaced; every other
// NVML call is the real library's, and any failure here returns the real
// answer unchanged. Devices are matched to the vGPU by UUID. The real NVML is
// opened by absolute path (GPUSLICE_REAL_NVML, else the standard driver
// directories) the first time a hook runs.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "core/vgpu_layout.h"
#include "interposer/export.h"
#include "interposer/real_dlsym.h"
#include "interposer/vgpu_runtime.h"
#include "port/driver_locator.h"
#include "port/gpu_uuid.h"
#include "port/log.h"
#include "port/nvml_api.h"

namespace gpuslice::interposer {
namespace {

void* RealNvml(const char* name) {
  static std::once_flag once;
  static void* handle = nullptr;
  std::call_once(once, [] {
    const std::string path = port::LocateRealNvml(reinterpret_cast<const void*>(&RealNvml));
    if (!path.empty()) handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) port::Log(port::LogLevel::kWarn, "real NVML not found; NVML memory queries fail");
  });
  return handle == nullptr ? nullptr : RealDlsym(handle, name);
}

// The vGPU's (limit, used) for an NVML device, or false to pass through.
bool VgpuMemory(nvmlDevice_t device, uint64_t* limit, uint64_t* used) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return false;
  using GetUuid = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
  auto get_uuid = reinterpret_cast<GetUuid>(RealNvml("nvmlDeviceGetUUID"));
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  uint8_t uuid[16];
  if (get_uuid == nullptr || get_uuid(device, text, sizeof text) != NVML_SUCCESS ||
      !port::ParseGpuUuid(text, uuid)) {
    return false;
  }
  const core::Limits& limits = rt->limits();
  for (uint32_t i = 0; i < limits.device_count && i < core::kMaxDevices; ++i) {
    if (memcmp(limits.devices[i].uuid, uuid, 16) != 0) continue;
    *limit = rt->ledger().LimitBytes(i);
    if (*limit == core::kUnlimited) return false;
    rt->ReapDeadProcesses(/*force=*/false);
    *used = rt->ledger().UsedBytes(i);
    return true;
  }
  return false;
}

}  // namespace
}  // namespace gpuslice::interposer

namespace gi = gpuslice::interposer;

GPUSLICE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  using Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
  auto real = reinterpret_cast<Fn>(gi::RealNvml("nvmlDeviceGetMemoryInfo"));
  if (real == nullptr) return NVML_ERROR_UNINITIALIZED;  // no NVML to ask
  const nvmlReturn_t r = real(device, memory);
  uint64_t limit = 0, used = 0;
  if (r != NVML_SUCCESS || memory == nullptr || !gi::VgpuMemory(device, &limit, &used)) return r;
  memory->total = std::min<unsigned long long>(limit, memory->total);
  memory->used = std::min<unsigned long long>(used, memory->total);
  memory->free = memory->total - memory->used;
  return r;
}

GPUSLICE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  using Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
  auto real = reinterpret_cast<Fn>(gi::RealNvml("nvmlDeviceGetMemoryInfo_v2"));
  if (real == nullptr) return NVML_ERROR_UNINITIALIZED;
  const nvmlReturn_t r = real(device, memory);
  uint64_t limit = 0, used = 0;
  if (r != NVML_SUCCESS || memory == nullptr || !gi::VgpuMemory(device, &limit, &used)) return r;
  // The driver's own reservation is outside the vGPU's limit, as the CUDA
  // context is: report none of it inside the vGPU.
  memory->total = std::min<unsigned long long>(limit, memory->total);
  memory->reserved = 0;
  memory->used = std::min<unsigned long long>(used, memory->total);
  memory->free = memory->total - memory->used;
  return r;
}
