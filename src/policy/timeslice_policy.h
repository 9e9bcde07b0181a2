// timeslice_policy.h — from the vGPUs on one GPU to each one's hardware
// timeslice.
//
// The GPU round-robins between busy channel groups (TSGs), each running for
// its timeslice before the next gets the GPU; idle TSGs are skipped, so
// shares set this way are work-conserving: a vGPU running alone gets the
// whole GPU. Measured on an H200 (../shared/reference/gpu-facts.md): shares
// follow slices (3000/7000 µs gave 31.5/68.5%, 1000/9000 µs 10.7/89.3%); each
// switch costs ~180 µs, so slices below ~1 ms between busy BE vGPUs waste
// the GPU (three at 200 µs lost 25%, at 2000 µs ~1%); an LC TSG with a long
// slice keeps the GPU while it is busy, and a small BE slice bounds how long
// LC waits for the GPU (BE 200 µs: LC p99 432 µs; BE 1000 µs: 1208 µs).
//
// Pure function of its inputs; thread-safe; allocates its result.
#ifndef GPUSLICE_POLICY_TIMESLICE_POLICY_H_
#define GPUSLICE_POLICY_TIMESLICE_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/vgpu_layout.h"

namespace gpuslice::policy {

struct VgpuOnGpu {
  std::string name;
  core::Priority priority = core::Priority::kBestEffort;
  uint32_t share_pct = 100;  // --compute; relative weight among BE vGPUs
};

struct TimeslicePolicyConfig {
  // BE vGPUs alone split this period by share: 10 ms keeps every slice at or
  // above 1 ms for shares down to 10%, where switching costs ~1%.
  uint64_t be_period_us = 10000;
  uint64_t be_min_slice_us = 1000;
  // With an LC vGPU present, BE slices split this shorter period, bounding
  // LC's wait for the GPU, but no slice goes below be_min_slice_with_lc_us.
  uint64_t be_period_with_lc_us = 400;
  uint64_t be_min_slice_with_lc_us = 50;
  // LC keeps the GPU for as long as it has work.
  uint64_t lc_slice_us = 5000000;
};

// One timeslice per input vGPU, in input order.
std::vector<uint64_t> ComputeTimeslices(const std::vector<VgpuOnGpu>& vgpus,
                                        const TimeslicePolicyConfig& config = {});

}  // namespace gpuslice::policy

#endif  // GPUSLICE_POLICY_TIMESLICE_POLICY_H_
