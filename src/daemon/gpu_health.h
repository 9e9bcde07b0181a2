// gpu_health.h — each GPU's health, from NVML's XID events.
//
// A critical XID marks its GPU unhealthy; the XIDs that the NVIDIA device
// plugin treats as application errors (13 graphics engine exception, 31
// memory page fault, 43 GPU stopped processing, 45 preemptive cleanup, 68
// video processor exception, 109 context switch timeout) are counted but
// leave the GPU healthy: one tenant's bad kernel must not take the GPU from
// every other tenant. Every other XID (999, "unknown", included) is
// critical (docs/design.md, "GPU health", lists the common ones and cites
// NVIDIA's XID table). Recovery (docs/operations.md, "GPU health"):
//   - by the operator, at once (`gpuslice devices --clear-health`, the
//     ClearGpuHealth RPC), after draining and resetting the GPU;
//   - or, where the config sets one, once `quiet_period` has passed with no
//     critical XID. The default is 0, never on its own, as NVIDIA's device
//     plugin: most critical XIDs need a GPU reset, which a quiet log does
//     not show.
// Counts per (GPU, XID) are kept either way, since the daemon started.
// Which GPUs are unhealthy outlives the daemon: the daemon stores them by
// UUID (node/gpu_health_file.h) whenever that changes (OnChange) and gives
// them back at start (Restore), so a restart does not offer a GPU that fell
// off the bus to the next pod.
//
// Thread-safe: the housekeeping thread reports events and ticks; gRPC
// handlers and the metrics collector read and clear; one mutex.
// Allocates.
#ifndef GPUSLICE_DAEMON_GPU_HEALTH_H_
#define GPUSLICE_DAEMON_GPU_HEALTH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "port/mutex.h"

namespace gpuslice::daemon {

// False for the application XIDs above.
bool IsCriticalXid(uint64_t xid);

class GpuHealth {
 public:
  using Clock = std::chrono::system_clock;
  explicit GpuHealth(std::chrono::seconds quiet_period) : quiet_period_(quiet_period) {}

  void OnXid(uint32_t gpu_index, uint64_t xid, Clock::time_point at) EXCLUDES(mu_);
  // An unhealthy mark kept from before this daemon started (its counts
  // were not kept); the quiet period runs from `at`.
  void Restore(uint32_t gpu_index, uint64_t xid, Clock::time_point at) EXCLUDES(mu_);
  // Recovers GPUs quiet for the quiet period.
  void Tick(Clock::time_point now) EXCLUDES(mu_);
  // Marks these GPUs (all when empty) healthy; their counts stay.
  void Clear(const std::vector<uint32_t>& gpu_indices) EXCLUDES(mu_);

  struct State {
    bool healthy = true;
    std::string detail;  // "XID 79 at 2026-...Z" while unhealthy
    uint64_t last_xid = 0;  // newest critical XID; 0: none
    std::map<uint64_t, uint64_t> xid_counts;  // every XID seen
    Clock::time_point last_critical{};
  };
  std::map<uint32_t, State> Snapshot() const EXCLUDES(mu_);  // GPUs that ever had an XID or are unhealthy

  // Called with a snapshot after any GPU turns unhealthy or healthy (or
  // another critical XID arrives), outside the state's lock, on the
  // caller's thread. Calls never overlap, and each takes its snapshot
  // inside its turn, so the last call sees the latest state (the daemon
  // writes a file from it). Set before events flow.
  using ChangeFn = std::function<void(const std::map<uint32_t, State>&)>;
  void OnChange(ChangeFn fn) { on_change_ = std::move(fn); }

 private:
  void Changed() EXCLUDES(change_mu_, mu_);

  const std::chrono::seconds quiet_period_;
  ChangeFn on_change_;
  port::Mutex change_mu_ ACQUIRED_BEFORE(mu_);  // one on_change_ call at a time
  mutable port::Mutex mu_;
  std::map<uint32_t, State> gpus_ GUARDED_BY(mu_);
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_GPU_HEALTH_H_
