// lc_activity.h — a latency-critical process's launches, published on its
// GPUs' pacing boards so that best-effort vGPUs hold their launches while the
// LC is in a burst of work, with no change to the application
// (core/pacing_board.h, "automatic hold").
//
// Why: an eager LC model (PyTorch without CUDA graphs) launches hundreds of
// small kernels per request with host gaps between them. In each gap its
// channel group runs dry, a busy best-effort one gets the GPU, and the LC's
// next kernel waits for that slice and two context switches (~180 µs each,
// docs/gpu-facts.md). Holding best-effort launches while the LC is active
// leaves the BE nothing queued to switch to once its queue drains.
//
// What "active" means is the LC's own linger: a launch keeps the burst going
// for `linger` after it. The linger is learnt from the process's own gaps
// between launches: twice the 95th percentile of gaps under the cap, never
// below kMinLingerUs (about two context switches: a shorter gap filled by a
// BE costs the LC more than the gap) nor above core::kMaxLingerUs. Gaps
// longer than the cap (between requests) are never held, so best-effort
// work runs there.
//
// Only a burst's later launches hold: the first launch after a gap longer
// than the cap publishes a linger of 0. A hold cannot evict BE work already
// queued (docs/gpu-facts.md); it only keeps the BE from queueing more before
// the LC's *next* launch. So an LC whose requests are one launch each (a
// single kernel, a CUDA graph replay) costs best-effort vGPUs nothing.
//
// And only an LC whose queue runs dry inside its bursts holds at all. A gap
// between launches is a gap on the GPU only if the LC's earlier work has
// finished by then; an LC whose host launches ahead of its GPU keeps its
// channel group busy through every host gap, and its 5 s slice keeps the
// GPU (docs/gpu-facts.md), so holding the BE buys it nothing, and a hold
// is not cheap: a launch-bound BE kept 63-85% of its rate beside a held
// eager LC, 92-116% beside the same LC unheld (docs/benchmarks.md, run 15).
// So each launch in a burst asks its stream's marker
// (event_markers.h) whether the work before it had finished, and the hold
// is published only while the dry launches' cost, two context switches
// each (kDryCostNs), is at least kHoldWorthFraction of the bursts' time.
// Until kEnoughLaunches have been seen, it holds (latency-critical first).
//
// GPUSLICE_LC_HOLD, read once by the LC process: `auto` (default), `off`, or
// a fixed linger in µs (clamped to core::kMaxLingerUs), which holds whether
// the queue runs dry or not.
//
// Hot path (AfterLaunch): one relaxed load unless this is an LC process that
// shares a GPU; then a clock read, one relaxed add to a process-local
// histogram, a store to the board at most every kStampIntervalNs, and under
// `auto` one cuCtxGetCurrent, cuEventQuery and cuEventRecord (the marker).
// No lock, no allocation, no syscall.
#ifndef GPUSLICE_INTERPOSER_LC_ACTIVITY_H_
#define GPUSLICE_INTERPOSER_LC_ACTIVITY_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace gpuslice::interposer {

class VgpuRuntime;

namespace lc_activity {

inline constexpr uint32_t kMinLingerUs = 300;
inline constexpr uint32_t kInitialLingerUs = 500;  // until enough gaps are seen
inline constexpr uint64_t kStampIntervalNs = 25'000;
// A launch after the LC's queue ran dry costs it about two context switches
// when a BE filled the gap (~175 µs each: docs/gpu-facts.md).
inline constexpr uint64_t kDryCostNs = 350'000;
// The hold is worth its cost to BE work while those switches would add at
// least this fraction to the LC's bursts (half the 10% that an eager LC's
// p50 may exceed its p50 alone, docs/benchmarks.md's matrix target).
inline constexpr double kHoldWorthFraction = 0.05;
inline constexpr double kEnoughLaunches = 64;

// True in a latency-critical process while another vGPU is live on one of
// its GPUs' boards and the hold is not off.
extern std::atomic<bool> g_on;

void NoteLaunch(CUstream stream, bool per_thread_stream);
inline void AfterLaunch(CUstream stream, bool per_thread_stream) {
  if (__builtin_expect(g_on.load(std::memory_order_relaxed), 0)) NoteLaunch(stream, per_thread_stream);
}

// The compute thread's periodic work: whether to publish, and the linger
// learnt from the gaps since the last tick.
void Tick(VgpuRuntime* runtime);

// The linger published now (µs; 0 = not publishing); for tests and logs.
uint32_t CurrentLingerUs();

// Whether, by what the last tick saw, a hold would pay for itself: `dry`
// launches after the queue ran dry, out of `launches` in bursts, over
// `burst_ns` of bursts. Pure; for Tick and tests.
bool HoldPaysOff(double dry, double launches, double burst_ns);

void AfterFork();

}  // namespace lc_activity
}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_LC_ACTIVITY_H_
