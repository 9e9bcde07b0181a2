// allocations.h — every live address range the fake has handed out, by
// address: what cuMemFree, cuMemGetAddressRange and cuPointerGetAttribute
// look up.
//
// Each family (plain, pool, graph, VMM mapping, host) registers its ranges
// here and keeps its own bookkeeping; `owner` points back into that family's
// records (the pool, the graph allocation, the VMM handle).
//
// Thread-safe through Locked (state.h). Adding allocates.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_ALLOCATIONS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_ALLOCATIONS_H_

#include <cuda.h>

#include <cstdint>

#include "state.h"

namespace fake_cuda {

enum class AllocationKind {
  kDevice,      // cuMemAlloc, cuMemAllocPitch
  kManaged,     // cuMemAllocManaged
  kPool,        // cuMemAllocAsync / FromPoolAsync; owner: the CUmemoryPool
  kGraph,       // a graph memory node's allocation after launch
  kVmmMapping,  // cuMemMap; owner: the VMM handle record
  kHost,        // cuMemAllocHost / cuMemHostAlloc (device is -1)
};

struct Allocation {
  AllocationKind kind;
  int device;
  CUdeviceptr base;
  uint64_t size;  // as committed: rounded up to the fake's granularity
  void* owner;
  // The mappable address range the pointer belongs to, for
  // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/RANGE_SIZE: the allocation itself,
  // except for a VMM mapping, where it is the cuMemAddressReserve range.
  CUdeviceptr range_base = 0;
  uint64_t range_size = 0;
  uint64_t id = 0;  // process-unique, for CU_POINTER_ATTRIBUTE_BUFFER_ID
  CUcontext context = nullptr;  // kDevice, kManaged: the context that owns it
};

void AddAllocation(const Locked&, Allocation allocation);
// The range containing `ptr`, or nullptr.
const Allocation* FindAllocation(const Locked&, CUdeviceptr ptr);
// The range starting exactly at `base`, or nullptr.
const Allocation* FindAllocationAt(const Locked&, CUdeviceptr base);
void RemoveAllocation(const Locked&, CUdeviceptr base);
// Frees every plain and managed allocation `ctx` owns, giving its memory back
// to the device: what destroying or resetting a context does to them.
void FreeContextAllocations(const Locked&, CUcontext ctx);

}  // namespace fake_cuda

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_ALLOCATIONS_H_
