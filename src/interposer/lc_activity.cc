#include "interposer/lc_activity.h"

#include <stdlib.h>

#include "core/hold_trial.h"
#include "core/pacing_board.h"
#include "interposer/pacer.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"
#include "port/log.h"

namespace gpuslice::interposer::lc_activity {

std::atomic<bool> g_on{false};

namespace {

// Gaps between consecutive launches of the process, by power of two of µs:
// bucket k holds gaps in [2^k, 2^(k+1)) µs (bucket 0 also holds < 1 µs), up
// to the linger cap; longer gaps are not counted (they are between bursts).
constexpr int kBuckets = 11;  // 2^11 µs = 2048 µs > core::kMaxLingerUs
std::atomic<uint64_t> g_gaps[kBuckets];
std::atomic<uint64_t> g_last_launch_ns{0};
std::atomic<uint64_t> g_last_stamp_ns{0};
std::atomic<uint32_t> g_linger_us{0};

// Requests, as the hold's trial measures them: from a burst's first launch to
// the end of the last synchronisation before the next burst began. The
// launch that starts a burst finishes the request before it into a ring,
// which the compute thread empties at its ticks (a request lasts more than
// the 2 ms between bursts, a tick at most 20 ms: the ring holds 16). Only
// requests of two launches or more are measured: a request's first launch
// holds nobody, so the hold cannot change a one-launch request (a kernel, a
// CUDA graph replay), and a verdict drawn from those would stand for the
// process's next, burstier requests (the matrix's LC runs graph requests,
// then eager ones).
std::atomic<uint64_t> g_burst_start_ns{0};
std::atomic<bool> g_burst_has_more{false};    // a second launch came
std::atomic<uint32_t> g_burst_generation{0};  // the trial's arm when it began
std::atomic<uint64_t> g_last_sync_ns{0};
std::atomic<uint32_t> g_generation{0};  // published by the compute thread
constexpr uint32_t kRequestRing = 16;
constexpr uint64_t kMaxRequestNs = 1'000'000'000;  // longer: not a request
std::atomic<uint64_t> g_requests[kRequestRing];    // generation << 32 | µs
std::atomic<uint64_t> g_requests_written{0};

// Only one launch sees a gap long enough to start a burst, so one writer.
void FinishRequest(uint64_t burst_start_ns) {
  const uint64_t start = g_burst_start_ns.load(std::memory_order_relaxed);
  const uint64_t sync = g_last_sync_ns.load(std::memory_order_relaxed);
  if (start != 0 && g_burst_has_more.load(std::memory_order_relaxed) && sync > start && sync - start < kMaxRequestNs) {
    const uint64_t n = g_requests_written.load(std::memory_order_relaxed);
    const uint64_t generation = g_burst_generation.load(std::memory_order_relaxed);
    g_requests[n % kRequestRing].store(generation << 32 | (sync - start) / 1000, std::memory_order_relaxed);
    g_requests_written.store(n + 1, std::memory_order_release);
  }
  g_burst_generation.store(g_generation.load(std::memory_order_relaxed), std::memory_order_relaxed);
  g_burst_start_ns.store(burst_start_ns, std::memory_order_relaxed);
  g_burst_has_more.store(false, std::memory_order_relaxed);
}

enum class Mode { kAuto, kOn, kOff, kFixed };
struct Config {
  Mode mode = Mode::kAuto;
  uint32_t fixed_us = 0;
};

Config ReadConfig() {
  Config c;
  const char* v = getenv("GPUSLICE_LC_HOLD");
  if (v == nullptr || *v == '\0' || __builtin_strcmp(v, "auto") == 0) return c;
  if (__builtin_strcmp(v, "off") == 0) {
    c.mode = Mode::kOff;
    return c;
  }
  if (__builtin_strcmp(v, "on") == 0) {
    c.mode = Mode::kOn;
    return c;
  }
  char* end = nullptr;
  const unsigned long us = strtoul(v, &end, 10);
  if (end == v || *end != '\0') {
    port::Log(port::LogLevel::kWarn,
              "GPUSLICE_LC_HOLD=%s is not auto, on, off or a number of microseconds; using "
              "auto",
              v);
    return c;
  }
  c.mode = us == 0 ? Mode::kOff : Mode::kFixed;
  c.fixed_us = us > core::kMaxLingerUs ? core::kMaxLingerUs : static_cast<uint32_t>(us);
  return c;
}

// Thread-private to the compute thread: the decayed histogram and the
// linger it gave last.
double g_smoothed[kBuckets];
uint32_t g_learnt_us = kInitialLingerUs;

uint32_t LearnLinger() {
  constexpr double kDecay = 0.8;  // per tick (≤ 20 ms): the last ~100 ms weigh most
  constexpr double kEnough = 16;  // gaps before the histogram is trusted
  double total = 0;
  for (int k = 0; k < kBuckets; ++k) {
    g_smoothed[k] = g_smoothed[k] * kDecay + static_cast<double>(g_gaps[k].exchange(0, std::memory_order_relaxed));
    total += g_smoothed[k];
  }
  if (total < kEnough) return g_learnt_us;
  double below = 0;
  int k = 0;
  for (; k < kBuckets - 1; ++k) {
    below += g_smoothed[k];
    if (below >= 0.95 * total) break;
  }
  uint64_t linger = 2ull << (k + 1);  // twice the bucket's upper bound
  if (linger < kMinLingerUs) linger = kMinLingerUs;
  if (linger > core::kMaxLingerUs) linger = core::kMaxLingerUs;
  g_learnt_us = static_cast<uint32_t>(linger);
  return g_learnt_us;
}

}  // namespace

void NoteLaunch() {
  const uint64_t now = port::MonotonicNanos();
  const uint64_t prev = g_last_launch_ns.exchange(now, std::memory_order_relaxed);
  // Launches of two threads may stamp out of order: a gap of 0.
  const uint64_t gap_us = prev == 0 ? UINT64_MAX : now > prev ? (now - prev) / 1000 : 0;
  const bool starts_burst = gap_us >= (1ull << kBuckets);
  if (starts_burst) {
    FinishRequest(now);
  } else {
    if (!g_burst_has_more.load(std::memory_order_relaxed)) g_burst_has_more.store(true, std::memory_order_relaxed);
    g_gaps[gap_us == 0 ? 0 : 63 - __builtin_clzll(gap_us)].fetch_add(1, std::memory_order_relaxed);
  }
  // Publish at most every kStampIntervalNs: far below any linger, so the
  // board's burst never ends early; races between threads only stamp twice.
  // A burst's first launch always publishes, since it publishes no hold.
  if (!starts_burst && now - g_last_stamp_ns.load(std::memory_order_relaxed) < kStampIntervalNs) return;
  g_last_stamp_ns.store(now, std::memory_order_relaxed);
  if (!g_on.load(std::memory_order_acquire)) return;
  // A hold can only help a launch that follows this one within the burst
  // (the BE work queued before this launch stays queued: lc_activity.h). So
  // the first launch of a burst publishes a linger of 0, which also ends any
  // hold left from the last burst, and a process whose bursts are single
  // launches (one kernel, one CUDA graph per request) holds nobody.
  const uint32_t linger = starts_burst ? 0 : g_linger_us.load(std::memory_order_relaxed);
  for (int s = 0; s < pacer::SeatCount(); ++s) {
    const pacer::Seat seat = pacer::SeatOf(s);
    if (seat.board != nullptr) core::NoteLcLaunch(seat.board, seat.member, linger, now);
  }
}

void NoteSync() { g_last_sync_ns.store(port::MonotonicNanos(), std::memory_order_relaxed); }

namespace {

// The compute thread's: the trial, and how far it has read the ring.
core::HoldTrial g_trial;
uint64_t g_requests_read = 0;
bool g_was_shared = false;

void LogVerdict() {
  const core::HoldTrial::Verdict& v = g_trial.last_verdict();
  port::Log(port::LogLevel::kInfo,
            "automatic hold tried: p50 %llu us held, %llu us not held (median ratio %.2f over %u pairs of epochs); "
            "%s for the next %u requests",
            static_cast<unsigned long long>(v.held_p50_ns / 1000),
            static_cast<unsigned long long>(v.unheld_p50_ns / 1000), v.ratio, v.pairs,
            g_trial.HoldOn() ? "holding" : "not holding", core::HoldTrial::Options{}.verdict_bursts);
}

// Feeds the requests finished since the last tick to the trial, and
// publishes its arm for the requests to come.
void FeedTrial() {
  const uint64_t written = g_requests_written.load(std::memory_order_acquire);
  if (written - g_requests_read > kRequestRing) g_requests_read = written - kRequestRing;  // the oldest are lost
  for (; g_requests_read < written; ++g_requests_read) {
    const uint64_t r = g_requests[g_requests_read % kRequestRing].load(std::memory_order_relaxed);
    if (g_trial.NoteRequest(static_cast<uint32_t>(r >> 32), (r & 0xffffffffu) * 1000)) LogVerdict();
  }
  g_generation.store(g_trial.arm_generation(), std::memory_order_relaxed);
}

}  // namespace

void Tick(VgpuRuntime* rt) {
  static const Config config = ReadConfig();
  bool shared = false;
  if (rt->latency_critical() && config.mode != Mode::kOff) {
    const uint64_t now = port::MonotonicNanos();
    for (int s = 0; s < pacer::SeatCount() && !shared; ++s) {
      const pacer::Seat seat = pacer::SeatOf(s);
      shared = seat.board != nullptr && core::OthersLive(*seat.board, seat.member, now);
    }
  }
  uint32_t linger = 0;
  if (shared) {
    linger = config.mode == Mode::kFixed ? config.fixed_us : LearnLinger();
    if (config.mode == Mode::kAuto) {
      if (!g_was_shared) {
        g_trial.Restart();  // new neighbours: what the hold is worth may have changed
        port::Log(port::LogLevel::kInfo, "automatic hold: trying it on and off, in epochs of requests");
      }
      FeedTrial();
      if (!g_trial.HoldOn()) linger = 0;
    }
  }
  g_was_shared = shared;
  // While a trial switches the hold every epoch, only its verdict is said.
  const bool trying = config.mode == Mode::kAuto && g_trial.phase() == core::HoldTrial::Phase::kTrying;
  if (!trying && linger != g_linger_us.load(std::memory_order_relaxed) && port::LogEnabled(port::LogLevel::kInfo)) {
    static uint32_t logged = ~0u;
    // Say when holding starts or stops, and when the linger moves by 2x.
    if (logged == ~0u || (linger == 0) != (logged == 0) || linger >= 2 * logged || 2 * linger <= logged) {
      logged = linger;
      port::Log(port::LogLevel::kInfo, "automatic hold of best-effort launches: %s%u us linger",
                linger == 0 ? "off, " : "", linger);
    }
  }
  g_linger_us.store(linger, std::memory_order_relaxed);
  g_on.store(shared, std::memory_order_release);
}

uint32_t CurrentLingerUs() { return g_on.load(std::memory_order_acquire) ? g_linger_us.load() : 0; }

void AfterFork() {
  g_on.store(false);
  g_last_launch_ns.store(0);
  g_last_stamp_ns.store(0);
  for (auto& b : g_gaps) b.store(0);
  for (double& d : g_smoothed) d = 0;
  g_learnt_us = kInitialLingerUs;
  g_burst_start_ns.store(0);
  g_burst_has_more.store(false);
  g_last_sync_ns.store(0);
  g_requests_read = g_requests_written.load();
  g_was_shared = false;
  g_trial.Restart();
}

}  // namespace gpuslice::interposer::lc_activity
