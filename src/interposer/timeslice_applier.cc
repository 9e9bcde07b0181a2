#include "interposer/timeslice_applier.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "core/pacing_board.h"
#include "core/shared_word.h"
#include "core/slice_ceiling.h"
#include "core/vgpu_layout.h"
#include "interposer/pacer.h"
#include "interposer/vgpu_runtime.h"
#include "port/clock.h"
#include "port/log.h"
#include "rm/ioctl_hook.h"
#include "rm/timeslice_control.h"
#include "rm/tsg_registry.h"

namespace gpuslice::interposer {
namespace {

std::atomic<bool> g_fail_logged{false};
std::atomic<bool> g_unknown_device_logged{false};

rm::TimesliceControl& Control() {
  static rm::TimesliceControl control(&rm::DriverIoctl());
  return control;
}

// What the thread has done to each TSG, by registry serial. Thread-private.
struct Applied {
  uint64_t serial = 0;
  uint64_t default_us = 0;  // read at first sight; 0 = unknown
  uint64_t applied_us = 0;  // last value set (or refused), 0 = none yet
  bool set_ok = false;      // the driver accepted applied_us
  uint64_t next_check_ms = 0;  // when to read the slice back (0 = never)
  uint32_t checks = 0;
};
Applied g_applied[rm::TsgRegistry::kCapacity];
uint64_t g_last_generation = 0;
uint64_t g_last_epoch = ~0ull;
uint32_t g_last_lc_mask = 0;
uint32_t g_last_co_busy_mask = 0;
uint32_t g_last_shared_lc_mask = 0;
uint32_t g_several_groups_mask = 0;  // SeveralComputeGroups at the last epoch seen
uint64_t g_last_roles = 0;
uint64_t g_next_verify_ms = 0;
std::mutex g_pass_mutex;  // the thread and tests; never contended in production

Applied& AppliedFor(uint64_t serial) {
  Applied* free_slot = nullptr;
  for (Applied& a : g_applied) {
    if (a.serial == serial) return a;
    if (a.serial == 0 && free_slot == nullptr) free_slot = &a;
  }
  if (free_slot == nullptr) free_slot = &g_applied[serial % rm::TsgRegistry::kCapacity];
  *free_slot = Applied{serial};
  return *free_slot;
}

// A slice set is read back later, and set again if the driver has put
// another value in its place: on an H100 (driver 580) a slice set on a
// channel group right after its creation did not hold (an LC beside a BE
// whose 50 us slice was set that way waited as under stock slices, while the
// same 50 us set seconds later held; docs/gpu-facts.md). Read back 0.5 s and
// 2 s after a set, then every 10 s: a GET is one ioctl of 160-440 us.
uint64_t NextCheckMs(uint64_t now_ms, uint32_t checks) {
  return now_ms + (checks == 0 ? 500 : checks == 1 ? 2000 : 10000);
}

void Count(VgpuRuntime* rt, bool ok) {
  core::Ledger* ledger = rt->ledger_region();
  if (ledger == nullptr) return;
  core::FetchAddRelaxed(ok ? ledger->timeslice_applications : ledger->timeslice_failures, 1);
}

// One info line whenever the set of channel groups changes: what the
// library acts on, and what the ioctl hook saw to find it.
void LogTracked(const rm::TsgRef* tsgs, uint32_t n) {
  static uint32_t last_n = ~0u;
  if (n == last_n || !port::LogEnabled(port::LogLevel::kInfo)) return;
  last_n = n;
  uint32_t compute = 0;
  for (uint32_t i = 0; i < n; ++i) compute += tsgs[i].engine_type == rm::kEngineTypeGraphics;
  const rm::IoctlHookStats stats = rm::HookStats();
  port::Log(port::LogLevel::kInfo, "tracking %u channel groups (%u compute); the driver made %llu ioctls, %llu RM "
            "allocations", n, compute, static_cast<unsigned long long>(stats.ioctls),
            static_cast<unsigned long long>(stats.rm_allocs));
}

// Bit s: a latency-critical vGPU of a higher level than this one is live on
// device slot s's board (so never for an LC vGPU of the highest level).
uint32_t LatencyCriticalPeers() {
  uint32_t mask = 0;
  const uint64_t now = port::MonotonicNanos();
  for (int s = 0; s < pacer::SeatCount() && s < 32; ++s) {
    const pacer::Seat seat = pacer::SeatOf(s);
    if (seat.board != nullptr && core::HigherLatencyCriticalLive(*seat.board, seat.member, now, *seat.config)) mask |= 1u << s;
  }
  return mask;
}

// Several busy processes of one best-effort vGPU beside an LC. The policy's
// slice beside an LC is for the vGPU as one tenant: the tiny slice when it is
// the only best-effort vGPU on the GPU. Each process has its own channel
// groups, though, and two busy groups at that slice do little but switch
// between themselves (a ~170 us switch per 50 us slice): on an H200 two
// copies of a GPU-bound training in one vGPU beside an LC never finished
// their warm-up, and at 250 us slices kept 45.6% of their alone throughput
// between them, against 88.3% under stock (docs/benchmarks.md, "Several
// best-effort processes beside an LC"). While two or more of the vGPU's
// processes have work queued on a GPU at once, its groups there get at least
// what the policy gives each of two best-effort vGPUs beside an LC (its
// default 2000 us period split in two), as several tenants do, and keep it
// for kCoBusyHoldMs after the last time it was seen, so the slices do not
// flap with every step's drain. The LC then waits up to that slice, as it
// does beside several best-effort vGPUs.
//
// Work is counted from the launches the gate tracks, which begin only once
// an LC makes the vGPU paced: work queued before, or processes blocked in a
// synchronisation behind it, show as no work. Two such processes starved at
// the tiny slice for the whole 6 s of an LC on the H200, launching nothing
// meanwhile. So the busy count is trusted only from kCoBusyHoldMs after the
// LC went live; until then two or more processes of the vGPU on the GPU
// (ProcessesOnGpu) count as busy. That includes the time before the LC is
// live at all: the node schedule gives the tiny slice as soon as the LC's
// vGPU exists, and an LC process may take seconds to start (an H200 run set
// 50 us before 1000 us, docs/benchmarks.md, run 35). The slice is
// core::kCoBusySliceUs, part of the ceiling the daemon audits.
using core::kCoBusySliceUs;
constexpr uint64_t kCoBusyHoldMs = 1000;
uint64_t g_co_busy_until_ms[core::kMaxDevices];    // per device slot; under g_pass_mutex
uint64_t g_beside_lc_since_ms[core::kMaxDevices];  // 0 = not beside a live LC at the last pass; under g_pass_mutex

// Processes of the vGPU on device slot `slot`, up to 2: those holding memory
// there, or whose compute channel group there has had a slice set (recorded
// by their own pass, which runs as soon as the group exists: a process whose
// context creation waits for the GPU behind another's holds no memory yet).
uint32_t ProcessesOnGpu(VgpuRuntime* rt, int slot) {
  const core::Ledger* ledger = rt->ledger_region();
  if (ledger == nullptr) return 0;
  // A slot's counters are its owner's; a free slot's are zero.
  uint32_t n = 0;
  const uint32_t high_water = core::LoadAcquire(ledger->slot_high_water);
  for (uint32_t i = 0; i < high_water && i < core::kMaxProcesses && n < 2; ++i) {
    const core::ProcessSlot& p = ledger->slots[i];
    n += core::LoadRelaxed(p.used_bytes[slot]) != 0 ||
         (slot < static_cast<int>(core::ProcessSlot::kApplied) && core::LoadRelaxed(p.applied_timeslice_us[slot]) != 0);
  }
  return n;
}

// The node schedule counted this vGPU as the lone best-effort one on the
// GPU beside an LC (kDeviceFlagLoneBestEffort), and another best-effort
// vGPU there has work queued now. The daemon counts only vGPUs whose
// processes the driver shows running (docs/design.md, "Who contends for a
// GPU"), so a neighbour that starts running is counted at its next pass, 1-6
// s later; meanwhile the neighbour runs its own slice (1000 us by default)
// against this vGPU's 50 us. Under exclusive turns the two never run at
// once, so the tiny slice stays.
bool NeighbourArrived(const core::DeviceLimit& limit, const pacer::Seat& seat) {
  const uint32_t flags = core::LoadRelaxed(limit.flags);
  if ((flags & core::kDeviceFlagLoneBestEffort) == 0 || (flags & core::kDeviceFlagExclusiveTurns) != 0) return false;
  return core::OtherBestEffortBusy(*seat.board, seat.member, port::MonotonicNanos(), *seat.config);
}

// Bit s: device slot s runs a slice under kCoBusySliceUs (beside a live LC,
// or the policy's own slice beside an LC's vGPU), and two or more of this
// vGPU's processes had work queued there at once within the last
// kCoBusyHoldMs (sampled at each pass), or are there (ProcessesOnGpu) while
// the busy count is not yet trusted; or this process has several compute
// groups there (`several`: SeveralComputeGroups), whose work the board counts
// as one; or a neighbour arrived (NeighbourArrived). lc_mask:
// LatencyCriticalPeers.
uint32_t CoBusySlots(VgpuRuntime* rt, uint32_t lc_mask, uint32_t several, uint64_t now_ms) {
  const core::Limits& limits = rt->limits();
  uint32_t mask = 0;
  for (uint32_t s = 0; s < limits.device_count && s < core::kMaxDevices; ++s) {
    const bool lc_live = (lc_mask >> s) & 1;
    const uint64_t policy_us = core::LoadRelaxed(limits.devices[s].timeslice_us);
    if (!lc_live) g_beside_lc_since_ms[s] = 0;
    if (!lc_live && (policy_us == 0 || policy_us >= kCoBusySliceUs)) continue;
    if (lc_live && g_beside_lc_since_ms[s] == 0) g_beside_lc_since_ms[s] = now_ms;
    const bool trusted = lc_live && now_ms >= g_beside_lc_since_ms[s] + kCoBusyHoldMs;
    const pacer::Seat seat = pacer::SeatOf(static_cast<int>(s));
    const bool seated = seat.board != nullptr && seat.member >= 0;
    const int32_t busy =
        seated ? static_cast<int32_t>(core::LoadAcquire(seat.board->members[seat.member].busy_processes)) : 0;
    if (busy >= 2 || ((several >> s) & 1) || (!trusted && ProcessesOnGpu(rt, static_cast<int>(s)) >= 2) ||
        (lc_live && seated && NeighbourArrived(limits.devices[s], seat))) {
      g_co_busy_until_ms[s] = now_ms + kCoBusyHoldMs;
    }
    if (now_ms < g_co_busy_until_ms[s]) mask |= 1u << s;
  }
  return mask;
}

// Several processes of one latency-critical vGPU. An LC vGPU's slice is long
// (5 s by default) so that no best-effort group takes the GPU from it in the
// middle of a request; but each process has its own channel groups, and a
// busy group at that slice keeps the GPU for seconds against another at the
// same slice (docs/gpu-facts.md): a second worker of the same service would
// wait for the first's whole slice, where stock time-slicing would switch in
// 2 ms (docs/benchmarks.md, "Two workers of one LC vGPU": on an H200 the
// second worker could not make its context in 51 s). So while two or more of
// the vGPU's processes are on a GPU (ProcessesOnGpu) where no higher LC is
// live, their groups there take the policy's slice beside another LC of
// their level (the driver's default, 2048 us), and best-effort groups still
// switch out within their own short slice.
//
// A process with two contexts on one GPU has two compute groups there, and
// they hold each other off as two processes would.
//
// Bit s: device slot s is such a GPU. lc_mask: LatencyCriticalPeers;
// several: SeveralComputeGroups.
uint32_t SharedLcSlots(VgpuRuntime* rt, uint32_t lc_mask, uint32_t several) {
  const core::Limits& limits = rt->limits();
  uint32_t mask = 0;
  for (uint32_t s = 0; s < limits.device_count && s < core::kMaxDevices; ++s) {
    if ((lc_mask >> s) & 1) continue;
    if (core::LevelClass(core::LoadRelaxed(limits.devices[s].priority)) != core::Priority::kLatencyCritical) continue;
    if (((several >> s) & 1) || ProcessesOnGpu(rt, static_cast<int>(s)) >= 2) mask |= 1u << s;
  }
  return mask;
}

// The slice an LC vGPU's processes share a GPU at (SharedLcSlots).
uint64_t SharedLcSlice(const core::DeviceLimit& limit) {
  const uint64_t shared = core::LoadRelaxed(limit.timeslice_beside_lc_us);
  return shared != 0 ? shared : core::kDefaultSharedLcSliceUs;
}

// The vGPU device slot a channel group is on, or VgpuRuntime::kUncapped.
int SlotOf(VgpuRuntime* rt, const rm::TsgRef& tsg) {
  if (tsg.device >= 0) return rt->DeviceSlot(tsg.device);
  return rt->limits().device_count == 1 ? 0 : VgpuRuntime::kUncapped;  // one GPU: it can only be that one
}

// Bit s: this process has two or more compute channel groups on device slot
// s (contexts of its own on one GPU).
uint32_t SeveralComputeGroups(VgpuRuntime* rt, const rm::TsgRef* tsgs, uint32_t n) {
  uint32_t seen = 0, several = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (tsgs[i].engine_type != rm::kEngineTypeGraphics) continue;
    const int slot = SlotOf(rt, tsgs[i]);
    if (slot < 0 || slot >= 32) continue;
    several |= seen & (1u << slot);
    seen |= 1u << slot;
  }
  return several;
}

// Writes this process's channel groups into its ledger slot, for the
// daemon's slice audit (daemon/slice_audit.h): compute groups first, since a
// slot holds only ProcessSlot::kPublishedGroups. Under g_publish_mutex, so
// that a pass and the driver's thread never interleave their lists.
std::mutex g_publish_mutex;
void PublishGroups(VgpuRuntime* rt, const rm::TsgRef* tsgs, uint32_t n) {
  core::PublishedChannelGroup published[core::ProcessSlot::kPublishedGroups];
  uint32_t count = 0;
  for (const bool compute : {true, false}) {
    for (uint32_t i = 0; i < n && count < core::ProcessSlot::kPublishedGroups; ++i) {
      if ((tsgs[i].engine_type == rm::kEngineTypeGraphics) != compute) continue;
      const int slot = SlotOf(rt, tsgs[i]);
      published[count++] = core::PublishChannelGroup(
          tsgs[i].fd, tsgs[i].client, tsgs[i].handle,
          slot >= 0 && slot < static_cast<int>(core::kMaxDevices) ? static_cast<uint32_t>(slot) : core::kUnknownDeviceSlot,
          tsgs[i].engine_type);
    }
  }
  rt->ledger().PublishChannelGroups(published, count);
}

void PublishGroupsLocked(VgpuRuntime* rt, const rm::TsgRef* tsgs, uint32_t n) {
  std::lock_guard<std::mutex> lock(g_publish_mutex);
  PublishGroups(rt, tsgs, n);
}

// Two bits per device slot s (bits 2s, 2s+1): its pacer::TurnRole.
uint64_t TurnRoles() {
  uint64_t roles = 0;
  for (int s = 0; s < pacer::SeatCount() && s < 32; ++s) {
    roles |= static_cast<uint64_t>(pacer::RoleOn(s)) << (2 * s);
  }
  return roles;
}

// The slice device slot `slot`'s compute groups should have now (0 = the
// driver's default). co_busy: CoBusySlots; shared_lc: SharedLcSlots.
uint64_t WantedSlice(const core::DeviceLimit& limit, pacer::TurnRole role, bool lc_live, bool co_busy = false,
                     bool shared_lc = false) {
  uint64_t want = core::LoadRelaxed(limit.timeslice_us);
  if (shared_lc && want > SharedLcSlice(limit)) want = SharedLcSlice(limit);
  // Backfill turns: the holder runs first, the others in its gaps.
  if (role == pacer::TurnRole::kHolder) want = core::kHolderSliceUs;
  if (role == pacer::TurnRole::kBackfiller) want = core::kBackfillSliceUs;
  // LC protection: beside a live LC of a higher level, a group never runs
  // with a longer slice than the policy's beside LC, whatever the node
  // schedule wrote (it may be stale, or may never have seen the LC).
  if (lc_live) {
    uint64_t beside = core::LoadRelaxed(limit.timeslice_beside_lc_us);
    if (beside == 0) beside = core::kDefaultSliceBesideLcUs;
    if (want == 0 || want > beside) want = beside;
  }
  // Busy processes of one vGPU: never the tiny slice between themselves,
  // whether it came from the clamp above or from the policy (CoBusySlots).
  if (co_busy && want != 0 && (lc_live || role == pacer::TurnRole::kNone)) want = std::max(want, kCoBusySliceUs);
  return want;
}

// The slice a device's copy-engine groups should have now (0 = the
// driver's default). Copy engines have runlists of their own, where an LC's
// copies wait behind a BE's copies as its kernels wait behind a BE's kernels
// (docs/gpu-facts.md): beside a live LC of a higher level they get the slice
// beside LC, an LC vGPU's own get its slice, and otherwise they keep the
// driver's default (shares and turns are of the compute engine).
uint64_t WantedCopySlice(const core::DeviceLimit& limit, bool lc_live, bool co_busy, bool shared_lc) {
  if (lc_live) return WantedSlice(limit, pacer::TurnRole::kNone, true, co_busy);
  if (core::LevelClass(core::LoadRelaxed(limit.priority)) == core::Priority::kLatencyCritical) {
    return WantedSlice(limit, pacer::TurnRole::kNone, false, false, shared_lc);
  }
  return 0;
}

// Per device slot, what the last pass wanted for its compute groups, with
// kKnown set (a wanted 0, the driver's default, is known too). For
// AdviseComputeSlice on other threads.
constexpr uint64_t kKnown = 1ull << 63;
std::atomic<uint64_t> g_slot_wanted[core::kMaxDevices];

}  // namespace

uint64_t AdviseComputeSlice(int device) {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return 0;
  const core::Limits& limits = rt->limits();
  const int slot = device >= 0 ? rt->DeviceSlot(device) : limits.device_count == 1 ? 0 : VgpuRuntime::kUncapped;
  if (slot < 0 || slot >= static_cast<int>(core::kMaxDevices)) return 0;
  const uint64_t known = g_slot_wanted[slot].load(std::memory_order_acquire);
  if (known & kKnown) return known & ~kKnown;
  const core::DeviceLimit& limit = limits.devices[slot];
  // No policy slice yet (the driver's default): let the driver's value
  // stand, so that the pass reads the real default back.
  if (core::LoadRelaxed(limit.timeslice_us) == 0) return 0;
  const bool lc = core::LevelClass(core::LoadRelaxed(limit.priority)) == core::Priority::kLatencyCritical;
  return WantedSlice(limit, pacer::TurnRole::kNone, /*lc_live=*/!lc);
}

void PublishChannelGroupsNow() {
  VgpuRuntime* rt = VgpuRuntime::Get();
  if (rt == nullptr) return;
  std::unique_lock<std::mutex> lock(g_publish_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  rm::TsgRef tsgs[rm::TsgRegistry::kCapacity];
  PublishGroups(rt, tsgs, rm::Registry().Snapshot(tsgs, rm::TsgRegistry::kCapacity));
}

void ApplyTimeslicesOnce(VgpuRuntime* rt) {
  std::lock_guard<std::mutex> lock(g_pass_mutex);
  const core::Limits& limits = rt->limits();
  const uint64_t generation = core::LoadAcquire(limits.generation);
  const uint64_t epoch = rm::Registry().epoch();
  const uint32_t lc_mask = LatencyCriticalPeers();
  const uint64_t roles = TurnRoles();
  const uint64_t now_ms = port::MonotonicNanos() / 1'000'000;
  rm::TsgRef tsgs[rm::TsgRegistry::kCapacity];
  uint32_t n = 0;
  const bool groups_moved = epoch != g_last_epoch;
  if (groups_moved) {
    n = rm::Registry().Snapshot(tsgs, rm::TsgRegistry::kCapacity);
    g_several_groups_mask = SeveralComputeGroups(rt, tsgs, n);
  }
  const uint32_t co_busy_mask = CoBusySlots(rt, lc_mask, g_several_groups_mask, now_ms);
  const uint32_t shared_lc_mask = SharedLcSlots(rt, lc_mask, g_several_groups_mask);
  const bool verify = now_ms >= g_next_verify_ms;
  if (generation == g_last_generation && epoch == g_last_epoch && lc_mask == g_last_lc_mask &&
      co_busy_mask == g_last_co_busy_mask && shared_lc_mask == g_last_shared_lc_mask && roles == g_last_roles &&
      !verify) {
    return;
  }
  if (verify) g_next_verify_ms = now_ms + 100;
  g_last_generation = generation;
  g_last_epoch = epoch;
  g_last_lc_mask = lc_mask;
  g_last_co_busy_mask = co_busy_mask;
  g_last_shared_lc_mask = shared_lc_mask;
  g_last_roles = roles;

  for (uint32_t slot = 0; slot < limits.device_count && slot < core::kMaxDevices; ++slot) {
    const auto role = static_cast<pacer::TurnRole>((roles >> (2 * slot)) & 3);
    g_slot_wanted[slot].store(kKnown | WantedSlice(limits.devices[slot], role, (lc_mask >> slot) & 1,
                                                   (co_busy_mask >> slot) & 1, (shared_lc_mask >> slot) & 1),
                              std::memory_order_release);
  }
  if (!groups_moved) n = rm::Registry().Snapshot(tsgs, rm::TsgRegistry::kCapacity);
  LogTracked(tsgs, n);
  // Again at each read-back tick (every 100 ms), not only when the driver's
  // thread published them: the slot may have been claimed after they were
  // made.
  PublishGroupsLocked(rt, tsgs, n);
  for (uint32_t i = 0; i < n; ++i) {
    const rm::TsgRef& tsg = tsgs[i];
    const bool compute = tsg.engine_type == rm::kEngineTypeGraphics;
    const int slot = SlotOf(rt, tsg);
    if (slot == VgpuRuntime::kUncapped) {
      if (tsg.device < 0 && !g_unknown_device_logged.exchange(true)) {
        port::Log(port::LogLevel::kWarn, "a channel group was made outside context creation in a multi-GPU "
                  "vGPU; it keeps the driver's default timeslice");
      }
      continue;
    }
    const auto role = slot < static_cast<int>(core::kMaxDevices) ? static_cast<pacer::TurnRole>((roles >> (2 * slot)) & 3) : pacer::TurnRole::kNone;
    const bool lc_live = (lc_mask >> slot) & 1;
    const bool co_busy = (co_busy_mask >> slot) & 1;
    const bool shared_lc = (shared_lc_mask >> slot) & 1;
    const uint64_t want = compute ? WantedSlice(limits.devices[slot], role, lc_live, co_busy, shared_lc)
                                  : WantedCopySlice(limits.devices[slot], lc_live, co_busy, shared_lc);
    Applied& a = AppliedFor(tsg.serial);
    // A copy group is left as the driver made it until it needs a slice: no
    // control (160-440 us each) for the groups of a BE that never meets an LC.
    if (!compute && want == 0 && a.applied_us == 0) continue;
    if (a.applied_us == 0 && a.default_us == 0) {
      uint64_t current = 0;
      if (Control().Get(tsg, &current).ok) a.default_us = current;
    }
    // Never above the ceiling the daemon's slice audit holds the vGPU to,
    // not even to restore a default (read at first sight, after anything a
    // tenant may have set there): the audit must never find a library's own
    // slice too long (core/slice_ceiling.h).
    const uint64_t target = std::min(want != 0 ? want : a.default_us, core::SliceCeilingUs(limits.devices[slot], compute));
    if (target == 0) continue;
    if (target == a.applied_us) {
      if (!a.set_ok || a.next_check_ms == 0 || now_ms < a.next_check_ms) continue;
      uint64_t current = 0;
      const bool read = Control().Get(tsg, &current).ok;
      const uint32_t check = a.checks++;
      a.next_check_ms = NextCheckMs(now_ms, a.checks);
      // The first two checks set it again even when the driver reads back
      // the value set: what it reads back need not be what it runs.
      if (check >= 2 && (!read || current == target)) continue;
      port::Log(port::LogLevel::kInfo, "channel group 0x%x reads back %llu us (set: %llu us); setting it again",
                tsg.handle, static_cast<unsigned long long>(read ? current : 0),
                static_cast<unsigned long long>(target));
      const rm::ControlResult again = Control().Set(tsg, target);
      Count(rt, again.ok);
      continue;
    }
    const rm::ControlResult r = Control().Set(tsg, target);
    a.applied_us = target;  // a refused value is not retried until the target changes
    a.set_ok = r.ok;
    a.checks = 0;
    a.next_check_ms = NextCheckMs(now_ms, 0);
    Count(rt, r.ok);
    if (r.ok) {
      if (compute) rt->ledger().RecordAppliedTimeslice(static_cast<uint32_t>(slot), target);
      // Benchmarks parse the compute line ("timeslice of channel group").
      port::Log(port::LogLevel::kInfo, "timeslice of %schannel group 0x%x set to %llu us (client 0x%x, fd %d)",
                compute ? "" : "copy-engine ", tsg.handle, static_cast<unsigned long long>(target), tsg.client, tsg.fd);
    } else if (!g_fail_logged.exchange(true)) {
      char why[96];
      port::Log(port::LogLevel::kWarn,
                "the driver refused to set a channel group's timeslice (%s); this process keeps the driver's "
                "timeslices, so its compute share and priority are NOT enforced",
                r.Describe(why, sizeof why));
    }
  }
}

void ForgetAppliedTimeslices() {
  for (Applied& a : g_applied) a = Applied{};
  for (auto& w : g_slot_wanted) w.store(0, std::memory_order_relaxed);
  g_last_epoch = ~0ull;
  g_last_lc_mask = 0;
  g_last_co_busy_mask = 0;
  g_last_shared_lc_mask = 0;
  g_several_groups_mask = 0;
  for (uint64_t& until : g_co_busy_until_ms) until = 0;
  for (uint64_t& since : g_beside_lc_since_ms) since = 0;
  g_last_roles = 0;
  g_next_verify_ms = 0;
}

}  // namespace gpuslice::interposer
