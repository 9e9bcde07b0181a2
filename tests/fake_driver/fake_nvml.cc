// The fake NVML (libnvidia-ml.so.1): describes the fake GPUs of fake_gpus.h,
// so that it agrees with the fake CUDA driver on count, names, UUIDs, memory
// size and PCI addresses.
//
// Memory "used" is 0 unless FAKE_GPU_SHARED_CAPACITY (fake_gpus.h) makes
// the processes share each GPU: each process that loads the fake CUDA driver
// has its own in-process fake GPU state, which NVML sees only through
// FAKE_GPU_PROCESS_DIR (below), per process.
//
// Topology: a GPU with itself is NVML_TOPOLOGY_INTERNAL; two GPUs are
// NVML_TOPOLOGY_SYSTEM (the farthest level), or NVML_TOPOLOGY_SINGLE (one
// PCIe switch, the closest level between boards) with FAKE_GPU_NVLINK=1.
// INTERNAL is not used between GPUs because it means "on the same board",
// which would mislead a topology-aware allocator. NVLink: 18 links per GPU
// (an H100's count), all enabled with FAKE_GPU_NVLINK=1, all disabled
// otherwise. Link l of GPU i leads to GPU (i + 1 + l mod (n - 1)) mod n, so
// that with two GPUs all 18 links join them.
//
// Per-process utilisation: FAKE_NVML_PROCESS_UTILIZATION_FILE names a file
// of "PID SM_PERCENT [GPU]" lines, re-read at every
// nvmlDeviceGetProcessUtilization (every GPU reports a line without a GPU;
// a line with one, only that GPU), so a test can script what the daemon
// measures. Unset: no process has run (NVML_ERROR_NOT_FOUND).
//
// The GPU's own utilisation: FAKE_NVML_DEVICE_UTILIZATION_FILE names a file
// of "GPU PERCENT" lines, re-read at every nvmlDeviceGetSamples
// (NVML_GPU_UTILIZATION_SAMPLES): one sample, stamped now, of PERCENT. Unset,
// or no line for the GPU: NVML_ERROR_NOT_FOUND, as when no sample is newer
// than asked.
//
// Energy and power: FAKE_NVML_ENERGY_FILE names a file of "GPU MILLIJOULES
// MILLIWATTS" lines, re-read at every call (a test scripts the counter);
// unset, or no line for the GPU: NVML_ERROR_NOT_SUPPORTED, as on a GPU
// without the counter. MILLIJOULES 0 is a GPU with a power reading but no
// energy counter (the daemon then integrates power over time), so a test
// can hold a steady power without advancing a counter in step with time.
//
// XID events: FAKE_NVML_XID_FILE names a file of "GPU XID" lines, which a
// test appends to. Each event set hands out every line once, in order, to
// nvmlEventSetWait_v2 (for GPUs registered in it); with no new line it
// waits up to its timeout, re-reading the file every 10 ms, then answers
// NVML_ERROR_TIMEOUT. Unset: events are supported, none ever comes.
//
// Processes' memory: with FAKE_GPU_PROCESS_DIR set, every process of the
// fake CUDA driver keeps what it holds per device in DIR/<pid> (physical.h),
// and nvmlDeviceGetComputeRunningProcesses_v3 lists the live ones among them.
//
// Thread-safe. Never allocates after the configuration is first read, except
// to list processes' memory and to make event sets.
#include <strings.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "fake_gpus.h"
#include "fake_nvml_types.h"

struct nvmlDevice_st {
  unsigned int index;
};

namespace fake_nvml {
namespace {

constexpr unsigned int kNvLinksPerGpu = 18;
// PCI ids of an H100 SXM5: device 0x2330, vendor 0x10de (NVIDIA).
constexpr unsigned int kPciDeviceId = 0x233010de;
constexpr unsigned int kPciSubSystemId = 0x16c110de;

std::atomic<int> g_init_count{0};

constexpr std::array<nvmlDevice_st, fake_gpus::kMaxGpus> MakeDevices() {
  std::array<nvmlDevice_st, fake_gpus::kMaxGpus> devices{};
  for (unsigned int i = 0; i < devices.size(); ++i) devices[i].index = i;
  return devices;
}

// The handles NVML gives out: addresses of these. Constant-initialised, so
// nothing runs at load time.
constinit std::array<nvmlDevice_st, fake_gpus::kMaxGpus> g_devices = MakeDevices();

unsigned int Count() { return static_cast<unsigned int>(fake_gpus::GetFakeGpuConfig().count); }

bool Initialized() { return g_init_count.load(std::memory_order_acquire) > 0; }

// The handle's index, or -1 when it is not one of ours.
int IndexOf(nvmlDevice_t device) {
  for (unsigned int i = 0; i < Count(); ++i) {
    if (device == &g_devices[i]) return static_cast<int>(i);
  }
  return -1;
}

nvmlReturn_t Init() {
  g_init_count.fetch_add(1, std::memory_order_acq_rel);
  return NVML_SUCCESS;
}

nvmlReturn_t CopyString(const std::string& text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < text.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t GetCount(unsigned int* count) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = Count();
  return NVML_SUCCESS;
}

nvmlReturn_t GetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= Count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

// Common prologue of per-device calls: initialised, known handle, non-null out.
nvmlReturn_t CheckDevice(nvmlDevice_t device, const void* out, int* index) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  *index = IndexOf(device);
  if (*index < 0 || out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace fake_nvml

namespace fake_nvml {
namespace {
// The scripted energy line of GPU `index`: false when there is none.
bool EnergyLine(int index, unsigned long long* mj, unsigned int* mw) {
  const char* path = getenv("FAKE_NVML_ENERGY_FILE");
  FILE* f = path != nullptr ? fopen(path, "r") : nullptr;
  if (f == nullptr) return false;
  int gpu = 0;
  bool found = false;
  while (!found && fscanf(f, "%d %llu %u", &gpu, mj, mw) == 3) found = gpu == index;
  fclose(f);
  return found;
}
}  // namespace
}  // namespace fake_nvml

extern "C" {

nvmlReturn_t nvmlInit(void) { return fake_nvml::Init(); }
nvmlReturn_t nvmlInit_v2(void) { return fake_nvml::Init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return fake_nvml::Init(); }

nvmlReturn_t nvmlShutdown(void) {
  int count = fake_nvml::g_init_count.load(std::memory_order_acquire);
  do {
    if (count == 0) return NVML_ERROR_UNINITIALIZED;
  } while (
      !fake_nvml::g_init_count.compare_exchange_weak(count, count - 1, std::memory_order_acq_rel));
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!fake_nvml::Initialized()) return NVML_ERROR_UNINITIALIZED;
  return fake_nvml::CopyString("580.00-fake", version, length);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return fake_nvml::GetCount(count); }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) { return fake_nvml::GetCount(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return fake_nvml::GetHandleByIndex(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return fake_nvml::GetHandleByIndex(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!fake_nvml::Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < fake_nvml::Count(); ++i) {
    if (fake_gpus::UuidString(static_cast<int>(i)) == uuid) {
      *device = &fake_nvml::g_devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pci_bus_id, nvmlDevice_t* device) {
  if (!fake_nvml::Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (pci_bus_id == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < fake_nvml::Count(); ++i) {
    const int index = static_cast<int>(i);
    if (strcasecmp(pci_bus_id, fake_gpus::NvmlPciBusId(index).c_str()) == 0 ||
        strcasecmp(pci_bus_id, fake_gpus::CudaPciBusId(index).c_str()) == 0) {
      *device = &fake_nvml::g_devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, uuid, &index); r != NVML_SUCCESS) return r;
  return fake_nvml::CopyString(fake_gpus::UuidString(index), uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, name, &index); r != NVML_SUCCESS) return r;
  return fake_nvml::CopyString(fake_gpus::GetFakeGpuConfig().name, name, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* out) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, out, &index); r != NVML_SUCCESS) return r;
  *out = static_cast<unsigned int>(index);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, memory, &index); r != NVML_SUCCESS) return r;
  memory->total = fake_gpus::GetFakeGpuConfig().memory_bytes;
  memory->used = fake_gpus::SharedCapacity() ? fake_gpus::PublishedUsed(index, 0) : 0;
  memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, memory, &index); r != NVML_SUCCESS) return r;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  memory->total = fake_gpus::GetFakeGpuConfig().memory_bytes;
  memory->reserved = 0;
  memory->used = fake_gpus::SharedCapacity() ? fake_gpus::PublishedUsed(index, 0) : 0;
  memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, pci, &index); r != NVML_SUCCESS) return r;
  *pci = {};
  const std::string legacy = fake_gpus::CudaPciBusId(index);
  const std::string bus_id = fake_gpus::NvmlPciBusId(index);
  std::memcpy(pci->busIdLegacy, legacy.c_str(),
              std::min(legacy.size() + 1, sizeof(pci->busIdLegacy)));
  std::memcpy(pci->busId, bus_id.c_str(), std::min(bus_id.size() + 1, sizeof(pci->busId)));
  pci->domain = 0;
  pci->bus = static_cast<unsigned int>(index);
  pci->device = 0;
  pci->pciDeviceId = fake_nvml::kPciDeviceId;
  pci->pciSubSystemId = fake_nvml::kPciSubSystemId;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* path_info) {
  int first = 0, second = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device1, path_info, &first); r != NVML_SUCCESS) {
    return r;
  }
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device2, path_info, &second); r != NVML_SUCCESS) {
    return r;
  }
  if (first == second) {
    *path_info = NVML_TOPOLOGY_INTERNAL;
  } else {
    *path_info = fake_gpus::GetFakeGpuConfig().nvlink ? NVML_TOPOLOGY_SINGLE : NVML_TOPOLOGY_SYSTEM;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* is_active) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, is_active, &index); r != NVML_SUCCESS) {
    return r;
  }
  if (link >= fake_nvml::kNvLinksPerGpu) return NVML_ERROR_INVALID_ARGUMENT;
  *is_active = fake_gpus::GetFakeGpuConfig().nvlink ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, pci, &index); r != NVML_SUCCESS) return r;
  if (link >= fake_nvml::kNvLinksPerGpu) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fake_gpus::GetFakeGpuConfig().nvlink) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned int n = fake_nvml::Count();
  const unsigned int peer = n < 2 ? static_cast<unsigned int>(index) : (index + 1 + link % (n - 1)) % n;
  return nvmlDeviceGetPciInfo_v3(&fake_nvml::g_devices[peer], pci);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* count, unsigned long long /*last_seen*/) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, count, &index); r != NVML_SUCCESS) return r;
  const char* path = getenv("FAKE_NVML_PROCESS_UTILIZATION_FILE");
  FILE* f = path != nullptr ? fopen(path, "r") : nullptr;
  if (f == nullptr) return NVML_ERROR_NOT_FOUND;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const unsigned long long stamp = static_cast<unsigned long long>(now.tv_sec) * 1000000ull + now.tv_nsec / 1000;
  unsigned int pid = 0, sm = 0, gpu = 0, found = 0;
  const unsigned int room = *count;
  char line[128];
  while (fgets(line, sizeof line, f) != nullptr) {
    const int fields = sscanf(line, "%u %u %u", &pid, &sm, &gpu);
    if (fields < 2 || (fields == 3 && gpu != static_cast<unsigned int>(index))) continue;
    if (utilization != nullptr && found < room) utilization[found] = {pid, stamp, sm, 0, 0, 0};
    ++found;
  }
  fclose(f);
  *count = found;
  if (found == 0) return NVML_ERROR_NOT_FOUND;
  return utilization == nullptr || found > room ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long last_seen,
                                  nvmlValueType_t* value_type, unsigned int* count, nvmlSample_t* samples) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, count, &index); r != NVML_SUCCESS) return r;
  if (value_type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (type != NVML_GPU_UTILIZATION_SAMPLES) return NVML_ERROR_NOT_SUPPORTED;
  const char* path = getenv("FAKE_NVML_DEVICE_UTILIZATION_FILE");
  FILE* f = path != nullptr ? fopen(path, "r") : nullptr;
  if (f == nullptr) return NVML_ERROR_NOT_FOUND;
  int gpu = 0;
  unsigned int percent = 0;
  bool found = false;
  while (!found && fscanf(f, "%d %u", &gpu, &percent) == 2) found = gpu == index;
  fclose(f);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const unsigned long long stamp = static_cast<unsigned long long>(now.tv_sec) * 1000000ull + now.tv_nsec / 1000;
  if (!found || stamp <= last_seen) return NVML_ERROR_NOT_FOUND;
  *value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (samples == nullptr) {
    *count = 1;
    return NVML_SUCCESS;
  }
  if (*count < 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  *count = 1;
  samples[0].timeStamp = stamp;
  samples[0].sampleValue.uiVal = percent;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy_mj) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, energy_mj, &index); r != NVML_SUCCESS) return r;
  unsigned int mw = 0;
  return fake_nvml::EnergyLine(index, energy_mj, &mw) && *energy_mj != 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, power_mw, &index); r != NVML_SUCCESS) return r;
  unsigned long long mj = 0;
  return fake_nvml::EnergyLine(index, &mj, power_mw) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, count, &index); r != NVML_SUCCESS) return r;
  const unsigned int room = *count;
  unsigned int found = 0;
  fake_gpus::ForEachPublished(index, [&](unsigned long pid, uint64_t used) {
    if (infos != nullptr && found < room) infos[found] = {static_cast<unsigned int>(pid), used, ~0u, ~0u};
    ++found;
  });
  *count = found;
  return found > room ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

struct nvmlEventSet_st {
  std::atomic<unsigned long long> registered{0};  // bit per GPU index
  std::atomic<long> consumed_lines{0};            // lines of FAKE_NVML_XID_FILE handed out
};

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!fake_nvml::Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new nvmlEventSet_st;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long event_types, nvmlEventSet_t set) {
  int index = 0;
  if (nvmlReturn_t r = fake_nvml::CheckDevice(device, set, &index); r != NVML_SUCCESS) return r;
  if ((event_types & ~static_cast<unsigned long long>(nvmlEventTypeXidCriticalError)) != 0) return NVML_ERROR_NOT_SUPPORTED;
  set->registered.fetch_or(1ull << index);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  if (!fake_nvml::Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const char* path = getenv("FAKE_NVML_XID_FILE");
  for (unsigned int waited = 0;; waited += 10) {
    FILE* f = path != nullptr ? fopen(path, "r") : nullptr;
    long line = 0;
    int gpu = 0;
    unsigned long long xid = 0;
    while (f != nullptr && fscanf(f, "%d %llu", &gpu, &xid) == 2) {
      if (line++ < set->consumed_lines.load()) continue;
      set->consumed_lines.store(line);
      if (gpu < 0 || gpu >= static_cast<int>(fake_nvml::Count()) || ((set->registered.load() >> gpu) & 1) == 0) continue;
      fclose(f);
      *data = {&fake_nvml::g_devices[gpu], static_cast<unsigned long long>(nvmlEventTypeXidCriticalError), xid, ~0u, ~0u};
      return NVML_SUCCESS;
    }
    if (f != nullptr) fclose(f);
    if (waited >= timeout_ms) return NVML_ERROR_TIMEOUT;
    timespec tick{0, 10'000'000};
    nanosleep(&tick, nullptr);
  }
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}

}  // extern "C"
