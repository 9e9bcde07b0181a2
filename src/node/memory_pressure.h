// memory_pressure.h — memory overcommit's policy: which best-effort vGPUs to
// suspend when a vGPU of a higher level finds its GPU full, and when to
// resume them.
//
// A node may give its vGPUs memory limits that add up past a GPU's size.
// Then an allocation within a vGPU's limit can find the GPU full; its
// process asks the node for room and waits (core/memory_wait.h). The daemon
// calls Decide every pass (daemon/memory_pressure_service.h) with every
// vGPU's view and each GPU's free memory, carries out the decision
// (VgpuManager::Suspend/Resume, AnswerMemoryWait) and reports each
// suspend and resume back. The rules:
//   - Only vGPUs that opted in (`suspendable`) are suspended, only to make
//     room for a requester of a strictly higher level on the same GPU, and
//     only as many as the requests need beyond the GPU's free memory.
//   - Victims in order: the lowest level first; then the least active (the
//     lowest measured share of GPU time over the last window); then the one
//     holding the most memory on that GPU (fewer suspends).
//   - If every candidate together cannot make the room, none is suspended
//     and the requests are answered "no relief" at once (the process's
//     allocation then fails without waiting out its bound).
//   - Anti-thrash: a vGPU resumed less than `min_run_after_resume` ago is no
//     candidate, and the node suspends at most `max_suspends_per_minute`.
//     A request that only such vGPUs could serve waits (the requester's own
//     bound ends it), rather than being told "no relief": room may come.
//   - Resume: a vGPU this policy suspended is resumed once no request waits
//     on any of its GPUs and each has free memory for what it held, plus
//     `resume_headroom_bytes`; one per pass, since a resume changes what is
//     free. vGPUs an operator suspended (`gpuslice suspend`) are left to the
//     operator.
//
// Thread-compatible: one caller (the service's thread). Pure: no clock, no
// I/O; `now` is passed in.
#ifndef GPUSLICE_NODE_MEMORY_PRESSURE_H_
#define GPUSLICE_NODE_MEMORY_PRESSURE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/memory_wait.h"
#include "node/vgpu_view.h"

namespace gpuslice::node {

struct MemoryPressureOptions {
  std::chrono::milliseconds min_run_after_resume{std::chrono::seconds(30)};
  uint32_t max_suspends_per_minute = 6;
  uint64_t resume_headroom_bytes = 256ull << 20;
};

class MemoryPressurePolicy {
 public:
  using Clock = std::chrono::steady_clock;

  explicit MemoryPressurePolicy(MemoryPressureOptions options = {}) : options_(options) {}

  struct Refusal {
    std::string vgpu;
    core::MemoryWait wait;
  };
  struct Decision {
    std::vector<std::string> suspend;  // in this order
    std::vector<std::string> resume;   // at most one
    std::vector<Refusal> refuse;       // answer "no relief"
    bool empty() const { return suspend.empty() && resume.empty() && refuse.empty(); }
  };
  // `free_bytes`: each GPU's free memory now, by UUID ("GPU-..."); a GPU
  // missing from it is not acted on.
  Decision Decide(const std::vector<VgpuView>& vgpus, const std::map<std::string, uint64_t>& free_bytes,
                  Clock::time_point now);

  // What the service did with a decision.
  void Suspended(const std::string& vgpu, Clock::time_point now);
  void Resumed(const std::string& vgpu, Clock::time_point now);
  // A vGPU that is gone, or that an operator resumed: forget it.
  void Forget(const std::string& vgpu);
  // A vGPU this policy suspended before the daemon restarted
  // (VgpuView::suspended_by): resumed by the same rule.
  void Adopt(const std::string& vgpu) { ours_.insert(vgpu); }

  bool SuspendedByPolicy(const std::string& vgpu) const { return ours_.count(vgpu) > 0; }
  bool HasSuspended() const { return !ours_.empty(); }

 private:
  bool RecentlyResumed(const std::string& vgpu, Clock::time_point now) const;
  uint32_t SuspendsInLastMinute(Clock::time_point now);

  const MemoryPressureOptions options_;
  std::set<std::string> ours_;                             // suspended by this policy
  std::map<std::string, Clock::time_point> last_resumed_;  // by this policy
  std::deque<Clock::time_point> suspends_;                 // the last minute's
};

// Some view has a pending request (VgpuView::memory_waits).
bool HasMemoryWaits(const std::vector<VgpuView>& vgpus);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_MEMORY_PRESSURE_H_
