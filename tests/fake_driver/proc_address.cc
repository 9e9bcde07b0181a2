// cuGetProcAddress_v2 and the legacy four-argument cuGetProcAddress,
// emulating the real driver with the generated version map.
//
// A name asked for (cuMemAlloc) resolves to the symbol a CUDA 13 program
// would link against (cuMemAlloc_v2), or to the per-thread-default-stream
// variant (cuLaunchKernel_ptsz) when the flags ask for it; a name outside the
// map resolves to itself. The result is the fake's own function (see
// entry_points.h). `cudaVersion` matters only for the few names in
// kLegacyForms, where a caller asking for an older CUDA version gets the
// older entry point, as from the real driver (cuDevicePrimaryCtxRelease,
// not _v2, for CUDA 10); every other version resolves as CUDA 13 does,
// whereas the real driver hands older callers older ABI versions of more
// names (cuCtxCreate_v2 for CUDA 12, for example).
// Works before cuInit, as the real one does.
#include <cuda.h>

#include <algorithm>
#include <climits>
#include <iterator>
#include <string_view>

#include "entry_points.h"
#include "state.h"

namespace fake_cuda {
namespace {

struct Versioned {
  std::string_view base;
  std::string_view current;
  std::string_view ptds;
};

constexpr Versioned kVersionMap[] = {
#define GPUSLICE_DRIVER_VERSIONED(base, current, ptds) {#base, #current, #ptds},
#include "driver_version_map.inc"
#undef GPUSLICE_DRIVER_VERSIONED
};
static_assert(std::is_sorted(std::begin(kVersionMap), std::end(kVersionMap),
                             [](const Versioned& a, const Versioned& b) {
                               return a.base < b.base;
                             }),
              "driver_version_map.inc must be sorted by base name");

// What a caller asking for a CUDA version below `before` gets for `name`
// (the versions of cudaTypedefs.h's PFN_<name>_v<version> types, as a CUDA
// 13.0 driver on an H100 answered). Entries of one name are in increasing
// `before`; INT_MAX marks an answer the real driver gives every version,
// unlike cuda.h's mapping (cuGraphInstantiate stays the five-argument _v2,
// not WithFlags).
struct LegacyForm {
  std::string_view name;
  int before;
  std::string_view legacy;
};

constexpr LegacyForm kLegacyForms[] = {
    {"cuCtxDestroy", 4000, "cuCtxDestroy"},
    {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease"},
    {"cuDevicePrimaryCtxReset", 11000, "cuDevicePrimaryCtxReset"},
    {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem"},
    {"cuGraphInstantiate", 11000, "cuGraphInstantiate"},
    {"cuGraphInstantiate", INT_MAX, "cuGraphInstantiate_v2"},
    {"cuIpcOpenMemHandle", 11000, "cuIpcOpenMemHandle"},
    {"cuMemAlloc", 3020, "cuMemAlloc"},
    {"cuMemAllocPitch", 3020, "cuMemAllocPitch"},
    {"cuMemFree", 3020, "cuMemFree"},
    {"cuMemGetInfo", 3020, "cuMemGetInfo"},
};

std::string_view Resolve(std::string_view name, int cuda_version, cuuint64_t flags) {
  for (const LegacyForm& form : kLegacyForms) {
    if (form.name == name && cuda_version < form.before) return form.legacy;
  }
  const auto* it = std::lower_bound(
      std::begin(kVersionMap), std::end(kVersionMap), name,
      [](const Versioned& entry, std::string_view key) { return entry.base < key; });
  if (it == std::end(kVersionMap) || it->base != name) return name;
  return (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 ? it->ptds : it->current;
}

CUresult GetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int index = EntryPointIndex(Resolve(symbol, cuda_version, flags));
  if (index < 0) {
    *pfn = nullptr;
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = EntryPointAddress(index);
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fake_cuda

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::GetProcAddress(symbol, pfn, cuda_version, flags, status);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::GetProcAddress(symbol, pfn, cuda_version, flags, nullptr);
}

}  // extern "C"
