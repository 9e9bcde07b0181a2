#include "interposer/driver_table.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "interposer/real_dlsym.h"
#include "port/driver_locator.h"
#include "port/log.h"

extern "C" {
__attribute__((visibility("hidden"))) std::atomic<void*> gpuslice_driver_table[gpuslice::interposer::kDriverSymbolCount];
}

namespace gpuslice::interposer {
namespace {

constexpr const char* kSymbolNames[] = {
#define GPUSLICE_DRIVER_SYMBOL(name) #name,
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL
};
static_assert(sizeof(kSymbolNames) / sizeof(kSymbolNames[0]) == kDriverSymbolCount);

// CUresult values, spelled out so that this file needs no cuda.h.
constexpr int kCudaErrorNotSupported = 801;
constexpr int kCudaErrorStubLibrary = 34;

// Stand-ins for entry points the installed driver does not have, and for every
// entry point when there is no driver at all. They take any arguments (the
// SysV ABI lets a callee ignore them) and return a CUresult.
extern "C" int gpuslice_missing_symbol() { return kCudaErrorNotSupported; }
extern "C" int gpuslice_missing_driver() { return kCudaErrorStubLibrary; }

std::once_flag g_resolve_once;
void* g_handle = nullptr;
std::atomic<bool> g_loaded{false};

void ResolveOnce() {
  const std::string path = port::LocateRealCudaDriver(reinterpret_cast<const void*>(&ResolveDriver));
  void* handle = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    port::Log(port::LogLevel::kError,
              "no real CUDA driver found (%s); every CUDA call will fail with CUDA_ERROR_STUB_LIBRARY. "
              "Install the NVIDIA driver or set GPUSLICE_REAL_DRIVER to its libcuda.so.1",
              path.empty() ? "searched GPUSLICE_REAL_DRIVER and the standard directories" : dlerror());
    for (auto& slot : gpuslice_driver_table) {
      slot.store(reinterpret_cast<void*>(&gpuslice_missing_driver), std::memory_order_release);
    }
    return;
  }
  g_handle = handle;
  uint32_t missing = 0;
  for (uint32_t i = 0; i < kDriverSymbolCount; ++i) {
    void* p = RealDlsym(handle, kSymbolNames[i]);
    if (p == nullptr) {
      p = reinterpret_cast<void*>(&gpuslice_missing_symbol);
      ++missing;
    }
    gpuslice_driver_table[i].store(p, std::memory_order_release);
  }
  g_loaded.store(true, std::memory_order_release);
  port::Log(port::LogLevel::kInfo, "loaded real CUDA driver %s (%u of %u entry points absent)", path.c_str(),
            missing, kDriverSymbolCount);
}

}  // namespace

bool ResolveDriver() {
  std::call_once(g_resolve_once, ResolveOnce);
  return g_loaded.load(std::memory_order_acquire);
}

bool DriverLoaded() { return g_loaded.load(std::memory_order_acquire); }
void* RealDriverHandle() {
  ResolveDriver();
  return g_handle;
}

uint32_t FindDriverSymbol(std::string_view name) {
  // The generator sorts the names, so a binary search finds them.
  const auto* begin = std::begin(kSymbolNames);
  const auto* end = std::end(kSymbolNames);
  const auto* it = std::lower_bound(begin, end, name, [](const char* a, std::string_view b) { return a < b; });
  if (it != end && name == *it) return static_cast<uint32_t>(it - begin);
  return kDriverSymbolCount;
}

const char* DriverSymbolName(uint32_t index) {
  return index < kDriverSymbolCount ? kSymbolNames[index] : nullptr;
}

}  // namespace gpuslice::interposer

// Called by gpuslice_trampoline_slow with the symbol index in edi.
extern "C" __attribute__((visibility("hidden"))) void* gpuslice_resolve_symbol(uint32_t index) {
  gpuslice::interposer::ResolveDriver();
  return gpuslice_driver_table[index].load(std::memory_order_acquire);
}
