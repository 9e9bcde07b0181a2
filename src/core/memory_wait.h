// memory_wait.h — memory overcommit's handshake: a process whose allocation
// the GPU refused asks the node to free memory, and waits a bounded time.
//
// A node may give its vGPUs limits that add up past a GPU's memory. Then an
// allocation within a vGPU's limit can still find the GPU full. If the vGPU's
// limits say so (Limits::memory_wait_ms), the allocating process posts what
// it needs in its own ledger slot (ProcessSlot::memory_wait: the device and
// the bytes), retries the allocation every few milliseconds, and clears the
// word when it succeeds, gives up at its bound, or reads the node's answer
// that nothing will be freed (kMemoryWaitNoRelief, set by the daemon with a
// CAS on the same word, so that an answer to an older request is never
// read as an answer to a newer one). The daemon polls the ledgers, and
// suspends best-effort vGPUs of lower levels that opted in until the GPU
// has the room (node/memory_pressure.h), then resumes them once it frees.
//
// The word is in the tenant's own ledger: a tenant that forges it can only
// ask for memory on its vGPU's GPUs, which it may do anyway by allocating,
// and the daemon frees memory only by suspending vGPUs below the
// requester's level (its level from its limits, which it cannot write).
//
// Encoding: bit 63 the answer, bits 56..62 the device index + 1 (an index
// into Limits::devices), bits 0..55 the bytes (clamped to 2^56 - 1: 64 PiB).
//
// Thread-safety: every function is one atomic access to the slot (plus a
// scan of the slots for PendingMemoryWaits); no lock, no allocation (except
// PendingMemoryWaits's vector), no syscall.
#ifndef GPUSLICE_CORE_MEMORY_WAIT_H_
#define GPUSLICE_CORE_MEMORY_WAIT_H_

#include <cstdint>
#include <vector>

#include "core/vgpu_layout.h"

namespace gpuslice::core {

inline constexpr uint64_t kMemoryWaitNoRelief = 1ull << 63;
inline constexpr uint64_t kMemoryWaitMaxBytes = (1ull << 56) - 1;

constexpr uint64_t MemoryWaitWord(uint32_t device, uint64_t bytes) {
  return static_cast<uint64_t>((device & 0x7f) + 1) << 56 | (bytes < kMemoryWaitMaxBytes ? bytes : kMemoryWaitMaxBytes);
}

// The requesting process's side, on its own slot.
void PostMemoryWait(ProcessSlot* mine, uint32_t device, uint64_t bytes);
bool MemoryWaitRefused(const ProcessSlot* mine);  // the node answered: nothing will be freed
void ClearMemoryWait(ProcessSlot* mine);

// The node's side.
struct MemoryWait {
  uint32_t slot = 0;    // index into Ledger::slots
  uint32_t device = 0;  // index into Limits::devices
  uint64_t bytes = 0;
  uint64_t word = 0;  // as read: AnswerNoRelief answers exactly this request
};
// Unanswered requests of live slots (busy and free slots are skipped).
std::vector<MemoryWait> PendingMemoryWaits(const Ledger& ledger);
// Whether there is one, without allocating (the daemon's every pass).
bool AnyPendingMemoryWait(const Ledger& ledger);
// Answers `wait` with "nothing will be freed"; false if the slot has since
// changed its request (the new one is for a later pass).
bool AnswerNoRelief(Ledger* ledger, const MemoryWait& wait);

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_MEMORY_WAIT_H_
