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
// Whether to hold at all is tried, not assumed (core/hold_trial.h): what the
// hold buys an LC depends on the GPU and the neighbour (on an H100 about 30%
// of the eager LC's p50, on an H200 nothing, while it always costs the
// neighbour). So the process measures its requests of two launches or more
// (the hold cannot change a one-launch request), each from a burst's first
// launch to the end of the last synchronisation (cuCtxSynchronize,
// cuStreamSynchronize, cuEventSynchronize: hooks_sync.cc) before the next
// burst, in alternating epochs with the hold on and off, and keeps the hold
// only where it shortened them. An LC whose requests are never measured
// (it never synchronises) keeps holding.
//
// GPUSLICE_LC_HOLD, read once by the LC process: `auto` (default: tried),
// `on` (always, with the learnt linger), `off`, or a fixed linger in µs
// (clamped to core::kMaxLingerUs).
//
// Hot path (AfterLaunch): one relaxed load unless this is an LC process that
// shares a GPU; then a clock read, one relaxed add to a process-local
// histogram, and a store to the board at most every kStampIntervalNs; at a
// burst's first launch, a few stores for the request it ends. AfterSync: one
// relaxed load, and in such a process one clock read and a store. No lock,
// no allocation, no syscall.
#ifndef GPUSLICE_INTERPOSER_LC_ACTIVITY_H_
#define GPUSLICE_INTERPOSER_LC_ACTIVITY_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::interposer {

class VgpuRuntime;

namespace lc_activity {

inline constexpr uint32_t kMinLingerUs = 300;
inline constexpr uint32_t kInitialLingerUs = 500;  // until enough gaps are seen
inline constexpr uint64_t kStampIntervalNs = 25'000;

// True in a latency-critical process while another vGPU is live on one of
// its GPUs' boards and the hold is not off.
extern std::atomic<bool> g_on;

void NoteLaunch();
inline void AfterLaunch() {
  if (__builtin_expect(g_on.load(std::memory_order_relaxed), 0)) NoteLaunch();
}

// After an application's synchronisation returned (hooks_sync.cc).
void NoteSync();
inline void AfterSync() {
  if (__builtin_expect(g_on.load(std::memory_order_relaxed), 0)) NoteSync();
}

// The compute thread's periodic work: whether to publish, and the linger
// learnt from the gaps since the last tick.
void Tick(VgpuRuntime* runtime);

// The linger published now (µs; 0 = not publishing); for tests and logs.
uint32_t CurrentLingerUs();

void AfterFork();

}  // namespace lc_activity
}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_LC_ACTIVITY_H_
