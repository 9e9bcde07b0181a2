// timeslice_policy.h — from the vGPUs on one GPU to each one's hardware
// timeslice.
//
// The GPU round-robins between busy channel groups (TSGs), each running for
// its timeslice before the next gets the GPU; idle TSGs are skipped, so
// shares set this way are work-conserving: a vGPU running alone gets the
// whole GPU. Measured on an H200 (docs/gpu-facts.md and
// docs/benchmarks.md):
//   - shares follow slices (3000/7000 µs gave 31.5/68.5%, 1000/9000 µs
//     10.7/89.3%);
//   - each switch between busy TSGs costs ~70–180 µs, so slices below ~1 ms
//     between busy BE vGPUs waste the GPU (three at 200 µs lost 25%, at
//     2000 µs ~1%);
//   - an LC TSG with a long slice keeps the GPU while it is busy, and the BE
//     slice bounds how long LC waits for the GPU (BE 1000 µs: LC p99 1208 µs;
//     200 µs: 432 µs; 50 µs: 300 µs; alone 74 µs). A lone busy TSG whose
//     slice expires is not switched out, so a small slice costs a BE nothing
//     while no other TSG is busy.
//
// Pure function of its inputs; thread-safe; allocates its result. Called by
// ApplyNodeSchedule (node_schedule.h) from the CLI supervisor and the daemon.
#ifndef GPUSLICE_POLICY_TIMESLICE_POLICY_H_
#define GPUSLICE_POLICY_TIMESLICE_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/vgpu_layout.h"

namespace gpuslice::policy {

struct VgpuOnGpu {
  std::string name;
  core::Priority priority = core::Priority::kBestEffort;  // its level's class
  uint32_t share_pct = 100;  // --compute; relative weight among BE vGPUs
  uint32_t rank = 0;         // its level's rank in its class (core::LevelWord)
  // False: the driver lists no process of this vGPU on the GPU
  // (node/gpu_occupancy.h). Beside an LC, a best-effort vGPU that is not on
  // the GPU is no contender for the others' slices (an idle neighbour made
  // an LC wait 4.3x longer at p99 on an H200: docs/benchmarks.md, "An idle
  // second BE vGPU beside an LC"), and its own slice is the one it would get
  // on arriving. Latency-critical vGPUs, and every vGPU on a GPU without an
  // LC, count whatever this says.
  bool on_gpu = true;
};

// How best-effort vGPUs that contend for a GPU split it by `--compute`
// (docs/design.md, "Shares: slices or turns").
//   kSlices: each keeps the slice above (its share of be_period_us), and the
//     GPU's own round-robin does the rest: work-conserving as stock
//     time-slicing is, so a vGPU that cannot use its share (a launch-bound
//     training) leaves it to the others. Between jobs that run dry at every
//     step, the split drifts from the shares by a few points.
//   kTurns: GPU turns (core/pacing_board.h) charged by time: splits within
//     ~2 points between GPU-bound jobs, but a launch-bound tenant's gaps are
//     filled only at a 50 us slice (a third of stock's total lost).
// Measured side by side in docs/benchmarks.md ("Shares by slices or by turns").
enum class ShareMode : uint64_t { kSlices = 0, kTurns = 1 };
const char* ShareModeName(ShareMode mode);

// How GPU turns (core/pacing_board.h) treat best-effort vGPUs that do not
// hold the turn (docs/design.md, "GPU turns").
//   kBackfill: they launch at once and run in the holder's gaps at a short
//     slice; only capped vGPUs and LC holds wait.
//   kExclusive: their launches wait for their own turn, so one BE vGPU runs
//     at a time. Beside an LC and two GPU-bound BE vGPUs, with the tiny slice
//     beside LC, the LC's p99 fell 3-4x and the BEs kept more, but beside a
//     launch-bound BE the BEs lost about half of what they kept under slices
//     (docs/benchmarks.md, "Several best-effort processes beside an LC"):
//     for a node that wants its LC first whatever it costs the BEs.
enum class TurnStyle : uint64_t { kBackfill = 0, kExclusive = 1 };
const char* TurnStyleName(TurnStyle style);

struct TimeslicePolicyConfig {
  ShareMode be_shares = ShareMode::kSlices;
  TurnStyle be_turns = TurnStyle::kBackfill;
  // BE vGPUs alone split this period by share: 10 ms keeps every slice at or
  // above 1 ms for shares down to 10%, where switching costs ~1%.
  uint64_t be_period_us = 10000;
  uint64_t be_min_slice_us = 1000;
  // One BE beside LC: nothing else to switch to but the LC, so the slice can
  // be as small as LC latency wants (50 µs: LC p99 = alone + ~230 µs) at no
  // cost to the BE's throughput.
  uint64_t be_slice_beside_lc_us = core::kDefaultSliceBesideLcUs;
  // Two or more BE beside LC switch among themselves too, and every switch
  // costs up to ~180 µs of GPU time; they split this period (LC then waits up
  // to about one period), with no slice below the floor. 2000 µs loses <~15%
  // to BE-vs-BE switching, against ~25% for three BE at 200 µs.
  uint64_t be_period_with_lc_us = 2000;
  uint64_t be_min_slice_with_lc_us = 250;
  // LC keeps the GPU for as long as it has work.
  uint64_t lc_slice_us = 5000000;
  // Two or more LC vGPUs of the highest LC level, or two processes of one,
  // must not hold each other off for seconds: each gets the driver's default
  // compute slice. (LC vGPUs of lower levels get be_min_slice_with_lc_us
  // beside a higher one.)
  uint64_t lc_shared_slice_us = core::kDefaultSharedLcSliceUs;
};

// One timeslice per input vGPU, in input order. `other_processes`: GPU
// processes the driver lists on the GPU that are in none of `vgpus` (not
// gpuslice's, or not yet in a ledger); beside an LC each counts as one more
// best-effort contender, of no share.
std::vector<uint64_t> ComputeTimeslices(const std::vector<VgpuOnGpu>& vgpus, const TimeslicePolicyConfig& config = {},
                                        uint32_t other_processes = 0);

// One slice per input vGPU for the case that a latency-critical vGPU is live
// on the GPU: what ComputeTimeslices gives it with one more LC vGPU beside
// (the same as ComputeTimeslices when one is already there); for LC vGPUs of
// the highest LC level present, with one more of their level beside
// (lc_shared_slice_us).
// Best-effort processes switch to it by themselves when they see a live LC
// on the GPU's pacing board (core::DeviceLimit::timeslice_beside_lc_us); the
// top level's processes when several of them are on the GPU.
std::vector<uint64_t> ComputeTimeslicesBesideLc(const std::vector<VgpuOnGpu>& vgpus,
                                                const TimeslicePolicyConfig& config = {}, uint32_t other_processes = 0);

// For each input vGPU: a best-effort one that is the only best-effort
// contender for the GPU beside an LC, counted as ComputeTimeslicesBesideLc
// counts (itself, the others on the GPU, other_processes): the one that
// gets be_slice_beside_lc_us.
std::vector<bool> AloneBesideLc(const std::vector<VgpuOnGpu>& vgpus, uint32_t other_processes = 0);

}  // namespace gpuslice::policy

#endif  // GPUSLICE_POLICY_TIMESLICE_POLICY_H_
