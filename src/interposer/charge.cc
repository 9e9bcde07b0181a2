#include "interposer/charge.h"

#include <atomic>

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

}  // namespace gpuslice::interposer
