#include "interposer/pacer.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <mutex>
#include <string>

#include "core/pacing_board.h"
#include "core/shared_word.h"
#include "core/vgpu_layout.h"
#include "interposer/driver_table.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"
#include "port/log.h"
#include "port/mapped_file.h"

namespace gpuslice::interposer::pacer {

std::atomic<bool> g_active{false};

namespace {

constexpr uint64_t kMaxWaitNs = 2'000'000'000;     // then launch anyway (fail open)
constexpr uint64_t kSlowWaitNs = 500'000'000;      // then say why, once per wait
constexpr uint64_t kSpinNs = 50'000;                // yield-spin before sleeping
constexpr long kSleepNs = 30'000;                   // between gate checks
constexpr uint64_t kPacedTickNs = 1'000'000;        // compute thread, while paced
// ... and while this process's vGPU holds a turn: its drain ends the turn and
// is charged up to when it is seen, so it is looked for more often. (A
// training blocked in a synchronisation is not at the gate to see it itself.)
constexpr uint64_t kHolderTickNs = 250'000;
constexpr uint64_t kIdleTickNs = 20'000'000;        // ... otherwise
constexpr int kMaxMarkers = 512;
// A launch the gate let through lets the process's launches on that device
// through for this long without reading the board again, and the board
// hears of its launches at most this often. The board's decisions move at
// turn boundaries (milliseconds) and at an LC's activity stamps (at most
// every 25 us, lc_activity.h), so this costs no precision that exists, and
// spares a launch-bound application a scan of the board per launch.
constexpr uint64_t kDecisionReuseNs = 20'000;

// One GPU of the vGPU, as this process paces it.
struct Device {
  core::Board* board = nullptr;
  int member = -1;
  std::atomic<bool> paced{false};
  // (launch sequence << 1) | busy: busy = work queued since the last drain.
  std::atomic<uint64_t> work{0};
  std::atomic<bool> polling{false};  // one drain poll at a time
  std::atomic<uint64_t> go_until_ns{0};    // see kDecisionReuseNs
  std::atomic<uint64_t> launch_noted_ns{0};
};
Device g_devices[core::kMaxDevices];
int g_device_count = 0;
bool g_single_device = true;
core::PacingConfig g_config;  // set once by Start, before any device is paced
std::mutex g_start_mutex;
bool g_started = false;

// A marker: one event, re-recorded after each launch on one stream by one
// thread. Slots are claimed once and never move; `state` says who may use it.
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

std::atomic<int> g_captures{0};
std::atomic<bool> g_querying{false};
std::atomic<bool> g_markers_exhausted_logged{false};
std::atomic<bool> g_wait_logged{false};

// The markers this thread records, by (context, stream).
struct ThreadMarkers {
  struct Entry {
    CUcontext context;
    CUstream stream;
    int marker;
    uint32_t epoch;
  };
  Entry entries[8] = {};
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
  if (!g_markers_exhausted_logged.exchange(true)) {
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
  if (t.count == 8) {
    at = t.next_victim;
    t.next_victim = (t.next_victim + 1) % 8;
    ThreadMarkers::Orphan(t.entries[at]);
  } else {
    ++t.count;
  }
  t.entries[at] = {context, stream, marker, g_markers[marker].epoch.load(std::memory_order_relaxed)};
  return &g_markers[marker];
}

// Queries `slot`'s markers; when all are complete and nothing was launched
// meanwhile, tells the board this process has drained. Any thread.
void PollDrain(int slot) {
  Device& d = g_devices[slot];
  if (d.polling.exchange(true, std::memory_order_acquire)) return;
  g_querying.store(true, std::memory_order_seq_cst);
  if (g_captures.load(std::memory_order_seq_cst) > 0) {
    g_querying.store(false, std::memory_order_seq_cst);
    d.polling.store(false, std::memory_order_release);
    return;
  }
  const uint64_t work = d.work.load(std::memory_order_acquire);
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
  g_querying.store(false, std::memory_order_seq_cst);
  uint64_t expected = work;
  if (all_done && (work & 1) != 0 && d.work.compare_exchange_strong(expected, work & ~1ull)) {
    core::NoteBusy(d.board, d.member, false, port::MonotonicNanos());
  }
  d.polling.store(false, std::memory_order_release);
}

core::MemberSpec SpecOf(const core::DeviceLimit& limit) {
  core::MemberSpec spec;
  spec.weight = core::LoadRelaxed(limit.compute_share_pct);
  spec.cap_pct = core::LoadRelaxed(limit.compute_cap_pct);
  const uint32_t level = core::LoadRelaxed(limit.priority);
  spec.priority = core::LevelClass(level);
  spec.rank = core::LevelRank(level);
  return spec;
}

void ReleaseAtExit() {
  for (int s = 0; s < g_device_count; ++s) {
    Device& d = g_devices[s];
    if (d.board != nullptr && (d.work.exchange(0) & 1) != 0) core::NoteBusy(d.board, d.member, false, port::MonotonicNanos());
  }
}

// What a long wait at the gate is waiting for, for the log.
void LogSlowWait(Device& d, uint64_t waited_ns) {
  const core::BoardMember& me = d.board->members[d.member];
  int pending = 0;
  const int high = g_marker_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    pending += g_markers[i].state.load() == kLive &&
               g_markers[i].records.load() != g_markers[i].completed.load();
  }
  port::Log(port::LogLevel::kWarn, "a launch has waited %llu ms for its GPU turn: holder %d (we are %d), our busy "
            "processes %u, markers pending %d, captures %d, cap tokens %lld us, process busy %d",
            static_cast<unsigned long long>(waited_ns / 1'000'000), core::TurnHolder(*d.board), d.member,
            core::LoadSeqCst(me.busy_processes), pending, g_captures.load(),
            static_cast<long long>(core::LoadRelaxed(me.cap_tokens_ns) / 1000),
            static_cast<int>(d.work.load() & 1));
}

// GPUSLICE_TURNS: `backfill` (the default) or `exclusive`. Every vGPU on a
// GPU should use the same: an exclusive one beside backfilling ones waits
// for its turns while they do not.
bool BackfillTurnsWanted() {
  const char* v = getenv("GPUSLICE_TURNS");
  if (v == nullptr || *v == '\0' || strcmp(v, "backfill") == 0) return true;
  if (strcmp(v, "exclusive") == 0) return false;
  port::Log(port::LogLevel::kWarn, "GPUSLICE_TURNS=%s is neither `backfill` nor `exclusive`; using backfill", v);
  return true;
}

}  // namespace

void Start(VgpuRuntime* rt) {
  std::lock_guard<std::mutex> lock(g_start_mutex);
  if (g_started) return;
  g_started = true;
  const char* dir = getenv("GPUSLICE_VGPU_DIR");
  if (dir == nullptr) return;
  const core::Limits& limits = rt->limits();
  struct stat st {};
  stat((std::string(dir) + "/limits").c_str(), &st);
  const uint64_t id = core::VgpuIdOf(limits.name, st.st_ino);
  g_device_count = static_cast<int>(limits.device_count < core::kMaxDevices ? limits.device_count
                                                                            : core::kMaxDevices);
  g_single_device = g_device_count == 1;
  g_config.backfill = BackfillTurnsWanted();
  const uint64_t now = port::MonotonicNanos();
  for (int s = 0; s < g_device_count; ++s) {
    const std::string path = std::string(dir) + "/boards/" + core::BoardFileName(limits.devices[s].uuid);
    auto file = port::MappedFile::Open(path, sizeof(core::Board), port::MappedFile::Access::kReadWrite);
    Status valid = file.ok() ? core::ValidateBoard(*static_cast<core::Board*>(file->data()), path) : file.status();
    if (!valid.ok()) {
      port::Log(port::LogLevel::kWarn, "no pacing board (%s): compute shares and caps on this GPU rely on "
                "hardware timeslices only, and a --compute-cap is NOT enforced", valid.message().c_str());
      continue;
    }
    auto* board = static_cast<core::Board*>((new port::MappedFile(std::move(file.value())))->data());
    const int member = core::JoinBoard(board, id, SpecOf(limits.devices[s]), now);
    if (member < 0) {
      port::Log(port::LogLevel::kWarn, "the pacing board %s is full (%d vGPUs); this vGPU is not paced there",
                path.c_str(), core::kBoardMembers);
      continue;
    }
    g_devices[s].board = board;
    g_devices[s].member = member;
  }
  atexit(&ReleaseAtExit);
}

uint64_t Tick(VgpuRuntime* rt) {
  if (!g_started) return kIdleTickNs;
  const core::Limits& limits = rt->limits();
  const uint64_t now = port::MonotonicNanos();
  bool any = false, holding = false;
  for (int s = 0; s < g_device_count; ++s) {
    Device& d = g_devices[s];
    if (d.board == nullptr) continue;
    core::Heartbeat(d.board, d.member, SpecOf(limits.devices[s]), now);
    const bool paced = core::PacingNeeded(*d.board, d.member, now);
    if (paced != d.paced.load(std::memory_order_relaxed)) {
      d.paced.store(paced, std::memory_order_release);
      port::Log(port::LogLevel::kInfo, "GPU turns %s on device slot %d", paced ? "on" : "off", s);
      if (!paced && (d.work.fetch_and(~1ull) & 1) != 0) core::NoteBusy(d.board, d.member, false, now);
    }
    if (paced) {
      any = true;
      PollDrain(s);
      core::AdvanceTurn(d.board, port::MonotonicNanos(), g_config);
      holding |= core::TurnHolder(*d.board) == d.member;
    }
  }
  g_active.store(any, std::memory_order_release);
  return holding ? kHolderTickNs : any ? kPacedTickNs : kIdleTickNs;
}

int EnterGate() {
  if (g_captures.load(std::memory_order_acquire) > 0) return -1;  // captured work runs when the graph does
  int slot = 0;
  if (!g_single_device) {
    VgpuRuntime* rt = VgpuRuntime::Get();
    slot = rt == nullptr ? -1 : rt->CurrentDeviceSlot();
    if (slot < 0) return -1;
  }
  Device& d = g_devices[slot];
  if (!d.paced.load(std::memory_order_acquire)) return -1;
  // A latency-critical vGPU passes the gate only for higher levels' holds;
  // its launches are no part of turns, so nothing after them is tracked
  // (its activity is lc_activity's, which a launch noted here would break).
  const int tracked = core::LevelClass(core::LoadRelaxed(d.board->members[d.member].priority)) ==
                              core::Priority::kLatencyCritical
                          ? -1
                          : slot;
  const uint64_t start = port::MonotonicNanos();
  if (start < d.go_until_ns.load(std::memory_order_relaxed)) return tracked;
  uint64_t now = start;
  bool slow_logged = false;
  bool counted = false;
  while (core::TryEnter(d.board, d.member, now, g_config, now - start) != core::GateDecision::kGo) {
    if (!counted) {
      counted = true;
      if (VgpuRuntime* rt = VgpuRuntime::Get()) rt->ledger().CountGateWait();
    }
    core::NoteWaiting(d.board, d.member, now, g_config);
    PollDrain(slot);  // our own drain may be what the hand-over waits for
    if (now - start < kSpinNs) {
      sched_yield();
    } else {
      timespec ts{0, kSleepNs};
      nanosleep(&ts, nullptr);
    }
    now = port::MonotonicNanos();
    if (now - start > kSlowWaitNs && !slow_logged) {
      slow_logged = true;
      LogSlowWait(d, now - start);
    }
    if (now - start > kMaxWaitNs) {
      if (!g_wait_logged.exchange(true)) {
        port::Log(port::LogLevel::kWarn, "a launch waited over 2 s for its GPU turn; launching anyway (is another "
                  "process stuck holding the turn?)");
      }
      break;
    }
  }
  d.go_until_ns.store(now + kDecisionReuseNs, std::memory_order_relaxed);
  return tracked;
}

void AfterLaunch(int slot, CUstream stream, bool per_thread_stream) {
  Device& d = g_devices[slot];
  if (per_thread_stream && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  if (Marker* m = MarkerFor(stream, slot)) {
    if (GPUSLICE_REAL(cuEventRecord)(m->event, stream) == CUDA_SUCCESS) {
      m->records.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  uint64_t w = d.work.load(std::memory_order_relaxed);
  while (!d.work.compare_exchange_weak(w, (((w >> 1) + 1) << 1) | 1, std::memory_order_acq_rel)) {
  }
  const uint64_t now = port::MonotonicNanos();
  if ((w & 1) == 0) core::NoteBusy(d.board, d.member, true, now);
  if (now >= d.launch_noted_ns.load(std::memory_order_relaxed) + kDecisionReuseNs) {
    d.launch_noted_ns.store(now, std::memory_order_relaxed);
    core::NoteLaunch(d.board, d.member, now);
  }
}

void CaptureBegin() {
  g_captures.fetch_add(1, std::memory_order_seq_cst);
  while (g_querying.load(std::memory_order_seq_cst)) sched_yield();
}

bool Capturing() { return g_captures.load(std::memory_order_acquire) > 0; }

void CaptureEnd() {
  int c = g_captures.load(std::memory_order_relaxed);
  while (c > 0 && !g_captures.compare_exchange_weak(c, c - 1)) {
  }
}

namespace {
template <typename Match>
void ForgetMarkers(Match match) {
  // No poll may be querying an event of the context about to die.
  for (int s = 0; s < g_device_count; ++s) {
    while (g_devices[s].polling.exchange(true, std::memory_order_acquire)) sched_yield();
  }
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
  for (int s = 0; s < g_device_count; ++s) g_devices[s].polling.store(false, std::memory_order_release);
}
}  // namespace

void HoldBestEffort(uint64_t until_ns) {
  if (!g_started) return;
  const uint64_t now = port::MonotonicNanos();
  for (int s = 0; s < g_device_count; ++s) {
    if (g_devices[s].board != nullptr) core::HoldBestEffort(g_devices[s].board, g_devices[s].member, until_ns, now);
  }
}

void ReleaseBestEffort() {
  if (!g_started) return;
  const uint64_t now = port::MonotonicNanos();
  for (int s = 0; s < g_device_count; ++s) {
    if (g_devices[s].board != nullptr) core::ReleaseHold(g_devices[s].board, g_devices[s].member, now);
  }
}

TurnRole RoleOn(int slot) {
  if (slot < 0 || slot >= g_device_count || !g_config.backfill) return TurnRole::kNone;
  const Device& d = g_devices[slot];
  if (d.board == nullptr || !d.paced.load(std::memory_order_acquire)) return TurnRole::kNone;
  // A capped vGPU runs only in its own (exclusive) turns: the policy's slice.
  if (core::LoadRelaxed(d.board->members[d.member].cap_pct) != 0) return TurnRole::kNone;
  return core::TurnHolder(*d.board) == d.member ? TurnRole::kHolder : TurnRole::kBackfiller;
}

Seat SeatOf(int slot) {
  if (slot < 0 || slot >= g_device_count || g_devices[slot].board == nullptr) return {};
  return {g_devices[slot].board, g_devices[slot].member};
}

int SeatCount() { return g_device_count; }

void AfterFork() {
  g_active.store(false);
  for (Marker& m : g_markers) m.state.store(kFree);
  g_marker_high.store(0);
  g_captures.store(0);
  t_markers.count = 0;
  for (Device& d : g_devices) {
    d.paced.store(false);
    d.work.store(0);
    d.polling.store(false);
    d.go_until_ns.store(0);
    d.launch_noted_ns.store(0);
  }
  // The boards stay mapped and joined: the child is in the same vGPU.
}

void ForgetContext(CUcontext context) {
  ForgetMarkers([&](const Marker& m) { return m.context == context; });
}

void ForgetDevice(CUdevice device) {
  ForgetMarkers([&](const Marker& m) { return m.device == device; });
}

}  // namespace gpuslice::interposer::pacer
