// nvml_types.h — the few NVML declarations gpuslice needs.
//
// There is no packaged nvml.h on our build machines, so these are written
// from NVML's public API reference (docs.nvidia.com/deploy/nvml-api,
// "Device Queries": nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_v2,
// nvmlDeviceGetUUID; "Return values": nvmlReturn_t). Layouts are part of
// NVML's stable C ABI.
#ifndef GPUSLICE_INTERPOSER_NVML_TYPES_H_
#define GPUSLICE_INTERPOSER_NVML_TYPES_H_

extern "C" {

typedef int nvmlReturn_t;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;

}  // extern "C"

#endif  // GPUSLICE_INTERPOSER_NVML_TYPES_H_
