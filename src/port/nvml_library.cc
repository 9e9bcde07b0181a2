#include "port/nvml_library.h"

#include <dlfcn.h>

#include "port/driver_locator.h"

namespace gpuslice::port {
namespace {

// From NVML's public API reference (docs.nvidia.com/deploy/nvml-api):
// nvmlReturn_t is an int enum with NVML_SUCCESS = 0; devices are opaque
// handles; nvmlMemory_t is {total, free, used} in bytes.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool ParseGpuUuid(const std::string& text, std::array<uint8_t, 16>* out) {
  std::string s = text.rfind("GPU-", 0) == 0 ? text.substr(4) : text;
  int n = 0;
  for (char c : s) {
    if (c == '-') continue;
    const int v = Hex(c);
    if (v < 0 || n >= 32) return false;
    if (n % 2 == 0) (*out)[n / 2] = static_cast<uint8_t>(v << 4);
    else (*out)[n / 2] |= static_cast<uint8_t>(v);
    ++n;
  }
  return n == 32;
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
  auto init = Lookup<InitFn>(handle, "nvmlInit_v2");
  const nvmlReturn_t r = init == nullptr ? -1 : init();
  if (r != 0) {
    auto err = Lookup<ErrorStringFn>(handle, "nvmlErrorString");
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
  if (auto shutdown = Lookup<ShutdownFn>(handle_, "nvmlShutdown")) shutdown();
  dlclose(handle_);
}

StatusOr<std::vector<GpuInfo>> NvmlLibrary::ListGpus() {
  auto count_fn = Lookup<CountFn>(handle_, "nvmlDeviceGetCount_v2");
  auto handle_fn = Lookup<HandleFn>(handle_, "nvmlDeviceGetHandleByIndex_v2");
  auto uuid_fn = Lookup<StringFn>(handle_, "nvmlDeviceGetUUID");
  auto name_fn = Lookup<StringFn>(handle_, "nvmlDeviceGetName");
  auto memory_fn = Lookup<MemoryFn>(handle_, "nvmlDeviceGetMemoryInfo");
  if (!count_fn || !handle_fn || !uuid_fn || !name_fn || !memory_fn) {
    return Status::Error("NVML at " + path_ + " lacks basic device queries; update the NVIDIA driver");
  }
  unsigned int count = 0;
  if (count_fn(&count) != 0) return Status::Error("NVML could not count GPUs; check nvidia-smi");
  std::vector<GpuInfo> gpus;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (handle_fn(i, &device) != 0) continue;  // e.g. a GPU the driver lost; skip it
    GpuInfo info;
    info.index = i;
    char buf[96] = {};
    if (uuid_fn(device, buf, sizeof buf) != 0 || !ParseGpuUuid(buf, &info.uuid)) continue;
    info.uuid_text = buf;
    if (name_fn(device, buf, sizeof buf) == 0) info.name = buf;
    nvmlMemory_t memory{};
    if (memory_fn(device, &memory) == 0) info.memory_total_bytes = memory.total;
    gpus.push_back(std::move(info));
  }
  return gpus;
}

}  // namespace gpuslice::port
