// slice_ceiling.h — the longest hardware timeslice a vGPU's channel groups
// may have on one GPU, by its limits: the bound the daemon's slice audit
// holds every process to (daemon/slice_audit.h).
//
// The library's own timeslice pass (interposer/timeslice_applier.cc) never
// sets more: it clamps every slice it wants to this ceiling, so a process
// whose library runs is never found above it, and the audit never fights a
// library. Everything the pass may add to the limits' slice is here: the
// co-busy slice of two busy processes of one vGPU, the holder's slice under
// backfill turns, and the driver's default where the limits name no slice.
// What it may take away (the clamp beside a live LC) needs no bound.
//
// Pure functions of the limits' words (atomic loads); any thread.
#ifndef GPUSLICE_CORE_SLICE_CEILING_H_
#define GPUSLICE_CORE_SLICE_CEILING_H_

#include <algorithm>
#include <cstdint>

#include "core/pacing_board.h"
#include "core/shared_word.h"
#include "core/vgpu_layout.h"

namespace gpuslice::core {

// The driver's own slices for a new channel group, read on an H200 and an
// H100 (docs/gpu-facts.md, "Channel groups and their timeslices"). A
// limits' slice of 0 means "the driver's default".
inline constexpr uint64_t kDriverComputeSliceUs = 2048;
inline constexpr uint64_t kDriverCopySliceUs = 1024;

// The slice two or more busy processes of one best-effort vGPU take beside
// an LC instead of the tiny one (interposer/timeslice_applier.cc says why).
inline constexpr uint64_t kCoBusySliceUs = 1000;

// The longest slice the vGPU's compute channel groups on this GPU may have.
inline uint64_t ComputeSliceCeilingUs(const DeviceLimit& limit) {
  const uint64_t policy_us = LoadRelaxed(limit.timeslice_us);
  uint64_t ceiling = std::max(policy_us != 0 ? policy_us : kDriverComputeSliceUs, kCoBusySliceUs);
  if (LoadRelaxed(limit.flags) & kDeviceFlagShareTurns) ceiling = std::max(ceiling, kHolderSliceUs);
  return ceiling;
}

// The longest its copy-engine groups may have: what its compute groups may
// (copy groups get the compute slice beside an LC), or the driver's default,
// which they otherwise keep.
inline uint64_t CopySliceCeilingUs(const DeviceLimit& limit) {
  return std::max(ComputeSliceCeilingUs(limit), kDriverCopySliceUs);
}

inline uint64_t SliceCeilingUs(const DeviceLimit& limit, bool compute_engine) {
  return compute_engine ? ComputeSliceCeilingUs(limit) : CopySliceCeilingUs(limit);
}

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_SLICE_CEILING_H_
