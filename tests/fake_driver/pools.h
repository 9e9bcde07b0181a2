// pools.h — stream-ordered memory pools (cuMemPool*), as the real driver
// models them: a pool holds `reserved` bytes of device memory, of which
// `used` are handed out.
//
// An allocation that does not fit in reserved - used grows `reserved` by
// whole chunks of FAKE_POOL_CHUNK bytes (default 32 MiB), taken from the
// device's physical memory; OOM when they do not fit. A free returns bytes to
// `used` only. At a synchronisation point (stream, event or context), each
// pool releases reserved memory down to max(round_up(used, chunk),
// release threshold): whole chunks that still hold live allocations cannot
// be released, as in the real driver. cuMemPoolTrimTo(pool, n) releases down
// to max(round_up(used, chunk), n) the same way.
//
// Thread-safe through Locked (state.h). Creating pools and allocations
// allocates.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_POOLS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_POOLS_H_

#include <cuda.h>

#include <cstdint>

#include "allocations.h"
#include "state.h"

namespace fake_cuda {

// The device's current pool (cuDeviceSetMemPool; its default pool otherwise).
CUmemoryPool CurrentPool(const Locked&, int device);

// Device of a live pool; CUDA_ERROR_INVALID_VALUE for anything else.
CUresult PoolDevice(const Locked&, CUmemoryPool pool, int* device);

// Hands out `bytes` from `pool`, growing it as described above.
CUresult PoolAllocate(const Locked&, CUmemoryPool pool, uint64_t bytes, CUdeviceptr* dptr);

// Returns a kPool allocation to its pool (cuMemFreeAsync, or cuMemFree).
void FreeToPool(const Locked&, const Allocation& allocation);

// What a synchronisation point does to every pool.
void ReleasePoolsAtSync(const Locked&);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_POOLS_H_
