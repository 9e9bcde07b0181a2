#include "core/memory_wait.h"

#include "core/shared_word.h"

namespace gpuslice::core {

void PostMemoryWait(ProcessSlot* mine, uint32_t device, uint64_t bytes) {
  StoreRelease(mine->memory_wait, MemoryWaitWord(device, bytes));
}

bool MemoryWaitRefused(const ProcessSlot* mine) { return (LoadAcquire(mine->memory_wait) & kMemoryWaitNoRelief) != 0; }

void ClearMemoryWait(ProcessSlot* mine) { StoreRelease(mine->memory_wait, 0); }

namespace {
// Calls `each(slot, device, word)` for every unanswered request of a live slot.
template <typename Each>
void ForEachPending(const Ledger& ledger, Each each) {
  uint32_t high = LoadAcquire(ledger.slot_high_water);
  if (high > kMaxProcesses) high = kMaxProcesses;
  for (uint32_t i = 0; i < high; ++i) {
    const ProcessSlot& s = ledger.slots[i];
    const uint64_t owner = LoadAcquire(s.owner);
    if (owner == 0 || SlotBusy(owner)) continue;
    const uint64_t word = LoadAcquire(s.memory_wait);
    if (word == 0 || (word & kMemoryWaitNoRelief) != 0) continue;
    const uint32_t device = static_cast<uint32_t>((word >> 56) & 0x7f) - 1;
    if (device >= kMaxDevices) continue;  // scribbled on: not a request
    if (!each(i, device, word)) return;
  }
}
}  // namespace

std::vector<MemoryWait> PendingMemoryWaits(const Ledger& ledger) {
  std::vector<MemoryWait> out;
  ForEachPending(ledger, [&out](uint32_t slot, uint32_t device, uint64_t word) {
    out.push_back({slot, device, word & kMemoryWaitMaxBytes, word});
    return true;
  });
  return out;
}

bool AnyPendingMemoryWait(const Ledger& ledger) {
  bool any = false;
  ForEachPending(ledger, [&any](uint32_t, uint32_t, uint64_t) {
    any = true;
    return false;
  });
  return any;
}

bool AnswerNoRelief(Ledger* ledger, const MemoryWait& wait) {
  if (wait.slot >= kMaxProcesses) return false;
  uint64_t expected = wait.word;
  return CompareExchangeAcqRel(ledger->slots[wait.slot].memory_wait, expected, wait.word | kMemoryWaitNoRelief);
}

}  // namespace gpuslice::core
