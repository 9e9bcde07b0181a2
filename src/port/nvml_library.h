// nvml_library.h — the node's GPUs, as NVML reports them.
//
// Loads libnvidia-ml.so.1 with dlopen (by absolute path: see
// driver_locator.h) and reads each GPU's index, UUID, name, memory and PCI
// bus id; how GPUs are connected (NVLink, PCIe); and which processes use each
// GPU's SMs. NVML's index order is PCI bus order, the order nvidia-smi shows.
//
// There is no nvml.h on the build machines: the NVML types used are declared
// in nvml_api.h, and the entry points' signatures in nvml_library.cc, from
// NVML's public API reference (https://docs.nvidia.com/deploy/nvml-api/).
// Entry points a driver lacks degrade to "unknown", never to an error, except
// the basic queries.
//
// Used by the CLI and the daemon, never by the interposer. Not thread-safe;
// one thread at a time (the daemon serialises its calls). Blocks in NVML
// (tens of milliseconds at init, about a millisecond per query); allocates.
#ifndef GPUSLICE_PORT_NVML_LIBRARY_H_
#define GPUSLICE_PORT_NVML_LIBRARY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "port/gpu_uuid.h"  // ParseGpuUuid, for callers of GpuInfo::uuid_text

namespace gpuslice::port {

struct GpuInfo {
  uint32_t index = 0;
  std::array<uint8_t, 16> uuid{};
  std::string uuid_text;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string name;
  uint64_t memory_total_bytes = 0;
  std::string pci_bus_id;  // NVML's form "00000000:19:00.0"; "" when NVML cannot tell
};

// How two GPUs reach each other (NVML's nvmlGpuTopologyLevel_t, and NVLink).
enum class LinkType {
  kUnknown,
  kBoard,                 // NVML_TOPOLOGY_INTERNAL: two GPUs of one board
  kNvLink,                // at least one active NVLink between them (direct or through NVSwitch)
  kPcieSingleSwitch,      // NVML_TOPOLOGY_SINGLE (10)
  kPcieMultipleSwitches,  // NVML_TOPOLOGY_MULTIPLE (20)
  kPcieHostBridge,        // NVML_TOPOLOGY_HOSTBRIDGE (30)
  kNumaNode,              // NVML_TOPOLOGY_NODE (40)
  kSystem,                // NVML_TOPOLOGY_SYSTEM (50): across CPU sockets
};
// "board", "nvlink", "pcie_single_switch", ... as the control API spells them.
const char* LinkTypeName(LinkType type);

struct GpuLink {
  uint32_t a = 0;  // GPU indices, a < b
  uint32_t b = 0;
  LinkType type = LinkType::kUnknown;
  uint32_t nvlinks = 0;  // active NVLinks between a and b (kNvLink only)
};

// One process's use of a GPU's SMs over NVML's last sampling window.
struct ProcessUtilization {
  uint32_t pid = 0;      // in the host's (NVML's) pid namespace
  uint32_t sm_percent = 0;
  uint64_t timestamp_us = 0;  // NVML's sample time, CPU clock in microseconds
};

// The GPU's own utilisation over one of NVML's sampling periods (about 200 ms
// on an H100): the percent of the period in which any kernel ran.
struct DeviceUtilization {
  uint32_t percent = 0;
  uint64_t timestamp_us = 0;  // NVML's sample time, CPU clock in microseconds
};

// One process's device memory on a GPU, as the driver accounts it.
struct ProcessMemory {
  uint32_t pid = 0;         // in the host's (NVML's) pid namespace
  uint64_t used_bytes = 0;  // 0 where the driver cannot tell
};

class NvmlLibrary {
 public:
  // Opens and initialises NVML. The error names the fix.
  static StatusOr<std::unique_ptr<NvmlLibrary>> Open();
  ~NvmlLibrary();

  StatusOr<std::vector<GpuInfo>> ListGpus();
  // The driver's version ("570.86.15"), or "" when NVML does not say.
  std::string DriverVersion();
  // One link per unordered pair of `gpus` (as ListGpus returned them).
  std::vector<GpuLink> ListLinks(const std::vector<GpuInfo>& gpus);
  // SM utilisation per process on GPU `index`, for samples newer than
  // `since_us` (0: everything NVML still holds). An empty list when no
  // process ran; an error when this driver or GPU cannot report it.
  StatusOr<std::vector<ProcessUtilization>> ProcessUtilizations(uint32_t index, uint64_t since_us);
  // The GPU's utilisation samples (nvmlDeviceGetSamples,
  // NVML_GPU_UTILIZATION_SAMPLES) newer than `since_us`, oldest first. An
  // empty list when there is none; an error when this driver or GPU cannot
  // report them.
  StatusOr<std::vector<DeviceUtilization>> DeviceUtilizations(uint32_t index, uint64_t since_us);
  // The GPU's energy since the driver loaded, mJ
  // (nvmlDeviceGetTotalEnergyConsumption, Volta and later), and its power
  // now, mW (nvmlDeviceGetPowerUsage); nullopt where the GPU cannot tell.
  std::optional<uint64_t> TotalEnergyMillijoules(uint32_t index);
  std::optional<uint32_t> PowerMilliwatts(uint32_t index);
  // The GPU's free memory now (nvmlDeviceGetMemoryInfo), bytes; nullopt
  // where NVML cannot tell.
  std::optional<uint64_t> FreeMemoryBytes(uint32_t index);
  // The GPU's memory that processes and the driver's allocations hold now,
  // bytes, without what the driver reserves for itself where NVML tells the
  // two apart (nvmlDeviceGetMemoryInfo_v2; 615 MiB reserved on an H200);
  // nullopt where NVML cannot tell.
  std::optional<uint64_t> UsedMemoryBytes(uint32_t index);
  // Every process with a compute context on GPU `index`, and its memory
  // there (nvmlDeviceGetComputeRunningProcesses_v3).
  StatusOr<std::vector<ProcessMemory>> ComputeProcesses(uint32_t index);

  // XID events (nvmlEventTypeXidCriticalError) of every GPU. Watch once
  // registers them all (an error where the driver or a GPU cannot: health
  // then stays unknown, i.e. healthy); NextXid waits up to `timeout_ms` for
  // the next one (0: only what is queued) and answers nullopt when none
  // came.
  struct XidEvent {
    std::optional<uint32_t> gpu_index;  // nullopt: NVML could not say which GPU
    uint64_t xid = 0;                   // 999: NVML does not know which XID
  };
  Status WatchXids();
  std::optional<XidEvent> NextXid(uint32_t timeout_ms);

 private:
  NvmlLibrary() = default;
  void* Symbol(const char* name) const;
  void* handle_ = nullptr;
  std::string path_;
  void* xid_events_ = nullptr;  // nvmlEventSet_t once WatchXids succeeded
};

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_NVML_LIBRARY_H_
