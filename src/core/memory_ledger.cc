#include "core/memory_ledger.h"

#include <cstdint>
#include <string>

#include "core/memory_wait.h"
#include "core/shared_word.h"
#include "port/log.h"

namespace gpuslice::core {
namespace {

// Retries when a racing charge that made us back off has itself backed off.
constexpr int kChargeAttempts = 8;

void ZeroCounters(ProcessSlot& slot) {
  for (uint64_t& used : slot.used_bytes) StoreSeqCst(used, 0);
  for (uint32_t& applied : slot.applied_timeslice_us) StoreRelaxed(applied, 0);
  StoreRelaxed(slot.memory_wait, 0);
  for (PublishedChannelGroup& g : slot.channel_groups) {
    StoreRelaxed(g.where, 0);
    StoreRelaxed(g.what, 0);
  }
  for (uint64_t& open : slot.open_ipc_handles) StoreSeqCst(open, 0);
}

}  // namespace

Status MemoryLedger::Attach(const port::ProcessIdentity& self, const port::ProcessProbe& probe) {
  if (mine_ != nullptr) return Status::Ok();
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < kMaxProcesses; ++i) {
      ProcessSlot& slot = ledger_->slots[i];
      uint64_t expected = 0;
      if (!CompareExchangeSeqCst(slot.owner, expected, BusyWord(self.pid, self.pid_namespace))) continue;
      // Claimed (marked busy, in our name, so no reaper touches it while we
      // fill it in, and one may free it again if we die meanwhile). Inside
      // the high-water mark at once, where reapers look.
      RaiseToSeqCst(ledger_->slot_high_water, i + 1);
      slot.start_time = self.start_time;
      slot.pid_namespace = self.pid_namespace;
      ZeroCounters(slot);
      const uint32_t seq = FetchAddSeqCst(ledger_->claim_sequence, 1) + 1;
      StoreRelease(slot.owner, (static_cast<uint64_t>(self.pid) << 32) | seq);
      mine_ = &slot;
      return Status::Ok();
    }
    if (pass == 0 && ReapDeadProcesses(probe) == 0) break;
  }
  return Status::Error("vGPU '" + std::string(limits_->name) + "' already has " +
                       std::to_string(kMaxProcesses) +
                       " live processes, the most one vGPU can hold; split the work across vGPUs");
}

void MemoryLedger::Detach() {
  if (mine_ == nullptr) return;
  ZeroCounters(*mine_);
  StoreRelease(mine_->owner, 0);
  mine_ = nullptr;
}

bool MemoryLedger::TryCharge(uint32_t device, uint64_t bytes) {
  if (device >= kMaxDevices || mine_ == nullptr) return false;
  const uint64_t limit = LimitBytes(device);
  uint64_t& my_used = mine_->used_bytes[device];
  if (limit == kUnlimited) {
    FetchAddSeqCst(my_used, bytes);
    return true;
  }
  if (bytes > limit) return false;
  for (int attempt = 0; attempt < kChargeAttempts; ++attempt) {
    FetchAddSeqCst(my_used, bytes);
    const uint64_t total = UsedBytes(device);
    if (total <= limit) return true;
    FetchSubSeqCst(my_used, bytes);
    // Backed off. Retry only if a racing charge has since backed off too and
    // our bytes now fit; otherwise the vGPU is truly full.
    if (UsedBytes(device) + bytes > limit) return false;
  }
  return false;
}

void MemoryLedger::Uncharge(uint32_t device, uint64_t bytes) {
  if (device >= kMaxDevices || mine_ == nullptr) return;
  uint64_t& my_used = mine_->used_bytes[device];
  uint64_t current = LoadSeqCst(my_used);
  while (true) {
    const uint64_t next = current >= bytes ? current - bytes : 0;
    if (CompareExchangeWeakSeqCst(my_used, current, next)) break;
  }
  if (current < bytes) {
    port::Log(port::LogLevel::kWarn,
              "ledger: freed %llu bytes on device slot %u but only %llu were charged; clamped at 0",
              static_cast<unsigned long long>(bytes), device,
              static_cast<unsigned long long>(current));
  }
}

uint64_t MemoryLedger::UsedBytes(uint32_t device) const {
  if (device >= kMaxDevices) return 0;
  const uint32_t hw = LoadSeqCst(ledger_->slot_high_water);
  uint64_t total = 0;
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    total += LoadSeqCst(ledger_->slots[i].used_bytes[device]);
  }
  return total;
}

void MemoryLedger::RecordIpcOpen(uint64_t hash) {
  if (mine_ == nullptr) return;
  constexpr uint32_t kLast = ProcessSlot::kOpenIpcHandles - 1;
  for (uint32_t i = 0; i < kLast; ++i) {
    uint64_t expected = 0;
    if (CompareExchangeSeqCst(mine_->open_ipc_handles[i], expected, hash)) return;
  }
  // Full: the last entry says so for good, and every exporter of the vGPU
  // then keeps what it frees (an over-charge, never an escape).
  StoreSeqCst(mine_->open_ipc_handles[kLast], kIpcOpenOverflow);
}

void MemoryLedger::ForgetIpcOpen(uint64_t hash) {
  if (mine_ == nullptr) return;
  for (uint32_t i = 0; i + 1 < ProcessSlot::kOpenIpcHandles; ++i) {
    uint64_t expected = hash;
    if (CompareExchangeSeqCst(mine_->open_ipc_handles[i], expected, uint64_t{0})) return;
  }
}

bool MemoryLedger::IpcHandleOpen(uint64_t hash) const {
  const uint32_t hw = LoadSeqCst(ledger_->slot_high_water);
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    for (const uint64_t& open : ledger_->slots[i].open_ipc_handles) {
      const uint64_t word = LoadSeqCst(open);
      if (word == hash || word == kIpcOpenOverflow) return true;
    }
  }
  return false;
}

uint64_t MemoryLedger::MyUsedBytes(uint32_t device) const {
  if (device >= kMaxDevices || mine_ == nullptr) return 0;
  return LoadSeqCst(mine_->used_bytes[device]);
}

uint64_t MemoryLedger::LimitBytes(uint32_t device) const {
  if (device >= kMaxDevices) return 0;
  return LoadAcquire(limits_->devices[device].memory_limit_bytes);
}

uint32_t MemoryLedger::LiveProcessCount() const {
  const uint32_t hw = LoadSeqCst(ledger_->slot_high_water);
  uint32_t n = 0;
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    const uint64_t owner = LoadSeqCst(ledger_->slots[i].owner);
    if (owner != 0 && !SlotBusy(owner)) ++n;
  }
  return n;
}

void MemoryLedger::CountDenial() { FetchAddRelaxed(ledger_->denied_allocations, 1); }

void MemoryLedger::PostMemoryWait(uint32_t device, uint64_t bytes) {
  if (mine_ != nullptr) core::PostMemoryWait(mine_, device, bytes);
}
bool MemoryLedger::MemoryWaitRefused() const { return mine_ != nullptr && core::MemoryWaitRefused(mine_); }
void MemoryLedger::ClearMemoryWait() {
  if (mine_ != nullptr) core::ClearMemoryWait(mine_);
}

void MemoryLedger::CountGateWait() { FetchAddRelaxed(ledger_->gate_waits, 1); }
void MemoryLedger::CountHoldBudgetSpent() { FetchAddRelaxed(ledger_->hold_budget_spent, 1); }

void MemoryLedger::RecordAppliedTimeslice(uint32_t device, uint64_t timeslice_us) {
  if (mine_ == nullptr || device >= ProcessSlot::kApplied) return;
  const uint32_t us = timeslice_us > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(timeslice_us);
  StoreRelaxed(mine_->applied_timeslice_us[device], us);
}

void MemoryLedger::PublishChannelGroups(const PublishedChannelGroup* groups, uint32_t count) {
  if (mine_ == nullptr) return;
  for (uint32_t i = 0; i < ProcessSlot::kPublishedGroups; ++i) {
    const PublishedChannelGroup g = i < count ? groups[i] : PublishedChannelGroup{0, 0};
    StoreRelaxed(mine_->channel_groups[i].what, g.what);
    StoreRelease(mine_->channel_groups[i].where, g.where);
  }
}

uint64_t MemoryLedger::DeniedAllocations() const {
  return LoadRelaxed(ledger_->denied_allocations);
}

uint32_t MemoryLedger::RedoIfStale(ProcessSlot& slot, uint64_t busy, const port::ProcessProbe& probe) {
  // A busy slot whose claimer or reaper is gone stays busy forever unless
  // someone finishes the job: zero what is left and free it. Safe because
  // only a dead process's mark is taken over, with a CAS, so its maker
  // cannot act on the slot again, and only one taker wins.
  if (busy == kSlotReaping) return 0;  // names no process
  const uint32_t pid = BusyPid(busy);
  if (!probe.PidIsGone(pid, BusyPidNamespace(busy))) return 0;
  const port::ProcessIdentity self = probe.Self();
  if (!CompareExchangeSeqCst(slot.owner, busy, BusyWord(self.pid, self.pid_namespace))) return 0;
  ZeroCounters(slot);
  StoreRelease(slot.owner, 0);
  FetchAddSeqCst(ledger_->reaped_processes, 1);
  port::Log(port::LogLevel::kInfo, "ledger: finished a slot's reclaim that process %u left when it died, in vGPU '%s'",
            pid, limits_->name);
  return 1;
}

uint32_t MemoryLedger::ReapDeadProcesses(const port::ProcessProbe& probe) {
  const uint32_t hw = LoadSeqCst(ledger_->slot_high_water);
  const port::ProcessIdentity self = probe.Self();
  const uint64_t reaper = BusyWord(self.pid, self.pid_namespace);
  uint32_t reaped = 0;
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    ProcessSlot& slot = ledger_->slots[i];
    if (&slot == mine_) continue;
    uint64_t owner = LoadAcquire(slot.owner);
    if (owner == 0) continue;
    if (SlotBusy(owner)) {
      reaped += RedoIfStale(slot, owner, probe);
      continue;
    }
    port::ProcessIdentity who;
    who.pid = static_cast<uint32_t>(owner >> 32);
    who.start_time = slot.start_time;
    who.pid_namespace = slot.pid_namespace;
    if (!probe.IsGone(who)) continue;
    // Take the slot first: if another reaper won, or the owner word changed
    // (the slot was freed and claimed again), leave it alone.
    if (!CompareExchangeSeqCst(slot.owner, owner, reaper)) continue;
    ZeroCounters(slot);
    StoreRelease(slot.owner, 0);
    FetchAddSeqCst(ledger_->reaped_processes, 1);
    ++reaped;
    port::Log(port::LogLevel::kInfo, "ledger: reclaimed the memory of dead process %u in vGPU '%s'",
              who.pid, limits_->name);
  }
  return reaped;
}

}  // namespace gpuslice::core
