// cap_audit.h — holds each capped vGPU to its compute cap from outside its
// processes, where the GPU itself can tell what the vGPU used.
//
// A compute cap (--compute-cap, and a power cap through it) is paced by the
// vGPU's own library, and the board rows it paces by are the tenant's to
// write: a process that skips its gate or rewrites its tokens runs uncapped
// (docs/design.md, "Threat model"). This audit does not run in the tenant.
// About once a second it is given NVML's per-process samples (the
// UtilizationSampler's pass) and the vGPUs' views, and keeps, for each
// capped vGPU on each GPU, the time in which its processes were the only
// ones NVML saw running there. NVML's samples are exact for a process alone
// on its GPU (0.90-1.01 of the GPU's busy time on an H100), and overlap
// between processes that time-slice (docs/benchmarks.md, "NVML's raw
// samples"), so only that alone time is measured. Once it adds up to
// `window_ns`, a vGPU whose processes used more than its cap plus `margin`
// of it is over its cap; so is one that used more than a whole window
// allows before its window is full (an escape at the whole GPU is found
// after cap + margin of a window). It is acted on (audit.over_cap):
//   - report: a log line and a count, once per episode;
//   - throttle (the default): its processes on that GPU are held to a duty
//     cycle from outside (cap_throttle.h), fitted at every alone pass so
//     that what they use comes down to the cap; the throttle lasts as long
//     as those processes, since a library that failed once is not trusted
//     again. An honest library whose pacing failed is slowed to its cap,
//     never stopped for good or killed;
//   - kill: its processes on that GPU are killed.
// A throttled process that someone else keeps continuing (cap_throttle.h's
// TakeTampered: a sibling of the tenant's sending SIGCONT) is killed, under
// throttle too: it fights the limit.
// Beside busy neighbours nothing is measured; a vGPU that defeats its gate
// there gets what its slice (held by the slice audit) gives it, and a
// throttle in force stays at its last duty.
//
// Processes are matched to vGPUs as the memory audit matches them (ledger
// slots, across pid namespaces), and nothing is done to a process that does
// not map the vGPU's ledger (audit_inputs.h's MapsLedgerOf): a tenant cannot
// point the audit at its neighbour.
//
// Not thread-safe: one thread calls Pass (the daemon's housekeeping thread).
// Allocates.
#ifndef GPUSLICE_DAEMON_CAP_AUDIT_H_
#define GPUSLICE_DAEMON_CAP_AUDIT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "audit/cap_action.h"
#include "audit/memory_audit.h"
#include "daemon/cap_throttle.h"
#include "daemon/utilization_sampler.h"
#include "node/vgpu_view.h"

namespace gpuslice::daemon {

using audit::CapAction;

struct CapAuditConfig {
  CapAction action = CapAction::kThrottle;
  // Use above cap + margin (a fraction of the GPU) is over: an honest
  // library holds a 30% cap to 29-31% of a GPU alone (docs/benchmarks.md).
  double margin = 0.10;
  // Alone time measured before a verdict (audit.over_cap_window_s), and the
  // oldest kept. An honest job that queues seconds of work per
  // synchronisation runs it at the whole GPU, then waits for its cap's
  // tokens: with 3.2 s queued under a 30% cap, 64% of any 5 s that holds a
  // burst, at most 37.5% of any 30 s (docs/benchmarks.md, "A compute cap
  // held from outside"). Throttled on a 5 s verdict, such a job stalled.
  uint64_t window_ns = 30'000'000'000;
  uint64_t max_age_ns = 60'000'000'000;
  // The throttle's lowest duty: a process always runs a little.
  double min_duty = 0.02;
};

// A vGPU over its cap on one GPU.
struct OverCap {
  std::string vgpu;
  uint32_t gpu_index = 0;
  double used = 0;     // its share of the GPU over its alone time in the window
  double allowed = 0;  // its cap over the window
  CapAction action = CapAction::kReport;
  bool found = false;          // first found in this pass (report it)
  double duty = 1.0;           // kThrottle: its duty now
  bool at_floor = false;       // kThrottle: at min_duty and still over (its work is queued deeper than a period)
  bool tampered = false;       // kThrottle: killed, continued by another process while throttled
  std::vector<uint32_t> pids;  // its processes there (this namespace's pids)
};
// One line for logs.
std::string Describe(const OverCap& over);

class ComputeCapAudit {
 public:
  using IsMember = std::function<bool(uint32_t pid, const node::VgpuView& view)>;
  // `throttle` may be null when the action is not kThrottle.
  ComputeCapAudit(CapAuditConfig config, const audit::ProcessTable* table, audit::ProcessActions* actions,
                  CapThrottle* throttle, IsMember is_member);

  // One pass: the sampler's samples of each GPU since its last pass, and the
  // vGPUs now. Returns every vGPU over its cap (found, or still throttled).
  std::vector<OverCap> Pass(const std::vector<SampledPass>& passes, const std::vector<node::VgpuView>& views,
                            uint64_t now_ns);

  const CapAuditConfig& config() const { return config_; }

 private:
  struct Span {
    uint64_t end_ns = 0;
    double wall_s = 0;
    double used_s = 0;
    double allowed_s = 0;  // its cap times wall_s
  };
  struct Track {
    std::deque<Span> alone;
    bool over = false;       // in an episode (report, kill)
    bool throttled = false;  // kThrottle: a throttle is set
    bool at_floor = false;
    double duty = 1.0;
    std::vector<uint32_t> pids;
  };
  using Key = std::pair<std::string, uint32_t>;  // vGPU, GPU index
  void Forget(const Key& key);

  const CapAuditConfig config_;
  const audit::ProcessTable* const table_;
  audit::ProcessActions* const actions_;
  CapThrottle* const throttle_;
  const IsMember is_member_;
  std::map<Key, Track> tracks_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_CAP_AUDIT_H_
