// hooks_memory.cc — device memory: plain, pitched, managed, VMM and arrays.
//
// Every hook has the same shape, read top to bottom:
//   1. not in a vGPU, or the device is not capped   -> the real driver, untouched
//   2. charge the ledger first                      -> over the limit: OUT_OF_MEMORY,
//                                                      and the driver is never called
//   3. call the driver; on failure give the charge back
//   4. settle the charge to what the driver says the object occupies, and
//      remember it so the matching free can give it back
// Frees forget the record first (so a racing allocation that reuses the
// address cannot collide with it), free, and uncharge on success.
//
// Hot path: no lock shared with other processes, no allocation, no syscall.
#include <cuda.h>

#include <type_traits>

#include "interposer/charge.h"
#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/vgpu_runtime.h"

namespace gpuslice::interposer {
namespace {

using Kind = AllocationKind;

// Charges `bytes` on the current context's device. *slot is kUncapped when the
// device is not limited (nothing charged).
bool ChargeCurrentDevice(VgpuRuntime& rt, uint64_t bytes, int* slot) {
  *slot = rt.CurrentDeviceSlot();
  return *slot == VgpuRuntime::kUncapped || ChargeOrRefuse(rt, *slot, bytes);
}

void Remember(VgpuRuntime& rt, uint64_t key, Kind kind, int slot, uint64_t bytes) {
  // A full table (2^20 live objects) keeps the charge: the memory is then
  // held until the process exits, never lost from the account.
  rt.allocations().Insert(key, kind, AllocationRecord{bytes, static_cast<uint32_t>(slot), 0});
}

bool Forget(VgpuRuntime& rt, uint64_t key, Kind kind, AllocationRecord* record) {
  return rt.allocations().Erase(key, kind, record);
}

void Restore(VgpuRuntime& rt, uint64_t key, Kind kind, const AllocationRecord& record) {
  rt.allocations().Insert(key, kind, record);
}

uint64_t FormatBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      // Packed and compressed formats: an upper bound. The charge is settled
      // to the driver's own figure (cuArrayGetMemoryRequirements) right after.
      return 16;
  }
}

// A first estimate of an array's footprint: rows padded to 512 bytes.
uint64_t ArrayEstimate(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  const uint64_t layers = (d.Flags & CUDA_ARRAY3D_CUBEMAP) ? 6 : 1;
  const uint64_t row = RoundUp(d.Width * d.NumChannels * FormatBytes(d.Format), 512);
  return row * (d.Height ? d.Height : 1) * (d.Depth ? d.Depth : 1) * layers;
}

uint64_t MipmapEstimate(CUDA_ARRAY3D_DESCRIPTOR d, unsigned int levels) {
  uint64_t total = 0;
  for (unsigned int i = 0; i < levels; ++i) {
    total += ArrayEstimate(d);
    d.Width = d.Width > 1 ? d.Width / 2 : 1;
    if (d.Height > 1) d.Height /= 2;
    if (d.Depth > 1 && !(d.Flags & CUDA_ARRAY3D_LAYERED)) d.Depth /= 2;
  }
  return total;
}

// The allocation-table key of a pointer-like or integer handle.
template <typename Handle>
uint64_t KeyOf(Handle h) {
  if constexpr (std::is_pointer_v<Handle>) return reinterpret_cast<uintptr_t>(h);
  else return static_cast<uint64_t>(h);
}

// Settles an array's charge to the driver's figure, or undoes the array.
template <typename Handle, typename RequirementsFn, typename DestroyFn>
CUresult SettleArray(VgpuRuntime& rt, Handle handle, Kind kind, int slot, uint64_t estimate,
                     RequirementsFn requirements, DestroyFn destroy) {
  CUdevice dev = 0;
  GPUSLICE_REAL(cuCtxGetDevice)(&dev);
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  uint64_t actual = estimate;
  if (requirements(&req, handle, dev) == CUDA_SUCCESS && req.size > 0) actual = req.size;
  if (!SettleCharge(rt, slot, estimate, actual)) {
    destroy(handle);
    rt.ledger().Uncharge(static_cast<uint32_t>(slot), estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Remember(rt, KeyOf(handle), kind, slot, actual);
  return CUDA_SUCCESS;
}

template <typename Handle, typename DestroyFn>
CUresult DestroyCharged(Handle handle, Kind kind, DestroyFn destroy) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  AllocationRecord rec;
  const bool known = rt != nullptr && Forget(*rt, KeyOf(handle), kind, &rec);
  const CUresult r = destroy(handle);
  if (!known) return r;
  if (r == CUDA_SUCCESS) rt->ledger().Uncharge(rec.device, rec.bytes);
  else Restore(*rt, KeyOf(handle), kind, rec);
  return r;
}

}  // namespace
}  // namespace gpuslice::interposer

using gpuslice::interposer::AllocationKind;
using gpuslice::interposer::AllocationRecord;
using gpuslice::interposer::VgpuRuntime;
namespace gi = gpuslice::interposer;

GPUSLICE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || bytesize == 0) return GPUSLICE_REAL(cuMemAlloc_v2)(dptr, bytesize);
  const uint64_t charge = gi::RoundUp(bytesize, gi::kDeviceAllocationGranule);
  int slot;
  if (!gi::ChargeCurrentDevice(*rt, charge, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuMemAlloc_v2)(dptr, bytesize);
  if (slot == VgpuRuntime::kUncapped) return r;
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, charge);
    return r;
  }
  gi::Remember(*rt, *dptr, AllocationKind::kDevice, slot, charge);
  return r;
}

GPUSLICE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                            unsigned int element_size) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || width == 0 || height == 0) {
    return GPUSLICE_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size);
  }
  const uint64_t estimate = gi::RoundUp(width, gi::kDeviceAllocationGranule) * height;
  int slot;
  if (!gi::ChargeCurrentDevice(*rt, estimate, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size);
  if (slot == VgpuRuntime::kUncapped) return r;
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, estimate);
    return r;
  }
  const uint64_t actual = gi::RoundUp(static_cast<uint64_t>(*pitch) * height, gi::kDeviceAllocationGranule);
  if (!gi::SettleCharge(*rt, slot, estimate, actual)) {
    GPUSLICE_REAL(cuMemFree_v2)(*dptr);
    rt->ledger().Uncharge(slot, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  gi::Remember(*rt, *dptr, AllocationKind::kDevice, slot, actual);
  return r;
}

// Managed memory may migrate to the host, but it can all be on the device at
// once, so all of it counts against the device it was allocated from.
GPUSLICE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || bytesize == 0) return GPUSLICE_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  const uint64_t charge = gi::RoundUp(bytesize, gi::kDeviceAllocationGranule);
  int slot;
  if (!gi::ChargeCurrentDevice(*rt, charge, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  if (slot == VgpuRuntime::kUncapped) return r;
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, charge);
    return r;
  }
  gi::Remember(*rt, *dptr, AllocationKind::kManaged, slot, charge);
  return r;
}

GPUSLICE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || dptr == 0) return GPUSLICE_REAL(cuMemFree_v2)(dptr);
  AllocationRecord rec;
  AllocationKind kind = AllocationKind::kDevice;
  bool known = gi::Forget(*rt, dptr, kind, &rec);
  if (!known) {
    kind = AllocationKind::kManaged;
    known = gi::Forget(*rt, dptr, kind, &rec);
  }
  // Unknown pointers (stream-ordered allocations, memory from before the
  // vGPU was joined) pass through: pools are accounted by their reservation.
  const CUresult r = GPUSLICE_REAL(cuMemFree_v2)(dptr);
  if (!known) return r;
  if (r == CUDA_SUCCESS) rt->ledger().Uncharge(rec.device, rec.bytes);
  else gi::Restore(*rt, dptr, kind, rec);
  return r;
}

// --- Virtual memory management (PyTorch expandable_segments) ---------------
// Physical memory is made by cuMemCreate and returned by cuMemRelease; maps
// and reservations of address space cost no device memory.

GPUSLICE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || prop == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || size == 0) {
    return GPUSLICE_REAL(cuMemCreate)(handle, size, prop, flags);
  }
  const int slot = rt->DeviceSlot(prop->location.id);
  if (slot == VgpuRuntime::kUncapped) return GPUSLICE_REAL(cuMemCreate)(handle, size, prop, flags);
  if (!gi::ChargeOrRefuse(*rt, slot, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuMemCreate)(handle, size, prop, flags);
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, size);
    return r;
  }
  gi::Remember(*rt, *handle, AllocationKind::kVmmHandle, slot, size);
  return r;
}

// A retained handle is released once more than it was created; count the
// extra references so that only the last release gives the memory back.
GPUSLICE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  const CUresult r = GPUSLICE_REAL(cuMemRetainAllocationHandle)(handle, addr);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr) return r;
  AllocationRecord rec;
  if (!rt->allocations().Find(*handle, AllocationKind::kVmmHandle, &rec)) return r;
  AllocationRecord retains{0, rec.device, 0};
  rt->allocations().Erase(*handle, AllocationKind::kVmmRetain, &retains);
  retains.bytes += 1;  // the reference count rides in the size field
  rt->allocations().Insert(*handle, AllocationKind::kVmmRetain, retains);
  return r;
}

GPUSLICE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_REAL(cuMemRelease)(handle);
  AllocationRecord retains;
  if (rt->allocations().Erase(handle, AllocationKind::kVmmRetain, &retains)) {
    const CUresult r = GPUSLICE_REAL(cuMemRelease)(handle);
    if (r != CUDA_SUCCESS || retains.bytes > 1) {
      if (r == CUDA_SUCCESS) retains.bytes -= 1;
      rt->allocations().Insert(handle, AllocationKind::kVmmRetain, retains);
    }
    return r;
  }
  return gi::DestroyCharged(handle, AllocationKind::kVmmHandle,
                            [](CUmemGenericAllocationHandle h) { return GPUSLICE_REAL(cuMemRelease)(h); });
}

// --- CUDA arrays: charged at their true size -------------------------------

GPUSLICE_EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || desc == nullptr) return GPUSLICE_REAL(cuArrayCreate_v2)(handle, desc);
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  d3.Width = desc->Width;
  d3.Height = desc->Height;
  d3.Format = desc->Format;
  d3.NumChannels = desc->NumChannels;
  const uint64_t estimate = gi::ArrayEstimate(d3);
  int slot;
  if (!gi::ChargeCurrentDevice(*rt, estimate, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuArrayCreate_v2)(handle, desc);
  if (slot == VgpuRuntime::kUncapped) return r;
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, estimate);
    return r;
  }
  return gi::SettleArray(*rt, *handle, AllocationKind::kArray, slot, estimate,
                         GPUSLICE_REAL(cuArrayGetMemoryRequirements), GPUSLICE_REAL(cuArrayDestroy));
}

GPUSLICE_EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || desc == nullptr) return GPUSLICE_REAL(cuArray3DCreate_v2)(handle, desc);
  const uint64_t estimate = gi::ArrayEstimate(*desc);
  int slot;
  if (!gi::ChargeCurrentDevice(*rt, estimate, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuArray3DCreate_v2)(handle, desc);
  if (slot == VgpuRuntime::kUncapped) return r;
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, estimate);
    return r;
  }
  return gi::SettleArray(*rt, *handle, AllocationKind::kArray, slot, estimate,
                         GPUSLICE_REAL(cuArrayGetMemoryRequirements), GPUSLICE_REAL(cuArrayDestroy));
}

GPUSLICE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int levels) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || desc == nullptr) return GPUSLICE_REAL(cuMipmappedArrayCreate)(handle, desc, levels);
  const uint64_t estimate = gi::MipmapEstimate(*desc, levels);
  int slot;
  if (!gi::ChargeCurrentDevice(*rt, estimate, &slot)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = GPUSLICE_REAL(cuMipmappedArrayCreate)(handle, desc, levels);
  if (slot == VgpuRuntime::kUncapped) return r;
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, estimate);
    return r;
  }
  return gi::SettleArray(*rt, *handle, AllocationKind::kMipmappedArray, slot, estimate,
                         GPUSLICE_REAL(cuMipmappedArrayGetMemoryRequirements),
                         GPUSLICE_REAL(cuMipmappedArrayDestroy));
}

GPUSLICE_EXPORT CUresult cuArrayDestroy(CUarray handle) {
  return gi::DestroyCharged(handle, AllocationKind::kArray,
                            [](CUarray h) { return GPUSLICE_REAL(cuArrayDestroy)(h); });
}

GPUSLICE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle) {
  return gi::DestroyCharged(handle, AllocationKind::kMipmappedArray,
                            [](CUmipmappedArray h) { return GPUSLICE_REAL(cuMipmappedArrayDestroy)(h); });
}
