// Virtual memory management: cuMemCreate / cuMemRelease (physical handles),
// cuMemAddressReserve / cuMemAddressFree (address ranges), cuMemMap /
// cuMemUnmap / cuMemSetAccess, handle queries, and sharing between handles
// (cuMemExportToShareableHandle / cuMemImportFromShareableHandle, POSIX file
// descriptors only).
//
// Physical memory is taken at cuMemCreate and given back only when the handle
// is both released and unmapped everywhere: cuMemRelease drops a reference,
// cuMemRetainAllocationHandle adds one, and each mapping keeps the memory
// alive on its own, as in the real driver. An import is a new handle to
// the same memory, and an exported descriptor keeps the memory too while it
// is open, as measured on an H200 (docs/benchmarks.md, "Exported device
// memory"): the memory is freed once no handle of its group has a reference
// or a mapping and no exported descriptor of it is open. The fake looks at
// the descriptors only when the group's last handle goes: one closed after
// that keeps the fake's memory taken for good. Granularity is 2 MiB for both
// minimum and recommended. Stricter than the real driver in one place:
// cuMemAddressFree of a range that still has mappings fails with
// CUDA_ERROR_INVALID_VALUE, so that tests catch leaked mappings.
#include <cuda.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iterator>
#include <map>
#include <vector>

#include "allocations.h"
#include "physical.h"
#include "state.h"

namespace fake_cuda {
namespace {

constexpr uint64_t kGranularity = uint64_t{2} << 20;

struct Handle {
  int device = 0;
  uint64_t size = 0;
  CUmemAllocationProp prop{};
  int references = 1;  // cuMemCreate's own, plus each retain
  int mappings = 0;
  CUmemGenericAllocationHandle origin = 0;  // the handle cuMemCreate made (itself, or an import's source)
};

// The memory one cuMemCreate made, shared by its handle and every import.
struct Group {
  Handle made;  // what cuMemCreate made
  int handles = 1;
  std::vector<std::pair<int, ino_t>> exports;  // descriptors handed out, and what each was
};

struct Mapping {
  uint64_t size;
  CUmemGenericAllocationHandle handle;
};

struct Vmm {
  std::map<CUmemGenericAllocationHandle, Handle> handles;
  std::map<CUmemGenericAllocationHandle, Group> groups;  // by origin
  CUmemGenericAllocationHandle next_handle = 0x1000;
  std::map<CUdeviceptr, uint64_t> reservations;  // base -> size
  std::map<CUdeviceptr, Mapping> mappings;       // base -> mapping
};

Vmm& GetVmm(const Locked&) {
  static auto* vmm = new Vmm;
  return *vmm;
}

CUresult CheckProp(const CUmemAllocationProp* prop) {
  if (prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return ValidDevice(prop->location.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

bool DescriptorOpen(const std::pair<int, ino_t>& exported) {
  struct stat st {};
  return fstat(exported.first, &st) == 0 && st.st_ino == exported.second;
}

// Frees the group's memory once nothing holds it.
void MaybeFreeGroup(const Locked& locked, CUmemGenericAllocationHandle origin) {
  Vmm& vmm = GetVmm(locked);
  auto g = vmm.groups.find(origin);
  if (g == vmm.groups.end() || g->second.handles > 0) return;
  for (const auto& exported : g->second.exports) {
    if (DescriptorOpen(exported)) return;
  }
  ReturnPhysical(locked, g->second.made.device, g->second.made.size);
  vmm.groups.erase(g);
}

void MaybeFreeHandle(const Locked& locked, CUmemGenericAllocationHandle id) {
  Vmm& vmm = GetVmm(locked);
  auto it = vmm.handles.find(id);
  if (it == vmm.handles.end() || it->second.references > 0 || it->second.mappings > 0) return;
  const CUmemGenericAllocationHandle origin = it->second.origin;
  vmm.handles.erase(it);
  --vmm.groups[origin].handles;
  MaybeFreeGroup(locked, origin);
}

// The reservation that wholly contains [ptr, ptr + size), if any.
const std::pair<const CUdeviceptr, uint64_t>* FindReservation(const Vmm& vmm, CUdeviceptr ptr,
                                                              uint64_t size) {
  auto it = vmm.reservations.upper_bound(ptr);
  if (it == vmm.reservations.begin()) return nullptr;
  --it;
  const uint64_t offset = ptr - it->first;
  if (offset >= it->second || size > it->second - offset) return nullptr;
  return &*it;
}

// The mapping containing `ptr`, or end().
std::map<CUdeviceptr, Mapping>::const_iterator FindMapping(const Vmm& vmm, CUdeviceptr ptr) {
  auto it = vmm.mappings.upper_bound(ptr);
  if (it == vmm.mappings.begin()) return vmm.mappings.end();
  --it;
  return ptr - it->first < it->second.size ? it : vmm.mappings.end();
}

bool Overlaps(const Vmm& vmm, CUdeviceptr ptr, uint64_t size) {
  auto it = vmm.mappings.lower_bound(ptr);
  if (it != vmm.mappings.end() && it->first < ptr + size) return true;
  return FindMapping(vmm, ptr) != vmm.mappings.end();
}

// Whether every byte of [ptr, ptr + size) is mapped.
bool FullyMapped(const Vmm& vmm, CUdeviceptr ptr, uint64_t size) {
  CUdeviceptr cursor = ptr;
  while (cursor < ptr + size) {
    auto it = FindMapping(vmm, cursor);
    if (it == vmm.mappings.end()) return false;
    cursor = it->first + it->second.size;
  }
  return true;
}

}  // namespace
}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags /*option*/) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = fake_cuda::CheckProp(prop); r != CUDA_SUCCESS) return r;
  *granularity = fake_cuda::kGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || flags != 0 || size == 0 || size % fake_cuda::kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = fake_cuda::CheckProp(prop); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  if (!fake_cuda::TakePhysical(locked, prop->location.id, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  *handle = vmm.next_handle++;
  fake_cuda::Handle& h = vmm.handles[*handle];
  h.device = prop->location.id;
  h.size = size;
  h.prop = *prop;
  h.origin = *handle;
  vmm.groups[*handle].made = h;
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  fake_cuda::Locked locked;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  auto it = vmm.handles.find(handle);
  if (it == vmm.handles.end() || it->second.references == 0) return CUDA_ERROR_INVALID_VALUE;
  // A descriptor of a file of its own, so that an import can tell which
  // memory it names wherever the descriptor was passed or duplicated.
  const int fd = memfd_create("fake-cuda-export", MFD_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return CUDA_ERROR_OPERATING_SYSTEM;
  vmm.groups[it->second.origin].exports.push_back({fd, st.st_ino});
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  struct stat st {};
  if (fstat(static_cast<int>(reinterpret_cast<intptr_t>(os_handle)), &st) != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  for (auto& [origin, group] : vmm.groups) {
    for (const auto& exported : group.exports) {
      if (exported.second != st.st_ino) continue;
      fake_cuda::Handle imported = group.made;
      imported.references = 1;
      imported.mappings = 0;
      *handle = vmm.next_handle++;
      vmm.handles[*handle] = imported;
      ++group.handles;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  auto& handles = fake_cuda::GetVmm(locked).handles;
  auto it = handles.find(handle);
  if (it == handles.end() || it->second.references == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.references;
  fake_cuda::MaybeFreeHandle(locked, handle);
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  auto it = fake_cuda::FindMapping(vmm, reinterpret_cast<CUdeviceptr>(addr));
  if (it == vmm.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  ++vmm.handles[it->second.handle].references;
  *handle = it->second.handle;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                CUmemGenericAllocationHandle handle) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  auto& handles = fake_cuda::GetVmm(locked).handles;
  auto it = handles.find(handle);
  if (it == handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.prop;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr /*addr*/,
                             unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (ptr == nullptr || size == 0 || flags != 0 || (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The address hint is ignored, which the real driver is allowed to do too.
  fake_cuda::Locked locked;
  const uint64_t align = alignment > fake_cuda::kGranularity ? alignment : fake_cuda::kGranularity;
  const uint64_t reserved = fake_cuda::RoundUp(size, fake_cuda::kGranularity);
  *ptr = fake_cuda::NewUnifiedAddress(locked, reserved, align);
  fake_cuda::GetVmm(locked).reservations[*ptr] = size;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  auto it = vmm.reservations.find(ptr);
  if (it == vmm.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  if (fake_cuda::Overlaps(vmm, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  vmm.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (flags != 0 || size == 0 || size % fake_cuda::kGranularity != 0 ||
      offset % fake_cuda::kGranularity != 0 || ptr % fake_cuda::kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  fake_cuda::Locked locked;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  auto h = vmm.handles.find(handle);
  // A released handle cannot gain mappings, even while old ones keep it alive.
  if (h == vmm.handles.end() || h->second.references == 0) return CUDA_ERROR_INVALID_VALUE;
  if (offset > h->second.size || size > h->second.size - offset) return CUDA_ERROR_INVALID_VALUE;
  const auto* reservation = fake_cuda::FindReservation(vmm, ptr, size);
  if (reservation == nullptr || fake_cuda::Overlaps(vmm, ptr, size))
    return CUDA_ERROR_INVALID_VALUE;
  vmm.mappings[ptr] = {size, handle};
  ++h->second.mappings;
  fake_cuda::Allocation allocation{fake_cuda::AllocationKind::kVmmMapping, h->second.device, ptr,
                                   size, nullptr};
  allocation.range_base = reservation->first;
  allocation.range_size = reservation->second;
  fake_cuda::AddAllocation(locked, allocation);
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  fake_cuda::Vmm& vmm = fake_cuda::GetVmm(locked);
  // Every mapping touched must lie wholly inside the range.
  auto first = vmm.mappings.lower_bound(ptr);
  auto last = vmm.mappings.lower_bound(ptr + size);
  if (first == last || fake_cuda::FindMapping(vmm, ptr) != first) return CUDA_ERROR_INVALID_VALUE;
  for (auto it = first; it != last; ++it) {
    if (it->first + it->second.size > ptr + size) return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto it = first; it != last;) {
    const CUmemGenericAllocationHandle handle = it->second.handle;
    fake_cuda::RemoveAllocation(locked, it->first);
    it = vmm.mappings.erase(it);
    --vmm.handles[handle].mappings;
    fake_cuda::MaybeFreeHandle(locked, handle);
  }
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_cuda::ValidDevice(desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
  }
  fake_cuda::Locked locked;
  if (!fake_cuda::FullyMapped(fake_cuda::GetVmm(locked), ptr, size))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

}  // extern "C"
