// schedule_worker.h — recomputes the node's timeslices (the policy's
// ApplyNodeSchedule) after vGPUs come, go or change, off the request path.
//
// Why a worker: the schedule reads every vGPU on the node, so running it
// inside each create would make a burst of N creates cost O(N^2). Requests
// made while a pass runs are coalesced into one more pass, which starts from
// the latest set of vGPUs, so the last change is always scheduled. Resize
// needs its effect before it answers, so it calls ApplyNow().
//
// A short-lived process (a standalone `gpuslice set` or `run`) has nothing
// to coalesce and would exit before a background pass ran, so it asks for
// inline passes: Request() then runs the pass on the caller's thread.
//
// Thread-safe: Request() and ApplyNow() from any thread; Request() never
// blocks in background mode. The worker thread (background mode) starts in
// the constructor and is joined by the destructor (after a pass in progress
// ends).
#ifndef GPUSLICE_NODE_SCHEDULE_WORKER_H_
#define GPUSLICE_NODE_SCHEDULE_WORKER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "core/status.h"
#include "core/vgpu_store.h"
#include "node/node_schedule.h"
#include "policy/timeslice_policy.h"
#include "port/mutex.h"

namespace gpuslice::node {

class ScheduleWorker {
 public:
  // `apply` writes the change if given, then computes and writes the
  // schedule (NodeSchedule below; tests count its calls). Its errors are
  // logged.
  using ApplyFn = std::function<Status(LimitsChange* change)>;
  enum class Passes { kBackground, kInline };
  explicit ScheduleWorker(ApplyFn apply, Passes passes = Passes::kBackground);
  // The pass every writer of node state uses: ApplyNodeSchedule over
  // `store` with the node's policy `config` (the daemon's, or the one it
  // stored: policy_file.h) and, where given (the daemon's; it must outlive
  // the worker), what `occupancy` holds at the pass.
  static ApplyFn NodeSchedule(core::VgpuStore store, policy::TimeslicePolicyConfig config,
                              const OccupancyCell* occupancy = nullptr);
  ~ScheduleWorker();
  ScheduleWorker(const ScheduleWorker&) = delete;
  ScheduleWorker& operator=(const ScheduleWorker&) = delete;

  void Request() EXCLUDES(mu_);
  // Runs a pass now, on the caller's thread, serialised with the worker's,
  // writing `change` first (VgpuManager's resize and power budget).
  Status ApplyNow(LimitsChange* change = nullptr) EXCLUDES(mu_);
  uint64_t passes() const EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  Status RunPass(LimitsChange* change) EXCLUDES(mu_, apply_mu_);

  const ApplyFn apply_;
  port::Mutex apply_mu_;  // one pass at a time
  mutable port::Mutex mu_;
  port::CondVar cv_;
  bool pending_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t passes_ GUARDED_BY(mu_) = 0;
  std::thread thread_;  // not started for Passes::kInline
};

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_SCHEDULE_WORKER_H_
