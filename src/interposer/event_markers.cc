#include "interposer/event_markers.h"

#include <sched.h>

#include "interposer/driver_table.h"
#include "port/log.h"

namespace gpuslice::interposer::markers {

std::atomic<int> g_captures{0};

namespace {

constexpr int kMaxMarkers = 512;
constexpr int kThreadStreams = 8;  // (context, stream) pairs a thread caches

// Slots are claimed once and never move; `state` says who may use one.
enum MarkerState : uint32_t { kFree = 0, kClaiming, kLive, kOrphaned };
struct Marker {
  std::atomic<uint32_t> state{kFree};
  CUevent event = nullptr;
  CUcontext context = nullptr;
  CUstream stream = nullptr;  // as the launches named it
  CUdevice device = -1;
  int slot = -1;
  // Whether `event`, re-recorded by the launching thread (a per-thread
  // stream, which no other thread can name) or once at the stream's
  // destruction, says when the work is done; else cuStreamQuery does. Written
  // at the claim, or with every poll stopped (StreamDestroyed).
  std::atomic<bool> by_event{false};
  std::atomic<uint32_t> epoch{0};  // bumped at each claim: stale thread caches notice
  // Launches (or, by event, records) so far; written by the launching thread only.
  std::atomic<uint64_t> submitted{0};
  std::atomic<uint64_t> completed{0};  // of `submitted`, those seen done (the poller's)
};
Marker g_markers[kMaxMarkers];
std::atomic<int> g_marker_high{0};

// Polls under way: those of two device slots may overlap, and a capture must
// wait for both (a bool, cleared by the first to end, let it begin early).
std::atomic<int> g_querying{0};
std::atomic<bool> g_exhausted_logged{false};

// The markers this thread records, by (context, stream).
struct ThreadMarkers {
  struct Entry {
    CUcontext context;
    CUstream stream;
    int marker;
    uint32_t epoch;
  };
  Entry entries[kThreadStreams] = {};
  int count = 0;
  int next_victim = 0;
  ~ThreadMarkers() {
    for (int i = 0; i < count; ++i) Orphan(entries[i]);
  }
  // The poller destroys an orphan's event once it completes.
  static void Orphan(const Entry& e) {
    if (e.marker < 0) return;
    Marker& m = g_markers[e.marker];
    uint32_t live = kLive;
    if (m.epoch.load(std::memory_order_relaxed) == e.epoch) {
      m.state.compare_exchange_strong(live, kOrphaned, std::memory_order_acq_rel);
    }
  }
};
thread_local ThreadMarkers t_markers;

bool IsPerThread(CUstream stream) { return stream == CU_STREAM_PER_THREAD; }
bool IsDestroyable(CUstream stream) { return stream != nullptr && stream != CU_STREAM_LEGACY && !IsPerThread(stream); }

int ClaimMarker(CUcontext context, CUstream stream, int slot) {
  CUevent event = nullptr;
  if (GPUSLICE_REAL(cuEventCreate)(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return -1;
  CUdevice device = -1;
  GPUSLICE_REAL(cuCtxGetDevice)(&device);
  for (int i = 0; i < kMaxMarkers; ++i) {
    uint32_t expected = kFree;
    if (!g_markers[i].state.compare_exchange_strong(expected, kClaiming, std::memory_order_acq_rel)) continue;
    Marker& m = g_markers[i];
    m.event = event;
    m.context = context;
    m.stream = stream;
    m.device = device;
    m.slot = slot;
    m.by_event.store(IsPerThread(stream), std::memory_order_relaxed);
    m.submitted.store(0, std::memory_order_relaxed);
    m.completed.store(0, std::memory_order_relaxed);
    m.epoch.fetch_add(1, std::memory_order_relaxed);
    m.state.store(kLive, std::memory_order_release);
    int high = g_marker_high.load(std::memory_order_relaxed);
    while (high < i + 1 && !g_marker_high.compare_exchange_weak(high, i + 1)) {
    }
    return i;
  }
  GPUSLICE_REAL(cuEventDestroy_v2)(event);
  if (!g_exhausted_logged.exchange(true)) {
    port::Log(port::LogLevel::kWarn, "more than %d (thread, stream) pairs launch work; launches on the others are "
              "paced but not tracked, so their GPU time is not charged exactly", kMaxMarkers);
  }
  return -1;
}

Marker* MarkerFor(CUstream stream, int slot) {
  CUcontext context = nullptr;
  if (GPUSLICE_REAL(cuCtxGetCurrent)(&context) != CUDA_SUCCESS || context == nullptr) return nullptr;
  ThreadMarkers& t = t_markers;
  for (int i = 0; i < t.count; ++i) {
    ThreadMarkers::Entry& e = t.entries[i];
    if (e.context == context && e.stream == stream) {
      if (e.marker >= 0 && g_markers[e.marker].state.load(std::memory_order_acquire) == kLive &&
          g_markers[e.marker].epoch.load(std::memory_order_relaxed) == e.epoch) {
        return &g_markers[e.marker];
      }
      e.marker = ClaimMarker(context, stream, slot);  // its context went away and came back
      if (e.marker < 0) return nullptr;
      e.epoch = g_markers[e.marker].epoch.load(std::memory_order_relaxed);
      return &g_markers[e.marker];
    }
  }
  const int marker = ClaimMarker(context, stream, slot);
  if (marker < 0) return nullptr;
  int at = t.count;
  if (t.count == kThreadStreams) {
    at = t.next_victim;
    t.next_victim = (t.next_victim + 1) % kThreadStreams;
    ThreadMarkers::Orphan(t.entries[at]);
  } else {
    ++t.count;
  }
  t.entries[at] = {context, stream, marker, g_markers[marker].epoch.load(std::memory_order_relaxed)};
  return &g_markers[marker];
}

}  // namespace

int MarkerBefore(CUstream stream, int slot) {
  const Marker* m = MarkerFor(stream, slot);
  return m == nullptr ? -1 : static_cast<int>(m - g_markers);
}

void NoteLaunch(int marker, CUstream stream) {
  if (marker < 0) return;
  Marker& m = g_markers[marker];
  // By the stream's kind, not `by_event`: a stream destroyed since the
  // lookup flips that, and this thread must not record on a dead stream.
  if (IsPerThread(stream) && GPUSLICE_REAL(cuEventRecord)(m.event, stream) != CUDA_SUCCESS) return;
  // This thread is the only writer: no read-modify-write on the hot path.
  m.submitted.store(m.submitted.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

namespace {
// Whether the work `m`'s launches queued is done: CUDA_ERROR_NOT_READY while
// it is queued. A stream is queried in the marker's context, which its
// legacy stream (nullptr, CU_STREAM_LEGACY) stands for.
CUresult QueryWork(const Marker& m) {
  if (m.by_event.load(std::memory_order_relaxed)) return GPUSLICE_REAL(cuEventQuery)(m.event);
  if (GPUSLICE_REAL(cuCtxPushCurrent_v2)(m.context) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  const CUresult r = GPUSLICE_REAL(cuStreamQuery)(m.stream);
  CUcontext popped = nullptr;
  GPUSLICE_REAL(cuCtxPopCurrent_v2)(&popped);
  return r;
}
}  // namespace

bool Poll(int slot) {
  // Sequentially consistent with CaptureBegin: either the capture sees this
  // poll and waits for it, or this poll sees the capture and queries nothing.
  g_querying.fetch_add(1, std::memory_order_seq_cst);
  if (g_captures.load(std::memory_order_seq_cst) > 0) {
    g_querying.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  bool all_done = true;
  const int high = g_marker_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    Marker& m = g_markers[i];
    const uint32_t state = m.state.load(std::memory_order_acquire);
    if ((state != kLive && state != kOrphaned) || m.slot != slot) continue;
    // Read before the query: the launches it counts were submitted before
    // it, so a query that finds the work done covers them.
    const uint64_t submitted = m.submitted.load(std::memory_order_acquire);
    if (submitted != m.completed.load(std::memory_order_relaxed)) {
      if (QueryWork(m) == CUDA_ERROR_NOT_READY) {
        all_done = false;
        continue;
      }
      m.completed.store(submitted, std::memory_order_release);  // done, or an error: nothing to wait for
    }
    if (state == kOrphaned) {
      GPUSLICE_REAL(cuEventDestroy_v2)(m.event);
      m.state.store(kFree, std::memory_order_release);
    }
  }
  g_querying.fetch_sub(1, std::memory_order_seq_cst);
  return all_done;
}

int Pending() {
  int pending = 0;
  const int high = g_marker_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    pending += g_markers[i].state.load() == kLive && g_markers[i].submitted.load() != g_markers[i].completed.load();
  }
  return pending;
}

void CaptureBegin() {
  g_captures.fetch_add(1, std::memory_order_seq_cst);
  while (g_querying.load(std::memory_order_seq_cst) != 0) sched_yield();
}

void CaptureEnd() {
  int c = g_captures.load(std::memory_order_relaxed);
  while (c > 0 && !g_captures.compare_exchange_weak(c, c - 1)) {
  }
}

namespace {
template <typename Match>
void Forget(Match match) {
  const int high = g_marker_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    Marker& m = g_markers[i];
    uint32_t state = m.state.load(std::memory_order_acquire);
    if ((state == kLive || state == kOrphaned) && match(m) &&
        m.state.compare_exchange_strong(state, kClaiming, std::memory_order_acq_rel)) {
      // The event dies with its context; only the slot is given back.
      m.state.store(kFree, std::memory_order_release);
    }
  }
}
}  // namespace

void ForgetContext(CUcontext context) {
  Forget([&](const Marker& m) { return m.context == context; });
}

void ForgetDevice(CUdevice device) {
  Forget([&](const Marker& m) { return m.device == device; });
}

void StreamDestroyed(CUstream stream) {
  if (!IsDestroyable(stream)) return;
  const int high = g_marker_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    Marker& m = g_markers[i];
    uint32_t state = m.state.load(std::memory_order_acquire);
    if ((state != kLive && state != kOrphaned) || m.stream != stream) continue;
    // Queued work outlives the stream: one last record, which the poller
    // queries instead of the stream, covers it. A thread launching on a new
    // stream of the same handle claims another marker.
    if (!m.by_event.load(std::memory_order_relaxed) &&
        m.submitted.load(std::memory_order_acquire) != m.completed.load(std::memory_order_relaxed)) {
      CUresult r = GPUSLICE_REAL(cuCtxPushCurrent_v2)(m.context);
      if (r == CUDA_SUCCESS) {
        r = GPUSLICE_REAL(cuEventRecord)(m.event, stream);
        CUcontext popped = nullptr;
        GPUSLICE_REAL(cuCtxPopCurrent_v2)(&popped);
      }
      if (r != CUDA_SUCCESS) m.completed.store(m.submitted.load(std::memory_order_acquire), std::memory_order_release);
    }
    m.by_event.store(true, std::memory_order_relaxed);
    if (state == kLive) m.state.compare_exchange_strong(state, kOrphaned, std::memory_order_acq_rel);
  }
}

void AfterFork() {
  for (Marker& m : g_markers) m.state.store(kFree);
  g_marker_high.store(0);
  g_captures.store(0);
  g_querying.store(0);  // a poll of another thread of the parent never ends here
  t_markers.count = 0;
}

}  // namespace gpuslice::interposer::markers
