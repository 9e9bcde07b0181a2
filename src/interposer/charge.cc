#include "interposer/charge.h"

#include <time.h>

#include <atomic>

#include "interposer/driver_table.h"
#include "interposer/pool_charge.h"
#include "port/clock.h"
#include "port/log.h"

namespace gpuslice::interposer {

namespace {
constexpr long kRoomRetryNs = 10'000'000;  // between retries of an allocation the GPU refused
std::atomic<bool> g_room_wait_logged{false};
}  // namespace

GpuRoomWait::GpuRoomWait(VgpuRuntime& runtime, int slot, uint64_t bytes) : runtime_(runtime), bytes_(bytes) {
  const uint32_t wait_ms = core::LoadRelaxed(runtime.limits().memory_wait_ms);
  if (slot < 0 || wait_ms == 0 || !runtime.ledger().attached()) return;
  start_ns_ = port::MonotonicNanos();
  deadline_ns_ = start_ns_ + static_cast<uint64_t>(wait_ms) * 1'000'000;
  runtime.ledger().PostMemoryWait(static_cast<uint32_t>(slot), bytes);
  if (!g_room_wait_logged.exchange(true)) {
    port::Log(port::LogLevel::kWarn,
              "the GPU is full (an allocation of %llu bytes within this vGPU's limit was "
              "refused); waiting up to %u ms for the node to suspend best-effort vGPUs",
              static_cast<unsigned long long>(bytes), wait_ms);
  }
}

GpuRoomWait::~GpuRoomWait() {
  if (deadline_ns_ == 0) return;
  const bool refused = runtime_.ledger().MemoryWaitRefused();
  runtime_.ledger().ClearMemoryWait();
  const uint64_t waited_ms = (port::MonotonicNanos() - start_ns_) / 1'000'000;
  if (succeeded_) {
    port::Log(port::LogLevel::kInfo, "an allocation of %llu bytes succeeded after waiting %llu ms for GPU memory",
              static_cast<unsigned long long>(bytes_), static_cast<unsigned long long>(waited_ms));
  } else {
    port::Log(port::LogLevel::kWarn, "an allocation of %llu bytes failed: the GPU stayed full for %llu ms (%s)",
              static_cast<unsigned long long>(bytes_), static_cast<unsigned long long>(waited_ms),
              refused ? "the node has nothing of a lower level to suspend" : "the wait's bound passed");
  }
}

bool GpuRoomWait::Next() {
  if (deadline_ns_ == 0 || runtime_.ledger().MemoryWaitRefused()) return false;
  if (port::MonotonicNanos() >= deadline_ns_) return false;
  timespec step{0, kRoomRetryNs};
  nanosleep(&step, nullptr);
  return true;
}

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
AllocationKind MarkerOf(AllocationKind kind) {
  return kind == AllocationKind::kVmmHandle ? AllocationKind::kExportedHandle : AllocationKind::kExportedPointer;
}
}  // namespace

bool MarkExported(VgpuRuntime& runtime, AllocationKind kind, uint64_t key, uint64_t ipc_hash) {
  AllocationRecord marker;
  if (runtime.allocations().Find(key, MarkerOf(kind), &marker)) {
    if (marker.aux == 0 || marker.aux == ipc_hash) return true;  // kept already, or this handle again
    runtime.allocations().Erase(key, MarkerOf(kind), &marker);   // kept from now on
    ipc_hash = 0;
  }
  if (runtime.allocations().Insert(key, MarkerOf(kind), AllocationRecord{0, 0, 0, ipc_hash})) return true;
  port::Log(port::LogLevel::kWarn,
            "refused to export device memory: this process's allocation table is full, so gpuslice could not "
            "keep the memory charged once it is freed; free some first");
  return false;
}

void GiveBack(VgpuRuntime& runtime, AllocationKind kind, uint64_t key, const AllocationRecord& record) {
  AllocationRecord marker;
  // A legacy handle that no process of the vGPU has open holds nothing.
  if (!runtime.allocations().Erase(key, MarkerOf(kind), &marker) ||
      (marker.aux != 0 && !runtime.ledger().IpcHandleOpen(marker.aux))) {
    runtime.ledger().Uncharge(record.device, record.bytes);
    return;
  }
  SayKeptExported(runtime, record.bytes);
}

void SayKeptExported(VgpuRuntime& runtime, uint64_t bytes) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed)) {
    port::Log(port::LogLevel::kWarn,
              "freed %llu bytes of device memory that this process had exported to other processes; another "
              "process's import or the exported descriptor can keep it on the GPU, so it stays charged to vGPU "
              "'%s' until this process exits (said once)",
              static_cast<unsigned long long>(bytes), runtime.limits().name);
  }
}

namespace {

// The context-owned kinds of record; their aux word is the owning context.
constexpr AllocationKind kContextOwned[] = {AllocationKind::kDevice, AllocationKind::kManaged, AllocationKind::kArray,
                                            AllocationKind::kMipmappedArray, AllocationKind::kMallocHeap};

void UnchargeErased(uint64_t key, const AllocationRecord& record, void* runtime) {
  GiveBack(*static_cast<VgpuRuntime*>(runtime), static_cast<AllocationKind>(record.kind), key, record);
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
