// Every driver entry point of cuda.h, generated from driver_symbols.inc: a
// weak stub returning CUDA_ERROR_NOT_SUPPORTED, plus the name -> address
// table behind cuGetProcAddress and the call counters.
//
// This file must not include cuda.h: the stubs are declared `int name()`,
// which conflicts with cuda.h's prototypes. Returning int through a function
// of any CUresult-returning signature is fine under the SysV x86-64 ABI
// (arguments are ignored; the result is in eax either way). The hand-written
// entry points, which do include cuda.h, are strong definitions and replace
// these stubs at link time.
#include <algorithm>
#include <atomic>
#include <iterator>
#include <string_view>

#include "entry_points.h"

namespace {

// CUDA_ERROR_NOT_SUPPORTED, spelled as a number because cuda.h is off limits.
constexpr int kNotSupported = 801;

}  // namespace

// The declaration first satisfies -Wmissing-declarations.
#define GPUSLICE_DRIVER_SYMBOL(name)            \
  extern "C" int name();                        \
  extern "C" __attribute__((weak)) int name() { \
    fake_cuda::CountCall(#name);                \
    return kNotSupported;                       \
  }
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL

namespace fake_cuda {
namespace {

struct EntryPoint {
  std::string_view name;
  void* address;
};

// driver_symbols.inc is sorted by the generator, so the table is too; the
// static_assert below keeps the binary search honest if that ever changes.
constexpr std::string_view kNames[] = {
#define GPUSLICE_DRIVER_SYMBOL(name) #name,
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL
};
constexpr size_t kCount = std::size(kNames);
static_assert(std::is_sorted(std::begin(kNames), std::end(kNames)),
              "driver_symbols.inc must be sorted");

void* const kAddresses[kCount] = {
#define GPUSLICE_DRIVER_SYMBOL(name) reinterpret_cast<void*>(&::name),
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL
};

std::atomic<uint64_t> g_calls[kCount];

}  // namespace

int EntryPointIndex(std::string_view name) {
  const auto* it = std::lower_bound(std::begin(kNames), std::end(kNames), name);
  if (it == std::end(kNames) || *it != name) return -1;
  return static_cast<int>(it - std::begin(kNames));
}

void* EntryPointAddress(int index) { return kAddresses[index]; }

void CountCall(std::string_view name) {
  const int index = EntryPointIndex(name);
  if (index >= 0) g_calls[index].fetch_add(1, std::memory_order_relaxed);
}

uint64_t CallCount(std::string_view name) {
  const int index = EntryPointIndex(name);
  return index < 0 ? 0 : g_calls[index].load(std::memory_order_relaxed);
}

void ResetCallCounts() {
  for (auto& count : g_calls) count.store(0, std::memory_order_relaxed);
}

}  // namespace fake_cuda
