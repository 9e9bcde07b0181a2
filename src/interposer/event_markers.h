// event_markers.h — the markers that tell the pacer (pacer.h) whether this
// process still has work queued on a GPU.
//
// A marker stands for one (thread, context, stream) that launches paced
// work: the launching thread counts its launches on it, and a poll asks the
// driver whether the stream has run dry (cuStreamQuery, in the marker's
// context); a launch counted before the query is covered by its answer.
// A per-thread stream names the calling thread's own stream, which no
// poller can query, so its launches re-record the marker's event instead
// and the poll queries that. Slots of the pool (512) are claimed once and
// never move; a thread that exits, or evicts one of its 8 cached streams,
// orphans its marker, and the next poll frees an orphan once its work is
// done.
//
// A destroyed stream's handle must never be queried (StreamDestroyed): its
// queued work gets one last event recorded, and the poll queries that.
// The lookup comes before the launch (MarkerBefore), so a stream destroyed
// right after a launch of another thread still finds that launch's marker.
//
// Why not an event recorded after every launch (what this was before): a
// cuEventRecord was 188-330 ns of the 560-850 ns a paced launch cost on an
// H200 (docs/benchmarks.md, "What a paced launch costs"); a poll runs at
// most every millisecond per marker.
//
// Stream capture forbids recording or querying (in global capture mode any
// thread's query invalidates the capture), so no marker is touched while a
// capture is open: CaptureBegin waits for a running poll to finish, and
// Poll does nothing while one is open.
//
// Threads: MarkerBefore and NoteLaunch run on the application's launching
// thread (hot path of a paced launch: no lock, no allocation, no syscall;
// one cuCtxGetCurrent and a store, plus a cuEventRecord on a per-thread
// stream, and a cuEventCreate the first time a thread launches on a
// stream). Poll runs on the compute thread or a launch waiting at the gate;
// the caller allows one poll per device slot at a time. Forget* and
// StreamDestroyed run with every poll stopped by the caller.
#ifndef GPUSLICE_INTERPOSER_EVENT_MARKERS_H_
#define GPUSLICE_INTERPOSER_EVENT_MARKERS_H_

#include <cuda.h>

#include <atomic>

namespace gpuslice::interposer::markers {

extern std::atomic<int> g_captures;  // stream captures open in this process

// The calling thread's marker for a launch on `stream` (CU_STREAM_PER_THREAD
// for the per-thread stream) on device slot `slot`, looked up before the
// launch; -1 leaves the launch untracked (a pool with no free slot, logged
// once). NoteLaunch counts the launch on it, once submitted.
int MarkerBefore(CUstream stream, int slot);
void NoteLaunch(int marker, CUstream stream);

// Queries `slot`'s markers: true when the work of every one is done (errors
// count as done), false while work is queued or a capture is open.
bool Poll(int slot);

// Live markers with launches not yet seen done, for the log.
int Pending();

// Stream capture begins/ends (hooks_launch.cc); whether one is open.
void CaptureBegin();
void CaptureEnd();
inline bool Capturing() { return g_captures.load(std::memory_order_acquire) > 0; }

// A context or device is going away: its markers' slots are freed (their
// events die with the context).
void ForgetContext(CUcontext context);
void ForgetDevice(CUdevice device);
// `stream` is about to be destroyed (a no-op for the legacy and per-thread
// streams); the calling thread's context may be any.
void StreamDestroyed(CUstream stream);

// In a forked child: nothing of the parent's CUDA state is valid.
void AfterFork();

}  // namespace gpuslice::interposer::markers

#endif  // GPUSLICE_INTERPOSER_EVENT_MARKERS_H_
