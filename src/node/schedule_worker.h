// schedule_worker.h — recomputes the node's timeslices (the policy's
// ApplyNodeSchedule) after vGPUs come, go or change, off the request path.
//
// Why a worker: the schedule reads every vGPU on the node, so running it
// inside each create would make a burst of N creates cost O(N^2). Requests
// made while a pass runs are coalesced into one more pass, which starts from
// the latest set of vGPUs, so the last change is always scheduled. Resize
// needs its effect before it answers, so it calls ApplyNow().
//
// Thread-safe: Request() and ApplyNow() from any thread; Request() never
// blocks. The worker thread starts in the constructor and is joined by the
// destructor (after a pass in progress ends).
#ifndef GPUSLICE_DAEMON_SCHEDULE_WORKER_H_
#define GPUSLICE_DAEMON_SCHEDULE_WORKER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "core/status.h"

namespace gpuslice::daemon {

class ScheduleWorker {
 public:
  // `apply` computes and writes the schedule; null: nothing to do (no
  // policy wired in). Its errors are logged, and kept for last_error().
  explicit ScheduleWorker(std::function<Status()> apply);
  ~ScheduleWorker();
  ScheduleWorker(const ScheduleWorker&) = delete;
  ScheduleWorker& operator=(const ScheduleWorker&) = delete;

  void Request();
  // Runs a pass now, on the caller's thread, serialised with the worker's.
  Status ApplyNow();
  uint64_t passes() const;

 private:
  void Loop();
  Status RunPass();

  const std::function<Status()> apply_;
  std::mutex apply_mu_;  // one pass at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  uint64_t passes_ = 0;   // guarded by mu_
  std::thread thread_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_SCHEDULE_WORKER_H_
