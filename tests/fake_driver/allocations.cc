#include "allocations.h"

#include <map>

#include "physical.h"

namespace fake_cuda {
namespace {

struct Registry {
  std::map<CUdeviceptr, Allocation> by_base;
  uint64_t next_id = 1;
};

Registry& GetRegistry(const Locked&) {
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

void AddAllocation(const Locked& locked, Allocation allocation) {
  Registry& r = GetRegistry(locked);
  allocation.id = r.next_id++;
  if (allocation.range_size == 0) {
    allocation.range_base = allocation.base;
    allocation.range_size = allocation.size;
  }
  r.by_base[allocation.base] = allocation;
}

const Allocation* FindAllocation(const Locked& locked, CUdeviceptr ptr) {
  Registry& r = GetRegistry(locked);
  auto it = r.by_base.upper_bound(ptr);
  if (it == r.by_base.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  // A zero-sized range still owns its base address.
  return ptr - a.base < (a.size == 0 ? 1 : a.size) ? &a : nullptr;
}

const Allocation* FindAllocationAt(const Locked& locked, CUdeviceptr base) {
  Registry& r = GetRegistry(locked);
  auto it = r.by_base.find(base);
  return it == r.by_base.end() ? nullptr : &it->second;
}

void RemoveAllocation(const Locked& locked, CUdeviceptr base) {
  GetRegistry(locked).by_base.erase(base);
}

void FreeContextAllocations(const Locked& locked, CUcontext ctx) {
  auto& by_base = GetRegistry(locked).by_base;
  for (auto it = by_base.begin(); it != by_base.end();) {
    const Allocation& a = it->second;
    const bool owned = a.kind == AllocationKind::kDevice || a.kind == AllocationKind::kManaged;
    if (!owned || a.context != ctx) {
      ++it;
      continue;
    }
    ReturnPhysical(locked, a.device, a.size);
    it = by_base.erase(it);
  }
}

}  // namespace fake_cuda
