// hooks_info.cc — what the application is told about the GPU's memory.
//
// Inside a vGPU the GPU's size is the vGPU's limit, and its free memory is
// the limit less what the whole vGPU (all its processes) has charged, never
// more than the device really has free. Frameworks size their caches from
// these numbers, so they must agree with what allocation will allow.
#include <cuda.h>

#include <algorithm>

#include "interposer/charge.h"
#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/pool_charge.h"
#include "interposer/vgpu_runtime.h"

using gpuslice::interposer::VgpuRuntime;
namespace gi = gpuslice::interposer;

GPUSLICE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  const CUresult r = GPUSLICE_REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr) return r;
  const int slot = rt->CurrentDeviceSlot();
  if (slot == VgpuRuntime::kUncapped) return r;
  const uint64_t limit = rt->ledger().LimitBytes(slot);
  if (limit == gpuslice::core::kUnlimited) return r;
  // An accurate answer is worth a slow path here: callers ask rarely, and
  // usually right before deciding how much to allocate.
  rt->ReapDeadProcesses(/*force=*/false);
  gi::SettleAllPools(*rt);
  const uint64_t used = rt->ledger().UsedBytes(slot);
  const uint64_t total = std::min<uint64_t>(limit, *total_bytes);
  const uint64_t room = used >= total ? 0 : total - used;
  *total_bytes = total;
  *free_bytes = std::min<uint64_t>(room, *free_bytes);
  return r;
}

GPUSLICE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  const CUresult r = GPUSLICE_REAL(cuDeviceTotalMem_v2)(bytes, dev);
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (r != CUDA_SUCCESS || rt == nullptr) return r;
  const int slot = rt->DeviceSlot(dev);
  if (slot == VgpuRuntime::kUncapped) return r;
  *bytes = std::min<uint64_t>(*bytes, rt->ledger().LimitBytes(slot));
  return r;
}
