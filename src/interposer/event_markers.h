// event_markers.h — the pool of marker events that tells the pacer (pacer.h)
// whether this process still has work queued on a GPU.
//
// A marker is one CUevent, re-recorded after each paced launch on one
// stream by one thread: one per (thread, context, stream), created at the
// first such launch and kept. A marker not yet complete means work is
// queued; when every marker of a device slot is complete the process has
// drained there. Slots of the pool (512) are claimed once and never move; a
// thread that exits, or evicts one of its 8 cached streams, orphans its
// marker, and the next poll destroys the orphan's event once it completes.
//
// Stream capture forbids recording or querying events (in global capture
// mode any thread's query invalidates the capture), so no marker is touched
// while a capture is open: CaptureBegin waits for a running poll to finish,
// and Poll does nothing while one is open.
//
// Threads: Record runs on the application's launching thread (hot path of a
// paced launch: no lock, no allocation, no syscall; one cuCtxGetCurrent and
// one cuEventRecord, a cuEventCreate the first time a thread launches on a
// stream). Poll runs on the compute thread or a launch waiting at the gate;
// the caller allows one poll per device slot at a time. Forget* run at
// context teardown, with every poll stopped by the caller.
#ifndef GPUSLICE_INTERPOSER_EVENT_MARKERS_H_
#define GPUSLICE_INTERPOSER_EVENT_MARKERS_H_

#include <cuda.h>

#include <atomic>

namespace gpuslice::interposer::markers {

extern std::atomic<int> g_captures;  // stream captures open in this process

// Records the calling thread's marker for `stream` after a launch on device
// slot `slot`. A pool with no free slot leaves the launch untracked (logged
// once).
void Record(CUstream stream, int slot);

// Queries `slot`'s markers: true when every one has completed (errors count
// as complete), false while work is queued or a capture is open.
bool Poll(int slot);

// Markers recorded but not yet seen complete, for the log.
int Pending();

// Stream capture begins/ends (hooks_launch.cc); whether one is open.
void CaptureBegin();
void CaptureEnd();
inline bool Capturing() { return g_captures.load(std::memory_order_acquire) > 0; }

// A context or device is going away: its markers' slots are freed (their
// events die with the context).
void ForgetContext(CUcontext context);
void ForgetDevice(CUdevice device);

// In a forked child: nothing of the parent's CUDA state is valid.
void AfterFork();

}  // namespace gpuslice::interposer::markers

#endif  // GPUSLICE_INTERPOSER_EVENT_MARKERS_H_
