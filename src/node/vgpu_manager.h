// vgpu_manager.h — the vGPU lifecycle: create or join, list, resize,
// delete, and garbage collection, over the state directory. The daemon
// serves it (daemon/control_service.h); a command run while no daemon
// answers opens the same manager (standalone_node.h), so both make the same
// checks and write the same bytes.
//
// The store on disk is the state. The manager keeps only what it can rebuild
// by scanning the store (open mappings, one per vGPU) plus three short-lived,
// in-memory facts: the clients that were just handed a vGPU and have not yet
// taken its membership lock, the latest measured compute shares, and recent
// snapshots of the LC latency histograms (to report recent quantiles). A
// restarted daemon re-adopts every vGPU by scanning; running applications
// never depended on the daemon process, so they keep their limits and
// accounting throughout.
//
// Ephemeral vGPUs (what `gpuslice run` makes) are removed once no member
// holds them, no process uses them and no client is on its way in;
// persistent ones (a `persistent` create, for the Kubernetes plugin) stay
// until deleted. Persistence is a file in the vGPU's directory, so it
// survives restarts.
//
// The manager also owns each vGPU's suspend state (running, suspending,
// suspended, resuming: suspend_record.h), kept in the vGPU's directory so
// that a restarted daemon finishes what it was killed in (RecoverSuspends).
// Suspend and Resume drive the driver's checkpoint API (vgpu_suspender.h)
// outside the mutex: the intermediate states keep a second suspend or
// resume of the same vGPU out meanwhile.
//
// Thread-safe: every public method may be called from any thread (gRPC
// handlers, the housekeeping thread); they serialise on one mutex, held for
// file-system work of about a millisecond. Ledger reaping and the
// checkpoint API's calls (seconds) run outside it.
// Methods allocate and make syscalls.
#ifndef GPUSLICE_NODE_VGPU_MANAGER_H_
#define GPUSLICE_NODE_VGPU_MANAGER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/lc_latency.h"
#include "core/vgpu_store.h"
#include "node/api_status.h"
#include "node/checkpoint_driver.h"
#include "node/host_memory.h"
#include "node/node_devices.h"
#include "node/schedule_worker.h"
#include "node/suspend_record.h"
#include "node/vgpu_view.h"
#include "port/mutex.h"
#include "task/task_levels.h"

namespace gpuslice::node {

struct ManagerOptions {
  // Applied to creates that leave a value out (the config's `defaults`).
  std::optional<uint64_t> default_memory_bytes;  // unset: unlimited
  uint32_t default_compute_pct = 100;
  core::Priority default_priority = core::Priority::kBestEffort;
  // The node's priority levels (the config's `levels:`, stored in the state
  // directory: policy_file.h): names in requests resolve through them, and
  // views name each vGPU's level with them.
  task::LevelTable levels = task::LevelTable::Defaults();
  // How long a vGPU handed to a client that gave no pid (or was adopted at
  // start) is kept before it may be collected: covers the moment between the
  // answer and the client's membership lock.
  std::chrono::milliseconds grace{std::chrono::seconds(3)};
  // Group that may use vGPUs besides the daemon's user; unset: owner only.
  // Each vGPU's own files go to its owner (vgpu_owner.h) within the group.
  std::optional<gid_t> group;
  // The daemon's user, who may change every vGPU (vgpu_owner.h); unset:
  // this process's effective uid.
  std::optional<uid_t> operator_uid;
  // LC latency quantiles in views are over about this much recent time (see
  // SampleLcLatency). A p99 needs a hundred requests or more to mean
  // anything, and one second of a sparse LC service rarely has them.
  std::chrono::milliseconds lc_latency_window{std::chrono::seconds(10)};
  // Host memory free for a suspend's checkpoints (host_memory.h); unset:
  // MemAvailable of /proc/meminfo.
  HostMemoryProbe host_memory;
  // How long a suspend waits for each process's CUDA calls in flight
  // before it gives up and leaves the vGPU running.
  std::chrono::milliseconds suspend_lock_timeout{std::chrono::seconds(10)};
  // Memory overcommit (node/memory_pressure.h): how long an allocation
  // that finds its GPU full waits for suspends, written into each new
  // vGPU's limits (core/memory_wait.h); 0: it fails at once.
  uint32_t memory_wait_ms = 0;
  // Admission: a create is refused when the memory limits of the vGPUs on
  // one of its GPUs (an unlimited one counts as the whole GPU) would add up
  // past this percentage of the GPU's memory (150: half again). 0: not
  // checked.
  uint32_t max_memory_overcommit_pct = 0;
};

struct SuspendOptions {
  std::string name;
  std::optional<std::chrono::milliseconds> lock_timeout;  // unset: ManagerOptions's
  std::string by;                                         // SuspendRecord::by: "" an operator
  std::optional<uid_t> caller;                            // vgpu_owner.h; unset: in-process
};

struct MigrateOptions {
  std::string name;
  std::string gpu;                                        // the target: an index or a UUID
  std::optional<std::chrono::milliseconds> lock_timeout;  // unset: ManagerOptions's
  std::optional<uid_t> caller;                            // vgpu_owner.h; unset: in-process
};

struct CreateOptions {
  std::string name;
  std::vector<std::string> gpus;  // indices or UUIDs; empty = all
  std::optional<uint64_t> memory_limit_bytes;
  std::optional<uint32_t> compute_share_pct;
  std::optional<uint32_t> compute_cap_pct;  // 100 = no cap
  std::optional<core::Priority> priority;  // a class: its lowest level (`lc`, `be`)
  std::string priority_level;              // or a level by name ("": none), as `--priority` takes it
  std::optional<double> power_cap_watts;   // per GPU (power_cap_file.h); unset: none
  bool join_existing = false;
  bool persistent = false;
  // Best-effort only: the node may suspend it to make room for higher
  // levels (node/memory_pressure.h; core::VgpuSpec::suspendable).
  bool suspendable = false;
  uint32_t client_pid = 0;  // kept while this process lives, until it releases; 0 = grace
  // Who asks (vgpu_owner.h): a new vGPU's owner, and a join is refused to
  // others. Unset: in-process; the new vGPU is this process's user's.
  std::optional<uid_t> caller;
};

struct CreateResult {
  std::string name;
  std::string dir;
  bool created = false;
  std::vector<std::string> gpu_uuids;
};

struct ResizeOptions {
  std::string name;
  std::optional<uint64_t> memory_limit_bytes;  // core::kUnlimited lifts the limit
  std::optional<uint32_t> compute_share_pct;
  std::optional<uint32_t> compute_cap_pct;  // 100 = no cap
  std::optional<core::Priority> priority;  // a class: its lowest level (`lc`, `be`)
  std::string priority_level;              // or a level by name ("": none), as `--priority` takes it
  std::optional<double> power_cap_watts;   // per GPU; 0 removes the power cap
  bool force = false;
  std::optional<uid_t> caller;  // vgpu_owner.h; unset: in-process
};

struct GcResult {
  uint32_t reaped_processes = 0;
  std::vector<std::string> removed;
};

class VgpuManager {
 public:
  // `devices` and `schedule` must outlive the manager; `schedule` writes
  // every change to a vGPU's limits after its creation (node_schedule.h).
  VgpuManager(core::VgpuStore store, const NodeDevices* devices, ScheduleWorker* schedule, ManagerOptions options);

  // Scans the store and adopts every vGPU in it. Call once, at start.
  // Returns how many were adopted; corrupted ones are logged and skipped.
  size_t Adopt() EXCLUDES(mu_);

  ApiStatus Create(const CreateOptions& options, CreateResult* result) EXCLUDES(mu_);
  ApiStatus Resize(const ResizeOptions& options, VgpuView* after) EXCLUDES(mu_);
  // if_unused: only an unused ephemeral vGPU, and no error but another
  // user's PERMISSION_DENIED. Otherwise
  // refused while processes or members use it. `client_pid` (if_unused):
  // the departing client, whose pending claim is dropped first. `caller`:
  // vgpu_owner.h (unset: in-process).
  ApiStatus Delete(const std::string& name, bool if_unused, uint32_t client_pid, bool* deleted,
                   std::optional<uid_t> caller = std::nullopt) EXCLUDES(mu_);
  // Every vGPU, or the one named ("" = all). Unknown name: NOT_FOUND.
  ApiStatus List(const std::string& name, std::vector<VgpuView>* views) EXCLUDES(mu_);

  // The checkpoint API that Suspend and Resume use; null (with why): they
  // answer FAILED_PRECONDITION with `unavailable`. Call before serving.
  void SetCheckpointDriver(CheckpointDriver* driver, std::string unavailable) EXCLUDES(mu_);
  // Suspends every process of the vGPU (vgpu_suspender.h), after checking
  // that the bytes they hold fit in the host's available memory.
  ApiStatus Suspend(const SuspendOptions& options, VgpuView* after) EXCLUDES(mu_);
  // Restores and unlocks every process of a suspended vGPU.
  ApiStatus Resume(const std::string& name, VgpuView* after, std::optional<uid_t> caller = std::nullopt) EXCLUDES(mu_);
  // Moves a running one-GPU vGPU to another GPU of the same model: suspend,
  // its limits moved to the target (one generation bump, and the node's
  // schedule and roster recomputed), every process restored onto the
  // target, running again. A failed restore puts everything back on the old
  // GPU. The library does not yet follow its process onto the new GPU's
  // pacing board and channel groups
  // (docs/design.md, "Migration to another GPU"): the memory limit moves,
  // shares and LC priority do not until its processes restart.
  ApiStatus Migrate(const MigrateOptions& options, VgpuView* after) EXCLUDES(mu_);
  // At start, after Adopt and SetCheckpointDriver: every vGPU found
  // suspending or resuming (a daemon killed in the middle) is brought back
  // to running, so that no process stays locked. Suspended ones stay
  // suspended. Returns how many were recovered.
  size_t RecoverSuspends() EXCLUDES(mu_);
  // Whether a process of some vGPU waits for room on a full GPU
  // (core/memory_wait.h): a scan of the ledgers' live slots, no view made.
  bool AnyMemoryWaits() EXCLUDES(mu_);
  // Answers a process's memory request "nothing will be freed"
  // (core/memory_wait.h); OK also when the request has since changed.
  ApiStatus AnswerMemoryWait(const std::string& name, const core::MemoryWait& wait) EXCLUDES(mu_);
  // The power cap's GPU-time budget of each of the vGPU's devices (1..100,
  // in device order; daemon/power_cap_controller.h): writes the effective
  // compute cap min(user's cap, budget) where it changes and bumps the
  // generation once. A vGPU without a power cap is left alone (OK).
  ApiStatus SetPowerBudget(const std::string& name, const std::vector<uint32_t>& budget_pct) EXCLUDES(mu_);

  // Reaps dead processes from every ledger, then removes unused ephemeral
  // vGPUs. Run by the housekeeping thread every reap interval.
  GcResult CollectGarbage() EXCLUDES(mu_);

  // Per vGPU name, per device index: measured share of GPU time (0..1), or
  // nullopt where NVML cannot tell. Replaces the previous measurement.
  void SetMeasuredRatios(const std::map<std::string, std::vector<std::optional<double>>>& ratios) EXCLUDES(mu_);
  // (pid, vGPU name, device index) of every live process, for the sampler.
  struct ProcessOnGpu {
    uint32_t pid;
    std::string vgpu;
    uint32_t device;
    uint32_t gpu_index;
  };
  std::vector<ProcessOnGpu> ProcessesInDaemonNamespace() EXCLUDES(mu_);

  // Snapshots every vGPU's LC latency histogram and task levels. Views then
  // report LC and task quantiles over the requests since the newest snapshot at least
  // `lc_latency_window` old (or the oldest kept, while the daemon is
  // younger than that). Run by the housekeeping thread every second.
  void SampleLcLatency() EXCLUDES(mu_);

  const core::VgpuStore& store() const { return store_; }
  // The user who may change every vGPU besides root (vgpu_owner.h).
  uid_t operator_uid() const { return operator_uid_; }
  const NodeDevices& devices() const { return *devices_; }

 private:
  struct Pending {
    uint32_t pid;
    uint64_t start_time;
  };
  struct Managed {
    core::VgpuHandle handle;
    ino_t limits_inode = 0;
    bool persistent = false;
    bool suspendable = false;
    std::chrono::steady_clock::time_point grace_until;
    std::vector<Pending> pending;
    std::vector<std::optional<double>> measured;
    std::vector<uint32_t> power_budget;  // per device; empty: none set by this manager yet
    struct LcSample {
      std::chrono::steady_clock::time_point at;
      core::LcLatencySnapshot snapshot;
      std::vector<core::TaskLevelSnapshot> tasks;  // the task API's levels (core/task_metrics.h)
    };
    std::deque<LcSample> lc_samples;  // oldest first; front is the views' baseline
  };
  using Clock = std::chrono::steady_clock;

  // The vGPU `name` and the checkpoint API, for a `verb` ("suspend",
  // "resume", "migrate") that needs both; the error names what is missing.
  ApiStatus CheckpointTargetLocked(const std::string& name, const char* verb, std::optional<uid_t> caller, Managed** m,
                                   CheckpointDriver** driver) REQUIRES(mu_);
  // PERMISSION_DENIED unless `caller` may `verb` the vGPU in `dir`
  // (vgpu_owner.h).
  ApiStatus CheckCaller(const std::string& name, const std::string& dir, std::optional<uid_t> caller,
                        const char* verb) const;
  // After a migration that did not finish (SuspendRecord::migrating_from):
  // the vGPU's limits back on the GPU its processes were checkpointed on.
  void PutLimitsBack(const std::string& name, const SuspendRecord& record) EXCLUDES(mu_);
  // Resume's work, optionally onto other GPUs (Migrate).
  ApiStatus ResumeOnto(const std::string& name, const std::vector<CheckpointDriver::GpuPair>& onto, VgpuView* after,
                       std::optional<uid_t> caller) EXCLUDES(mu_);
  // Brings the map in line with the directory (new, gone and replaced
  // vGPUs).
  void RefreshLocked() REQUIRES(mu_);
  // Opens (or reopens) one vGPU into the map.
  Status AdoptLocked(const std::string& name) REQUIRES(mu_);
  bool RemovableLocked(const std::string& name, Managed& m, Clock::time_point now) REQUIRES(mu_);
  // ManagerOptions::max_memory_overcommit_pct for a new vGPU of `spec`.
  ApiStatus AdmitLocked(const core::VgpuSpec& spec) REQUIRES(mu_);
  // Group mode: the vGPU's directory opened to the group, and its ledger,
  // members lock and state socket given to `owner` alone, the directory
  // last, so that no member finds them open to all.
  void ApplyGroupPermissions(const std::string& dir, uid_t owner) const;
  VgpuView ViewLocked(const std::string& name, const Managed& m) const REQUIRES(mu_);

  core::VgpuStore store_;
  const NodeDevices* const devices_;
  ScheduleWorker* const schedule_;
  const ManagerOptions options_;
  const uid_t operator_uid_;
  CheckpointDriver* checkpoint_ = nullptr;  // set before serving, then read-only
  std::string checkpoint_unavailable_;
  port::Mutex mu_;
  std::map<std::string, std::shared_ptr<Managed>> vgpus_ GUARDED_BY(mu_);
  // vGPUs whose state cannot be read, and why: listed as corrupt, never
  // removed while their processes cannot be counted.
  std::map<std::string, std::string> corrupt_ GUARDED_BY(mu_);
};

// The name of the file that marks a vGPU persistent.
inline constexpr char kPersistentMarker[] = "persistent";

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_VGPU_MANAGER_H_
