#include "core/memory_ledger.h"

#include <cstdint>
#include <atomic>
#include <string>

#include "port/log.h"

namespace gpuslice::core {
namespace {

template <typename T>
std::atomic_ref<T> A(T& v) {
  return std::atomic_ref<T>(v);
}
template <typename T>
std::atomic_ref<T> A(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v));
}

// Retries when a racing charge that made us back off has itself backed off.
constexpr int kChargeAttempts = 8;

void ZeroCounters(ProcessSlot& slot) {
  for (uint64_t& used : slot.used_bytes) A(used).store(0, std::memory_order_seq_cst);
  for (uint32_t& applied : slot.applied_timeslice_us) A(applied).store(0, std::memory_order_relaxed);
}

}  // namespace

Status MemoryLedger::Attach(const port::ProcessIdentity& self, const port::ProcessProbe& probe) {
  if (mine_ != nullptr) return Status::Ok();
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < kMaxProcesses; ++i) {
      ProcessSlot& slot = ledger_->slots[i];
      uint64_t expected = 0;
      if (!A(slot.owner).compare_exchange_strong(expected, kSlotReaping)) continue;
      // Claimed (marked busy so no reaper touches it while we fill it in).
      slot.start_time = self.start_time;
      slot.pid_namespace = self.pid_namespace;
      ZeroCounters(slot);
      const uint32_t seq = A(ledger_->claim_sequence).fetch_add(1) + 1;
      A(slot.owner).store((static_cast<uint64_t>(self.pid) << 32) | seq, std::memory_order_release);
      uint32_t hw = A(ledger_->slot_high_water).load();
      while (hw < i + 1 && !A(ledger_->slot_high_water).compare_exchange_weak(hw, i + 1)) {
      }
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
  A(mine_->owner).store(0, std::memory_order_release);
  mine_ = nullptr;
}

bool MemoryLedger::TryCharge(uint32_t device, uint64_t bytes) {
  if (device >= kMaxDevices || mine_ == nullptr) return false;
  const uint64_t limit = LimitBytes(device);
  uint64_t& my_used = mine_->used_bytes[device];
  if (limit == kUnlimited) {
    A(my_used).fetch_add(bytes);
    return true;
  }
  if (bytes > limit) return false;
  for (int attempt = 0; attempt < kChargeAttempts; ++attempt) {
    A(my_used).fetch_add(bytes);  // seq_cst
    const uint64_t total = UsedBytes(device);
    if (total <= limit) return true;
    A(my_used).fetch_sub(bytes);
    // Backed off. Retry only if a racing charge has since backed off too and
    // our bytes now fit; otherwise the vGPU is truly full.
    if (UsedBytes(device) + bytes > limit) return false;
  }
  return false;
}

void MemoryLedger::Uncharge(uint32_t device, uint64_t bytes) {
  if (device >= kMaxDevices || mine_ == nullptr) return;
  uint64_t& my_used = mine_->used_bytes[device];
  uint64_t current = A(my_used).load();
  while (true) {
    const uint64_t next = current >= bytes ? current - bytes : 0;
    if (A(my_used).compare_exchange_weak(current, next)) break;
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
  const uint32_t hw = A(ledger_->slot_high_water).load();
  uint64_t total = 0;
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    total += A(ledger_->slots[i].used_bytes[device]).load();
  }
  return total;
}

uint64_t MemoryLedger::MyUsedBytes(uint32_t device) const {
  if (device >= kMaxDevices || mine_ == nullptr) return 0;
  return A(mine_->used_bytes[device]).load();
}

uint64_t MemoryLedger::LimitBytes(uint32_t device) const {
  if (device >= kMaxDevices) return 0;
  return A(limits_->devices[device].memory_limit_bytes).load(std::memory_order_acquire);
}

uint32_t MemoryLedger::LiveProcessCount() const {
  const uint32_t hw = A(ledger_->slot_high_water).load();
  uint32_t n = 0;
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    const uint64_t owner = A(ledger_->slots[i].owner).load();
    if (owner != 0 && owner != kSlotReaping) ++n;
  }
  return n;
}

void MemoryLedger::CountDenial() { A(ledger_->denied_allocations).fetch_add(1, std::memory_order_relaxed); }

void MemoryLedger::CountGateWait() { A(ledger_->gate_waits).fetch_add(1, std::memory_order_relaxed); }

void MemoryLedger::RecordAppliedTimeslice(uint32_t device, uint64_t timeslice_us) {
  if (mine_ == nullptr || device >= ProcessSlot::kApplied) return;
  const uint32_t us = timeslice_us > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(timeslice_us);
  A(mine_->applied_timeslice_us[device]).store(us, std::memory_order_relaxed);
}

uint64_t MemoryLedger::DeniedAllocations() const {
  return A(ledger_->denied_allocations).load(std::memory_order_relaxed);
}

uint32_t MemoryLedger::ReapDeadProcesses(const port::ProcessProbe& probe) {
  const uint32_t hw = A(ledger_->slot_high_water).load();
  uint32_t reaped = 0;
  for (uint32_t i = 0; i < hw && i < kMaxProcesses; ++i) {
    ProcessSlot& slot = ledger_->slots[i];
    if (&slot == mine_) continue;
    uint64_t owner = A(slot.owner).load(std::memory_order_acquire);
    if (owner == 0 || owner == kSlotReaping) continue;
    port::ProcessIdentity who;
    who.pid = static_cast<uint32_t>(owner >> 32);
    who.start_time = slot.start_time;
    who.pid_namespace = slot.pid_namespace;
    if (!probe.IsGone(who)) continue;
    // Take the slot first: if another reaper won, or the owner word changed
    // (the slot was freed and claimed again), leave it alone.
    if (!A(slot.owner).compare_exchange_strong(owner, kSlotReaping)) continue;
    ZeroCounters(slot);
    A(slot.owner).store(0, std::memory_order_release);
    A(ledger_->reaped_processes).fetch_add(1);
    ++reaped;
    port::Log(port::LogLevel::kInfo, "ledger: reclaimed the memory of dead process %u in vGPU '%s'",
              who.pid, limits_->name);
  }
  return reaped;
}

}  // namespace gpuslice::core
