#include "interposer/hook_registry.h"

#include <cstring>

#include "interposer/driver_table.h"
#include "interposer/hook_list.h"

// This file deliberately includes no cuda.h: the hooks are only named here,
// so each is declared with a placeholder type; their real signatures are
// checked where they are defined.
#define GPUSLICE_DECLARE(name) void name();
extern "C" {
GPUSLICE_CUDA_HOOKS(GPUSLICE_DECLARE)
GPUSLICE_NVML_HOOKS(GPUSLICE_DECLARE)
}
#undef GPUSLICE_DECLARE

namespace gpuslice::interposer {
namespace {

#define GPUSLICE_ENTRY(name) {#name, reinterpret_cast<void*>(&::name)},
const HookEntry kHooks[] = {GPUSLICE_CUDA_HOOKS(GPUSLICE_ENTRY) GPUSLICE_NVML_HOOKS(GPUSLICE_ENTRY)};
#undef GPUSLICE_ENTRY

}  // namespace

const HookEntry* Hooks(size_t* count) {
  *count = sizeof(kHooks) / sizeof(kHooks[0]);
  return kHooks;
}

void* HookByName(const char* name) {
  if (name == nullptr) return nullptr;
  for (const HookEntry& e : kHooks) {
    if (strcmp(e.name, name) == 0) return e.hook;
  }
  return nullptr;
}

void* HookForRealDriverFunction(const void* real) {
  if (real == nullptr || !ResolveDriver()) return nullptr;
  for (const HookEntry& e : kHooks) {
    const uint32_t index = FindDriverSymbol(e.name);
    if (index < kDriverSymbolCount && gpuslice_driver_table[index].load(std::memory_order_acquire) == real) {
      return e.hook;
    }
  }
  return nullptr;
}

}  // namespace gpuslice::interposer
