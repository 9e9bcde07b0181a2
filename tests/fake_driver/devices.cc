// Driver initialisation and device queries: cuInit, cuDriverGetVersion,
// cuDeviceGet*, cuDeviceTotalMem_v2. Devices are described by fake_gpus.h.
#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint.h"
#include "fake_gpus.h"
#include "physical.h"
#include "state.h"

namespace fake_cuda {
namespace {

CUresult CheckDevice(CUdevice dev) {
  return ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// Values of an H100 SXM where gpuslice or its tests could care; 0 otherwise.
int AttributeValue(CUdevice_attribute attribute) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    default: return 0;
  }
}

bool ParseHex(const char*& p, unsigned* out) {
  char* end = nullptr;
  const unsigned long value = std::strtoul(p, &end, 16);
  if (end == p) return false;
  *out = static_cast<unsigned>(value);
  p = end;
  return true;
}

// Accepts "domain:bus:device.function" (any number of domain digits, as
// NVML and CUDA spell it differently) and "bus:device.function".
bool ParsePciBusId(const char* text, unsigned* domain, unsigned* bus) {
  unsigned a = 0, b = 0, c = 0, function = 0;
  const char* p = text;
  if (!ParseHex(p, &a) || *p++ != ':' || !ParseHex(p, &b)) return false;
  if (*p == ':') {
    ++p;
    if (!ParseHex(p, &c)) return false;
    *domain = a;
    *bus = b;
  } else {
    *domain = 0;
    *bus = a;
    c = b;
  }
  if (*p++ != '.' || !ParseHex(p, &function) || *p != '\0') return false;
  return c == 0 && function == 0;
}

void CopyTruncated(const std::string& text, char* out, int len) {
  const size_t n = std::min(text.size(), static_cast<size_t>(len - 1));
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

CUresult GetUuid(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  const auto bytes = fake_gpus::Uuid(dev);
  std::memcpy(uuid->bytes, bytes.data(), bytes.size());
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuInit(unsigned int flags) {
  fake_cuda::EnterUninitialized(__func__);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // The real driver fails cuInit on a machine without GPUs; FAKE_GPU_COUNT=0
  // lets a test see how gpuslice copes.
  if (fake_cuda::DeviceCount() == 0) return CUDA_ERROR_NO_DEVICE;
  fake_cuda::MarkInitialized();
  fake_cuda::StartCheckpointWatcher();
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  fake_cuda::EnterUninitialized(__func__);  // works before cuInit, as the real one
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = fake_cuda::DeviceCount();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = fake_cuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
  fake_cuda::CopyTruncated(fake_gpus::GetFakeGpuConfig().name, name, len);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::GetUuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::GetUuid(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = fake_cuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
  *bytes = fake_cuda::DeviceCapacity(dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (value == nullptr || attribute <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = fake_cuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = dev; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; break;
    default: *value = fake_cuda::AttributeValue(attribute); break;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (bus_id == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = fake_cuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
  fake_cuda::CopyTruncated(fake_gpus::CudaPciBusId(dev), bus_id, len);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* bus_id) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (dev == nullptr || bus_id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  unsigned domain = 0, bus = 0;
  if (!fake_cuda::ParsePciBusId(bus_id, &domain, &bus)) return CUDA_ERROR_INVALID_VALUE;
  if (domain != 0 || !fake_cuda::ValidDevice(static_cast<int>(bus))) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *dev = static_cast<CUdevice>(bus);
  return CUDA_SUCCESS;
}

}  // extern "C"
