// vgpu_runtime.h — this process's membership in its vGPU, as the hooks see it.
//
// Built lazily on the first hook that needs it, never at load time: it reads
// GPUSLICE_VGPU_DIR, maps the vGPU's limits read-only and its ledger
// read-write, claims a ledger slot, and maps CUDA device ordinals to the
// vGPU's device slots by UUID. A process with no GPUSLICE_VGPU_DIR is in no
// vGPU: Get() returns nullptr and every hook passes straight through.
//
// Failure policy (docs/design.md, "failing open", "failing closed for
// memory"): with no limits file, the process runs unlimited and says so
// loudly on stderr. A vGPU whose limits or shared ledger exist but cannot be
// read (corrupt, truncated), or whose ledger has no free slot, gets a runtime
// that refuses every device allocation (CUDA_ERROR_OUT_OF_MEMORY) and says
// why once; everything else runs. A private ledger instead would give each
// process the whole limit. A process refused for want of a slot joins when
// one frees up (RetryJoin).
//
// Thread-safety: Get() is safe from any thread; after the first call it is a
// single acquire load. DeviceSlot() is one array read once devices are mapped.
#ifndef GPUSLICE_INTERPOSER_VGPU_RUNTIME_H_
#define GPUSLICE_INTERPOSER_VGPU_RUNTIME_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "core/memory_ledger.h"
#include "core/shared_word.h"
#include "core/vgpu_layout.h"
#include "interposer/allocation_table.h"
#include "interposer/pool_accounts.h"

namespace gpuslice::interposer {

class VgpuRuntime {
 public:
  static constexpr int kMaxCudaDevices = 64;
  static constexpr int kUncapped = -1;
  // A CUDA device the process can see that is not part of its vGPU (the
  // application widened CUDA_VISIBLE_DEVICES, say): its memory is refused.
  static constexpr int kOutside = -2;

  // The process's runtime, or nullptr when it belongs to no vGPU.
  static VgpuRuntime* Get() {
    VgpuRuntime* r = instance_.load(std::memory_order_acquire);
    return __builtin_expect(r != nullptr, 1) ? (r == Disabled() ? nullptr : r) : Create();
  }

  core::MemoryLedger& ledger() { return ledger_; }
  AllocationTable& allocations() { return allocations_; }
  PoolAccounts& pools() { return pools_; }
  const core::Limits& limits() const { return *limits_; }
  // Whether the vGPU is latency-critical (a vGPU has one class; resizable
  // live, hence the atomic read).
  bool latency_critical() const {
    return core::LevelClass(core::LoadRelaxed(limits_->devices[0].priority)) == core::Priority::kLatencyCritical;
  }
  // The ledger in use (shared, or private and never joined when the shared
  // one is unusable), for lifetime counters.
  core::Ledger* ledger_region() { return ledger_region_; }

  // The vGPU device slot of a CUDA device ordinal, or kUncapped (devices
  // outside the vGPU included).
  int DeviceSlot(CUdevice device) {
    const int slot = MemorySlot(device);
    return slot == kOutside ? kUncapped : slot;
  }
  // The slot that device memory on `device` is charged to; kOutside when the
  // device is not part of the vGPU (the allocation must be refused), and
  // kUncapped only when the device cannot be told (not a device, or the
  // driver not yet initialised: the driver refuses those itself).
  int MemorySlot(CUdevice device) {
    if (__builtin_expect(!devices_mapped_.load(std::memory_order_acquire), 0)) MapDevices();
    return device >= 0 && device < kMaxCudaDevices ? device_slot_[device] : kUncapped;
  }
  // DeviceSlot and MemorySlot of the calling thread's current context's device.
  int CurrentDeviceSlot(CUdevice* device_out = nullptr);
  int CurrentMemorySlot(CUdevice* device_out = nullptr);

  // Slow path: reclaim dead processes' usage; rate-limited to one scan per
  // 100 ms unless `force`.
  void ReapDeadProcesses(bool force);
  // Slow path, for a process that holds no ledger slot: tries to claim one
  // (a scan of the slots; a reap of the dead when all are taken, as the
  // refused allocation's slow path does anyway). True when it holds one.
  bool RetryJoin();

  // At exit: gives this process's ledger slot back if it charges nothing,
  // else leaves it to the reapers (the driver frees memory after every exit
  // handler; vgpu_runtime.cc). Registered when the library loads, so that
  // it runs after every exit handler registered later (atexit is LIFO): the
  // CUDA runtime's and frameworks' teardown, which hold and free GPU memory.
  // Memory outside any ledger during a teardown was taken by the memory
  // audit for an escape: a teardown past its grace (1 s) was killed, a
  // finished job's exit status 137.
  static void DetachAtExit();

 private:
  VgpuRuntime() = default;
  static VgpuRuntime* Create();
  static VgpuRuntime* Disabled() { return reinterpret_cast<VgpuRuntime*>(uintptr_t{1}); }
  bool Attach(const char* dir);
  void MapDevices();
  static void ForkChild();

  static std::atomic<VgpuRuntime*> instance_;

  const core::Limits* limits_ = nullptr;
  core::Ledger* ledger_region_ = nullptr;
  core::MemoryLedger ledger_{nullptr, nullptr};
  AllocationTable allocations_;
  PoolAccounts pools_;
  std::atomic<bool> devices_mapped_{false};
  int8_t device_slot_[kMaxCudaDevices] = {};
  std::atomic<uint64_t> last_reap_ns_{0};
  bool ledger_shared_ = false;   // ledger_region_ is the vGPU's (else private, never joined)
  bool memory_refused_ = false;  // the limits are unreadable: every device is outside the vGPU
};

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_VGPU_RUNTIME_H_
