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
  CUdevice device = -1;
  int slot = -1;
  std::atomic<uint32_t> epoch{0};  // bumped at each claim: stale thread caches notice
  std::atomic<uint64_t> records{0};
  std::atomic<uint64_t> completed{0};
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

int ClaimMarker(CUcontext context, int slot) {
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
    m.device = device;
    m.slot = slot;
    m.records.store(0, std::memory_order_relaxed);
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
      e.marker = ClaimMarker(context, slot);  // its context went away and came back
      if (e.marker < 0) return nullptr;
      e.epoch = g_markers[e.marker].epoch.load(std::memory_order_relaxed);
      return &g_markers[e.marker];
    }
  }
  const int marker = ClaimMarker(context, slot);
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

void Record(CUstream stream, int slot) {
  if (Marker* m = MarkerFor(stream, slot)) {
    if (GPUSLICE_REAL(cuEventRecord)(m->event, stream) == CUDA_SUCCESS) {
      m->records.fetch_add(1, std::memory_order_acq_rel);
    }
  }
}

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
    const uint64_t records = m.records.load(std::memory_order_acquire);
    if (records != m.completed.load(std::memory_order_relaxed)) {
      const CUresult r = GPUSLICE_REAL(cuEventQuery)(m.event);
      if (r == CUDA_ERROR_NOT_READY) {
        all_done = false;
        continue;
      }
      m.completed.store(records, std::memory_order_release);  // done, or an error: nothing to wait for
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
    pending += g_markers[i].state.load() == kLive && g_markers[i].records.load() != g_markers[i].completed.load();
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

void AfterFork() {
  for (Marker& m : g_markers) m.state.store(kFree);
  g_marker_high.store(0);
  g_captures.store(0);
  g_querying.store(0);  // a poll of another thread of the parent never ends here
  t_markers.count = 0;
}

}  // namespace gpuslice::interposer::markers
