#include "interposer/charge.h"

#include <atomic>

#include "interposer/driver_table.h"
#include "interposer/pool_charge.h"
#include "port/log.h"

namespace gpuslice::interposer {

bool ChargeOrRefuse(VgpuRuntime& runtime, int slot, uint64_t bytes) {
  if (slot < 0) return false;  // VgpuRuntime::kOutside: a device the vGPU does not include
  core::MemoryLedger& ledger = runtime.ledger();
  if (__builtin_expect(ledger.TryCharge(static_cast<uint32_t>(slot), bytes), 1)) return true;
  // Slow path: the vGPU looks full. Memory of processes that died, and pool
  // reservations the driver has since released, may be all that stands in
  // the way.
  runtime.ReapDeadProcesses(/*force=*/true);
  if (!ledger.attached()) runtime.RetryJoin();  // no slot yet (the ledger was full)
  SettleAllPools(runtime);
  if (ledger.TryCharge(static_cast<uint32_t>(slot), bytes)) return true;
  ledger.CountDenial();
  if (port::LogEnabled(port::LogLevel::kInfo)) {
    port::Log(port::LogLevel::kInfo, "refused %llu bytes: vGPU '%s' uses %llu of %llu on device slot %d",
              static_cast<unsigned long long>(bytes), runtime.limits().name,
              static_cast<unsigned long long>(ledger.UsedBytes(static_cast<uint32_t>(slot))),
              static_cast<unsigned long long>(ledger.LimitBytes(static_cast<uint32_t>(slot))), slot);
  }
  return false;
}

bool SettleCharge(VgpuRuntime& runtime, int slot, uint64_t charged, uint64_t actual) {
  if (actual > charged) return ChargeOrRefuse(runtime, slot, actual - charged);
  if (actual < charged) runtime.ledger().Uncharge(static_cast<uint32_t>(slot), charged - actual);
  return true;
}

namespace {

// The context-owned kinds of record; their aux word is the owning context.
constexpr AllocationKind kContextOwned[] = {AllocationKind::kDevice, AllocationKind::kManaged, AllocationKind::kArray,
                                            AllocationKind::kMipmappedArray, AllocationKind::kMallocHeap};

void UnchargeErased(const AllocationRecord& record, void* runtime) {
  static_cast<VgpuRuntime*>(runtime)->ledger().Uncharge(record.device, record.bytes);
}

// Called once `context` and its memory are gone.
void UnchargeContext(VgpuRuntime& runtime, CUcontext context) {
  for (AllocationKind kind : kContextOwned) {
    runtime.allocations().EraseAll(kind, reinterpret_cast<uint64_t>(context), &UnchargeErased, &runtime);
  }
  SettleAllPools(runtime);  // whatever the driver did to pools meanwhile
}

// `device`'s primary context if it is active, or nullptr; its reference
// count is left as it was.
CUcontext ActivePrimaryContext(CUdevice device) {
  unsigned int flags = 0;
  int active = 0;
  if (GPUSLICE_REAL(cuDevicePrimaryCtxGetState)(device, &flags, &active) != CUDA_SUCCESS || !active) return nullptr;
  CUcontext context = nullptr;
  if (GPUSLICE_REAL(cuDevicePrimaryCtxRetain)(&context, device) != CUDA_SUCCESS) return nullptr;
  GPUSLICE_REAL(cuDevicePrimaryCtxRelease_v2)(device);
  return context;
}

bool PrimaryContextActive(CUdevice device) {
  unsigned int flags = 0;
  int active = 0;
  return GPUSLICE_REAL(cuDevicePrimaryCtxGetState)(device, &flags, &active) == CUDA_SUCCESS && active;
}

}  // namespace

CUresult ReleasePrimaryContext(CUdevice device, PrimaryContextCall real_release) {
  VgpuRuntime* runtime = VgpuRuntime::Get();
  const CUcontext context = runtime != nullptr ? ActivePrimaryContext(device) : nullptr;
  const CUresult r = real_release(device);
  // Only the last reference's release resets the context.
  if (r == CUDA_SUCCESS && context != nullptr && !PrimaryContextActive(device)) UnchargeContext(*runtime, context);
  return r;
}

CUresult ResetPrimaryContext(CUdevice device, PrimaryContextCall real_reset) {
  VgpuRuntime* runtime = VgpuRuntime::Get();
  const CUcontext context = runtime != nullptr ? ActivePrimaryContext(device) : nullptr;
  const CUresult r = real_reset(device);
  if (r == CUDA_SUCCESS && context != nullptr) UnchargeContext(*runtime, context);
  return r;
}

CUresult DestroyContext(CUcontext context, ContextCall real_destroy) {
  const CUresult r = real_destroy(context);
  VgpuRuntime* runtime = VgpuRuntime::Get();
  if (r == CUDA_SUCCESS && runtime != nullptr && context != nullptr) UnchargeContext(*runtime, context);
  return r;
}

}  // namespace gpuslice::interposer
