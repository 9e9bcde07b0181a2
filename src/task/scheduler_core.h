// scheduler_core.h — the task scheduler behind gpuslice::Scheduler and the
// Python package: worker threads that start queued tasks by the
// DispatchQueue's rules, open a request span around each latency-critical
// task, and keep each level's metrics (LevelStats), whose SLO pressure they
// feed back to the queue and into pre-preemption hints.
//
// The clock, gpuslice's C API and the warnings are seams (CoreOptions), so
// tests run it with a fake clock and a fake C API and count what it did.
//
// Thread-safety: every member may be called from any thread at once. One
// mutex guards the queue and the stats; it is never held while a task runs
// or while gpuslice's C API is called. Submit allocates and never waits for
// tasks; Stop waits for the running ones.
#ifndef GPUSLICE_TASK_SCHEDULER_CORE_H_
#define GPUSLICE_TASK_SCHEDULER_CORE_H_

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"
#include "gpuslice/scheduler.h"
#include "port/mutex.h"
#include "task/clock.h"
#include "task/dispatch_queue.h"
#include "task/level_stats.h"
#include "task/level_streams.h"
#include "task/task_abi.h"
#include "task/task_levels.h"

namespace gpuslice::task {

struct CoreOptions {
  int workers = 4;
  Clock* clock = nullptr;      // null: SteadyClock()
  TaskAbi* abi = nullptr;      // null: LibraryAbi()
  Notices* notices = nullptr;  // null: ProcessNotices()
  uint64_t starvation_ns = kStarvationNs;
  // false: SLO pressure is measured and reported but changes nothing (for
  // comparing attainment with and without the reaction).
  bool slo_reaction = true;
  // Non-null: each level's tasks get a CUDA stream of their level's
  // priority from this driver (CurrentTaskStream; level_streams.h).
  StreamDriver* streams = nullptr;
};

// The running task's level stream (level_streams.h), in the calling
// thread's current context; nullptr outside a task of a scheduler with
// streams, or without a current context. The worker synchronises every
// stream a task was given before its future is ready.
void* CurrentTaskStream();

// A task class checked against the levels.
struct ResolvedClass {
  size_t level = 0;  // index in the LevelTable
  uint64_t slo_ns = 0;
};

class SchedulerCore {
 public:
  SchedulerCore(LevelTable levels, CoreOptions options);
  ~SchedulerCore();  // Stop()
  SchedulerCore(const SchedulerCore&) = delete;
  SchedulerCore& operator=(const SchedulerCore&) = delete;

  const LevelTable& levels() const { return levels_; }

  // The level and SLO of `task_class`, or an error naming the problem: an
  // unknown level, a negative SLO, or (with `require_lc` set) a level of the
  // other class.
  StatusOr<ResolvedClass> Resolve(const TaskClass& task_class, std::optional<bool> require_lc) const;

  // Queues `job`; false when the scheduler is stopping (the job is dropped).
  bool Submit(const ResolvedClass& task_class, std::unique_ptr<detail::Job> job) EXCLUDES(mu_);

  std::vector<LevelMetrics> Metrics() const EXCLUDES(mu_);

  // Stops taking tasks, abandons the queued ones (their Jobs are destroyed
  // unrun) and waits for the running ones. Idempotent. Not from a task of
  // this scheduler (it would wait for itself): see OnWorkerThread().
  void Stop() EXCLUDES(mu_);

  // Whether the calling thread is one of this scheduler's workers.
  bool OnWorkerThread() const;

 private:
  void WorkerLoop() EXCLUDES(mu_);
  void RunTask(QueuedTask& task) EXCLUDES(mu_);

  const LevelTable levels_;
  Clock* const clock_;
  TaskAbi* const abi_;
  Notices* const notices_;
  const bool slo_reaction_;
  const std::unique_ptr<LevelStreams> streams_;  // null: no level streams

  mutable port::Mutex mu_;
  port::CondVar changed_;  // a task queued or finished, or stopping
  DispatchQueue queue_ GUARDED_BY(mu_);
  std::vector<LevelStats> stats_ GUARDED_BY(mu_);  // one per level
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
  std::once_flag joined_;
};

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_SCHEDULER_CORE_H_
