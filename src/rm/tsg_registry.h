// tsg_registry.h — the channel groups (TSGs) this process's CUDA driver has
// allocated, learned by watching its RM ioctls.
//
// libcuda allocates one compute TSG (and a few copy TSGs) per context with
// NV_ESC_RM_ALLOC of class KEPLER_CHANNEL_GROUP_A, and frees them with
// NV_ESC_RM_FREE (of the TSG, or of its whole client). Observe() sees both,
// after the real ioctl returned, and keeps the live ones with the descriptor
// and client they belong to: controls on a TSG must be issued on that
// descriptor with that client handle.
//
// Observe() runs inside libcuda's ioctls, on whichever thread made them: it
// takes no lock, allocates nothing and makes no syscall. Snapshot() is for
// the compute thread (any thread); entries are seqlock-protected, so a
// concurrent add/remove is either seen whole or not at all. A fixed table:
// a process with more than kCapacity live TSGs has the rest untracked (and
// logged once).
#ifndef GPUSLICE_RM_TSG_REGISTRY_H_
#define GPUSLICE_RM_TSG_REGISTRY_H_

#include <atomic>
#include <cstdint>

#include "rm/rm_abi.h"

namespace gpuslice::rm {

struct TsgRef {
  int fd = -1;             // the descriptor the TSG (and its client) was allocated on
  NvHandle client = 0;     // hRoot
  NvHandle handle = 0;     // the TSG object
  uint32_t engine_type = 0;  // NV2080_ENGINE_TYPE_*; kEngineTypeGraphics = compute
  int device = -1;         // CUDA device ordinal the context was made for; -1 unknown
  uint64_t serial = 0;     // unique per allocation seen, never reused
};

class TsgRegistry {
 public:
  static constexpr uint32_t kCapacity = 256;

  constexpr TsgRegistry() = default;

  // Records an RM ioctl that has returned `rc`. `device_hint` is the CUDA
  // device whose context the calling thread is creating, or -1.
  void Observe(int fd, unsigned long request, const void* arg, int rc, int device_hint);

  // Copies up to `max` live TSGs into `out`; returns how many.
  uint32_t Snapshot(TsgRef* out, uint32_t max) const;

  // Bumped after every add and remove: a reader that saw the same value
  // twice saw no change in between.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // Forgets everything (a forked child has none of its parent's TSGs).
  void Clear();

  // Direct entry points, for Observe and tests.
  void Add(const TsgRef& tsg);
  void Remove(int fd, NvHandle client, NvHandle object);

 private:
  struct Slot {
    std::atomic<uint64_t> seq{0};  // even: stable; odd: being written
    std::atomic<uint32_t> state{0};  // 0 free, 1 claimed, 2 live
    int fd = -1;
    NvHandle client = 0;
    NvHandle handle = 0;
    uint32_t engine_type = 0;
    int device = -1;
    uint64_t serial = 0;
  };
  Slot slots_[kCapacity];
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> next_serial_{1};
  std::atomic<bool> overflow_logged_{false};
};

}  // namespace gpuslice::rm

#endif  // GPUSLICE_RM_TSG_REGISTRY_H_
