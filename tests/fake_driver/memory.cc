// Plain device memory (cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged,
// cuMemFree_v2), pinned host memory, and the pointer queries
// (cuMemGetInfo_v2, cuMemGetAddressRange_v2, cuPointerGetAttribute).
//
// Device allocations are committed in 512-byte granules, so
// cuMemGetAddressRange reports the rounded size. Managed memory is charged to
// the current context's device in full at allocation (the real driver pages
// it in lazily; charging up front is what a per-vGPU limit has to assume).
#include <cuda.h>
#include <sys/mman.h>

#include <cstdlib>
#include <set>

#include "allocations.h"
#include "contexts.h"
#include "graphs.h"
#include "physical.h"
#include "pools.h"
#include "state.h"

namespace fake_cuda {
namespace {

constexpr uint64_t kGranule = 512;

CUresult AllocateDevice(CUdeviceptr* dptr, uint64_t bytes, AllocationKind kind) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  const uint64_t size = RoundUp(bytes, kGranule);
  if (!TakePhysical(locked, device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  *dptr = NewDeviceAddress(locked, device, size, kGranule);
  Allocation allocation{kind, device, *dptr, size, nullptr};
  allocation.context = CurrentContext(locked);
  AddAllocation(locked, allocation);
  return CUDA_SUCCESS;
}

CUresult AllocateHost(void** pp, size_t bytes) {
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  // Real host memory: callers write to pinned buffers.
  void* p = std::malloc(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pp = p;
  AddAllocation(locked,
                {AllocationKind::kHost, -1, reinterpret_cast<CUdeviceptr>(p), bytes, nullptr});
  return CUDA_SUCCESS;
}

// Writes a pointer attribute of `a` into `data`. Boolean attributes are
// written as unsigned int, as callers commonly declare them.
CUresult WriteAttribute(const Allocation& a, CUdeviceptr ptr, CUpointer_attribute attribute,
                        void* data) {
  const bool host = a.kind == AllocationKind::kHost;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host && a.kind != AllocationKind::kManaged) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = a.id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned int*>(data) = a.kind == AllocationKind::kManaged ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (host) return CUDA_ERROR_INVALID_VALUE;  // the fake does not record it
      *static_cast<int*>(data) = a.device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = a.range_base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = a.range_size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<unsigned int*>(data) = 1; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<CUmemoryPool*>(data) =
          a.kind == AllocationKind::kPool ? static_cast<CUmemoryPool>(a.owner) : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      *static_cast<CUdeviceptr*>(data) = a.base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      *static_cast<size_t*>(data) = a.size;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace
}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  int device = 0;
  if (CUresult r = fake_cuda::CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  *total = fake_cuda::DeviceCapacity(device);
  *free = *total - fake_cuda::PhysicalUsed(locked, device);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AllocateDevice(dptr, bytes, fake_cuda::AllocationKind::kDevice);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_size) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) {
    return CUDA_ERROR_INVALID_VALUE;  // the only sizes the real driver accepts
  }
  const uint64_t row = fake_cuda::RoundUp(width, fake_cuda::kGranule);
  if (row > UINT64_MAX / height) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = fake_cuda::AllocateDevice(dptr, row * height, fake_cuda::AllocationKind::kDevice);
  if (r == CUDA_SUCCESS) *pitch = row;
  return r;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::AllocateDevice(dptr, bytes, fake_cuda::AllocationKind::kManaged);
}

// Legacy IPC: the handle names the allocation by its base address, device
// and size. A per-process fake cannot share memory with another process, so
// an opened handle is a fresh address on that device that holds nothing, and
// freeing the exported memory frees it here (the real driver keeps it while
// an importer has it open: docs/benchmarks.md, "Exported device memory").
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const fake_cuda::Allocation* a = fake_cuda::FindAllocationAt(locked, dptr);
  if (a == nullptr || a->kind != fake_cuda::AllocationKind::kDevice) return CUDA_ERROR_INVALID_VALUE;
  *handle = {};
  const uint64_t words[3] = {dptr, static_cast<uint64_t>(a->device), a->size};
  __builtin_memcpy(handle->reserved, words, sizeof(words));
  return CUDA_SUCCESS;
}

namespace fake_cuda {
namespace {
std::set<CUdeviceptr>& OpenedIpcHandles(const Locked&) {
  static auto* opened = new std::set<CUdeviceptr>;
  return *opened;
}
}  // namespace
}  // namespace fake_cuda

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int /*flags*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  uint64_t words[3];
  __builtin_memcpy(words, handle.reserved, sizeof(words));
  if (pdptr == nullptr || words[0] == 0 || !fake_cuda::ValidDevice(static_cast<int>(words[1]))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  fake_cuda::Locked locked;
  *pdptr = fake_cuda::NewDeviceAddress(locked, static_cast<int>(words[1]), words[2], 512);
  fake_cuda::OpenedIpcHandles(locked).insert(*pdptr);
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  return fake_cuda::OpenedIpcHandles(locked).erase(dptr) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// A dma-buf descriptor of a range of one allocation or mapping. The fake's
// memory does not outlive its free for it.
CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type,
                                       unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_NOT_SUPPORTED;
  fake_cuda::Locked locked;
  const fake_cuda::Allocation* a = fake_cuda::FindAllocation(locked, dptr);
  if (a == nullptr || size > a->base + a->size - dptr) return CUDA_ERROR_INVALID_VALUE;
  const int fd = memfd_create("fake-cuda-dmabuf", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  *static_cast<int*>(handle) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  fake_cuda::Locked locked;
  const fake_cuda::Allocation* a = fake_cuda::FindAllocationAt(locked, dptr);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (a->kind) {
    case fake_cuda::AllocationKind::kDevice:
    case fake_cuda::AllocationKind::kManaged:
      fake_cuda::ReturnPhysical(locked, a->device, a->size);
      fake_cuda::RemoveAllocation(locked, dptr);
      return CUDA_SUCCESS;
    // The real cuMemFree also accepts stream-ordered and graph allocations.
    case fake_cuda::AllocationKind::kPool: fake_cuda::FreeToPool(locked, *a); return CUDA_SUCCESS;
    case fake_cuda::AllocationKind::kGraph:
      fake_cuda::FreeGraphAllocation(locked, *a);
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const fake_cuda::Allocation* a = fake_cuda::FindAllocation(locked, dptr);
  if (a == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = a->base;
  if (size != nullptr) *size = a->size;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytes) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AllocateHost(pp, bytes);
}

CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int /*flags*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AllocateHost(pp, bytes);
}

// Host memory is mapped at the same address on the device (UVA).
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned int flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const fake_cuda::Allocation* a = fake_cuda::FindAllocation(locked, reinterpret_cast<CUdeviceptr>(p));
  if (a == nullptr || a->kind != fake_cuda::AllocationKind::kHost) return CUDA_ERROR_INVALID_VALUE;
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const auto dptr = reinterpret_cast<CUdeviceptr>(p);
  const fake_cuda::Allocation* a = fake_cuda::FindAllocationAt(locked, dptr);
  if (a == nullptr || a->kind != fake_cuda::AllocationKind::kHost) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::RemoveAllocation(locked, dptr);
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const fake_cuda::Allocation* a = fake_cuda::FindAllocation(locked, ptr);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::WriteAttribute(*a, ptr, attribute, data);
}

}  // extern "C"
