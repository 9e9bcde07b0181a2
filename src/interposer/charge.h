// charge.h — the few steps every allocation hook shares.
//
// Called by the hooks in hooks_memory.cc, hooks_pools.cc and hooks_graphs.cc
// on the application's own threads, and around context teardown (all defined
// in charge.cc). ChargeOrRefuse is the hot path (no lock, no syscall) unless
// the vGPU is full, when it first reclaims dead processes'
// usage and the process's stale pool reservations (slow path) and tries once
// more. Never allocates.
#ifndef GPUSLICE_INTERPOSER_CHARGE_H_
#define GPUSLICE_INTERPOSER_CHARGE_H_

#include <cstdint>

#include "interposer/vgpu_runtime.h"

namespace gpuslice::interposer {

inline constexpr uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

// The driver hands out device memory in 512-byte-aligned blocks (cuMemAlloc's
// documented alignment is 256; observed blocks are 512). Charging the rounded
// size keeps many small allocations from adding up unseen.
inline constexpr uint64_t kDeviceAllocationGranule = 512;

// True when `bytes` were charged to `slot`; false means the caller must
// return CUDA_ERROR_OUT_OF_MEMORY without calling the driver. A slot of
// VgpuRuntime::kOutside (a device not in the vGPU) is always refused.
bool ChargeOrRefuse(VgpuRuntime& runtime, int slot, uint64_t bytes);

// Brings a charge from `charged` to `actual` once the driver has said what an
// object really occupies. False when growing it would pass the limit (the
// original charge is then kept; the caller undoes the allocation).
bool SettleCharge(VgpuRuntime& runtime, int slot, uint64_t charged, uint64_t actual);

// Pools are settled to their reservation in pool_charge.h.

// --- Memory exported to other processes ---------------------------------------
// Memory this process exported (cuMemExportToShareableHandle,
// cuIpcGetMemHandle, a dma-buf) outlives its own free: another process's
// import keeps it on the GPU, and so does an exported file descriptor held
// by any process, even one that never imports it (measured on an H200:
// docs/benchmarks.md, "Exported device memory"). Nothing tells this process
// when the last of those goes, so such memory stays charged until it exits.
// A legacy IPC handle (`ipc_hash`, core::IpcHandleHash) holds nothing by
// itself, unlike a descriptor: memory exported only so is kept at its free
// only while a process of the vGPU has the handle open
// (MemoryLedger::IpcHandleOpen); once exported otherwise too, or under
// another handle, it is kept.
//
// MarkExported records the export of a charged object (`kind` kDevice, a
// pointer, or kVmmHandle) before the driver makes a descriptor, or once a
// legacy handle is made: false when the table is full, and the caller then
// refuses the export (an export the driver then refuses stays marked).
// GiveBack settles a freed object's record: uncharged, or kept if exported.
// Hot path (a free): table operations only, and a scan of the ledger's
// slots for memory exported by legacy handle.
bool MarkExported(VgpuRuntime& runtime, AllocationKind kind, uint64_t key, uint64_t ipc_hash = 0);
void GiveBack(VgpuRuntime& runtime, AllocationKind kind, uint64_t key, const AllocationRecord& record);
// Says (once per process) that `bytes` freed stay charged for that reason.
void SayKeptExported(VgpuRuntime& runtime, uint64_t bytes);

// --- A full GPU (memory overcommit) ------------------------------------------
// The driver refused an allocation that the vGPU had room for: the GPU is
// full. Where the vGPU's limits give a wait (Limits::memory_wait_ms), the
// process asks the node to free memory (core/memory_wait.h) and retries
// `make` every few milliseconds until it succeeds, fails otherwise, the wait
// passes, or the node answers that nothing will be freed; then it clears its
// request. Without a wait, CUDA_ERROR_OUT_OF_MEMORY at once. Slow path
// (sleeps, logs); never on an allocation the driver granted.
class GpuRoomWait {
 public:
  GpuRoomWait(VgpuRuntime& runtime, int slot, uint64_t bytes);
  ~GpuRoomWait();
  GpuRoomWait(const GpuRoomWait&) = delete;
  GpuRoomWait& operator=(const GpuRoomWait&) = delete;
  // Sleeps one step; false once the wait is over (bound or answer).
  bool Next();
  void Succeeded() { succeeded_ = true; }

 private:
  VgpuRuntime& runtime_;
  uint64_t bytes_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t deadline_ns_ = 0;  // 0: no wait
  bool succeeded_ = false;
};

template <typename Make>
CUresult AwaitGpuRoom(VgpuRuntime& runtime, int slot, uint64_t bytes, Make make) {
  GpuRoomWait wait(runtime, slot, bytes);
  while (wait.Next()) {
    const CUresult r = make();
    if (r != CUDA_ERROR_OUT_OF_MEMORY) {
      if (r == CUDA_SUCCESS) wait.Succeeded();
      return r;
    }
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// --- Context teardown ---------------------------------------------------------
// A context takes the memory it owns with it (plain, pitched and managed
// allocations, arrays, a grown malloc heap; pools, graph pools and VMM
// memory belong to the device), so its charges go too. These wrap the driver's own call; a
// primary context is torn down by its reset or its last release.
using PrimaryContextCall = CUresult (*)(CUdevice);
using ContextCall = CUresult (*)(CUcontext);
CUresult ReleasePrimaryContext(CUdevice device, PrimaryContextCall real_release);
CUresult ResetPrimaryContext(CUdevice device, PrimaryContextCall real_reset);
CUresult DestroyContext(CUcontext context, ContextCall real_destroy);

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_CHARGE_H_
