// memory_ledger.h — one vGPU's memory account, shared by all its processes.
//
// The ledger is a region every process of the vGPU maps (see vgpu_layout.h).
// Each process owns one slot and is the only writer of its slot's counters.
// Charging is optimistic and lock-free:
//   1. add the bytes to my slot                       (one atomic RMW)
//   2. sum every slot's counter for that device       (plain atomic loads)
//   3. over the limit? take my bytes back and refuse
// With sequentially consistent operations, of any set of racing charges the
// last one to add sees every other one, so the committed total never exceeds
// the limit. Two racers near the limit may both back off; TryCharge retries a
// bounded number of times when the obstacle has gone away.
//
// No lock exists, so none can be left held by a `kill -9`; a dead process's
// counters are reclaimed by ReapDeadProcesses(), which any process or the
// supervisor may run: a reaper takes the slot with a CAS on its owner word,
// marking it busy in its own name, before zeroing it, so two reapers never
// clear a newly claimed slot; a reclaim (or claim) whose maker was killed
// mid-way is redone by the next reaper that sees the maker gone.
//
// Thread-safety: all methods may be called concurrently from any thread of any
// process. TryCharge/Uncharge/UsedBytes make no syscall and never allocate.
// Attach/Detach/ReapDeadProcesses are slow paths (they read /proc through the
// probe).
#ifndef GPUSLICE_CORE_MEMORY_LEDGER_H_
#define GPUSLICE_CORE_MEMORY_LEDGER_H_

#include <cstdint>

#include "core/status.h"
#include "core/vgpu_layout.h"
#include "port/process.h"

namespace gpuslice::core {

class MemoryLedger {
 public:
  // Both regions must outlive the ledger. `limits` is only ever read.
  MemoryLedger(const Limits* limits, Ledger* ledger) : limits_(limits), ledger_(ledger) {}

  // Claims a slot for `self`. Reaps dead processes first if the ledger is full.
  Status Attach(const port::ProcessIdentity& self, const port::ProcessProbe& probe);
  // Returns this process's usage to the pool and frees its slot.
  void Detach();
  // Forgets the slot without touching it: for a forked child, whose parent
  // still owns the slot it inherited.
  void ForgetSlotAfterFork() { mine_ = nullptr; }
  bool attached() const { return mine_ != nullptr; }

  // Adds `bytes` on `device` (an index into Limits::devices) if the vGPU's
  // total stays within its limit. False means: refuse the allocation.
  bool TryCharge(uint32_t device, uint64_t bytes);
  // Returns bytes charged earlier by this process. Clamps at zero (and says
  // so) rather than wrapping: an underflow must never turn into a false OOM.
  void Uncharge(uint32_t device, uint64_t bytes);

  uint64_t UsedBytes(uint32_t device) const;       // the whole vGPU
  uint64_t MyUsedBytes(uint32_t device) const;     // this process
  uint64_t LimitBytes(uint32_t device) const;      // kUnlimited when uncapped
  uint32_t LiveProcessCount() const;

  // Legacy IPC handles this process has open (ProcessSlot::open_ipc_handles),
  // by IpcHandleHash. IpcHandleOpen: whether any process of the vGPU has that
  // handle open, or had more open than its slot keeps (a scan of every slot:
  // a slow path, at the free of exported memory).
  void RecordIpcOpen(uint64_t hash);
  void ForgetIpcOpen(uint64_t hash);
  bool IpcHandleOpen(uint64_t hash) const;

  // What this process last set as its compute channel groups' timeslice on
  // `device` (shown by `ls`); devices past ProcessSlot::kApplied are not kept.
  void RecordAppliedTimeslice(uint32_t device, uint64_t timeslice_us);

  // This process's channel groups, for the daemon's slice audit
  // (ProcessSlot::channel_groups); the first kPublishedGroups of `count`.
  void PublishChannelGroups(const PublishedChannelGroup* groups, uint32_t count);

  // This process's memory-overcommit request (core/memory_wait.h); no-ops
  // (and never refused) while the process has no slot.
  void PostMemoryWait(uint32_t device, uint64_t bytes);
  bool MemoryWaitRefused() const;
  void ClearMemoryWait();

  // The vGPU's cumulative counters (vgpu_layout.h), one atomic add each.
  void CountDenial();
  void CountGateWait();
  void CountHoldBudgetSpent();
  uint64_t DeniedAllocations() const;

  // Reclaims slots whose process is gone, and finishes the claims and
  // reclaims of slots whose claimer or reaper died mid-way (each reaper marks
  // the slot busy in its own name first). Returns how many were reclaimed.
  uint32_t ReapDeadProcesses(const port::ProcessProbe& probe);

 private:
  uint32_t RedoIfStale(ProcessSlot& slot, uint64_t busy, const port::ProcessProbe& probe);

  const Limits* limits_;
  Ledger* ledger_;
  ProcessSlot* mine_ = nullptr;
};

// How long one supervisor of a vGPU (each `gpuslice run` reaps its whole
// vGPU's ledger) waits between reaps: `interval_ns` while up to
// kReapersPerInterval processes share the vGPU, and in proportion beyond.
// Every run of a vGPU reaps every slot, so a fixed interval costs the node
// runs × processes probes per interval: 40 runs of one vGPU took a tenth of
// a 2-core machine doing nothing else (docs/benchmarks.md, "Load"). Spaced
// so, runs of one process each still reap the vGPU about
// kReapersPerInterval times per interval in all; one run of many processes
// reaps it less often. An allocation that would be refused reaps at once
// (interposer/charge.cc), so no limit waits on the spacing.
inline constexpr uint32_t kReapersPerInterval = 8;
constexpr uint64_t ReapSpacingNs(uint64_t interval_ns, uint32_t live_processes) {
  return live_processes <= kReapersPerInterval ? interval_ns : interval_ns * live_processes / kReapersPerInterval;
}

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_MEMORY_LEDGER_H_
