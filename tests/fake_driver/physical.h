// physical.h — what each fake GPU really holds for this process, and the
// device address space the fake hands out.
//
// Every byte that a real GPU would commit — plain allocations, pool
// reservations, VMM handles, arrays, graph pools — is taken here, and an
// allocation that does not fit in capacity minus used fails with
// CUDA_ERROR_OUT_OF_MEMORY. Addresses are never backed or dereferenced: they
// come from a monotonic per-device range (0x7000'0000'0000 + device * 2^40)
// and are never reused, so a stale pointer can never alias a new allocation.
//
// Thread-safe through Locked (state.h). Allocates only on first use.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_PHYSICAL_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_PHYSICAL_H_

#include <cuda.h>

#include <cstdint>

#include "state.h"

namespace fake_cuda {

int DeviceCount();
bool ValidDevice(int device);
uint64_t DeviceCapacity(int device);

// Takes `bytes` of `device`'s memory. False, taking nothing, when it would
// exceed the device's capacity.
bool TakePhysical(const Locked&, int device, uint64_t bytes);
void ReturnPhysical(const Locked&, int device, uint64_t bytes);
uint64_t PhysicalUsed(const Locked&, int device);

// A fresh range of `bytes` in `device`'s address space, aligned to
// `alignment` (a power of two).
CUdeviceptr NewDeviceAddress(const Locked&, int device, uint64_t bytes, uint64_t alignment);

// A fresh range in the unified address space shared by all devices, where
// cuMemAddressReserve places VMM reservations (0x6000'0000'0000 up).
CUdeviceptr NewUnifiedAddress(const Locked&, uint64_t bytes, uint64_t alignment);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_PHYSICAL_H_
