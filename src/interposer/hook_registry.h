// hook_registry.h — the one list of every entry point gpuslice replaces.
//
// cuGetProcAddress and dlsym hand out function pointers by name; both consult
// this registry so that an application reaching the driver by lookup gets the
// same hooks as one that links against it. The list itself is in
// hook_registry.cc. Read-only after start; lookups are linear over ~30
// entries (slow paths only: symbol lookup happens at start-up).
#ifndef GPUSLICE_INTERPOSER_HOOK_REGISTRY_H_
#define GPUSLICE_INTERPOSER_HOOK_REGISTRY_H_

#include <cstddef>

namespace gpuslice::interposer {

struct HookEntry {
  const char* name;  // exact exported symbol, e.g. "cuMemAlloc_v2"
  void* hook;
};

// All hooks, CUDA driver and NVML.
const HookEntry* Hooks(size_t* count);
// The hook exported under `name`, or nullptr.
void* HookByName(const char* name);
// The hook that replaces the real driver function at `real`, or nullptr.
// Resolves the real driver if needed.
void* HookForRealDriverFunction(const void* real);

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_HOOK_REGISTRY_H_
