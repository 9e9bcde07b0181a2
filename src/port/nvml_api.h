// nvml_api.h — the part of NVML's C API that gpuslice uses, declared once.
//
// There is no packaged nvml.h on our build machines, so these are written
// from NVML's public API reference (https://docs.nvidia.com/deploy/nvml-api/),
// at global scope and under NVML's own names, as nvml.h would declare them:
// the library's exported NVML hooks (interposer/hooks_nvml.cc) must have
// NVML's exact signatures, and the CLI/daemon's NVML reader
// (port/nvml_library.cc) calls the real entry points through them. Layouts
// and values are part of NVML's stable C ABI:
//   - nvmlReturn_t is an int-sized enum ("Return values");
//   - devices are opaque handles;
//   - nvmlMemory_t / nvmlMemory_v2_t as nvmlDeviceGetMemoryInfo(_v2) fill
//     them;
//   - nvmlPciInfo_t is the v3 layout (what nvmlDeviceGetPciInfo_v3 and
//     nvmlDeviceGetNvLinkRemotePciInfo_v2 fill);
//   - nvmlProcessUtilizationSample_t as nvmlDeviceGetProcessUtilization
//     fills it;
//   - nvmlSample_t (a timestamp and an 8-byte nvmlValue_t) as
//     nvmlDeviceGetSamples fills it, and its sampling type
//     NVML_GPU_UTILIZATION_SAMPLES ("nvmlSamplingType_t");
//   - nvmlProcessInfo_t (the v2/v3 layout) as
//     nvmlDeviceGetComputeRunningProcesses_v3 fills it;
//   - event sets and nvmlEventData_t, as NVIDIA's nvml.h declares them
//     ("Event Handling Methods": nvmlEventSetCreate,
//     nvmlDeviceRegisterEvents, nvmlEventSetWait_v2, nvmlEventSetFree).
// Add what a new caller needs here, from the same reference.
//
// Declarations only: no code, no state. (The fake NVML in tests/fake_driver
// declares its own copy, fake_nvml_types.h.)
#ifndef GPUSLICE_PORT_NVML_API_H_
#define GPUSLICE_PORT_NVML_API_H_

extern "C" {

typedef int nvmlReturn_t;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;          // e.g. no sample newer than asked
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;           // nvmlEventSetWait: no event in time

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
// nvml.h's nvmlMemory_v2: the struct's size and version 2, in its version word.
inline constexpr unsigned int kNvmlMemoryV2 = static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef union {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
} nvmlValue_t;
typedef struct {
  unsigned long long timeStamp;
  nvmlValue_t sampleValue;
} nvmlSample_t;
typedef int nvmlValueType_t;  // NVML_VALUE_TYPE_*: which member of nvmlValue_t holds the value
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_DOUBLE = 0;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_INT = 1;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_LONG = 2;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3;
inline constexpr int NVML_GPU_UTILIZATION_SAMPLES = 1;  // percent of the period with a kernel running

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE when the driver cannot tell
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ull;

inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;  // R525 and later

// nvmlIntNvLinkDeviceType_t
inline constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0x00;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02;
// nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t
inline constexpr int NVML_P2P_CAPS_INDEX_NVLINK = 2;
inline constexpr int NVML_P2P_STATUS_OK = 0;

// Events (NVIDIA's nvml.h, "Event Handling Methods" and "Event Types").
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // for nvmlEventTypeXidCriticalError: the XID (999: unknown)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;
// An XID error; despite the name, every XID, application errors included.
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ull;
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long event_types, nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

}  // extern "C"

#endif  // GPUSLICE_PORT_NVML_API_H_
