#include "task/dispatch_queue.h"

#include "core/vgpu_layout.h"

namespace gpuslice::task {

namespace {
uint32_t Order(const Level& level) { return core::LevelOrder(level.word); }
}  // namespace

DispatchQueue::DispatchQueue(const LevelTable& levels, int workers, uint64_t starvation_ns)
    : levels_(levels.levels()),
      workers_(workers < 1 ? 1 : static_cast<size_t>(workers)),
      starvation_ns_(starvation_ns),
      queues_(levels_.size()),
      running_(levels_.size(), 0),
      pressure_(levels_.size(), false) {}

void DispatchQueue::Push(QueuedTask task) {
  task.seq = next_seq_++;
  queues_[task.level].push_back(std::move(task));
}

bool DispatchQueue::Blocked(const QueuedTask& task, bool aged) const {
  const Level& level = levels_[task.level];
  if (!level.latency_critical && workers_ > 1 && workers_ - running_total_ == 1) return true;
  if (aged) return false;
  for (size_t i = 0; i < levels_.size(); ++i) {
    if (pressure_[i] && Order(levels_[i]) > Order(level) && queues_[i].size() + running_[i] > 0) return true;
  }
  return false;
}

std::optional<QueuedTask> DispatchQueue::Pop(uint64_t now_ns) {
  if (running_total_ >= workers_) return std::nullopt;
  // Rule 1: the oldest task that has waited too long.
  std::deque<QueuedTask>* aged = nullptr;
  for (auto& queue : queues_) {
    if (queue.empty()) continue;
    const uint64_t submit_ns = queue.front().submit_ns;
    if (now_ns < submit_ns || now_ns - submit_ns < starvation_ns_) continue;
    if (aged == nullptr || queue.front().seq < aged->front().seq) aged = &queue;
  }
  // Rule 2: the highest level, then the first submitted.
  std::deque<QueuedTask>* best = nullptr;
  for (auto& queue : queues_) {
    if (queue.empty()) continue;
    if (best == nullptr) {
      best = &queue;
      continue;
    }
    const uint32_t order = Order(levels_[queue.front().level]);
    const uint32_t best_order = Order(levels_[best->front().level]);
    if (order > best_order || (order == best_order && queue.front().seq < best->front().seq)) best = &queue;
  }
  // An aged best-effort task kept off the last worker (rule 3) lets a
  // latency-critical one start. Rules 3 and 4 hold back every task below
  // `best` too, so if it may not start, nothing may.
  std::deque<QueuedTask>* chosen = nullptr;
  if (aged != nullptr && !Blocked(aged->front(), true)) {
    chosen = aged;
  } else if (best != nullptr && !Blocked(best->front(), false)) {
    chosen = best;
  }
  if (chosen == nullptr) return std::nullopt;
  QueuedTask task = std::move(chosen->front());
  chosen->pop_front();
  ++running_[task.level];
  ++running_total_;
  return task;
}

void DispatchQueue::Finished(size_t level) {
  if (running_[level] > 0) --running_[level];
  if (running_total_ > 0) --running_total_;
}

void DispatchQueue::SetPressure(size_t level, bool on) { pressure_[level] = on; }

bool DispatchQueue::empty() const {
  for (const auto& queue : queues_) {
    if (!queue.empty()) return false;
  }
  return true;
}

std::optional<uint64_t> DispatchQueue::NextAgingNs() const {
  std::optional<uint64_t> oldest;
  for (const auto& queue : queues_) {
    if (!queue.empty() && (!oldest || queue.front().submit_ns < *oldest)) oldest = queue.front().submit_ns;
  }
  if (!oldest) return std::nullopt;
  return *oldest + starvation_ns_;
}

std::vector<QueuedTask> DispatchQueue::TakeAll() {
  std::vector<QueuedTask> all;
  for (auto& queue : queues_) {
    for (auto& task : queue) all.push_back(std::move(task));
    queue.clear();
  }
  return all;
}

}  // namespace gpuslice::task
