// dispatch_queue.h — which queued task a free worker starts: the task
// scheduler's policy, without threads or clocks of its own (the scheduler
// passes the time in), so that tests drive it step by step.
//
// Rules, in order:
//   1. A task that has waited starvation_ns (1 s) starts first, the oldest
//      first, whatever its level: no level starves behind higher ones.
//   2. Otherwise the highest level's oldest task (equal levels: the one
//      submitted first).
//   3. A best-effort task never takes the last free worker of a scheduler of
//      several: it stays for latency-critical work, which so never waits for
//      a long best-effort task to end (aged tasks too: a reservation, not
//      an order).
//   4. While a level is under SLO pressure (SetPressure) and has work queued
//      or running, no lower level's task starts (aged ones excepted), so
//      that the level has the process's CPU and GPU to itself.
//
// Not thread-safe: the scheduler calls it under its lock. Push and Pop
// allocate (queue nodes) but never block.
#ifndef GPUSLICE_TASK_DISPATCH_QUEUE_H_
#define GPUSLICE_TASK_DISPATCH_QUEUE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "gpuslice/scheduler.h"
#include "task/task_levels.h"

namespace gpuslice::task {

inline constexpr uint64_t kStarvationNs = 1'000'000'000;

struct QueuedTask {
  size_t level = 0;  // index in the LevelTable
  uint64_t submit_ns = 0;
  uint64_t slo_ns = 0;  // 0: none
  std::unique_ptr<detail::Job> job;
  uint64_t seq = 0;  // set by Push
};

class DispatchQueue {
 public:
  DispatchQueue(const LevelTable& levels, int workers, uint64_t starvation_ns = kStarvationNs);

  void Push(QueuedTask task);
  // The task a free worker starts at `now_ns`, counted as running; nullopt:
  // none may start now (wait for a Push, a Finished, or NextAgingNs()).
  std::optional<QueuedTask> Pop(uint64_t now_ns);
  // A task of `level` that Pop returned has ended.
  void Finished(size_t level);
  void SetPressure(size_t level, bool on);

  size_t queued(size_t level) const { return queues_[level].size(); }
  size_t running(size_t level) const { return running_[level]; }
  size_t running_total() const { return running_total_; }
  bool empty() const;
  // When the oldest queued task ages into rule 1; nullopt when none queued.
  std::optional<uint64_t> NextAgingNs() const;
  // Every queued task, removed (the scheduler is stopping).
  std::vector<QueuedTask> TakeAll();

 private:
  bool Blocked(const QueuedTask& task, bool aged) const;

  std::vector<Level> levels_;
  const size_t workers_;
  const uint64_t starvation_ns_;
  std::vector<std::deque<QueuedTask>> queues_;
  std::vector<size_t> running_;
  std::vector<bool> pressure_;
  size_t running_total_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_DISPATCH_QUEUE_H_
