// hooks_pools.cc — stream-ordered allocation (cuMemAllocAsync and pools).
//
// Pools are charged by reservation (pool_accounts.h). An allocation that will
// make its pool grow charges the growth before the driver is called, rounded
// up to the 32 MiB a pool grows by (measured: docs/benchmarks.md), then
// settles to the reservation the driver reports. If the pool grew by more than that and the rest does not
// fit, the allocation is undone (freed, its stream synchronised, the pool
// trimmed) and refused.
//
// The memory is charged to the device it lands on: the stream's device for
// cuMemAllocAsync, the pool's for cuMemAllocFromPoolAsync, neither of which
// need be the current context's.
//
// Allocations recorded into a graph during stream capture make no memory
// until the graph is launched (hooks_graphs.cc); they pass through.
#include <cuda.h>

#include "interposer/charge.h"

// cuda.h declares the per-thread-default-stream variants only when
// CUDA_API_PER_THREAD_DEFAULT_STREAM renames the plain ones; they have the
// plain ones' types.
extern "C" {
decltype(cuMemAllocAsync) cuMemAllocAsync_ptsz;
decltype(cuMemFreeAsync) cuMemFreeAsync_ptsz;
decltype(cuMemAllocFromPoolAsync) cuMemAllocFromPoolAsync_ptsz;
}
#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/pool_charge.h"
#include "interposer/vgpu_runtime.h"

namespace gpuslice::interposer {
namespace {

// On an H200 with driver 580, a pool's first 1 MiB allocation reserved
// 32 MiB (bench/gpu/real_driver_checks.sh, async_pool_reservation).
constexpr uint64_t kPoolGrowthGranule = 32ull << 20;

template <typename RealAlloc, typename RealFree>
CUresult AllocFromPool(VgpuRuntime& rt, PoolAccount& account, CUdeviceptr* dptr, size_t bytesize,
                       CUstream stream, RealAlloc alloc, RealFree free_async) {
  bool ok_used = false, ok_reserved = false;
  const CUmemoryPool pool = reinterpret_cast<CUmemoryPool>(account.pool.load());
  const uint64_t used = PoolAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok_used);
  const uint64_t reserved = PoolAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok_reserved);
  const int slot = account.slot.load();
  uint64_t precharge = 0;
  if (!ok_used || !ok_reserved || used + bytesize > reserved) {
    const uint64_t needed = ok_used && ok_reserved ? used + bytesize - reserved : bytesize;
    precharge = RoundUp(needed, kPoolGrowthGranule);
    if (!ChargeOrRefuse(rt, slot, precharge)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = alloc(dptr, bytesize, stream);
  if (r != CUDA_SUCCESS) {
    SettlePool(rt, account, precharge, /*may_reclaim=*/false);
    return r;
  }
  if (SettlePool(rt, account, precharge, /*may_reclaim=*/true)) return r;
  // The pool grew past what the vGPU has room for: undo, release, refuse.
  free_async(*dptr, stream);
  GPUSLICE_REAL(cuStreamSynchronize)(stream);
  GPUSLICE_REAL(cuMemPoolTrimTo)(pool, 0);
  SettlePool(rt, account, 0, /*may_reclaim=*/false);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

bool Capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return GPUSLICE_REAL(cuStreamIsCapturing)(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The device whose memory an allocation on `stream` takes: the stream's
// own, which need not be the current context's (device 1's stream used while
// device 0's context is current puts the memory on device 1).
bool StreamDevice(CUstream stream, CUdevice* dev) {
  if (GPUSLICE_REAL(cuStreamGetDevice)(stream, dev) == CUDA_SUCCESS) return true;  // drivers of CUDA 12.8+
  // Older drivers: the device of the stream's context, asked with it current.
  CUcontext ctx = nullptr, current = nullptr;
  if (GPUSLICE_REAL(cuStreamGetCtx)(stream, &ctx) != CUDA_SUCCESS || ctx == nullptr) return false;
  if (GPUSLICE_REAL(cuCtxGetCurrent)(&current) == CUDA_SUCCESS && current == ctx) {
    return GPUSLICE_REAL(cuCtxGetDevice)(dev) == CUDA_SUCCESS;
  }
  if (GPUSLICE_REAL(cuCtxPushCurrent_v2)(ctx) != CUDA_SUCCESS) return false;
  const bool ok = GPUSLICE_REAL(cuCtxGetDevice)(dev) == CUDA_SUCCESS;
  GPUSLICE_REAL(cuCtxPopCurrent_v2)(&current);
  return ok;
}

// The device of a pool we did not see created: a device's default or
// current pool is found by asking each device; any other pool is taken to
// be on the stream's device. A slow path: the answer is kept in the pool's
// account.
bool PoolDevice(CUmemoryPool pool, CUstream stream, CUdevice* dev) {
  int count = 0;
  if (GPUSLICE_REAL(cuDeviceGetCount)(&count) == CUDA_SUCCESS) {
    for (CUdevice d = 0; d < count; ++d) {
      CUmemoryPool found = nullptr;
      const bool is_default = GPUSLICE_REAL(cuDeviceGetDefaultMemPool)(&found, d) == CUDA_SUCCESS && found == pool;
      if (is_default || (GPUSLICE_REAL(cuDeviceGetMemPool)(&found, d) == CUDA_SUCCESS && found == pool)) {
        *dev = d;
        return true;
      }
    }
  }
  return StreamDevice(stream, dev);
}

template <typename RealAlloc, typename RealFree>
CUresult AllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream, RealAlloc alloc, RealFree free_async) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || bytesize == 0 || Capturing(stream)) return alloc(dptr, bytesize, stream);
  CUdevice dev = 0;
  if (!StreamDevice(stream, &dev)) return alloc(dptr, bytesize, stream);  // the driver refuses the stream too
  const int slot = rt->MemorySlot(dev);
  if (slot == VgpuRuntime::kOutside) return CUDA_ERROR_OUT_OF_MEMORY;
  CUmemoryPool pool = nullptr;
  if (slot == VgpuRuntime::kUncapped || GPUSLICE_REAL(cuDeviceGetMemPool)(&pool, dev) != CUDA_SUCCESS) {
    return alloc(dptr, bytesize, stream);
  }
  PoolAccount* account = rt->pools().FindOrAdd(reinterpret_cast<uint64_t>(pool), slot);
  if (account == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  return AllocFromPool(*rt, *account, dptr, bytesize, stream, alloc, free_async);
}

template <typename RealAlloc, typename RealFree>
CUresult AllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream,
                            RealAlloc alloc, RealFree free_async) {
  auto with_pool = [&](CUdeviceptr* p, size_t n, CUstream s) { return alloc(p, n, pool, s); };
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr || bytesize == 0 || Capturing(stream)) return with_pool(dptr, bytesize, stream);
  PoolAccount* account = rt->pools().Find(reinterpret_cast<uint64_t>(pool));
  if (account == nullptr) {
    // A pool made before we could see it, or a device's default pool.
    CUdevice dev = 0;
    if (!PoolDevice(pool, stream, &dev)) return with_pool(dptr, bytesize, stream);
    const int slot = rt->MemorySlot(dev);
    if (slot == VgpuRuntime::kOutside) return CUDA_ERROR_OUT_OF_MEMORY;
    if (slot == VgpuRuntime::kUncapped) return with_pool(dptr, bytesize, stream);
    account = rt->pools().FindOrAdd(reinterpret_cast<uint64_t>(pool), slot);
    if (account == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (account->slot.load() == VgpuRuntime::kUncapped) return with_pool(dptr, bytesize, stream);
  return AllocFromPool(*rt, *account, dptr, bytesize, stream, with_pool, free_async);
}

}  // namespace

}  // namespace gpuslice::interposer

using gpuslice::interposer::PoolAccount;
using gpuslice::interposer::VgpuRuntime;
namespace gi = gpuslice::interposer;

GPUSLICE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return gi::AllocAsync(dptr, bytesize, stream, GPUSLICE_REAL(cuMemAllocAsync), GPUSLICE_REAL(cuMemFreeAsync));
}

GPUSLICE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return gi::AllocAsync(dptr, bytesize, stream, GPUSLICE_REAL(cuMemAllocAsync_ptsz),
                        GPUSLICE_REAL(cuMemFreeAsync_ptsz));
}

GPUSLICE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream stream) {
  return gi::AllocFromPoolAsync(dptr, bytesize, pool, stream, GPUSLICE_REAL(cuMemAllocFromPoolAsync),
                                GPUSLICE_REAL(cuMemFreeAsync));
}

GPUSLICE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                      CUstream stream) {
  return gi::AllocFromPoolAsync(dptr, bytesize, pool, stream, GPUSLICE_REAL(cuMemAllocFromPoolAsync_ptsz),
                                GPUSLICE_REAL(cuMemFreeAsync_ptsz));
}

GPUSLICE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  // Host pools hold no device memory.
  const bool device_pool = rt != nullptr && props != nullptr && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  const int slot = device_pool ? rt->MemorySlot(props->location.id) : VgpuRuntime::kUncapped;
  if (slot == VgpuRuntime::kOutside) return CUDA_ERROR_OUT_OF_MEMORY;  // all it could hold is outside the vGPU
  const CUresult r = GPUSLICE_REAL(cuMemPoolCreate)(pool, props);
  if (r != CUDA_SUCCESS || slot == VgpuRuntime::kUncapped) return r;
  if (rt->pools().FindOrAdd(reinterpret_cast<uint64_t>(*pool), slot) == nullptr) {
    // Untracked pools would escape the limit: refuse the 257th.
    GPUSLICE_REAL(cuMemPoolDestroy)(*pool);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

// A pool shared with other processes: what they import from it outlives its
// trims and its destruction, so its charge is kept until this process exits
// (charge.h, "Memory exported to other processes").
GPUSLICE_EXPORT CUresult cuMemPoolExportToShareableHandle(void* shareable, CUmemoryPool pool,
                                                          CUmemAllocationHandleType type, unsigned long long flags) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt != nullptr) {
    if (PoolAccount* a = rt->pools().Find(reinterpret_cast<uint64_t>(pool))) a->exported.store(true);
  }
  return GPUSLICE_REAL(cuMemPoolExportToShareableHandle)(shareable, pool, type, flags);
}

GPUSLICE_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  const CUresult r = GPUSLICE_REAL(cuMemPoolDestroy)(pool);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr) return r;
  if (PoolAccount* a = rt->pools().Find(reinterpret_cast<uint64_t>(pool))) {
    if (a->slot.load() != VgpuRuntime::kUncapped) {
      if (a->exported.load()) {
        gi::SayKeptExported(*rt, a->charged.load());
      } else {
        rt->ledger().Uncharge(a->slot.load(), a->charged.load());
      }
    }
    rt->pools().Remove(a);
  }
  return r;
}

GPUSLICE_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t min_bytes_to_keep) {
  const CUresult r = GPUSLICE_REAL(cuMemPoolTrimTo)(pool, min_bytes_to_keep);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr) return r;
  if (PoolAccount* a = rt->pools().Find(reinterpret_cast<uint64_t>(pool))) {
    if (a->slot.load() != VgpuRuntime::kUncapped) gi::SettlePool(*rt, *a, 0, /*may_reclaim=*/false);
  }
  return r;
}
