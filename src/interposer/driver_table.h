// driver_table.h — the real CUDA driver, as seen from inside the interposer.
//
// Every driver entry point named in cuda.h has a slot in
// gpuslice_driver_table, indexed by DriverSymbol (generated from cuda.h at
// build time: build/generated/driver_symbols.inc). Unhooked entry points are
// assembly forwarders that jump through their slot; hooks call the real
// function through Real<>(). The first call of either resolves the whole table
// once (dlopen of the real driver by absolute path, then dlsym of each name).
//
// Thread-safe. After resolution, Real<>() is one relaxed load: no lock, no
// syscall. Resolution itself (first call only) makes syscalls and allocates.
#ifndef GPUSLICE_INTERPOSER_DRIVER_TABLE_H_
#define GPUSLICE_INTERPOSER_DRIVER_TABLE_H_

#include <atomic>
#include <cstdint>
#include <string_view>

namespace gpuslice::interposer {

enum class DriverSymbol : uint32_t {
#define GPUSLICE_DRIVER_SYMBOL(name) k_##name,
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL
  kCount
};
inline constexpr uint32_t kDriverSymbolCount = static_cast<uint32_t>(DriverSymbol::kCount);

}  // namespace gpuslice::interposer

extern "C" {
// Slot i holds the real address of symbol i (or a stub returning
// CUDA_ERROR_NOT_SUPPORTED when the installed driver lacks it). Hidden: only
// the forwarders and hooks of this library use it.
extern std::atomic<void*> gpuslice_driver_table[];
}

namespace gpuslice::interposer {

// Loads the real driver and fills the table; idempotent. Returns false when no
// real driver could be loaded (every slot then holds a stub returning
// CUDA_ERROR_STUB_LIBRARY, and the reason has been logged).
bool ResolveDriver();
bool DriverLoaded();
void* RealDriverHandle();

// Index of a symbol by exact name, or kDriverSymbolCount when unknown.
uint32_t FindDriverSymbol(std::string_view name);
const char* DriverSymbolName(uint32_t index);

// The real function for `sym`, typed as the hook's own signature.
template <typename Fn>
Fn Real(DriverSymbol sym) {
  void* p = gpuslice_driver_table[static_cast<uint32_t>(sym)].load(std::memory_order_acquire);
  if (__builtin_expect(p == nullptr, 0)) {
    ResolveDriver();
    p = gpuslice_driver_table[static_cast<uint32_t>(sym)].load(std::memory_order_acquire);
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace gpuslice::interposer

// Calls the real driver's `name` with the hook's own arguments, e.g.
//   return GPUSLICE_REAL(cuMemAlloc_v2)(dptr, bytesize);
#define GPUSLICE_REAL(name) \
  ::gpuslice::interposer::Real<decltype(&::name)>(::gpuslice::interposer::DriverSymbol::k_##name)

#endif  // GPUSLICE_INTERPOSER_DRIVER_TABLE_H_
