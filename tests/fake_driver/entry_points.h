// entry_points.h — the fake driver's own exported cu* entry points, by name,
// and how often each was called.
//
// The table holds every name in driver_symbols.inc (generated from cuda.h).
// Addresses are the fake's own definitions: the library links with
// -Bsymbolic, so an interposer exporting the same names cannot capture them.
// That is what cuGetProcAddress must hand out, as the real driver does.
//
// Thread-safe, lock-free, never allocates. Includes no cuda.h: the stubs'
// translation unit declares every name with a dummy signature.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_ENTRY_POINTS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_ENTRY_POINTS_H_

#include <cstdint>
#include <string_view>

namespace fake_cuda {

// Index of `name` in the table, or -1 when it is not a driver entry point.
int EntryPointIndex(std::string_view name);

// The fake's own function for table index `index`.
void* EntryPointAddress(int index);

// Per-symbol call counters. Implemented entry points count themselves (via
// Enter() in state.h); generated stubs count themselves too, so a test can
// see that a call was forwarded even to a function the fake leaves out.
void CountCall(std::string_view name);
uint64_t CallCount(std::string_view name);
void ResetCallCounts();

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_ENTRY_POINTS_H_
