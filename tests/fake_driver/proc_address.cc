// cuGetProcAddress_v2 and the legacy four-argument cuGetProcAddress,
// emulating the real driver with the generated version map.
//
// A name asked for (cuMemAlloc) resolves to the symbol a CUDA 13 program
// would link against (cuMemAlloc_v2), or to the per-thread-default-stream
// variant (cuLaunchKernel_ptsz) when the flags ask for it; a name outside the
// map resolves to itself. The result is the fake's own function (see
// entry_points.h). `cudaVersion` is ignored: every version resolves as CUDA
// 13 does, including versions below 12000, whereas the real driver hands
// older callers older ABI versions (cuCtxCreate_v2 for CUDA 12, for example).
// Works before cuInit, as the real one does.
#include <cuda.h>

#include <algorithm>
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

std::string_view Resolve(std::string_view name, cuuint64_t flags) {
  const auto* it = std::lower_bound(
      std::begin(kVersionMap), std::end(kVersionMap), name,
      [](const Versioned& entry, std::string_view key) { return entry.base < key; });
  if (it == std::end(kVersionMap) || it->base != name) return name;
  return (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 ? it->ptds : it->current;
}

CUresult GetProcAddress(const char* symbol, void** pfn, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int index = EntryPointIndex(Resolve(symbol, flags));
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

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int /*cuda_version*/, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::GetProcAddress(symbol, pfn, flags, status);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int /*cuda_version*/, cuuint64_t flags) {
  fake_cuda::EnterUninitialized(__func__);
  return fake_cuda::GetProcAddress(symbol, pfn, flags, nullptr);
}

}  // extern "C"
