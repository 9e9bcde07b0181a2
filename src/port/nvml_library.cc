#include "port/nvml_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "port/driver_locator.h"
#include "port/gpu_uuid.h"
#include "port/nvml_api.h"

namespace gpuslice::port {
namespace {

// NVML's types and constants are in nvml_api.h; the entry points used, as
// NVML's public API reference gives them:
using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using SystemStringFn = nvmlReturn_t (*)(char*, unsigned int);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using PciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using TopologyFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int*);
using NvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, int*);
using NvLinkRemotePciFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
using NvLinkRemoteTypeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, int*);
using P2pStatusFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int, int*);
using ProcessUtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                              unsigned long long);
using SamplesFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned long long, nvmlValueType_t*, unsigned int*,
                                   nvmlSample_t*);
using EnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using PowerFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using RunningProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using EventSetCreateFn = decltype(&nvmlEventSetCreate);
using RegisterEventsFn = decltype(&nvmlDeviceRegisterEvents);
using EventSetWaitFn = decltype(&nvmlEventSetWait_v2);
using DeviceIndexFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);

using PciAddress = std::tuple<unsigned int, unsigned int, unsigned int>;  // domain, bus, device

LinkType FromTopologyLevel(int level) {
  switch (level) {
    case 0: return LinkType::kBoard;
    case 10: return LinkType::kPcieSingleSwitch;
    case 20: return LinkType::kPcieMultipleSwitches;
    case 30: return LinkType::kPcieHostBridge;
    case 40: return LinkType::kNumaNode;
    case 50: return LinkType::kSystem;
    default: return LinkType::kUnknown;
  }
}

}  // namespace

const char* LinkTypeName(LinkType type) {
  switch (type) {
    case LinkType::kBoard: return "board";
    case LinkType::kNvLink: return "nvlink";
    case LinkType::kPcieSingleSwitch: return "pcie_single_switch";
    case LinkType::kPcieMultipleSwitches: return "pcie_multiple_switches";
    case LinkType::kPcieHostBridge: return "pcie_host_bridge";
    case LinkType::kNumaNode: return "numa_node";
    case LinkType::kSystem: return "system";
    case LinkType::kUnknown: break;
  }
  return "unknown";
}

StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open() {
  const std::string path = LocateRealNvml(nullptr);
  if (path.empty()) {
    return Status::Error(
        "no NVIDIA driver found (libnvidia-ml.so.1 is not installed); install the NVIDIA driver, "
        "or set GPUSLICE_REAL_NVML to its libnvidia-ml.so.1");
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Status::Error("cannot load " + path + " (" + dlerror() + "); reinstall the NVIDIA driver");
  }
  auto init = reinterpret_cast<InitFn>(dlsym(handle, "nvmlInit_v2"));
  const nvmlReturn_t r = init == nullptr ? -1 : init();
  if (r != NVML_SUCCESS) {
    auto err = reinterpret_cast<ErrorStringFn>(dlsym(handle, "nvmlErrorString"));
    const std::string why = err != nullptr && r >= 0 ? err(r) : "nvmlInit_v2 missing";
    dlclose(handle);
    return Status::Error("NVML at " + path + " failed to initialise (" + why +
                         "); check that the NVIDIA kernel module is loaded (nvidia-smi)");
  }
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = handle;
  lib->path_ = path;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (handle_ == nullptr) return;
  if (auto free_fn = reinterpret_cast<decltype(&nvmlEventSetFree)>(Symbol("nvmlEventSetFree")); free_fn && xid_events_) {
    free_fn(static_cast<nvmlEventSet_t>(xid_events_));
  }
  if (auto shutdown = reinterpret_cast<ShutdownFn>(Symbol("nvmlShutdown"))) shutdown();
  dlclose(handle_);
}

void* NvmlLibrary::Symbol(const char* name) const { return dlsym(handle_, name); }

StatusOr<std::vector<GpuInfo>> NvmlLibrary::ListGpus() {
  auto count_fn = reinterpret_cast<CountFn>(Symbol("nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto uuid_fn = reinterpret_cast<StringFn>(Symbol("nvmlDeviceGetUUID"));
  auto name_fn = reinterpret_cast<StringFn>(Symbol("nvmlDeviceGetName"));
  auto memory_fn = reinterpret_cast<MemoryFn>(Symbol("nvmlDeviceGetMemoryInfo"));
  auto pci_fn = reinterpret_cast<PciInfoFn>(Symbol("nvmlDeviceGetPciInfo_v3"));
  if (!count_fn || !handle_fn || !uuid_fn || !name_fn || !memory_fn) {
    return Status::Error("NVML at " + path_ + " lacks basic device queries; update the NVIDIA driver");
  }
  unsigned int count = 0;
  if (count_fn(&count) != NVML_SUCCESS) return Status::Error("NVML could not count GPUs; check nvidia-smi");
  std::vector<GpuInfo> gpus;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (handle_fn(i, &device) != NVML_SUCCESS) continue;  // e.g. a GPU the driver lost; skip it
    GpuInfo info;
    info.index = i;
    char buf[96] = {};
    if (uuid_fn(device, buf, sizeof buf) != NVML_SUCCESS || !ParseGpuUuid(buf, &info.uuid)) continue;
    info.uuid_text = buf;
    if (name_fn(device, buf, sizeof buf) == NVML_SUCCESS) info.name = buf;
    nvmlMemory_t memory{};
    if (memory_fn(device, &memory) == NVML_SUCCESS) info.memory_total_bytes = memory.total;
    nvmlPciInfo_t pci{};
    if (pci_fn != nullptr && pci_fn(device, &pci) == NVML_SUCCESS) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      info.pci_bus_id = pci.busId;
    }
    gpus.push_back(std::move(info));
  }
  return gpus;
}

std::string NvmlLibrary::DriverVersion() {
  auto fn = reinterpret_cast<SystemStringFn>(Symbol("nvmlSystemGetDriverVersion"));
  char buf[96] = {};
  if (fn == nullptr || fn(buf, sizeof buf) != NVML_SUCCESS) return "";
  return buf;
}

std::vector<GpuLink> NvmlLibrary::ListLinks(const std::vector<GpuInfo>& gpus) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto pci_fn = reinterpret_cast<PciInfoFn>(Symbol("nvmlDeviceGetPciInfo_v3"));
  auto topology_fn = reinterpret_cast<TopologyFn>(Symbol("nvmlDeviceGetTopologyCommonAncestor"));
  auto state_fn = reinterpret_cast<NvLinkStateFn>(Symbol("nvmlDeviceGetNvLinkState"));
  auto remote_pci_fn = reinterpret_cast<NvLinkRemotePciFn>(Symbol("nvmlDeviceGetNvLinkRemotePciInfo_v2"));
  auto remote_type_fn = reinterpret_cast<NvLinkRemoteTypeFn>(Symbol("nvmlDeviceGetNvLinkRemoteDeviceType"));
  auto p2p_fn = reinterpret_cast<P2pStatusFn>(Symbol("nvmlDeviceGetP2PStatus"));

  const size_t n = gpus.size();
  std::vector<nvmlDevice_t> devices(n, nullptr);
  std::map<PciAddress, size_t> by_address;
  for (size_t i = 0; i < n; ++i) {
    if (handle_fn == nullptr || handle_fn(gpus[i].index, &devices[i]) != NVML_SUCCESS) devices[i] = nullptr;
    nvmlPciInfo_t pci{};
    if (devices[i] != nullptr && pci_fn != nullptr && pci_fn(devices[i], &pci) == NVML_SUCCESS) {
      by_address[{pci.domain, pci.bus, pci.device}] = i;
    }
  }

  // Each GPU's active links, by what is at the other end: another GPU
  // (direct NVLink), or an NVSwitch (HGX boards: every GPU's links go to the
  // switches, which connect every pair).
  std::vector<std::vector<uint32_t>> direct(n, std::vector<uint32_t>(n, 0));
  std::vector<uint32_t> to_switch(n, 0);
  for (size_t i = 0; i < n && state_fn != nullptr && remote_pci_fn != nullptr; ++i) {
    if (devices[i] == nullptr) continue;
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      int active = 0;
      if (state_fn(devices[i], link, &active) != NVML_SUCCESS || active == 0) continue;
      int remote_type = NVML_NVLINK_DEVICE_TYPE_GPU;
      if (remote_type_fn != nullptr && remote_type_fn(devices[i], link, &remote_type) != NVML_SUCCESS) {
        remote_type = NVML_NVLINK_DEVICE_TYPE_GPU;  // older drivers: decide by the remote's PCI address
      }
      if (remote_type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
        ++to_switch[i];
        continue;
      }
      nvmlPciInfo_t remote{};
      if (remote_pci_fn(devices[i], link, &remote) != NVML_SUCCESS) continue;
      auto it = by_address.find({remote.domain, remote.bus, remote.device});
      if (it != by_address.end() && it->second != i) ++direct[i][it->second];
    }
  }

  std::vector<GpuLink> links;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      GpuLink link;
      link.a = gpus[i].index;
      link.b = gpus[j].index;
      int level = -1;
      if (devices[i] != nullptr && devices[j] != nullptr && topology_fn != nullptr &&
          topology_fn(devices[i], devices[j], &level) != NVML_SUCCESS) {
        level = -1;
      }
      // Count each direct link once even if only one side reports it.
      uint32_t nvlinks = std::max(direct[i][j], direct[j][i]);
      if (nvlinks == 0 && to_switch[i] > 0 && to_switch[j] > 0) {
        int p2p = NVML_P2P_STATUS_OK;
        if (p2p_fn == nullptr || p2p_fn(devices[i], devices[j], NVML_P2P_CAPS_INDEX_NVLINK, &p2p) != NVML_SUCCESS) {
          p2p = NVML_P2P_STATUS_OK;  // no P2P query: trust the switch fabric
        }
        if (p2p == NVML_P2P_STATUS_OK) nvlinks = std::min(to_switch[i], to_switch[j]);
      }
      if (level == 0) {
        link.type = LinkType::kBoard;
      } else if (nvlinks > 0) {
        link.type = LinkType::kNvLink;
        link.nvlinks = nvlinks;
      } else {
        link.type = FromTopologyLevel(level);
      }
      links.push_back(link);
    }
  }
  return links;
}

StatusOr<std::vector<ProcessUtilization>> NvmlLibrary::ProcessUtilizations(uint32_t index, uint64_t since_us) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto fn = reinterpret_cast<ProcessUtilizationFn>(Symbol("nvmlDeviceGetProcessUtilization"));
  if (handle_fn == nullptr || fn == nullptr) {
    return Status::Error("this NVIDIA driver cannot report per-process utilisation (nvmlDeviceGetProcessUtilization)");
  }
  nvmlDevice_t device = nullptr;
  if (handle_fn(index, &device) != NVML_SUCCESS) return Status::Error("NVML lost GPU " + std::to_string(index));
  // Ask for the count first; processes may start between the two calls, so
  // leave room and retry once on INSUFFICIENT_SIZE.
  for (int attempt = 0; attempt < 2; ++attempt) {
    unsigned int count = 0;
    nvmlReturn_t r = fn(device, nullptr, &count, since_us);
    if (r == NVML_ERROR_NOT_FOUND) return std::vector<ProcessUtilization>{};
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) {
      return Status::Error("nvmlDeviceGetProcessUtilization failed on GPU " + std::to_string(index) +
                           " (NVML error " + std::to_string(r) + ")");
    }
    count += 8;
    std::vector<nvmlProcessUtilizationSample_t> samples(count);
    r = fn(device, samples.data(), &count, since_us);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) continue;
    if (r == NVML_ERROR_NOT_FOUND) return std::vector<ProcessUtilization>{};
    if (r != NVML_SUCCESS) {
      return Status::Error("nvmlDeviceGetProcessUtilization failed on GPU " + std::to_string(index) +
                           " (NVML error " + std::to_string(r) + ")");
    }
    std::vector<ProcessUtilization> out;
    for (unsigned int k = 0; k < count && k < samples.size(); ++k) {
      out.push_back({samples[k].pid, std::min(samples[k].smUtil, 100u), samples[k].timeStamp});
    }
    return out;
  }
  return Status::Error("NVML kept changing its process count on GPU " + std::to_string(index));
}

Status NvmlLibrary::WatchXids() {
  auto create_fn = reinterpret_cast<EventSetCreateFn>(Symbol("nvmlEventSetCreate"));
  auto register_fn = reinterpret_cast<RegisterEventsFn>(Symbol("nvmlDeviceRegisterEvents"));
  auto count_fn = reinterpret_cast<CountFn>(Symbol("nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  if (!create_fn || !register_fn || !count_fn || !handle_fn || !Symbol("nvmlEventSetWait_v2")) {
    return Status::Error("this NVIDIA driver has no NVML events (nvmlEventSetWait_v2); GPU health from XID errors is "
                         "off until the driver is updated");
  }
  nvmlEventSet_t set = nullptr;
  if (create_fn(&set) != NVML_SUCCESS) return Status::Error("NVML could not create an event set; GPU health from XID errors is off");
  unsigned int count = 0;
  if (count_fn(&count) != NVML_SUCCESS) count = 0;
  std::string refused;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (handle_fn(i, &device) != NVML_SUCCESS || register_fn(device, nvmlEventTypeXidCriticalError, set) != NVML_SUCCESS) {
      refused += (refused.empty() ? "" : ", ") + std::to_string(i);
    }
  }
  xid_events_ = set;
  if (!refused.empty()) {
    return Status::Error("NVML refused XID events of GPU(s) " + refused + " (run the daemon as root to watch them); "
                         "their health stays unknown, reported healthy");
  }
  return Status::Ok();
}

std::optional<NvmlLibrary::XidEvent> NvmlLibrary::NextXid(uint32_t timeout_ms) {
  if (xid_events_ == nullptr) return std::nullopt;
  auto wait_fn = reinterpret_cast<EventSetWaitFn>(Symbol("nvmlEventSetWait_v2"));
  auto index_fn = reinterpret_cast<DeviceIndexFn>(Symbol("nvmlDeviceGetIndex"));
  nvmlEventData_t data{};
  if (wait_fn == nullptr || wait_fn(static_cast<nvmlEventSet_t>(xid_events_), &data, timeout_ms) != NVML_SUCCESS) {
    return std::nullopt;
  }
  XidEvent e;
  unsigned int index = 0;
  if (index_fn != nullptr && index_fn(data.device, &index) == NVML_SUCCESS) e.gpu_index = index;
  e.xid = data.eventData;
  return e;
}

StatusOr<std::vector<DeviceUtilization>> NvmlLibrary::DeviceUtilizations(uint32_t index, uint64_t since_us) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto fn = reinterpret_cast<SamplesFn>(Symbol("nvmlDeviceGetSamples"));
  if (handle_fn == nullptr || fn == nullptr) {
    return Status::Error("this NVIDIA driver cannot report GPU utilisation samples (nvmlDeviceGetSamples)");
  }
  nvmlDevice_t device = nullptr;
  if (handle_fn(index, &device) != NVML_SUCCESS) return Status::Error("NVML lost GPU " + std::to_string(index));
  const auto failed = [index](nvmlReturn_t r) {
    return Status::Error("nvmlDeviceGetSamples failed on GPU " + std::to_string(index) + " (NVML error " +
                         std::to_string(r) + ")");
  };
  nvmlValueType_t type = NVML_VALUE_TYPE_UNSIGNED_INT;
  unsigned int count = 0;
  nvmlReturn_t r = fn(device, NVML_GPU_UTILIZATION_SAMPLES, since_us, &type, &count, nullptr);
  if (r == NVML_ERROR_NOT_FOUND) return std::vector<DeviceUtilization>{};
  if (r != NVML_SUCCESS) return failed(r);
  // Room for samples taken between the two calls (one per ~200 ms).
  count += 8;
  std::vector<nvmlSample_t> samples(count);
  r = fn(device, NVML_GPU_UTILIZATION_SAMPLES, since_us, &type, &count, samples.data());
  if (r == NVML_ERROR_NOT_FOUND) return std::vector<DeviceUtilization>{};
  if (r != NVML_SUCCESS) return failed(r);
  std::vector<DeviceUtilization> out;
  for (unsigned int k = 0; k < count && k < samples.size(); ++k) {
    const nvmlValue_t& v = samples[k].sampleValue;
    double percent = 0;
    switch (type) {
      case NVML_VALUE_TYPE_DOUBLE:
        percent = v.dVal;
        break;
      case NVML_VALUE_TYPE_UNSIGNED_LONG:
        percent = static_cast<double>(v.ulVal);
        break;
      case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        percent = static_cast<double>(v.ullVal);
        break;
      default:
        percent = v.uiVal;
        break;
    }
    if (samples[k].timeStamp <= since_us) continue;
    out.push_back({static_cast<uint32_t>(std::clamp(percent, 0.0, 100.0)), samples[k].timeStamp});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.timestamp_us < b.timestamp_us; });
  return out;
}

std::optional<uint64_t> NvmlLibrary::TotalEnergyMillijoules(uint32_t index) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto fn = reinterpret_cast<EnergyFn>(Symbol("nvmlDeviceGetTotalEnergyConsumption"));
  nvmlDevice_t device = nullptr;
  unsigned long long mj = 0;
  if (handle_fn == nullptr || fn == nullptr || handle_fn(index, &device) != NVML_SUCCESS ||
      fn(device, &mj) != NVML_SUCCESS) {
    return std::nullopt;
  }
  return mj;
}

std::optional<uint32_t> NvmlLibrary::PowerMilliwatts(uint32_t index) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto fn = reinterpret_cast<PowerFn>(Symbol("nvmlDeviceGetPowerUsage"));
  nvmlDevice_t device = nullptr;
  unsigned int mw = 0;
  if (handle_fn == nullptr || fn == nullptr || handle_fn(index, &device) != NVML_SUCCESS ||
      fn(device, &mw) != NVML_SUCCESS) {
    return std::nullopt;
  }
  return mw;
}

std::optional<uint64_t> NvmlLibrary::FreeMemoryBytes(uint32_t index) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto fn = reinterpret_cast<MemoryFn>(Symbol("nvmlDeviceGetMemoryInfo"));
  nvmlDevice_t device = nullptr;
  nvmlMemory_t memory{};
  if (handle_fn == nullptr || fn == nullptr || handle_fn(index, &device) != NVML_SUCCESS ||
      fn(device, &memory) != NVML_SUCCESS) {
    return std::nullopt;
  }
  return memory.free;
}

std::optional<uint64_t> NvmlLibrary::UsedMemoryBytes(uint32_t index) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  nvmlDevice_t device = nullptr;
  if (handle_fn == nullptr || handle_fn(index, &device) != NVML_SUCCESS) return std::nullopt;
  using MemoryV2Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
  if (auto v2 = reinterpret_cast<MemoryV2Fn>(Symbol("nvmlDeviceGetMemoryInfo_v2"))) {
    nvmlMemory_v2_t memory{};
    memory.version = kNvmlMemoryV2;
    if (v2(device, &memory) == NVML_SUCCESS) return memory.used;
  }
  auto v1 = reinterpret_cast<MemoryFn>(Symbol("nvmlDeviceGetMemoryInfo"));
  nvmlMemory_t memory{};
  if (v1 == nullptr || v1(device, &memory) != NVML_SUCCESS) return std::nullopt;
  return memory.used;
}

StatusOr<std::vector<ProcessMemory>> NvmlLibrary::ComputeProcesses(uint32_t index) {
  auto handle_fn = reinterpret_cast<HandleFn>(Symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto fn = reinterpret_cast<RunningProcessesFn>(Symbol("nvmlDeviceGetComputeRunningProcesses_v3"));
  if (handle_fn == nullptr || fn == nullptr) {
    return Status::Error("this NVIDIA driver cannot list processes' memory (nvmlDeviceGetComputeRunningProcesses_v3, "
                         "R510 and later)");
  }
  nvmlDevice_t device = nullptr;
  if (handle_fn(index, &device) != NVML_SUCCESS) return Status::Error("NVML lost GPU " + std::to_string(index));
  unsigned int count = 64;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<nvmlProcessInfo_t> infos(count);
    const nvmlReturn_t r = fn(device, &count, infos.data());
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
      count += 16;  // processes may start meanwhile
      continue;
    }
    if (r != NVML_SUCCESS) {
      return Status::Error("nvmlDeviceGetComputeRunningProcesses_v3 failed on GPU " + std::to_string(index) +
                           " (NVML error " + std::to_string(r) + ")");
    }
    std::vector<ProcessMemory> out;
    for (unsigned int k = 0; k < count && k < infos.size(); ++k) {
      const unsigned long long used = infos[k].usedGpuMemory;
      out.push_back({infos[k].pid, used == NVML_VALUE_NOT_AVAILABLE ? 0 : used});
    }
    return out;
  }
  return Status::Error("NVML kept changing its process count on GPU " + std::to_string(index));
}

}  // namespace gpuslice::port
