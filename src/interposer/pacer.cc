#include "interposer/pacer.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/board_roster.h"
#include "core/gate_wait_budget.h"
#include "core/hold_budget.h"
#include "core/pacing_board.h"
#include "core/shared_word.h"
#include "core/state_handout.h"
#include "core/turn_floor.h"
#include "core/vgpu_layout.h"
#include "interposer/driver_table.h"
#include "interposer/event_markers.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"
#include "port/log.h"
#include "port/mapped_file.h"
#include "port/wake_word.h"

namespace gpuslice::interposer::pacer {

std::atomic<bool> g_active{false};

namespace {

constexpr uint64_t kMaxWaitNs = 2'000'000'000;     // then launch anyway (fail open)
// ... not counting time spent waiting for the vGPU's own cap's tokens
// (core::WaitsForOwnCap): a debt of a long queue takes debt / cap to pay
// back (3 s at 30%: 10 s), and a launch that went ahead at 2 s ran outside
// any turn, uncharged (36% under a 30% cap with 3.2 s queues). Those waits
// are bounded by what the cap explains instead (core/gate_wait_budget.h):
// the row's tokens may be forged. So are waits for another vGPU's turn
// where the roster says what share of the turns this vGPU is owed: the
// turn word may be forged too.
constexpr uint64_t kSlowWaitNs = 500'000'000;      // then say why, once per wait
constexpr uint64_t kSpinNs = 50'000;                // yield-spin before sleeping
constexpr long kSleepNs = 30'000;                   // between gate checks
constexpr uint64_t kPacedTickNs = 1'000'000;        // compute thread, while paced
// ... and while this process's vGPU holds a turn: its drain ends the turn and
// is charged up to when it is seen, so it is looked for more often. (A
// training blocked in a synchronisation is not at the gate to see it itself.)
constexpr uint64_t kHolderTickNs = 250'000;
constexpr uint64_t kIdleTickNs = 20'000'000;        // ... otherwise
// A paced process (best-effort, or a capped LC) with nothing queued, no
// launch waiting, none since its last tick and no live LC above it
// ("quiet") also ticks at kIdleTickNs, and its next launch or gate wait
// wakes the thread (g_tick_wake). Nothing of the turn needs it meanwhile: a
// turn goes only to a vGPU that wants the GPU, and those tick fast or wait
// at the gate, where TryEnter advances the turn itself. Before, every idle
// process beside another vGPU ticked every millisecond: 500 of them took
// about two cores (docs/benchmarks.md, "Load").
// A launch the gate let through lets the process's launches on that device
// through for this long without reading the board again, and the board
// hears of its launches at most this often. The board's decisions move at
// turn boundaries (milliseconds) and at an LC's activity stamps (at most
// every 25 us, lc_activity.h), so this costs no precision that exists, and
// spares a launch-bound application a scan of the board per launch.
constexpr uint64_t kDecisionReuseNs = 20'000;
// How often the compute thread looks for a new roster (core/board_roster.h):
// a vGPU made or resized elsewhere is believed by this process at most this
// late (its rows are ignored until then).
constexpr uint64_t kRosterCheckNs = 100'000'000;

// One GPU of the vGPU, as this process paces it.
struct Device {
  core::Board* board = nullptr;
  uint64_t vgpu_id = 0;
  // Its row on the board; -1 while it has none (the row was given away and
  // the board is full). Changed only by the compute thread (Rejoin).
  std::atomic<int> member{-1};
  std::atomic<bool> paced{false};
  // (launch sequence << 1) | busy: busy = work queued since the last drain,
  // or a launch on its way (`launching`). Set only once the board counts
  // this process busy (MarkLaunching).
  std::atomic<uint64_t> work{0};
  // Launches between their mark at the gate and their count on a marker:
  // not yet seen by a drain poll, so none may report a drain meanwhile.
  std::atomic<uint32_t> launching{0};
  std::atomic<bool> polling{false};  // one drain poll at a time
  std::atomic<uint64_t> go_until_ns{0};    // see kDecisionReuseNs
  std::atomic<uint64_t> launch_noted_ns{0};
  // This vGPU's own level and cap here, from its limits: the row says the
  // same unless someone wrote over it.
  std::atomic<bool> own_lc{false};
  std::atomic<bool> own_capped{false};
  // The node splits this GPU by turns (kDeviceFlagShareTurns), not by the
  // policy's slices alone; from the limits, which the node writes.
  std::atomic<bool> share_turns{false};
  // Which rows to believe; `config.trust` points at `trust` where the vGPU
  // has a roster (set by Start, before the device is paced; never changed
  // after).
  core::BoardTrust trust;
  // What `trust` was built from (compute thread): the roster's other vGPUs
  // on this GPU, and this vGPU as its own limits said then. Fixed arrays:
  // g_devices is a global the compute thread may still use while the
  // process exits, so nothing in it may have a destructor.
  std::pair<uint64_t, core::TrustedMember> roster_others[core::BoardTrust::kCapacity - 1];
  int roster_other_count = 0;
  core::TrustedMember trusted_self;
  core::PacingConfig config;
  // Whether the board gives this vGPU the turns the roster says it is owed
  // (core/turn_floor.h); compute thread.
  core::TurnFloorWatch floor;
  // How much of this process's time holds may take here (core/hold_budget.h).
  core::HoldBudget hold_budget;
  // ... and waits for its own cap's tokens and others' turns
  // (core/gate_wait_budget.h).
  core::GateWaitBudget gate_wait_budget;
  // The share of the turns, in permille, the roster says this vGPU is owed
  // here (core::OwedTurnPermille); 0: none, and waits for others' turns are
  // no part of the budget (set by the compute thread).
  std::atomic<uint32_t> owed_turn_permille{0};
  // When the last tick saw work of ours run on past our turn; 0 when it did
  // not (compute thread).
  uint64_t run_on_seen_ns = 0;
  // Work launched ahead of the board (GoAhead) may be queued: until our
  // queue drains, none of it is a run-on our cap's tokens pay for, so none
  // is vouched for (else a forger's victim would wait for its own escape).
  std::atomic<bool> ahead_queued{false};
  uint64_t floor_sampled_ns = 0;  // when `floor` last looked, and what it saw
  bool floor_saw_wants = false, floor_saw_holds = false;
  uint64_t ticked_launches = 0;  // `work`'s launch sequence at the last tick (compute thread)
};
// The compute thread may still run while the process exits and destroys its
// globals: nothing it uses may have a destructor.
static_assert(std::is_trivially_destructible_v<Device>);
Device g_devices[core::kMaxDevices];
int g_device_count = 0;
bool g_single_device = true;
std::mutex g_start_mutex;
bool g_started = false;
char g_roster_path[4096];  // the compute thread's only (no destructor: see Device)
struct stat g_roster_seen {};
uint64_t g_roster_checked_ns = 0;
bool g_roster_logged = false;

std::atomic<bool> g_wait_logged{false};
std::atomic<bool> g_budget_logged{false};
std::atomic<bool> g_gate_budget_logged{false};

// The quiet compute thread sleeps on this; see kIdleTickNs.
port::WakeWord g_tick_wake;
std::atomic<int> g_gate_waiters{0};  // launches of this process waiting at the gate
bool g_quiet = false;                // the compute thread's last tick found it quiet

// Queries `slot`'s markers (event_markers.h); when all have run dry, no
// launch is on its way and nothing was launched meanwhile, tells the board
// this process has drained. Any thread; one poll per slot at a time.
void PollDrain(int slot) {
  Device& d = g_devices[slot];
  if (d.polling.exchange(true, std::memory_order_acquire)) return;
  // `work` before `launching`, as a launch marks them in the other order
  // (MarkLaunching): a launch whose mark this load saw is counted in
  // `launching` until it is counted on its marker, and one it missed changes
  // `work`'s sequence, so the exchange below fails.
  const uint64_t work = d.work.load(std::memory_order_seq_cst);
  uint64_t expected = work;
  if ((work & 1) != 0 && d.launching.load(std::memory_order_seq_cst) == 0 && markers::Poll(slot) &&
      d.work.compare_exchange_strong(expected, work & ~1ull, std::memory_order_seq_cst)) {
    if (const int m = d.member.load(std::memory_order_relaxed); m >= 0) {
      core::NoteBusy(d.board, m, false, port::MonotonicNanos());
    }
  }
  d.polling.store(false, std::memory_order_release);
}

// A launch of this process is on its way to device `d`: counted in
// `launching` (until AfterLaunch) and in `work`'s sequence, and the board
// counts the process busy before `work` says so. A launch checks the turn
// only after this (core::LaunchMayGo), so a hand-over that closes the turn
// after that check sees the process busy and waits for its drain.
void MarkLaunching(Device& d, int member, uint64_t now) {
  d.launching.fetch_add(1, std::memory_order_seq_cst);
  uint64_t w = d.work.load(std::memory_order_relaxed);
  for (;;) {
    if ((w & 1) != 0) {
      if (d.work.compare_exchange_weak(w, w + 2, std::memory_order_seq_cst)) return;
      continue;
    }
    core::NoteBusy(d.board, member, true, now);
    // Sequentially consistent, as is the quiet compute thread's check of
    // `work` after it arms g_tick_wake: one of the two sees the other.
    if (d.work.compare_exchange_strong(w, (w + 2) | 1, std::memory_order_seq_cst)) {
      g_tick_wake.Wake();  // one load unless the thread sleeps quietly
      return;
    }
    core::NoteBusy(d.board, member, false, now);  // another launch marked it first
  }
}

// Marks a launch the gate (or a reused decision) let through, then looks
// again whether the turn still lets it go; if not, unmarks it (its busy mark
// stays until a drain poll clears it) and returns false.
bool MarkedAndStillMayGo(Device& d, int member, uint64_t now) {
  MarkLaunching(d, member, now);
  if (core::LaunchMayGo(d.board, member, d.config)) return true;
  d.launching.fetch_sub(1, std::memory_order_seq_cst);
  return false;
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
    const int m = d.member.load(std::memory_order_relaxed);
    if (d.board != nullptr && m >= 0 && (d.work.exchange(0) & 1) != 0) {
      core::NoteBusy(d.board, m, false, port::MonotonicNanos());
    }
  }
}

// What a long wait at the gate is waiting for, for the log.
void LogSlowWait(Device& d, int member, uint64_t waited_ns) {
  const core::BoardMember& me = d.board->members[member];
  port::Log(port::LogLevel::kWarn, "a launch has waited %llu ms for its GPU turn: holder %d (we are %d), our busy "
            "processes %u, markers pending %d, captures %d, cap tokens %lld us, process busy %d",
            static_cast<unsigned long long>(waited_ns / 1'000'000), core::TurnHolder(*d.board), member,
            core::LoadSeqCst(me.busy_processes), markers::Pending(), markers::g_captures.load(),
            static_cast<long long>(core::LoadRelaxed(me.cap_tokens_ns) / 1000),
            static_cast<int>(d.work.load() & 1));
}

// GPUSLICE_TURNS: `backfill` (the default) or `exclusive`, this process's
// wish. The node's policy decides for every vGPU on a GPU
// (core::kDeviceFlagExclusiveTurns); a process may only take exclusive turns
// where the node backfills, which slows itself (it waits for turns the
// others do not wait for). Were it the other way, a tenant that unsets the
// variable would run in the others' exclusive turns.
bool BackfillTurnsWanted() {
  const char* v = getenv("GPUSLICE_TURNS");
  if (v == nullptr || *v == '\0' || strcmp(v, "backfill") == 0) return true;
  if (strcmp(v, "exclusive") == 0) return false;
  port::Log(port::LogLevel::kWarn, "GPUSLICE_TURNS=%s is neither `backfill` nor `exclusive`; using backfill", v);
  return true;
}

// GPUSLICE_HOLD_BUDGET: the most of each second, in percent (1-100), that
// latency-critical holds may keep this process's launches waiting
// (core/hold_budget.h). A tenant can set it in its own processes only, and
// gains nothing it could not take anyway: holds are obeyed by its own
// library.
uint32_t HoldBudgetPctWanted() {
  const char* v = getenv("GPUSLICE_HOLD_BUDGET");
  if (v == nullptr || *v == '\0') return core::kDefaultMaxHeldPct;
  char* end = nullptr;
  const long pct = strtol(v, &end, 10);
  if (*end == '%') ++end;
  if (*end == '\0' && pct >= 1 && pct <= 100) return static_cast<uint32_t>(pct);
  port::Log(port::LogLevel::kWarn, "GPUSLICE_HOLD_BUDGET=%s is not a percentage from 1 to 100; using %u", v,
            core::kDefaultMaxHeldPct);
  return core::kDefaultMaxHeldPct;
}

// Reads `path` (a roster: small) whole; false if it cannot.
bool ReadSmallFile(const char* path, std::string* text) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[16384];
  text->clear();
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 && text->size() < (1u << 20)) text->append(buf, static_cast<size_t>(n));
  close(fd);
  return n == 0;
}

core::TrustedMember TrustedSelf(const core::DeviceLimit& mine) {
  return {core::LoadRelaxed(mine.priority), core::LoadRelaxed(mine.compute_share_pct),
          core::LoadRelaxed(mine.compute_cap_pct)};
}

// `d`'s trust: the roster's vGPUs on its GPU, and this vGPU as its limits say
// now. Rebuilt whenever either changes: its own cap also changes without a
// new roster (the daemon's power-cap budget), and this process enforces it.
void RebuildTrust(Device& d, const core::DeviceLimit& mine, uint64_t self) {
  d.trusted_self = TrustedSelf(mine);
  std::vector<std::pair<uint64_t, core::TrustedMember>> members(d.roster_others,
                                                                d.roster_others + d.roster_other_count);
  members.push_back({self, d.trusted_self});
  d.trust.Reset(members);
}

// Believes, on each board, the vGPUs the roster lists on that GPU, and this
// vGPU itself as its own limits say. Compute thread (and Start). Returns
// whether a roster is in force: false when there is none to read, or when the
// first one cannot be parsed (rows are then believed as written: fail open,
// loudly); a later one that cannot be parsed is said once and the trust kept.
bool LoadRoster(const core::Limits& limits, uint64_t self) {
  struct stat st {};
  if (stat(g_roster_path, &st) != 0) return false;
  if (st.st_ino == g_roster_seen.st_ino && st.st_size == g_roster_seen.st_size &&
      st.st_mtim.tv_sec == g_roster_seen.st_mtim.tv_sec && st.st_mtim.tv_nsec == g_roster_seen.st_mtim.tv_nsec) {
    return true;
  }
  const bool loaded_before = g_roster_seen.st_ino != 0;
  std::string text;
  // Gone between the stat and the read (its vGPU being removed): next time.
  if (!ReadSmallFile(g_roster_path, &text)) return loaded_before;
  auto parsed = core::ParseRoster(text);
  if (!parsed.ok()) {
    if (!g_roster_logged) {
      g_roster_logged = true;
      port::Log(port::LogLevel::kWarn, "the roster %s is unusable (%s); this process believes %s", g_roster_path,
                parsed.status().message().c_str(),
                loaded_before ? "the board rows it believed before" : "every board row as written");
    }
    return loaded_before;
  }
  g_roster_seen = st;
  for (int s = 0; s < g_device_count; ++s) {
    const core::DeviceLimit& mine = limits.devices[s];
    Device& d = g_devices[s];
    d.roster_other_count = 0;
    for (const core::RosterEntry& e : parsed.value()) {
      if (e.vgpu_id != self && memcmp(e.gpu.data(), mine.uuid, 16) == 0 &&
          d.roster_other_count < static_cast<int>(std::size(d.roster_others))) {
        d.roster_others[d.roster_other_count++] = {e.vgpu_id, {e.level, e.weight, e.cap_pct}};
      }
    }
    RebuildTrust(d, mine, self);
    d.floor.SetFloor(core::TurnFloorPermille(parsed.value(), mine.uuid, self));
    d.owed_turn_permille.store(core::OwedTurnPermille(parsed.value(), mine.uuid, self), std::memory_order_relaxed);
  }
  return true;
}

}  // namespace

// This process's row on `d`'s board, checked by the compute thread before
// it heartbeats. A row nobody heartbeat for member_timeout_ns is given to
// the next vGPU that joins: so a process that did not run that long
// (stopped by SIGSTOP, the audit's `deny`, a frozen cgroup, a checkpoint
// lock) finds another vGPU's id there. It must not write that vGPU's
// weight, cap and level, nor launch as it: it joins again, and carries its
// queued work's busy mark over. -1 while the board has no row for it.
int SeatedMember(Device& d, int slot, const core::Limits& limits, uint64_t now) {
  const int member = d.member.load(std::memory_order_relaxed);
  if (member >= 0 && core::LoadAcquire(d.board->members[member].vgpu_id) == d.vgpu_id) return member;
  const int joined = core::JoinBoard(d.board, d.vgpu_id, SpecOf(limits.devices[slot]), now);
  if (joined != member) {
    port::Log(port::LogLevel::kWarn, "this process's row on the pacing board of device slot %d went to another vGPU "
              "while the process did not run; %s", slot,
              joined < 0 ? "the board is full, so this vGPU is not paced there until a row frees up"
                         : "it joined again");
  }
  d.member.store(joined, std::memory_order_relaxed);
  if (joined >= 0 && (d.work.load(std::memory_order_acquire) & 1) != 0) core::NoteBusy(d.board, joined, true, now);
  return joined;
}

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
  const bool backfill_wanted = BackfillTurnsWanted();
  // With a roster, each board's rows are believed only as it says
  // (core/board_roster.h); without one (a manager from before rosters), as
  // they say themselves.
  snprintf(g_roster_path, sizeof g_roster_path, "%s/%s", dir, core::kRosterFileName);
  if (struct stat st {}; stat(g_roster_path, &st) != 0) {  // in a pod
    snprintf(g_roster_path, sizeof g_roster_path, "%s/%s/%s", dir, core::kRosterDirName, core::kRosterFileName);
  }
  const bool rostered = LoadRoster(limits, id);
  if (!rostered) {
    port::Log(port::LogLevel::kInfo, "no roster at %s: the pacing boards' rows are believed as they are written",
              g_roster_path);
  }
  const uint32_t max_held_pct = HoldBudgetPctWanted();
  for (int s = 0; s < g_device_count; ++s) {
    // The node's turn style as the limits say at start: a process keeps it
    // for its life (its launch path reads the config unsynchronised).
    g_devices[s].config.backfill =
        backfill_wanted && (core::LoadAcquire(limits.devices[s].flags) & core::kDeviceFlagExclusiveTurns) == 0;
    g_devices[s].config.trust = rostered ? &g_devices[s].trust : nullptr;
    g_devices[s].hold_budget.Configure(max_held_pct);
  }
  const uint64_t now = port::MonotonicNanos();
  // A daemon-made vGPU's boards are sealed memfds from the state keeper
  // (core/state_handout.h). Without them, compute fails open: the GPU's
  // hardware timeslices still apply, and nobody's memory depends on a board.
  std::optional<core::HandedState> handed;
  struct stat boards_link {};
  if (lstat((std::string(dir) + "/boards").c_str(), &boards_link) != 0 && core::HandsOutState(dir)) {
    auto fetched = core::FetchState(dir);
    if (fetched.ok()) {
      handed.emplace(std::move(fetched.value()));
    } else {
      port::Log(port::LogLevel::kWarn, "no pacing boards (%s): compute shares and caps rely on hardware timeslices "
                "only, and a --compute-cap is NOT enforced", fetched.status().message().c_str());
      atexit(&ReleaseAtExit);
      return;
    }
  }
  for (int s = 0; s < g_device_count; ++s) {
    const std::string path = handed ? "the handed-out board of device slot " + std::to_string(s)
                                    : std::string(dir) + "/boards/" + core::BoardFileName(limits.devices[s].uuid);
    const int board_fd = handed ? handed->BoardFd(limits.devices[s].uuid) : -1;
    auto file = !handed ? port::MappedFile::Open(path, sizeof(core::Board), port::MappedFile::Access::kReadWrite)
                : board_fd >= 0
                    ? port::MappedFile::FromFd(board_fd, sizeof(core::Board), port::MappedFile::Access::kReadWrite, path)
                    : StatusOr<port::MappedFile>(Status::Error(path + ": the keeper handed out none"));
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
    g_devices[s].vgpu_id = id;
    g_devices[s].member.store(member, std::memory_order_relaxed);
  }
  atexit(&ReleaseAtExit);
}

namespace {
// Samples whether this vGPU gets the turns it is owed on `d`
// (core/turn_floor.h); says so when the verdict changes. Compute thread,
// each paced tick of an uncapped best-effort vGPU under backfill turns.
void WatchTurnFloor(Device& d, int slot, bool holds, uint64_t now) {
  // The time since the last look counts as what that look saw: the thread
  // looks four times as often while its vGPU holds the turn, so crediting
  // each look's state to the time before it would overstate the turns.
  const uint64_t elapsed = d.floor_sampled_ns == 0 || now < d.floor_sampled_ns ? 0 : now - d.floor_sampled_ns;
  const bool wanted = d.floor_saw_wants, held = d.floor_saw_holds;
  d.floor_sampled_ns = now;
  d.floor_saw_holds = holds;
  d.floor_saw_wants = holds || (d.work.load(std::memory_order_relaxed) & 1) != 0;
  if (!d.floor.Sample(wanted, held, elapsed)) return;
  const uint32_t permille = d.floor.held_permille(), floor = d.floor.floor_permille();
  if (d.floor.starved()) {
    port::Log(port::LogLevel::kWarn, "this vGPU held the GPU's turn %u.%u%% of the time it wanted the GPU on device "
              "slot %d over the last second, under half its floor of %u.%u%% (its share among the roster's "
              "vGPUs): another process may be forging the pacing board. Its channel groups keep the policy's "
              "slice, not the backfill slice, until it gets its turns again",
              permille / 10, permille % 10, slot, floor / 10, floor % 10);
  } else {
    port::Log(port::LogLevel::kInfo, "this vGPU gets its turns again on device slot %d (%u.%u%%); backfill slices "
              "resume", slot, permille / 10, permille % 10);
  }
}
}  // namespace

uint64_t Tick(VgpuRuntime* rt) {
  if (!g_started) return kIdleTickNs;
  const core::Limits& limits = rt->limits();
  const uint64_t now = port::MonotonicNanos();
  if (now >= g_roster_checked_ns + kRosterCheckNs) {
    g_roster_checked_ns = now;
    if (g_device_count > 0 && g_devices[0].config.trust != nullptr) LoadRoster(limits, g_devices[0].vgpu_id);
  }
  bool any = false, holding = false, quiet = true;
  for (int s = 0; s < g_device_count; ++s) {
    Device& d = g_devices[s];
    if (d.board == nullptr) continue;
    const int member = SeatedMember(d, s, limits, now);
    if (member < 0) continue;
    const core::MemberSpec spec = SpecOf(limits.devices[s]);
    core::Heartbeat(d.board, member, spec, now);
    if (d.config.trust != nullptr) {
      const core::TrustedMember self = TrustedSelf(limits.devices[s]);
      if (self.level != d.trusted_self.level || self.weight != d.trusted_self.weight ||
          self.cap_pct != d.trusted_self.cap_pct) {
        RebuildTrust(d, limits.devices[s], d.vgpu_id);
      }
    }
    d.own_lc.store(spec.priority == core::Priority::kLatencyCritical, std::memory_order_relaxed);
    d.own_capped.store(spec.cap_pct != 0, std::memory_order_relaxed);
    d.share_turns.store((core::LoadRelaxed(limits.devices[s].flags) & core::kDeviceFlagShareTurns) != 0,
                        std::memory_order_relaxed);
    const bool paced = core::PacingNeeded(*d.board, member, now, d.config);
    if (paced != d.paced.load(std::memory_order_relaxed)) {
      d.paced.store(paced, std::memory_order_release);
      port::Log(port::LogLevel::kInfo, "GPU turns %s on device slot %d", paced ? "on" : "off", s);
      if (!paced && (d.work.fetch_and(~1ull) & 1) != 0) core::NoteBusy(d.board, member, false, now);
      d.floor_sampled_ns = 0;  // time unpaced is no part of the turn floor's windows
    }
    if (paced) {
      any = true;
      PollDrain(s);
      // Work of ours still queued past our capped turn is charged as it runs.
      const bool queued = (d.work.load(std::memory_order_relaxed) & 1) != 0;
      if (queued) core::ChargeRunOn(d.board, member, now, d.config);
      core::AdvanceTurn(d.board, port::MonotonicNanos(), d.config);
      const bool holds = core::TurnHolder(*d.board) == member;
      // What waits at the gate may take: the share we are owed now (a cap
      // may change, and a floor with the roster).
      d.gate_wait_budget.Configure(
          core::OwedPermille(spec.cap_pct, d.owed_turn_permille.load(std::memory_order_relaxed)),
          core::GateWaitBufferNs(d.config), d.config.min_quantum_ns);
      // A run-on of ours explains as long a wait for our cap's tokens:
      // vouched for between two ticks that both saw it, whatever the row says.
      if (!queued) d.ahead_queued.store(false, std::memory_order_relaxed);
      const bool run_on = spec.cap_pct != 0 && queued && !holds && !d.ahead_queued.load(std::memory_order_relaxed);
      if (run_on && d.run_on_seen_ns != 0 && now > d.run_on_seen_ns) d.gate_wait_budget.Vouch(now - d.run_on_seen_ns);
      d.run_on_seen_ns = run_on ? now : 0;
      holding |= holds;
      // Quiet: nothing queued and no launch since the last tick, so a
      // launch-bound process that drains between launches does not wake
      // its thread at every launch. Never beside a live LC of a higher
      // level: LC protection was measured with the millisecond tick, and an
      // A/B on the eager LC cells could not rule a difference out
      // (docs/benchmarks.md, "Workload matrix, runs 9–10"). An LC process is
      // paced only for a cap (then quiet as a capped best-effort one is) or
      // beside a higher level.
      const uint64_t work = d.work.load(std::memory_order_relaxed);
      quiet &= (work & 1) == 0 && (work >> 1) == d.ticked_launches &&
               !core::HigherLatencyCriticalLive(*d.board, member, now, d.config);
      d.ticked_launches = work >> 1;
      if (d.config.backfill && spec.cap_pct == 0 && spec.priority == core::Priority::kBestEffort) {
        WatchTurnFloor(d, s, holds, now);
      }
    }
  }
  g_active.store(any, std::memory_order_release);
  // A launch waiting at the gate keeps the thread's pace: the wait may be
  // for this process's own drain, which the thread also looks for.
  g_quiet = any && quiet && g_gate_waiters.load(std::memory_order_relaxed) == 0;
  if (g_quiet) return kIdleTickNs;
  return holding ? kHolderTickNs : any ? kPacedTickNs : kIdleTickNs;
}

namespace {
bool WorkOrWaiters() {
  if (g_gate_waiters.load(std::memory_order_seq_cst) != 0) return true;
  for (int s = 0; s < g_device_count; ++s) {
    if ((g_devices[s].work.load(std::memory_order_seq_cst) & 1) != 0) return true;
  }
  return false;
}
}  // namespace

void SleepBetweenTicks(uint64_t ns) {
  if (g_quiet) {
    g_tick_wake.Arm();
    if (!WorkOrWaiters()) {
      g_tick_wake.SleepArmed(ns);
      return;
    }
    g_tick_wake.Disarm();
    ns = kPacedTickNs;  // woke before it slept: the next tick sees the work
  }
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

namespace {
// One check of the gate. Holds of latency-critical levels above this vGPU
// are obeyed while this process's hold budget lasts; then turns decide.
// `*held`: the gate stayed shut for a hold.
bool GateOpens(Device& d, int member, uint64_t now, uint64_t waited_ns, bool* first_held, bool* held) {
  *held = false;
  if (d.hold_budget.Holds(now) &&
      core::LaunchesHeld(*d.board, member, now, waited_ns < core::kMaxAutoHoldNs, d.config)) {
    if (d.hold_budget.NoteHeld(now, *first_held)) {
      if (VgpuRuntime* rt = VgpuRuntime::Get()) rt->ledger().CountHoldBudgetSpent();
      if (!g_budget_logged.exchange(true)) {
        port::Log(port::LogLevel::kWarn,
                  "latency-critical holds kept this process's launches waiting for its "
                  "whole hold budget of a second; they go ahead of holds for the rest of each such second "
                  "(GPUSLICE_HOLD_BUDGET, %u%% by default)",
                  core::kDefaultMaxHeldPct);
      }
    }
    *first_held = false;
    *held = true;
    return false;
  }
  return core::TryEnter(d.board, member, now, d.config, waited_ns, /*obey_holds=*/false) == core::GateDecision::kGo;
}

// Whether a launch the gate keeps waiting waits for what the gate wait
// budget covers (core/gate_wait_budget.h): its own cap's tokens, or another
// vGPU's turn where the roster says what share of the turns it is owed.
// Not a hold (the hold budget's), nor the drain of its own turn.
// `for_own_cap`: core::WaitsForOwnCap, as the caller saw it.
bool WaitIsBudgeted(const Device& d, int member, bool held, bool for_own_cap) {
  if (held) return false;
  return for_own_cap ||
         (d.owed_turn_permille.load(std::memory_order_relaxed) != 0 && core::TurnHolder(*d.board) != member);
}

// A launch whose waits for its cap's tokens and others' turns took more
// than its share explains (core/gate_wait_budget.h) goes ahead, outside
// any turn.
void GoAhead(Device& d, int member, uint64_t now, bool tracked) {
  if (!g_gate_budget_logged.exchange(true)) {
    port::Log(port::LogLevel::kWarn,
              "this process's launches waited for their compute cap's tokens or other vGPUs' GPU turns longer "
              "than its share explains (its cap's or its weight's share of the time, what its own queued work "
              "ran on, and %llu ms); launching anyway: is the pacing board forged? (docs/design.md, \"Forged "
              "board entries\")",
              static_cast<unsigned long long>(core::GateWaitBufferNs(d.config) / 1'000'000));
  }
  d.ahead_queued.store(true, std::memory_order_relaxed);
  if (tracked) MarkLaunching(d, member, now);
}
}  // namespace

int EnterGate(uint64_t* gate_ns) {
  if (markers::Capturing()) return -1;  // captured work runs when the graph does
  int slot = 0;
  if (!g_single_device) {
    VgpuRuntime* rt = VgpuRuntime::Get();
    slot = rt == nullptr ? -1 : rt->CurrentDeviceSlot();
    if (slot < 0) return -1;
  }
  Device& d = g_devices[slot];
  if (!d.paced.load(std::memory_order_acquire)) return -1;
  const int member = d.member.load(std::memory_order_relaxed);
  if (member < 0) return -1;
  // An uncapped latency-critical vGPU passes the gate only for higher
  // levels' holds; its launches are no part of turns, so nothing after them
  // is tracked. A capped one takes turns, and its drains end them.
  const bool tracked = !d.own_lc.load(std::memory_order_relaxed) || d.own_capped.load(std::memory_order_relaxed);
  const uint64_t start = port::MonotonicNanos();
  if (start < d.go_until_ns.load(std::memory_order_relaxed)) {
    if (!tracked) return -1;
    if (MarkedAndStillMayGo(d, member, start)) {
      *gate_ns = start;
      return slot;
    }
    // Else the turn passed: look at the board again.
  }
  uint64_t now = start;
  uint64_t cap_waited = 0;  // of now - start, spent waiting for our own cap's tokens
  bool budgeted = false;    // at the last look: waiting for our own cap's tokens or another's turn
  bool held = false;        // at the last check of the gate: shut for a hold
  bool slow_logged = false;
  bool counted = false;
  bool first_held = true;
  for (;;) {
    if (GateOpens(d, member, now, now - start, &first_held, &held)) {
      if (!tracked) break;
      // The board said go; its thread may have been descheduled since,
      // while the turn passed on.
      if (MarkedAndStillMayGo(d, member, now)) break;
    }
    if (!counted) {
      // Our waits have taken all that our share explains: this launch
      // goes ahead at once, as one whose wait ran it out does.
      if (!d.gate_wait_budget.Allows(now) &&
          WaitIsBudgeted(d, member, held, core::WaitsForOwnCap(*d.board, member, now, d.config))) {
        GoAhead(d, member, now, tracked);
        break;
      }
      counted = true;
      if (VgpuRuntime* rt = VgpuRuntime::Get()) rt->ledger().CountGateWait();
      g_gate_waiters.fetch_add(1, std::memory_order_seq_cst);
      g_tick_wake.Wake();  // the launch waits (and sleeps) anyway
    }
    core::NoteWaiting(d.board, member, now, d.config);
    PollDrain(slot);  // our own drain may be what the hand-over waits for
    if (now - start < kSpinNs) {
      sched_yield();
    } else {
      timespec ts{0, kSleepNs};
      nanosleep(&ts, nullptr);
    }
    const uint64_t before = now;
    now = port::MonotonicNanos();
    const bool was_budgeted = budgeted;
    const bool for_own_cap = core::WaitsForOwnCap(*d.board, member, now, d.config);
    if (for_own_cap) cap_waited += now - before;
    budgeted = WaitIsBudgeted(d, member, held, for_own_cap);
    if (budgeted) {
      // Spent only between two looks that both saw it, so that a wait is
      // never counted longer than it was (an honest job's waits would then
      // outrun what its share explains).
      if (was_budgeted && !d.gate_wait_budget.Spend(before, now)) {
        GoAhead(d, member, now, tracked);
        break;
      }
    }
    if (now - start > kSlowWaitNs && !slow_logged) {
      slow_logged = true;
      LogSlowWait(d, member, now - start);
    }
    if (now - start - cap_waited > kMaxWaitNs) {
      if (!g_wait_logged.exchange(true)) {
        port::Log(port::LogLevel::kWarn,
                  "a launch waited over 2 s for its GPU turn; launching anyway (is another "
                  "process stuck holding the turn?)");
      }
      if (tracked) MarkLaunching(d, member, now);
      break;
    }
  }
  if (counted) g_gate_waiters.fetch_sub(1, std::memory_order_seq_cst);
  d.go_until_ns.store(now + kDecisionReuseNs, std::memory_order_relaxed);
  *gate_ns = now;
  return tracked ? slot : -1;
}

void AfterLaunch(int slot, int marker, CUstream stream, bool launched, uint64_t gate_ns) {
  Device& d = g_devices[slot];
  if (launched) markers::NoteLaunch(marker, stream);
  // After the count: a drain poll that sees this is over sees the count.
  d.launching.fetch_sub(1, std::memory_order_seq_cst);
  if (!launched) return;
  const uint64_t now = gate_ns;  // the launch itself took microseconds: no second clock read
  const int member = d.member.load(std::memory_order_relaxed);
  // A latency-critical row's launch times are its activity's
  // (core::NoteLcLaunch), whose bursts a launch noted here would run together.
  if (member < 0 || d.own_lc.load(std::memory_order_relaxed)) return;
  if (now >= d.launch_noted_ns.load(std::memory_order_relaxed) + kDecisionReuseNs) {
    d.launch_noted_ns.store(now, std::memory_order_relaxed);
    core::NoteLaunch(d.board, member, now);
  }
}

namespace {
// No poll may be querying an event of the context about to die.
template <typename Forget>
void WithPollsStopped(Forget forget) {
  for (int s = 0; s < g_device_count; ++s) {
    while (g_devices[s].polling.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  forget();
  for (int s = 0; s < g_device_count; ++s) g_devices[s].polling.store(false, std::memory_order_release);
}
}  // namespace

void HoldBestEffort(uint64_t until_ns) {
  if (!g_started) return;
  const uint64_t now = port::MonotonicNanos();
  for (int s = 0; s < g_device_count; ++s) {
    const Seat seat = SeatOf(s);
    if (seat.board != nullptr) core::HoldBestEffort(seat.board, seat.member, until_ns, now);
  }
}

void ReleaseBestEffort() {
  if (!g_started) return;
  const uint64_t now = port::MonotonicNanos();
  for (int s = 0; s < g_device_count; ++s) {
    const Seat seat = SeatOf(s);
    if (seat.board != nullptr) core::ReleaseHold(seat.board, seat.member, now);
  }
}

TurnRole RoleOn(int slot) {
  if (slot < 0 || slot >= g_device_count) return TurnRole::kNone;
  const Device& d = g_devices[slot];
  if (!d.config.backfill) return TurnRole::kNone;
  if (d.board == nullptr || !d.paced.load(std::memory_order_acquire)) return TurnRole::kNone;
  const int member = d.member.load(std::memory_order_relaxed);
  if (member < 0) return TurnRole::kNone;
  // A capped vGPU runs only in its own (exclusive) turns: the policy's slice.
  if (d.own_capped.load(std::memory_order_relaxed)) return TurnRole::kNone;
  // Starved of the turns it is owed (core/turn_floor.h): the policy's slice.
  if (d.floor.starved()) return TurnRole::kNone;
  // An LC vGPU (of a lower level: only those are paced) takes no part in
  // turns, so it is neither holder nor backfiller: its slice is the
  // policy's (as a backfiller it ran at 50 us beside the BE holder).
  if (d.own_lc.load(std::memory_order_relaxed)) return TurnRole::kNone;
  // Shares by slices (the node's default): the policy's slice, except while
  // a capped vGPU holds the turn. The turn is the GPU time its cap is
  // charged, so it must have the GPU to itself then, as under turns.
  if (!d.share_turns.load(std::memory_order_relaxed)) {
    return core::CappedTurnHeldByOther(*d.board, member, port::MonotonicNanos(), d.config) ? TurnRole::kBackfiller
                                                                                           : TurnRole::kNone;
  }
  return core::TurnHolder(*d.board) == member ? TurnRole::kHolder : TurnRole::kBackfiller;
}

Seat SeatOf(int slot) {
  if (slot < 0 || slot >= g_device_count || g_devices[slot].board == nullptr) return {};
  const int member = g_devices[slot].member.load(std::memory_order_relaxed);
  if (member < 0) return {};
  return {g_devices[slot].board, member, &g_devices[slot].config};
}

int SeatCount() { return g_device_count; }

void AfterFork() {
  g_active.store(false);
  markers::AfterFork();
  for (Device& d : g_devices) {
    d.paced.store(false);
    d.work.store(0);
    d.launching.store(0);
    d.ticked_launches = 0;
    d.polling.store(false);
    d.go_until_ns.store(0);
    d.launch_noted_ns.store(0);
  }
  g_tick_wake.Disarm();  // the child has no compute thread yet
  g_gate_waiters.store(0);
  g_quiet = false;
  // The boards stay mapped and joined: the child is in the same vGPU.
}

void ForgetContext(CUcontext context) {
  WithPollsStopped([&] { markers::ForgetContext(context); });
}

void ForgetStream(CUstream stream) {
  WithPollsStopped([&] { markers::StreamDestroyed(stream); });
}

void ForgetDevice(CUdevice device) {
  WithPollsStopped([&] { markers::ForgetDevice(device); });
}

}  // namespace gpuslice::interposer::pacer
