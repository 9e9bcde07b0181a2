// hooks_memory.cc — device memory: plain, pitched, managed, VMM and arrays.
//
// Every hook has the same shape, read top to bottom:
//   1. not in a vGPU, or the device cannot be told  -> the real driver, untouched
//   2. charge the ledger first                      -> over the limit, or a device
//                                                      outside the vGPU: OUT_OF_MEMORY,
//                                                      and the driver is never called
//   3. call the driver; on failure give the charge back
//   4. remember the charge so the matching free can give it back
// Steps 2-4 are written once, AllocateCharged(); each hook says only how its
// object is made, sized and undone.
// Sizes are the driver's own where it reports them before the allocation
// exists (arrays: a memoryless probe); pitched allocations settle to the
// pitch the driver chose.
// Frees forget the record first (so a racing allocation that reuses the
// address cannot collide with it), free, and uncharge on success. Records
// name the context that owns the memory: its teardown uncharges them
// (charge.h).
//
// Hot path: no lock shared with other processes, no allocation, no syscall.
#include <cuda.h>

#include <type_traits>

#include "core/vgpu_layout.h"
#include "interposer/charge.h"
#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/observers.h"
#include "interposer/pacer.h"
#include "interposer/vgpu_runtime.h"
#include "port/log.h"

// Legacy names that cuda.h declares only under __CUDA_API_VERSION_INTERNAL
// (it maps them to their _v2); the driver still exports them.
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuCtxDestroy
#undef cuIpcOpenMemHandle
extern "C" {
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx);
}

namespace gpuslice::interposer {
namespace {

using Kind = AllocationKind;

// Records a charge with the context that owns the memory (the current one),
// so that the context's teardown can give it back (charge.h). `aux` is the
// record's aux word where the kind has one of its own (VMM handles). False
// when the table is full (2^20 live objects): the caller must then undo the
// allocation and refuse it, since memory it cannot find at its free would
// stay charged, or worse, a later object's record could not be found.
bool Remember(VgpuRuntime& rt, uint64_t key, Kind kind, int slot, uint64_t bytes, uint64_t aux) {
  return rt.allocations().Insert(key, kind, AllocationRecord{bytes, static_cast<uint32_t>(slot), 0, aux});
}

uint64_t CurrentContextWord() {
  CUcontext owner = nullptr;
  GPUSLICE_REAL(cuCtxGetCurrent)(&owner);
  return reinterpret_cast<uint64_t>(owner);
}

// The refusal of an allocation that was made but cannot be recorded: the
// driver's object has been freed (`undo`'s result, ignored), the charge is
// given back.
CUresult RefuseUnrecorded(VgpuRuntime& rt, int slot, uint64_t bytes, CUresult undo) {
  (void)undo;
  rt.ledger().Uncharge(static_cast<uint32_t>(slot), bytes);
  rt.ledger().CountDenial();
  port::Log(port::LogLevel::kWarn,
            "refused an allocation of %llu bytes: this process's allocation table is full (too many live objects "
            "for gpuslice to track); free some first",
            static_cast<unsigned long long>(bytes));
  return CUDA_ERROR_OUT_OF_MEMORY;
}

bool Forget(VgpuRuntime& rt, uint64_t key, Kind kind, AllocationRecord* record) {
  return rt.allocations().Erase(key, kind, record);
}

// Puts back a record taken out for a free the driver then refused. The
// entry just freed makes a full table unlikely; should it happen, the charge
// stays until the process exits (never given back twice).
void Restore(VgpuRuntime& rt, uint64_t key, Kind kind, const AllocationRecord& record) {
  (void)rt.allocations().Insert(key, kind, record);
}

// The allocation-table key of a pointer-like or integer handle.
template <typename Handle>
uint64_t KeyOf(Handle h) {
  if constexpr (std::is_pointer_v<Handle>) return reinterpret_cast<uintptr_t>(h);
  else return static_cast<uint64_t>(h);
}

// --- The allocation hook's steps, once ---------------------------------------

// What an allocation is charged: `bytes` on ledger `slot` (kOutside is
// refused), recorded as `kind`.
struct Charge {
  int slot;
  uint64_t bytes;
  Kind kind;
};

// The aux word of a record: the owning context, or a kind's own word.
struct OwnerIsCurrentContext {};
// The charge is what was asked for; nothing to settle once the driver answered.
struct ExactSize {};

// Steps 2-4 of the header's shape, for an object the driver makes into
// *out:
//   charge `c` (refused: OUT_OF_MEMORY, the driver never called) ->
//   make()  (failed: the charge is given back) ->
//   settle(): the size the driver actually made, when it may differ (too big
//     to charge: the object is undone and refused) ->
//   remember it (a full table: undone and refused).
// `undo(handle)` frees what make() made. The refusal is one call,
// ChargeOrRefuse (charge.h), so whatever policy a full vGPU gets (a reclaim,
// a bounded wait) is decided there for every hook.
// Hot path: inline; no lock, no allocation, no syscall beyond the driver's.
template <typename Handle, typename Make, typename Undo, typename Settle = ExactSize,
          typename Aux = OwnerIsCurrentContext>
CUresult AllocateCharged(VgpuRuntime& rt, Charge c, Handle* out, Make make, Undo undo, [[maybe_unused]] Settle settle = {},
                         [[maybe_unused]] Aux aux = {}) {
  if (!ChargeOrRefuse(rt, c.slot, c.bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = make();
  if (r == CUDA_ERROR_OUT_OF_MEMORY) r = AwaitGpuRoom(rt, c.slot, c.bytes, make);
  if (r != CUDA_SUCCESS) {
    rt.ledger().Uncharge(static_cast<uint32_t>(c.slot), c.bytes);
    return r;
  }
  uint64_t bytes = c.bytes;
  if constexpr (!std::is_same_v<Settle, ExactSize>) {
    bytes = settle();
    if (!SettleCharge(rt, c.slot, c.bytes, bytes)) {
      undo(*out);
      rt.ledger().Uncharge(static_cast<uint32_t>(c.slot), c.bytes);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  uint64_t aux_word;
  if constexpr (std::is_same_v<Aux, OwnerIsCurrentContext>) aux_word = CurrentContextWord();
  else aux_word = aux;
  if (!Remember(rt, KeyOf(*out), c.kind, c.slot, bytes, aux_word)) {
    return RefuseUnrecorded(rt, c.slot, bytes, undo(*out));
  }
  return r;
}

CUresult FreeDevicePointer(CUdeviceptr p) { return GPUSLICE_REAL(cuMemFree_v2)(p); }

// --- VMM handles: counted uses -----------------------------------------------

// A VMM handle's record counts its uses in its aux word: references in the
// high half (AdjustCounter field 1), mappings in the low half (field 0).
enum class VmmUse { kMapping = 0, kReference = 1 };
constexpr uint64_t kVmmOneReference = 1ull << 32;

// False when the handle is not one we charged (imported, or made before the
// vGPU was joined).
bool CountVmmUse(VgpuRuntime& rt, CUmemGenericAllocationHandle handle, VmmUse use, int delta) {
  uint64_t aux;
  return rt.allocations().AdjustCounter(handle, Kind::kVmmHandle, static_cast<int>(use), delta, &aux);
}

enum class VmmDrop { kUnknown, kCounted, kLast };

// Drops one use. When it was the handle's last, the record is forgotten and
// returned in *last: its memory is the driver's to free and ours to uncharge.
VmmDrop DropVmmUse(VgpuRuntime& rt, CUmemGenericAllocationHandle handle, VmmUse use, AllocationRecord* last) {
  uint64_t aux;
  if (!rt.allocations().AdjustCounter(handle, Kind::kVmmHandle, static_cast<int>(use), -1, &aux)) {
    return VmmDrop::kUnknown;  // not ours, or a use the driver will refuse (a second release)
  }
  if (aux != 0) return VmmDrop::kCounted;
  return Forget(rt, handle, Kind::kVmmHandle, last) ? VmmDrop::kLast : VmmDrop::kCounted;
}

// Forgets the recorded mappings that tile [ptr, ptr + size), after the
// driver has unmapped them, and uncharges each handle left with no use. The
// walk stops at the first address with no record (a mapping we never saw).
// A handle the driver frees here and hands out again to another thread
// before its record is dropped leaves that record to outlive it: the charge
// is then kept until the process exits, never given back twice.
void ForgetMappings(VgpuRuntime& rt, CUdeviceptr ptr, uint64_t size) {
  for (CUdeviceptr cursor = ptr; cursor < ptr + size;) {
    AllocationRecord mapping;
    if (!Forget(rt, cursor, Kind::kVmmMapping, &mapping) || mapping.bytes == 0) return;
    AllocationRecord last;
    if (DropVmmUse(rt, mapping.aux, VmmUse::kMapping, &last) == VmmDrop::kLast) {
      GiveBack(rt, Kind::kVmmHandle, mapping.aux, last);
    }
    cursor += mapping.bytes;
  }
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
      return 16;  // packed and compressed formats: an upper bound
  }
}

// An upper-bound estimate, used only if the driver cannot tell us the size.
uint64_t EstimateArrayBytes(CUDA_ARRAY3D_DESCRIPTOR d, unsigned int levels) {
  uint64_t total = 0;
  const uint64_t layers = (d.Flags & CUDA_ARRAY3D_CUBEMAP) ? 6 : 1;
  for (unsigned int i = 0; i < (levels ? levels : 1); ++i) {
    const uint64_t row = RoundUp(d.Width * d.NumChannels * FormatBytes(d.Format), 512);
    total += row * (d.Height ? d.Height : 1) * (d.Depth ? d.Depth : 1) * layers;
    d.Width = d.Width > 1 ? d.Width / 2 : 1;
    if (d.Height > 1) d.Height /= 2;
    if (d.Depth > 1 && !(d.Flags & CUDA_ARRAY3D_LAYERED)) d.Depth /= 2;
  }
  return total;
}

// The true footprint of an array with this descriptor, from the driver
// itself. Only arrays made with CUDA_ARRAY3D_DEFERRED_MAPPING answer
// cu*GetMemoryRequirements, and such an array has the same layout but holds
// no memory: so a probe of that kind is made, asked, and destroyed. Charging
// this size before the real array exists keeps the check exact.
uint64_t ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned int levels) {
  CUDA_ARRAY3D_DESCRIPTOR probe = desc;
  probe.Flags |= CUDA_ARRAY3D_DEFERRED_MAPPING;
  CUdevice dev = 0;
  GPUSLICE_REAL(cuCtxGetDevice)(&dev);
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  CUresult r;
  if (levels == 0) {
    CUarray array = nullptr;
    r = GPUSLICE_REAL(cuArray3DCreate_v2)(&array, &probe);
    if (r == CUDA_SUCCESS) {
      r = GPUSLICE_REAL(cuArrayGetMemoryRequirements)(&req, array, dev);
      GPUSLICE_REAL(cuArrayDestroy)(array);
    }
  } else {
    CUmipmappedArray mipmap = nullptr;
    r = GPUSLICE_REAL(cuMipmappedArrayCreate)(&mipmap, &probe, levels);
    if (r == CUDA_SUCCESS) {
      r = GPUSLICE_REAL(cuMipmappedArrayGetMemoryRequirements)(&req, mipmap, dev);
      GPUSLICE_REAL(cuMipmappedArrayDestroy)(mipmap);
    }
  }
  return r == CUDA_SUCCESS && req.size > 0 ? req.size : EstimateArrayBytes(desc, levels);
}

// Arrays made deferred or sparse hold no memory of their own: what backs them
// is mapped from cuMemCreate allocations, which are charged there.
bool HoldsMemory(const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  return (desc.Flags & (CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_SPARSE)) == 0;
}

template <typename Handle, typename Create, typename Destroy>
CUresult CreateArrayCharged(Handle* handle, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned int levels, Kind kind,
                            Create create, Destroy destroy) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || !HoldsMemory(desc)) return create();
  const int slot = rt->CurrentMemorySlot();
  if (slot == VgpuRuntime::kUncapped) return create();
  if (slot == VgpuRuntime::kOutside) return CUDA_ERROR_OUT_OF_MEMORY;  // before the probe of ArrayBytes
  return AllocateCharged(*rt, Charge{slot, ArrayBytes(desc, levels), kind}, handle, create, destroy);
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
  const int slot = rt->CurrentMemorySlot();
  if (slot == VgpuRuntime::kUncapped) return GPUSLICE_REAL(cuMemAlloc_v2)(dptr, bytesize);
  return gi::AllocateCharged(
      *rt, gi::Charge{slot, gi::RoundUp(bytesize, gi::kDeviceAllocationGranule), AllocationKind::kDevice}, dptr,
      [&] { return GPUSLICE_REAL(cuMemAlloc_v2)(dptr, bytesize); }, gi::FreeDevicePointer);
}

// Charged by an estimate from the width, then settled to the pitch the
// driver chose.
GPUSLICE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                            unsigned int element_size) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || width == 0 || height == 0) {
    return GPUSLICE_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size);
  }
  const int slot = rt->CurrentMemorySlot();
  if (slot == VgpuRuntime::kUncapped) {
    return GPUSLICE_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size);
  }
  const uint64_t estimate = gi::RoundUp(width, gi::kDeviceAllocationGranule) * height;
  return gi::AllocateCharged(
      *rt, gi::Charge{slot, estimate, AllocationKind::kDevice}, dptr,
      [&] { return GPUSLICE_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size); },
      gi::FreeDevicePointer,
      [&] { return gi::RoundUp(static_cast<uint64_t>(*pitch) * height, gi::kDeviceAllocationGranule); });
}

// Managed memory may migrate to the host, but it can all be on the device at
// once, so all of it counts against the device it was allocated from.
GPUSLICE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || bytesize == 0) return GPUSLICE_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  const int slot = rt->CurrentMemorySlot();
  if (slot == VgpuRuntime::kUncapped) return GPUSLICE_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  return gi::AllocateCharged(
      *rt, gi::Charge{slot, gi::RoundUp(bytesize, gi::kDeviceAllocationGranule), AllocationKind::kManaged}, dptr,
      [&] { return GPUSLICE_REAL(cuMemAllocManaged)(dptr, bytesize, flags); }, gi::FreeDevicePointer);
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
  if (r == CUDA_SUCCESS) {
    gi::GiveBack(*rt, kind, dptr, rec);
  } else {
    gi::Restore(*rt, dptr, kind, rec);
  }
  return r;
}

namespace {
// Marks the charged object that holds `dptr` as exported (charge.h, "Memory
// exported to other processes"): a cuMemAlloc'd allocation, or the VMM
// handle mapped at `dptr`. False when the table is full: refuse the export.
bool MarkAddressExported(VgpuRuntime& rt, CUdeviceptr dptr, uint64_t ipc_hash = 0) {
  CUdeviceptr base = 0;
  size_t size = 0;
  AllocationRecord found;
  if (GPUSLICE_REAL(cuMemGetAddressRange_v2)(&base, &size, dptr) == CUDA_SUCCESS &&
      rt.allocations().Find(base, AllocationKind::kDevice, &found)) {
    return gi::MarkExported(rt, AllocationKind::kDevice, base, ipc_hash);
  }
  if (rt.allocations().Find(dptr, AllocationKind::kVmmMapping, &found)) {
    const uint64_t handle = found.aux;
    if (rt.allocations().Find(handle, AllocationKind::kVmmHandle, &found)) {
      return gi::MarkExported(rt, AllocationKind::kVmmHandle, handle, ipc_hash);
    }
  }
  return true;  // not memory we charged
}
}  // namespace

// Legacy IPC (what PyTorch's CUDA tensors use between processes). The
// importer's cuIpcOpenMemHandle is not charged: the exporter pays, and keeps
// paying after its free while a process of the vGPU has the handle open
// (charge.h). The handle names the whole allocation around `dptr`; it holds
// nothing itself, so it is marked once made, and a refusal leaves the
// application none.
GPUSLICE_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  const CUresult r = GPUSLICE_REAL(cuIpcGetMemHandle)(handle, dptr);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr || handle == nullptr) return r;
  if (!MarkAddressExported(*rt, dptr, gpuslice::core::IpcHandleHash(handle->reserved))) {
    *handle = CUipcMemHandle{};
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

namespace {
// The handle is in this process's slot before the driver opens it, so that
// its exporter, freeing meanwhile, keeps the memory charged.
template <typename Open>
CUresult OpenIpcHandle(CUdeviceptr* pdptr, const CUipcMemHandle& handle, Open open) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || pdptr == nullptr) return open();
  const uint64_t hash = gpuslice::core::IpcHandleHash(handle.reserved);
  rt->ledger().RecordIpcOpen(hash);
  const CUresult r = open();
  if (r != CUDA_SUCCESS) {
    rt->ledger().ForgetIpcOpen(hash);
  } else {
    // Unrecorded (a full table), the handle stays in the slot until exit.
    (void)rt->allocations().Insert(*pdptr, AllocationKind::kIpcOpened, AllocationRecord{0, 0, 0, hash});
  }
  return r;
}
}  // namespace

GPUSLICE_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return OpenIpcHandle(pdptr, handle, [&] { return GPUSLICE_REAL(cuIpcOpenMemHandle_v2)(pdptr, handle, flags); });
}

GPUSLICE_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return OpenIpcHandle(pdptr, handle, [&] { return GPUSLICE_REAL(cuIpcOpenMemHandle)(pdptr, handle, flags); });
}

GPUSLICE_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  const CUresult r = GPUSLICE_REAL(cuIpcCloseMemHandle)(dptr);
  VgpuRuntime* rt = VgpuRuntime::Get();
  AllocationRecord opened;
  if (r == CUDA_SUCCESS && rt != nullptr && rt->allocations().Erase(dptr, AllocationKind::kIpcOpened, &opened)) {
    rt->ledger().ForgetIpcOpen(opened.aux);
  }
  return r;
}

// A dma-buf of device memory (RDMA registration) is a descriptor of it like
// an export's, so it is treated as one: not measured on a GPU. Marks the
// object at the range's start.
GPUSLICE_EXPORT CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                       CUmemRangeHandleType type, unsigned long long flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt != nullptr && !MarkAddressExported(*rt, dptr)) return CUDA_ERROR_OUT_OF_MEMORY;
  return GPUSLICE_REAL(cuMemGetHandleForAddressRange)(handle, dptr, size, type, flags);
}

// --- Virtual memory management (PyTorch expandable_segments) ---------------
// Physical memory is made by cuMemCreate and lives while its handle has a
// reference (cuMemCreate's own, and one per cuMemRetainAllocationHandle) or
// a mapping: NVIDIA's documented idiom releases the handle right after
// cuMemMap and lets the mapping keep the memory. So the charge follows the
// physical memory: the handle's record counts both (aux: references << 32 |
// mappings), and the last release or unmap, whichever comes second,
// uncharges. Reservations of address space cost no device memory.

GPUSLICE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || prop == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || size == 0) {
    return GPUSLICE_REAL(cuMemCreate)(handle, size, prop, flags);
  }
  const int slot = rt->MemorySlot(prop->location.id);
  if (slot == VgpuRuntime::kUncapped) return GPUSLICE_REAL(cuMemCreate)(handle, size, prop, flags);
  return gi::AllocateCharged(
      *rt, gi::Charge{slot, size, AllocationKind::kVmmHandle}, handle,
      [&] { return GPUSLICE_REAL(cuMemCreate)(handle, size, prop, flags); },
      [](CUmemGenericAllocationHandle h) { return GPUSLICE_REAL(cuMemRelease)(h); }, gi::ExactSize{},
      gi::kVmmOneReference);
}

GPUSLICE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  const CUresult r = GPUSLICE_REAL(cuMemRetainAllocationHandle)(handle, addr);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r == CUDA_SUCCESS && rt != nullptr) gi::CountVmmUse(*rt, *handle, gi::VmmUse::kReference, +1);
  return r;
}

// The record is forgotten before the driver frees the memory (so that a
// handle value the driver hands out again cannot collide with it), and
// restored if the release fails.
GPUSLICE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return GPUSLICE_REAL(cuMemRelease)(handle);
  AllocationRecord last;
  const gi::VmmDrop drop = gi::DropVmmUse(*rt, handle, gi::VmmUse::kReference, &last);
  const CUresult r = GPUSLICE_REAL(cuMemRelease)(handle);
  if (r == CUDA_SUCCESS) {
    if (drop == gi::VmmDrop::kLast) gi::GiveBack(*rt, AllocationKind::kVmmHandle, handle, last);
  } else if (drop == gi::VmmDrop::kLast) {
    last.aux = gi::kVmmOneReference;
    gi::Restore(*rt, handle, AllocationKind::kVmmHandle, last);
  } else if (drop == gi::VmmDrop::kCounted) {
    gi::CountVmmUse(*rt, handle, gi::VmmUse::kReference, +1);
  }
  return r;
}

// An exported handle's memory lives on in imports and in the exported
// descriptor, wherever they are: its charge is kept past its last release
// (charge.h). Imports are not charged; their exporter pays.
GPUSLICE_EXPORT CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                      CUmemAllocationHandleType type, unsigned long long flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  AllocationRecord charged;
  if (rt != nullptr && rt->allocations().Find(handle, AllocationKind::kVmmHandle, &charged) &&
      !gi::MarkExported(*rt, AllocationKind::kVmmHandle, handle)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return GPUSLICE_REAL(cuMemExportToShareableHandle)(shareable, handle, type, flags);
}

GPUSLICE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                  unsigned long long flags) {
  const CUresult r = GPUSLICE_REAL(cuMemMap)(ptr, size, offset, handle, flags);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr) return r;
  // A record still at this address is stale (the driver has just mapped it
  // anew, so what it recorded is gone): settle it first.
  gi::ForgetMappings(*rt, ptr, 1);
  // Counted before the mapping is recorded: if the table is full, the
  // mapping cannot be found at cuMemUnmap, and the memory then stays charged
  // until the process exits instead of being uncharged while still mapped.
  if (!gi::CountVmmUse(*rt, handle, gi::VmmUse::kMapping, +1)) return r;  // not a handle we charged
  if (!rt->allocations().Insert(ptr, AllocationKind::kVmmMapping, AllocationRecord{size, 0, 0, handle})) {
    // Unfindable at cuMemUnmap, the mapping could keep the memory alive
    // after its handle's last release uncharged it: refuse the mapping.
    GPUSLICE_REAL(cuMemUnmap)(ptr, size);
    AllocationRecord last;
    if (gi::DropVmmUse(*rt, handle, gi::VmmUse::kMapping, &last) == gi::VmmDrop::kLast) {
      gi::GiveBack(*rt, AllocationKind::kVmmHandle, handle, last);
    }
    gpuslice::port::Log(gpuslice::port::LogLevel::kWarn,
              "refused a mapping of %llu bytes: this process's allocation table is full (too many live objects for "
              "gpuslice to track); free some first",
              static_cast<unsigned long long>(size));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

// One call may unmap several adjacent mappings (the driver frees the
// memory of each handle left with neither reference nor mapping).
GPUSLICE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  const CUresult r = GPUSLICE_REAL(cuMemUnmap)(ptr, size);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r == CUDA_SUCCESS && rt != nullptr) gi::ForgetMappings(*rt, ptr, size);
  return r;
}

// --- CUDA arrays: charged at their true size -------------------------------

GPUSLICE_EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (desc == nullptr) return GPUSLICE_REAL(cuArrayCreate_v2)(handle, desc);
  CUDA_ARRAY3D_DESCRIPTOR d3{};  // a 2D array is a 3D one of depth 0
  d3.Width = desc->Width;
  d3.Height = desc->Height;
  d3.Format = desc->Format;
  d3.NumChannels = desc->NumChannels;
  return gi::CreateArrayCharged(handle, d3, 0, AllocationKind::kArray,
                                [&] { return GPUSLICE_REAL(cuArrayCreate_v2)(handle, desc); },
                                [](CUarray a) { return GPUSLICE_REAL(cuArrayDestroy)(a); });
}

GPUSLICE_EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (desc == nullptr) return GPUSLICE_REAL(cuArray3DCreate_v2)(handle, desc);
  return gi::CreateArrayCharged(handle, *desc, 0, AllocationKind::kArray,
                                [&] { return GPUSLICE_REAL(cuArray3DCreate_v2)(handle, desc); },
                                [](CUarray a) { return GPUSLICE_REAL(cuArrayDestroy)(a); });
}

GPUSLICE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int levels) {
  if (desc == nullptr || levels == 0) return GPUSLICE_REAL(cuMipmappedArrayCreate)(handle, desc, levels);
  return gi::CreateArrayCharged(handle, *desc, levels, AllocationKind::kMipmappedArray,
                                [&] { return GPUSLICE_REAL(cuMipmappedArrayCreate)(handle, desc, levels); },
                                [](CUmipmappedArray m) { return GPUSLICE_REAL(cuMipmappedArrayDestroy)(m); });
}

GPUSLICE_EXPORT CUresult cuArrayDestroy(CUarray handle) {
  return gi::DestroyCharged(handle, AllocationKind::kArray,
                            [](CUarray h) { return GPUSLICE_REAL(cuArrayDestroy)(h); });
}

GPUSLICE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle) {
  return gi::DestroyCharged(handle, AllocationKind::kMipmappedArray,
                            [](CUmipmappedArray h) { return GPUSLICE_REAL(cuMipmappedArrayDestroy)(h); });
}

// --- The device-side malloc heap --------------------------------------------
// CU_LIMIT_MALLOC_HEAP_SIZE is device memory the driver sets aside for the
// context (8 MiB by default, part of the context's own, uncharged memory).
// Growing it is charged like an allocation, before the driver is asked;
// shrinking gives back what was charged; the context's teardown gives back
// the rest (charge.h). The other limits' memory (thread stacks, the printf
// FIFO) is sized by the driver at launch, out of sight: docs/design.md.

GPUSLICE_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  size_t before = 0;
  if (rt == nullptr || limit != CU_LIMIT_MALLOC_HEAP_SIZE ||
      GPUSLICE_REAL(cuCtxGetLimit)(&before, limit) != CUDA_SUCCESS) {
    return GPUSLICE_REAL(cuCtxSetLimit)(limit, value);
  }
  CUcontext ctx = nullptr;
  GPUSLICE_REAL(cuCtxGetCurrent)(&ctx);
  const int slot = rt->CurrentMemorySlot();
  const uint64_t growth = value > before ? value - before : 0;
  if (growth > 0 && slot != VgpuRuntime::kUncapped && !gi::ChargeOrRefuse(*rt, slot, growth)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = GPUSLICE_REAL(cuCtxSetLimit)(limit, value);
  if (slot < 0) return r;  // nothing charged: a device we cannot tell, or one outside the vGPU
  const uint64_t key = reinterpret_cast<uint64_t>(ctx);
  AllocationRecord heap{0, static_cast<uint32_t>(slot), 0, key};
  gi::Forget(*rt, key, AllocationKind::kMallocHeap, &heap);
  if (r != CUDA_SUCCESS) {
    rt->ledger().Uncharge(slot, growth);
  } else if (value < before) {
    const uint64_t back = before - value < heap.bytes ? before - value : heap.bytes;
    rt->ledger().Uncharge(heap.device, back);
    heap.bytes -= back;
  } else {
    heap.bytes += growth;
  }
  if (heap.bytes > 0) gi::Restore(*rt, key, AllocationKind::kMallocHeap, heap);
  return r;
}

// --- Context teardown: legacy entry points ----------------------------------
// The current ones (cuCtxDestroy_v2, cuDevicePrimaryCtxRelease_v2/Reset_v2)
// are hooked in hooks_launch.cc. The driver still hands these to callers that
// ask for an old CUDA version, and they free the context's memory alike.

GPUSLICE_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  gi::OnDeviceGone(dev);
  gi::pacer::ForgetDevice(dev);
  return gi::ReleasePrimaryContext(dev, GPUSLICE_REAL(cuDevicePrimaryCtxRelease));
}

GPUSLICE_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  gi::OnDeviceGone(dev);
  gi::pacer::ForgetDevice(dev);
  return gi::ResetPrimaryContext(dev, GPUSLICE_REAL(cuDevicePrimaryCtxReset));
}

GPUSLICE_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  gi::OnContextGone(ctx);
  gi::pacer::ForgetContext(ctx);
  return gi::DestroyContext(ctx, GPUSLICE_REAL(cuCtxDestroy));
}
