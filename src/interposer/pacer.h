// pacer.h — this process's side of GPU turns (core/pacing_board.h): the gate
// in front of every kernel and graph launch, and the drain tracking behind it.
//
// A process is *paced* on a GPU while its vGPU has a hard cap there, or while
// another vGPU uses the same GPU; an uncapped latency-critical one only while
// an LC vGPU of a higher level does (core::PacingNeeded). Otherwise the launch hooks cost
// one relaxed load (Active()) and nothing else: a vGPU alone on its GPU runs
// exactly as without gpuslice, whatever its share.
//
// While paced, each launch:
//   1. waits at the gate until its vGPU holds the GPU's turn (TryEnter); the
//      wait marks the vGPU as demanding and is bounded (a wait longer than
//      2 s launches anyway and says so: the application is never hung).
//      Under backfill turns (GPUSLICE_TURNS=backfill, the default) only
//      capped vGPUs and LC holds wait; the others go at once and the GPU's
//      slices order them (RoleOn);
//   2. marks its process busy and on its way, then looks once more that the
//      turn is still its vGPU's (core::LaunchMayGo): an exclusive turn is
//      handed over only while its holder's processes are all drained, and
//      a launch that passed the gate counts as queued work before it looks;
//   3. launches;
//   4. counts the launch on its marker, one per (thread, context, stream),
//      looked up before the launch (event_markers.h, which also owns the
//      stream-capture rule below).
// A marker whose stream has not run dry means the process has work queued on
// the GPU. When none has, the process has drained; the board then knows when
// the holder's GPU time ended, and hands the turn over (see the board for
// why turns are charged from their start to the holder's drain).
//
// Markers are polled by the compute thread every millisecond and by the
// process's own launches while they wait. No marker is recorded or queried
// while any stream of the process is being captured into a graph: capture
// forbids it (in global mode, any thread's query invalidates the capture),
// and captured work does not run until the graph is launched, which is
// paced itself.
//
// Hot path: no lock, no allocation, no syscall until the launch must wait;
// while paced, one cuCtxGetCurrent, one clock read and the gate's atomics
// per launch (a cuEventRecord too on a per-thread stream), and a
// cuEventCreate the first time a thread launches on a stream
// (docs/benchmarks.md, "What a paced launch costs"). The one exception: the first launch after
// the compute thread went to sleep quietly wakes it (a futex wake), at most
// once per quiet spell.
#ifndef GPUSLICE_INTERPOSER_PACER_H_
#define GPUSLICE_INTERPOSER_PACER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "interposer/event_markers.h"
#include "interposer/lc_activity.h"
#include "interposer/observers.h"

namespace gpuslice::core {
struct Board;
struct PacingConfig;
}

namespace gpuslice::interposer {

class VgpuRuntime;

namespace pacer {

extern std::atomic<bool> g_active;  // some device of this process is paced

// Opens the boards of the vGPU's GPUs and joins them; slow path, once, from
// the compute thread's start.
void Start(VgpuRuntime* runtime);
// The compute thread's periodic work: heartbeat, share/cap changes, whether
// to pace, drain tracking, turn hand-over. Returns the nanoseconds until it
// wants to run again.
uint64_t Tick(VgpuRuntime* runtime);
// The compute thread's sleep after a tick. While the last tick found this
// process quiet (paced, best-effort, nothing queued), its next launch or
// gate wait cuts the sleep short (the launch pays one futex wake for it).
void SleepBetweenTicks(uint64_t ns);

// Launch path (paced only): EnterGate returns the device slot it waited for,
// or -1 when this launch is not paced or not tracked (an uncapped LC vGPU's). A
// tracked launch is marked on its way from before the gate's last look at
// the turn until AfterLaunch, which counts it on its marker
// (markers::MarkerBefore, looked up before the launch) if it `launched`,
// and must follow every EnterGate that returned a slot, with the time the
// gate let it go (`*gate_ns`).
int EnterGate(uint64_t* gate_ns);
void AfterLaunch(int slot, int marker, CUstream stream, bool launched, uint64_t gate_ns);

// Also where a latency-critical process publishes its activity
// (lc_activity.h), paced or not, and where the launch's
// optional observers (observers.h) learn of it, once it is submitted.
template <typename Launch>
CUresult Paced(CUstream stream, bool per_thread_stream, Launch launch) {
  if (__builtin_expect(!g_active.load(std::memory_order_relaxed), 1)) {
    const CUresult r = launch();
    lc_activity::AfterLaunch();
    AfterEveryLaunch();
    return r;
  }
  uint64_t gate_ns = 0;
  const int slot = EnterGate(&gate_ns);
  if (per_thread_stream && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  const int marker = slot >= 0 ? markers::MarkerBefore(stream, slot) : -1;
  const CUresult r = launch();
  if (slot >= 0) AfterLaunch(slot, marker, stream, r == CUDA_SUCCESS, gate_ns);
  lc_activity::AfterLaunch();
  AfterEveryLaunch();
  return r;
}

// A context is going away: forget its markers before their events die.
void ForgetContext(CUcontext context);
void ForgetDevice(CUdevice device);
// A stream is about to be destroyed: its markers stop querying it.
void ForgetStream(CUstream stream);
// This (latency-critical) vGPU holds best-effort launches on its GPUs until
// `until_ns` (CLOCK_MONOTONIC; bounded by core::kMaxHoldNs), or releases
// them. No-op in a best-effort vGPU or before the pacer started.
void HoldBestEffort(uint64_t until_ns);
void ReleaseBestEffort();

// What this process's channel groups on device `slot` should be under
// backfill turns (core/pacing_board.h): kNone where it is not paced, turns
// are exclusive or its vGPU is capped (the policy's slice applies: a capped
// vGPU runs only in its own turns); where the node shares the GPU by slices
// (the default: no kDeviceFlagShareTurns), kBackfiller while a capped vGPU
// holds the turn, else kNone; else whether its vGPU holds the turn
// there (the long slice) or backfills (the short one).
enum class TurnRole { kNone, kHolder, kBackfiller };
TurnRole RoleOn(int slot);

// The board seat of the vGPU's device `slot` in this process, or
// {nullptr, -1} where it has none (no board, full board, not started).
struct Seat {
  core::Board* board = nullptr;
  int member = -1;
  const core::PacingConfig* config = nullptr;  // how to read the board (its roster)
};
Seat SeatOf(int slot);
int SeatCount();  // device slots, seated or not

// In a forked child: nothing of the parent's CUDA state is valid; start over.
void AfterFork();

}  // namespace pacer
}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_PACER_H_
