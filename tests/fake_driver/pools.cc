// Stream-ordered pool model (pools.h) and the cuMemPool* / cuDevice*MemPool
// entry points. cuMemAllocAsync and friends are in stream_ordered.cc.
#include "pools.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>

#include "fake_gpus.h"
#include "physical.h"

struct CUmemPoolHandle_st {
  int device = 0;
  bool is_default = false;
  // Destroyed while allocations were outstanding: invisible to the API, and
  // reclaimed when its last allocation is freed (the documented behaviour).
  bool destroyed = false;
  uint64_t max_size = 0;  // 0: unlimited
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t reserved_high = 0;
  uint64_t used_high = 0;
  uint64_t release_threshold = 0;
  uint64_t outstanding = 0;  // live allocations
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
};

namespace fake_cuda {
namespace {

struct Pools {
  std::map<CUmemoryPool, std::unique_ptr<CUmemPoolHandle_st>> all;
  std::array<CUmemoryPool, fake_gpus::kMaxGpus> default_pool{};
  std::array<CUmemoryPool, fake_gpus::kMaxGpus> current_pool{};
};

Pools& GetPools(const Locked&) {
  static auto* pools = new Pools;
  return *pools;
}

uint64_t Chunk() { return fake_gpus::GetFakeGpuConfig().pool_chunk_bytes; }

CUmemoryPool NewPool(const Locked& locked, int device, bool is_default, uint64_t max_size) {
  auto pool = std::make_unique<CUmemPoolHandle_st>();
  pool->device = device;
  pool->is_default = is_default;
  pool->max_size = max_size;
  CUmemoryPool handle = pool.get();
  GetPools(locked).all.emplace(handle, std::move(pool));
  return handle;
}

CUmemoryPool DefaultPool(const Locked& locked, int device) {
  Pools& pools = GetPools(locked);
  if (pools.default_pool[device] == nullptr) {
    pools.default_pool[device] = NewPool(locked, device, true, 0);
  }
  return pools.default_pool[device];
}

// A pool the API may name: live and not destroyed.
CUmemPoolHandle_st* FindPool(const Locked& locked, CUmemoryPool handle) {
  auto& all = GetPools(locked).all;
  auto it = all.find(handle);
  if (it == all.end() || it->second->destroyed) return nullptr;
  return it->second.get();
}

// Releases reserved memory down to max(round_up(used, chunk), keep).
void TrimPool(const Locked& locked, CUmemPoolHandle_st& pool, uint64_t keep) {
  const uint64_t target = std::max(RoundUp(pool.used, Chunk()), keep);
  if (pool.reserved <= target) return;
  ReturnPhysical(locked, pool.device, pool.reserved - target);
  pool.reserved = target;
}

void Reclaim(const Locked& locked, CUmemoryPool handle) {
  CUmemPoolHandle_st& pool = *handle;
  ReturnPhysical(locked, pool.device, pool.reserved);
  GetPools(locked).all.erase(handle);
}

}  // namespace

CUmemoryPool CurrentPool(const Locked& locked, int device) {
  CUmemoryPool current = GetPools(locked).current_pool[device];
  return current != nullptr ? current : DefaultPool(locked, device);
}

CUresult PoolDevice(const Locked& locked, CUmemoryPool handle, int* device) {
  const CUmemPoolHandle_st* pool = FindPool(locked, handle);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = pool->device;
  return CUDA_SUCCESS;
}

CUresult PoolAllocate(const Locked& locked, CUmemoryPool handle, uint64_t bytes,
                      CUdeviceptr* dptr) {
  CUmemPoolHandle_st* pool = FindPool(locked, handle);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t size = RoundUp(bytes, 512);
  const uint64_t available = pool->reserved - pool->used;
  if (size > available) {
    const uint64_t grow = RoundUp(size - available, Chunk());
    if (pool->max_size != 0 && grow > pool->max_size - pool->reserved) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!TakePhysical(locked, pool->device, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
    pool->reserved += grow;
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  }
  pool->used += size;
  pool->used_high = std::max(pool->used_high, pool->used);
  ++pool->outstanding;
  *dptr = NewDeviceAddress(locked, pool->device, size, 512);
  AddAllocation(locked, {AllocationKind::kPool, pool->device, *dptr, size, handle});
  return CUDA_SUCCESS;
}

void FreeToPool(const Locked& locked, const Allocation& allocation) {
  auto handle = static_cast<CUmemoryPool>(allocation.owner);
  CUmemPoolHandle_st& pool = *handle;
  pool.used -= allocation.size;
  --pool.outstanding;
  RemoveAllocation(locked, allocation.base);  // `allocation` dangles from here
  if (pool.destroyed && pool.outstanding == 0) Reclaim(locked, handle);
}

void ReleasePoolsAtSync(const Locked& locked) {
  for (auto& [handle, pool] : GetPools(locked).all) {
    TrimPool(locked, *pool, pool->release_threshold);
  }
}

}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  *pool = fake_cuda::DefaultPool(locked, dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_cuda::ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  *pool = fake_cuda::CurrentPool(locked, dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (!fake_cuda::ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  int pool_device = 0;
  if (fake_cuda::PoolDevice(locked, pool, &pool_device) != CUDA_SUCCESS || pool_device != dev) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  fake_cuda::GetPools(locked).current_pool[dev] = pool;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pool == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!fake_cuda::ValidDevice(props->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda::Locked locked;
  *pool = fake_cuda::NewPool(locked, props->location.id, false, props->maxSize);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool handle) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  CUmemPoolHandle_st* pool = fake_cuda::FindPool(locked, handle);
  if (pool == nullptr || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  auto& current = fake_cuda::GetPools(locked).current_pool[pool->device];
  if (current == handle) current = nullptr;  // the default pool takes over
  if (pool->outstanding == 0) {
    fake_cuda::Reclaim(locked, handle);
  } else {
    fake_cuda::TrimPool(locked, *pool, 0);
    pool->destroyed = true;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool handle, size_t min_bytes_to_keep) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  CUmemPoolHandle_st* pool = fake_cuda::FindPool(locked, handle);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::TrimPool(locked, *pool, min_bytes_to_keep);
  return CUDA_SUCCESS;
}

// A descriptor naming the pool. Unlike the real driver, the fake does not
// keep a destroyed or trimmed pool's memory for its importers (it has none).
CUresult cuMemPoolExportToShareableHandle(void* shareable, CUmemoryPool handle, CUmemAllocationHandleType type,
                                          unsigned long long flags) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  fake_cuda::Locked locked;
  if (fake_cuda::FindPool(locked, handle) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int fd = memfd_create("fake-cuda-pool-export", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool handle, CUmemPool_attribute attr, void* value) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  CUmemPoolHandle_st* pool = fake_cuda::FindPool(locked, handle);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Read only as many bytes as the attribute's type: int or cuuint64_t.
  const auto int_value = [value] { return *static_cast<const int*>(value); };
  const auto u64_value = [value] { return *static_cast<const cuuint64_t*>(value); };
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      pool->reuse_follow_event_dependencies = int_value();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      pool->reuse_allow_opportunistic = int_value();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      pool->reuse_allow_internal_dependencies = int_value();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      pool->release_threshold = u64_value();
      return CUDA_SUCCESS;
    // The high-water marks can only be reset (to the current value), by
    // writing 0, as documented.
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (u64_value() != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->reserved_high = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (u64_value() != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->used_high = pool->used;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuMemPoolGetAttribute(CUmemoryPool handle, CUmemPool_attribute attr, void* value) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUmemPoolHandle_st* pool = fake_cuda::FindPool(locked, handle);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* as_int = static_cast<int*>(value);
  auto* as_u64 = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      *as_int = pool->reuse_follow_event_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      *as_int = pool->reuse_allow_opportunistic;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *as_int = pool->reuse_allow_internal_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *as_u64 = pool->release_threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *as_u64 = pool->reserved; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *as_u64 = pool->reserved_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *as_u64 = pool->used; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *as_u64 = pool->used_high; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // extern "C"
