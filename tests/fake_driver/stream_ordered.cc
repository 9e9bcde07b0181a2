// Stream-ordered allocation entry points: cuMemAllocAsync,
// cuMemAllocFromPoolAsync, cuMemFreeAsync and their _ptsz variants. They
// join streams (which device, capturing or not), pools (pools.h) and, on a
// capturing stream, graphs: there an allocation becomes a memory node and
// takes no memory until the graph is launched.
#include <cuda.h>

#include "allocations.h"
#include "graphs.h"
#include "pools.h"
#include "state.h"
#include "streams.h"

namespace fake_cuda {
namespace {

// `pool` is nullptr for cuMemAllocAsync: the stream's device's current pool.
CUresult AllocAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Locked locked;
  int device = 0;
  if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
  if (pool == nullptr) {
    pool = CurrentPool(locked, device);
  } else if (CUresult r = PoolDevice(locked, pool, &device); r != CUDA_SUCCESS) {
    return r;
  }
  if (CUgraph graph = CapturingGraph(locked, stream)) {
    return AddCapturedAlloc(locked, graph, device, bytes, dptr);
  }
  return PoolAllocate(locked, pool, bytes, dptr);
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream stream) {
  Locked locked;
  int device = 0;
  if (CUresult r = StreamDevice(locked, stream, &device); r != CUDA_SUCCESS) return r;
  if (CUgraph graph = CapturingGraph(locked, stream)) {
    return AddCapturedFree(locked, graph, dptr);
  }
  const Allocation* allocation = FindAllocationAt(locked, dptr);
  if (allocation == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (allocation->kind) {
    case AllocationKind::kPool: FreeToPool(locked, *allocation); return CUDA_SUCCESS;
    case AllocationKind::kGraph: FreeGraphAllocation(locked, *allocation); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace
}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AllocAsync(dptr, bytes, nullptr, stream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::AllocAsync(dptr, bytes, nullptr, stream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::AllocAsync(dptr, bytes, pool, stream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::AllocAsync(dptr, bytes, pool, stream);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::FreeAsync(dptr, stream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  return fake_cuda::FreeAsync(dptr, stream);
}

}  // extern "C"
