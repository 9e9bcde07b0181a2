// vgpu_layout.h — the on-disk (and in-memory) shape of one vGPU's shared state.
//
// A vGPU is a directory holding two fixed-size files, each mapped by every
// process of the vGPU:
//
//   limits  What the vGPU may use. Written only by whoever created or resizes
//           the vGPU (`gpuslice run`, the daemon). Applications open it O_RDONLY
//           and map it PROT_READ, so no application can raise its own limit.
//   ledger  What the vGPU uses. One slot per process; a process charges and
//           uncharges only its own slot, so a `kill -9` can never leave a
//           half-made update behind, and no lock exists to be left held.
//
// Both are plain-old-data with atomics, no pointers, and a magic/version/size
// header checked on open. All fields are naturally aligned 64-bit or 32-bit
// values so that lock-free std::atomic_ref operations are valid across
// processes (x86-64 and aarch64 both guarantee address-free atomics for these);
// every access goes through core/shared_word.h, which says why.
//
// This header includes no CUDA header: the policy and accounting core never
// sees driver types. Devices are identified by their 16-byte UUID.
#ifndef GPUSLICE_CORE_VGPU_LAYOUT_H_
#define GPUSLICE_CORE_VGPU_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace gpuslice::core {

inline constexpr uint32_t kMaxDevices = 16;      // per node; NVIDIA ships at most 16 per host today
inline constexpr uint32_t kMaxProcesses = 1024;  // per vGPU; the ledger is 584.5 KiB at this size
inline constexpr size_t kMaxNameLength = 63;     // vGPU names: [A-Za-z0-9_.-]{1,63}

inline constexpr uint64_t kLimitsMagic = 0x53544d4c53504721ull;  // "!GPSLMTS"
inline constexpr uint64_t kLedgerMagic = 0x5244474c53504721ull;  // "!GPSLGDR"
// 2: the ledger gained the LC latency histogram. 3: limits gained each
// device's slice beside a latency-critical vGPU, slots their applied slices.
// 4: the ledger gained the task API's per-level rows (after the slots).
// 5: slots gained their process's channel groups, for the daemon's slice audit.
// 6: slots gained their process's open legacy IPC handles.
// (A vGPU of an older version must be deleted and made again by this gpuslice.)
inline constexpr uint32_t kLayoutVersion = 6;

// A memory limit of this value means "no limit": the device is visible but the
// vGPU does not cap it.
inline constexpr uint64_t kUnlimited = ~0ull;

enum class Priority : uint32_t { kBestEffort = 0, kLatencyCritical = 1 };

// A priority level, as one word (DeviceLimit::priority, BoardMember::priority):
//   bits 0..7   its class, a Priority: what the GPU gives it (lc: the long
//               slice, never waits for turns; be: turns by share);
//   bits 8..15  its rank among the node's levels of that class, 0 the lowest.
// Levels are ordered by class, then rank: every LC level above every BE one.
// The built-in levels `be` and `lc` are rank 0 of their class, so their words
// are 0 and 1, as before levels had ranks. docs/design.md, "Priority levels".
inline constexpr uint32_t kMaxLevelRank = 255;
constexpr uint32_t LevelWord(Priority level_class, uint32_t rank) {
  return static_cast<uint32_t>(level_class) | (rank > kMaxLevelRank ? kMaxLevelRank : rank) << 8;
}
constexpr Priority LevelClass(uint32_t word) {
  return (word & 0xff) == static_cast<uint32_t>(Priority::kLatencyCritical) ? Priority::kLatencyCritical
                                                                            : Priority::kBestEffort;
}
constexpr uint32_t LevelRank(uint32_t word) { return (word >> 8) & 0xff; }
// Higher is more important; any value of a word in, one of 512 out.
constexpr uint32_t LevelOrder(uint32_t word) {
  return static_cast<uint32_t>(LevelClass(word)) << 8 | LevelRank(word);
}

struct FileHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t size;  // sizeof the whole struct that begins with this header
};

struct DeviceLimit {
  uint8_t uuid[16];             // the GPU's UUID as cuDeviceGetUuid/NVML report it
  uint64_t memory_limit_bytes;  // atomic: live resize stores here
  uint32_t compute_share_pct;   // 1..100 (issue "compute"); 100 = no share set
  uint32_t compute_cap_pct;     // 0 = no hard cap
  uint32_t priority;            // a level word: LevelWord
  uint32_t flags;               // kDeviceFlag*
  // The hardware timeslice this vGPU's channel groups on this GPU should
  // have, computed by the policy (src/policy) from every vGPU on the GPU and
  // written by whoever manages the node (a `gpuslice run` supervisor or the
  // daemon). Atomic; 0 = leave the driver's default. Processes re-apply it
  // when `generation` changes.
  uint64_t timeslice_us;
  // The slice this vGPU's processes use instead, whenever a latency-critical
  // vGPU of a higher level has a live process on this GPU (seen on the GPU's
  // pacing board), whatever `timeslice_us` says: the policy's slice for this
  // vGPU with an LC beside it. It holds LC protection even when the node
  // schedule is stale or never saw the LC (docs/design.md, "LC protection").
  // For a vGPU of the highest LC level on the GPU, the slice its processes
  // take while two or more of them are on it (the policy's slice
  // beside another LC vGPU of its level). 0 = the built-in policy's.
  uint64_t timeslice_beside_lc_us;
};
inline constexpr uint32_t kDeviceFlagPresent = 1u << 0;
// Contending best-effort vGPUs on this GPU split it by GPU turns, not by the
// policy's slices alone (policy::ShareMode::kTurns; docs/design.md,
// "Shares"). Written by the node schedule from the node's policy, so every
// vGPU on a GPU follows one rule and no tenant chooses its own.
inline constexpr uint32_t kDeviceFlagShareTurns = 1u << 1;
// Contending best-effort vGPUs on this GPU take exclusive GPU turns: every
// launch waits for its vGPU's turn (policy::TurnStyle::kExclusive), not only
// a capped vGPU's. Written by the node schedule from the node's policy; a
// process may take exclusive turns where this is not set
// (GPUSLICE_TURNS=exclusive), never backfill where it is.
inline constexpr uint32_t kDeviceFlagExclusiveTurns = 1u << 2;
// The node schedule counted this best-effort vGPU as the only one that
// contends for this GPU beside an LC (its slice beside an LC is the lone,
// tiny one; policy::AloneBesideLc). Its processes take a longer slice by
// themselves while another best-effort vGPU there has work queued
// (interposer/timeslice_applier.h): a neighbour that starts running is
// counted by the schedule only at the daemon's next pass.
inline constexpr uint32_t kDeviceFlagLoneBestEffort = 1u << 3;
// A best-effort vGPU's slice beside a latency-critical one when its limits
// name none (timeslice_beside_lc_us == 0): with nothing else to switch to but
// the LC, the slice bounds the LC's wait for the GPU (docs/gpu-facts.md).
inline constexpr uint64_t kDefaultSliceBesideLcUs = 50;
// A latency-critical vGPU's slice when it shares the GPU with another of its
// level, or its processes with each other, and its limits name none: the
// driver's own default compute slice (docs/gpu-facts.md), so that they take
// turns as under stock time-slicing instead of holding each other off for
// the LC's whole slice.
inline constexpr uint64_t kDefaultSharedLcSliceUs = 2048;

struct Limits {
  FileHeader header;
  uint64_t generation;  // atomic: bumped after every change, so readers can notice
  char name[kMaxNameLength + 1];
  uint32_t device_count;
  // How long an allocation that the GPU refuses (it is full, though the vGPU
  // is within its limit) waits for the node to free memory by suspending
  // best-effort vGPUs of lower levels (core/memory_wait.h); 0: it fails at
  // once. Written by the daemon at create from its configuration.
  uint32_t memory_wait_ms;
  DeviceLimit devices[kMaxDevices];
};

// One channel group of a process, in two atomic words; both 0 = none.
//   where: (descriptor + 1) << 32 | RM client handle. The descriptor is the
//          process's own number for the /dev/nvidiactl it made the group on.
//   what:  group handle << 32 | device slot (an index into Limits::devices,
//          0xffff unknown) << 16 | engine type (NV2080_ENGINE_TYPE_*; 1 is
//          the compute engine, the others copy engines).
struct PublishedChannelGroup {
  uint64_t where;
  uint64_t what;
};
inline constexpr uint32_t kUnknownDeviceSlot = 0xffff;
constexpr PublishedChannelGroup PublishChannelGroup(int fd, uint32_t client, uint32_t handle, uint32_t device_slot,
                                                    uint32_t engine_type) {
  return {static_cast<uint64_t>(static_cast<uint32_t>(fd) + 1) << 32 | client,
          static_cast<uint64_t>(handle) << 32 | (device_slot & 0xffffu) << 16 | (engine_type & 0xffffu)};
}

// One process's share of the vGPU's usage. `owner` is the claim word:
//   0                 free
//   bit 63 set        busy: being claimed or reclaimed by the process that
//                     BusyWord() names (its pid, and its pid namespace's
//                     inode, which the kernel keeps to 32 bits). If that
//                     process dies mid-way, a reaper that can see it is gone
//                     redoes the reclaim (memory_ledger.h).
//   anything else     (pid << 32) | claim_sequence (low 32 bits), live or dead
//                     (pids are below 2^22, so bit 63 is clear)
struct alignas(64) ProcessSlot {
  uint64_t owner;            // atomic
  uint64_t start_time;       // /proc/<pid>/stat field 22, guards against pid reuse
  uint64_t pid_namespace;    // inode of /proc/self/ns/pid; reapers judge only their own
  uint64_t used_bytes[kMaxDevices];  // atomic; indexed like Limits::devices
  // The timeslice this process last set on its compute channel groups of
  // each of the vGPU's first kApplied devices (what `ls` shows as applied;
  // the policy's wish is in Limits). Atomic; 0 = none set yet.
  static constexpr uint32_t kApplied = 8;
  uint32_t applied_timeslice_us[kApplied];
  // Atomic: the process's request that the node free GPU memory for it, and
  // the node's answer (core/memory_wait.h); 0 = none.
  uint64_t memory_wait;
  // The channel groups (TSGs) the process's driver made, as its library saw
  // them (rm/tsg_registry.h), so that the daemon can read and set their
  // slices from outside the process (daemon/slice_audit.h). The tenant can
  // write them: the daemon trusts only what RM answers for them.
  static constexpr uint32_t kPublishedGroups = 8;
  PublishedChannelGroup channel_groups[kPublishedGroups];
  // The legacy IPC handles (cuIpcOpenMemHandle) this process has open, each
  // as IpcHandleHash of its 64 bytes, 0 in a free entry, kIpcOpenOverflow
  // once more were open than there are entries. An exporter of the vGPU
  // reads them at its free (interposer/charge.h): memory open here lives on
  // after it, and stays charged. Atomic; written only by the slot's owner.
  static constexpr uint32_t kOpenIpcHandles = 32;
  uint64_t open_ipc_handles[kOpenIpcHandles];
};
inline constexpr uint64_t kIpcOpenOverflow = ~0ull;
// A legacy IPC handle's 64 bytes (CUipcMemHandle) as a word that is neither
// 0 nor kIpcOpenOverflow (FNV-1a).
inline constexpr uint32_t kIpcHandleBytes = 64;
inline uint64_t IpcHandleHash(const void* handle) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t i = 0; i < kIpcHandleBytes; ++i)
    h = (h ^ static_cast<const unsigned char*>(handle)[i]) * 0x100000001b3ull;
  return h == 0 || h == kIpcOpenOverflow ? 1 : h;
}
inline constexpr uint64_t kSlotBusyBit = 1ull << 63;
constexpr uint64_t BusyWord(uint32_t pid, uint64_t pid_namespace) {
  return kSlotBusyBit | static_cast<uint64_t>(pid & 0x7fffffffu) << 32 | (pid_namespace & 0xffffffffu);
}
constexpr bool SlotBusy(uint64_t owner) { return (owner & kSlotBusyBit) != 0; }
constexpr uint32_t BusyPid(uint64_t owner) { return static_cast<uint32_t>(owner >> 32) & 0x7fffffffu; }
constexpr uint64_t BusyPidNamespace(uint64_t owner) { return owner & 0xffffffffu; }
// The busy marker of gpuslice before interrupted reclaims could be redone:
// it names no process, so it is never redone (a vGPU of that gpuslice must be
// made again to lose a slot stuck so).
inline constexpr uint64_t kSlotReaping = ~0ull;

// The LC (latency-critical) request-latency histogram's buckets: upper
// bounds in nanoseconds, inclusive (Prometheus's `le`), then one more bucket
// for everything above the last bound (+Inf). Log-spaced from 25 µs to 1 s and
// densest from 100 µs to 3 ms, where an LC kernel's p99 lies on an H200 (313
// µs beside a busy BE vGPU, 2.3 ms under stock time-slicing): quantiles are
// interpolated within one bucket, so narrow buckets there keep p99 close to
// the truth. 10 ms to 1 s catch a BE slice or a preemption gone wrong.
inline constexpr uint64_t kLcLatencyBucketBoundsNs[] = {
    25'000,     50'000,     100'000,    150'000,     200'000,     300'000,      500'000,
    750'000,    1'000'000,  1'500'000,  2'000'000,   3'000'000,   5'000'000,    7'500'000,
    10'000'000, 20'000'000, 50'000'000, 100'000'000, 250'000'000, 1'000'000'000};
inline constexpr uint32_t kLcLatencyBuckets =
    sizeof(kLcLatencyBucketBoundsNs) / sizeof(kLcLatencyBucketBoundsNs[0]) + 1;  // + the +Inf bucket

// One level's tasks, as the task API's schedulers in the vGPU's processes
// record them (core/task_metrics.h, which says how a row is claimed). Rows
// are keyed by the level's name, not its word: two processes of one vGPU
// may run with different configs, and a name is what a user reads.
inline constexpr uint32_t kTaskLevelNameBytes = 33;  // a level name (1-32 characters) and its NUL
inline constexpr uint32_t kTaskLevelRows = 32;       // names past these are counted in `task_levels_other`
struct alignas(64) TaskLevelRow {
  uint32_t state;  // atomic: 0 free, 1 being claimed (name not yet written), 2 ready
  char name[kTaskLevelNameBytes];
  uint64_t failed;      // atomic: tasks that ended with an exception
  uint64_t slo_misses;  // atomic: tasks over their SLO
  uint64_t count;       // atomic: tasks recorded
  uint64_t sum_ns;      // atomic: their total latency, submission to completion
  uint64_t buckets[kLcLatencyBuckets];  // atomic; the LC histogram's bounds, per bucket, NOT cumulative
};

struct Ledger {
  FileHeader header;
  uint32_t slot_high_water;  // atomic: slots [0, high_water) may be in use
  uint32_t claim_sequence;   // atomic: feeds ProcessSlot::owner's low bits
  // Cumulative counters for the vGPU's lifetime, each one atomic add by
  // whichever process has something to count (metrics read them).
  uint64_t reaped_processes;        // dead processes' slots reclaimed
  uint64_t denied_allocations;      // allocations refused for the limit
  uint64_t timeslice_applications;  // timeslices set on a channel group
  uint64_t timeslice_failures;      // ... and refused by the driver
  uint64_t gate_waits;              // launches that waited at the GPU-turn gate (pacer.h)
  // LC request latency over the vGPU's lifetime, shared by all its processes
  // (so not per slot: a dead process's requests stay counted). Written only
  // through RecordLcLatency and read through TakeLcLatencySnapshot
  // (core/lc_latency.h), which say in what order. Its own cache lines, apart
  // from the header words every charge reads.
  uint64_t lc_latency_count;                       // atomic: requests recorded
  uint64_t lc_latency_sum_ns;                      // atomic: their total latency
  uint64_t lc_latency_buckets[kLcLatencyBuckets];  // atomic; per bucket, NOT cumulative
  // Windows in which latency-critical holds took a process's whole hold
  // budget, so that its launches went ahead of holds for the rest of the
  // window (core/hold_budget.h). Zero in ledgers of libraries before it.
  uint64_t hold_budget_spent;
  ProcessSlot slots[kMaxProcesses];
  // The task API's metrics per level (after the slots, whose offset tests
  // and benchmarks read).
  TaskLevelRow task_levels[kTaskLevelRows];
  TaskLevelRow task_levels_other;  // every name once the rows are taken; its name is "other"
};

static_assert(sizeof(ProcessSlot) == 576);
static_assert(sizeof(DeviceLimit) == 56);
static_assert(offsetof(Ledger, lc_latency_count) % 64 == 0, "the LC histogram starts a cache line");
static_assert(offsetof(Ledger, slots) % 64 == 0);
// tests/integration/test_shared_vgpu.py and bench/daemon/load_bench.py read
// the slots at this offset.
static_assert(offsetof(Ledger, slots) == 256, "the header part of the ledger is four cache lines");
// ... and these counters at these bytes (tests/integration/cuda_app.cc).
static_assert(offsetof(Ledger, gate_waits) == 56 && offsetof(Ledger, hold_budget_spent) == 248);
static_assert(kLcLatencyBuckets == 21);
static_assert(sizeof(TaskLevelRow) == 256);
static_assert(sizeof(Limits) < 4096, "limits must fit one page");

// Checks a mapped file's header and ranges; the message names the file and
// the fix. Slow path (allocates the message on error).
Status ValidateLimits(const Limits& limits, const std::string& dir);
Status ValidateLedger(const Ledger& ledger, const std::string& dir);
std::string CorruptedStateMessage(const std::string& dir, const std::string& file, const std::string& why);

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_VGPU_LAYOUT_H_
