// scheduler.cc — gpuslice::Scheduler (include/gpuslice/scheduler.h): the
// public face of SchedulerCore, turning its statuses into the exceptions the
// C++ API documents.
#include "gpuslice/scheduler.h"

#include <stdexcept>
#include <thread>

#include "task/scheduler_core.h"

namespace gpuslice {

namespace {
task::LevelTable LoadLevels(const std::string& path) {
  if (path.empty()) return task::LevelTable::Defaults();
  StatusOr<task::LevelTable> table = task::LevelTable::Load(path);
  if (!table.ok()) throw std::invalid_argument(table.status().message());
  return std::move(*table);
}

task::CoreOptions Checked(const SchedulerOptions& options) {
  if (options.workers < 1) {
    throw std::invalid_argument("workers is " + std::to_string(options.workers) + "; a scheduler needs at least 1");
  }
  task::CoreOptions core;
  core.workers = options.workers;
  core.slo_reaction = options.slo_reaction;
  if (options.cuda_streams) core.streams = task::LibraryStreamDriver();
  return core;
}

TaskClass Resolved(const task::SchedulerCore& core, TaskClass task_class, bool lc) {
  StatusOr<task::ResolvedClass> resolved = core.Resolve(task_class, lc);
  if (!resolved.ok()) throw std::invalid_argument(resolved.status().message());
  return task_class;
}
}  // namespace

Scheduler::Scheduler() : Scheduler(SchedulerOptions{}) {}

Scheduler::Scheduler(SchedulerOptions options) {
  task::CoreOptions core = Checked(options);
  core_ = std::make_unique<task::SchedulerCore>(LoadLevels(options.config_path), core);
}

Scheduler::~Scheduler() {
  // Destroyed by one of its own tasks: a worker cannot wait for itself, so
  // another thread stops it, once that task is over.
  if (core_->OnWorkerThread()) {
    std::thread([core = std::move(core_)]() mutable { core.reset(); }).detach();
  }
}

TaskClass Scheduler::latency_critical(const std::string& level, std::chrono::microseconds slo) const {
  return Resolved(*core_, TaskClass{level, slo}, true);
}

TaskClass Scheduler::best_effort(const std::string& level) const {
  return Resolved(*core_, TaskClass{level, std::chrono::microseconds(0)}, false);
}

void Scheduler::Enqueue(const TaskClass& task_class, std::unique_ptr<detail::Job> job) {
  StatusOr<task::ResolvedClass> resolved = core_->Resolve(task_class, std::nullopt);
  if (!resolved.ok()) throw std::invalid_argument(resolved.status().message());
  if (!core_->Submit(*resolved, std::move(job))) throw std::logic_error("submit() on a scheduler that is stopping");
}

std::vector<LevelMetrics> Scheduler::metrics() const { return core_->Metrics(); }

void* current_task_stream() { return task::CurrentTaskStream(); }

std::vector<std::string> Scheduler::levels() const {
  std::vector<std::string> names;
  for (const task::Level& level : core_->levels().levels()) names.push_back(level.name);
  return names;
}

}  // namespace gpuslice
