#include "task/scheduler_core.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "gpuslice/gpuslice.h"

namespace gpuslice::task {

namespace {
// A worker with nothing it may start waits for a change, but a queued task
// also becomes startable by age alone (DispatchQueue rule 1): then it wakes
// when that is due, and at least this often (the clock may be a fake).
constexpr uint64_t kMaxIdleWaitNs = 50'000'000;

// The task a worker thread runs now, for CurrentTaskStream.
struct RunningTask {
  LevelStreams* streams;
  size_t level;
  std::vector<void*> handed;  // streams the task was given (usually one)
};
thread_local RunningTask* t_running = nullptr;
}  // namespace

void* CurrentTaskStream() {
  RunningTask* running = t_running;
  if (running == nullptr || running->streams == nullptr) return nullptr;
  void* stream = running->streams->StreamFor(running->level);
  if (stream != nullptr && std::find(running->handed.begin(), running->handed.end(), stream) == running->handed.end()) {
    running->handed.push_back(stream);
  }
  return stream;
}

SchedulerCore::SchedulerCore(LevelTable levels, CoreOptions options)
    : levels_(std::move(levels)),
      clock_(options.clock ? options.clock : SteadyClock()),
      abi_(options.abi ? options.abi : LibraryAbi()),
      notices_(options.notices ? options.notices : ProcessNotices()),
      slo_reaction_(options.slo_reaction),
      streams_(options.streams ? std::make_unique<LevelStreams>(levels_, options.streams) : nullptr),
      queue_(levels_, options.workers, options.starvation_ns),
      stats_(levels_.levels().size()) {
  notices_->NoteLoaded(abi_->Loaded());
  const int workers = std::max(1, options.workers);
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

SchedulerCore::~SchedulerCore() { Stop(); }

StatusOr<ResolvedClass> SchedulerCore::Resolve(const TaskClass& task_class, std::optional<bool> require_lc) const {
  const std::optional<size_t> index = levels_.Find(task_class.level);
  if (!index) {
    return Status::Error("unknown level `" + task_class.level + "`; the levels are " + levels_.Names() +
                         " (add yours to the config's `levels:`)");
  }
  const Level& level = levels_.levels()[*index];
  if (require_lc && *require_lc != level.latency_critical) {
    return Status::Error(std::string("level `") + level.name + "` is " +
                         (level.latency_critical ? "latency-critical; use latency_critical() for it"
                                                 : "best-effort; use best_effort() for it, or a latency-critical "
                                                   "level"));
  }
  if (task_class.slo.count() < 0) {
    return Status::Error("the SLO of a `" + level.name + "` task is negative; give one above 0, or 0 for the level's");
  }
  ResolvedClass resolved;
  resolved.level = *index;
  resolved.slo_ns = task_class.slo.count() > 0 ? static_cast<uint64_t>(task_class.slo.count()) * 1000 : level.slo_ns;
  return resolved;
}

bool SchedulerCore::Submit(const ResolvedClass& task_class, std::unique_ptr<detail::Job> job) {
  QueuedTask task;
  task.level = task_class.level;
  task.slo_ns = task_class.slo_ns;
  task.job = std::move(job);
  bool pressure = false;
  {
    port::MutexLock lock(&mu_);
    if (stopping_) return false;
    task.submit_ns = clock_->NowNs();
    pressure = stats_[task.level].pressure();
    queue_.Push(std::move(task));
  }
  changed_.NotifyAll();
  // SLO pressure: tell gpuslice now, so best-effort vGPUs stop launching
  // while the task waits for a worker, not only once it runs (its span).
  // The hint lapses by itself after the SLO, or at the span's end.
  const Level& level = levels_.levels()[task_class.level];
  if (pressure && slo_reaction_ && level.latency_critical && task_class.slo_ns > 0) {
    const uint64_t usec = std::clamp<uint64_t>(task_class.slo_ns / 1000, 1, UINT_MAX);
    notices_->NoteStatus(abi_->Hint(static_cast<unsigned int>(usec)));
  }
  return true;
}

void SchedulerCore::RunTask(QueuedTask& task) {
  const Level& level = levels_.levels()[task.level];
  // A latency-critical task is a request span: the library holds other
  // vGPUs' best-effort launches while it runs and times it.
  if (level.latency_critical) {
    const int status = abi_->SpanBegin();
    if (abi_->Loaded()) notices_->NoteStatus(status);
  }
  RunningTask running{streams_.get(), task.level, {}};
  t_running = &running;
  const bool ok = task.job->Run();
  t_running = nullptr;
  // Its GPU work is part of the task: done before the future is ready (and
  // before the span ends).
  for (void* stream : running.handed) streams_->Synchronize(stream);
  if (level.latency_critical) abi_->SpanEnd();
  const uint64_t end_ns = clock_->NowNs();
  const uint64_t latency_ns = end_ns >= task.submit_ns ? end_ns - task.submit_ns : 0;
  bool missed = false;
  {
    port::MutexLock lock(&mu_);
    queue_.Finished(task.level);
    LevelStats& stats = stats_[task.level];
    missed = stats.Record(latency_ns, task.slo_ns, ok);
    if (slo_reaction_) queue_.SetPressure(task.level, stats.pressure());
  }
  changed_.NotifyAll();
  // The vGPU's metrics, shared by its processes (`gpuslice top`, /metrics).
  const int flags = (ok ? 0 : GPUSLICE_TASK_FAILED) | (missed ? GPUSLICE_TASK_SLO_MISS : 0);
  if (const int status = abi_->TaskRecord(level.name.c_str(), latency_ns, flags); abi_->Loaded()) {
    notices_->NoteStatus(status);
  }
  // After the metrics, so a caller woken by the future sees the task counted.
  task.job->Publish();
}

void SchedulerCore::WorkerLoop() {
  for (;;) {
    std::optional<QueuedTask> task;
    {
      port::MutexLock lock(&mu_);
      for (;;) {
        if (stopping_) return;
        const uint64_t now = clock_->NowNs();
        task = queue_.Pop(now);
        if (task) break;
        // What blocks a task (a busy worker, SLO pressure) changes only at a
        // Push or a Finished, which notify; its age changes with time.
        const std::optional<uint64_t> aging = queue_.NextAgingNs();
        if (aging && *aging > now) {
          changed_.WaitFor(&mu_, std::chrono::nanoseconds(std::min(*aging - now, kMaxIdleWaitNs)));
        } else {
          changed_.Wait(&mu_);
        }
      }
    }
    RunTask(*task);
  }
}

std::vector<LevelMetrics> SchedulerCore::Metrics() const {
  std::vector<LevelMetrics> all;
  port::MutexLock lock(&mu_);
  for (size_t i = 0; i < levels_.levels().size(); ++i) {
    const Level& level = levels_.levels()[i];
    const LevelStats& stats = stats_[i];
    LevelMetrics m;
    m.level = level.name;
    m.latency_critical = level.latency_critical;
    m.count = stats.count();
    m.failed = stats.failed();
    m.slo_misses = stats.slo_misses();
    m.queued = queue_.queued(i);
    m.p50 = std::chrono::nanoseconds(stats.LatencyQuantileNs(0.50).value_or(0));
    m.p99 = std::chrono::nanoseconds(stats.LatencyQuantileNs(0.99).value_or(0));
    m.slo = std::chrono::microseconds(level.slo_ns / 1000);
    m.slo_pressure = stats.pressure();
    all.push_back(std::move(m));
  }
  return all;
}

bool SchedulerCore::OnWorkerThread() const {
  for (const std::thread& worker : workers_) {
    if (worker.get_id() == std::this_thread::get_id()) return true;
  }
  return false;
}

void SchedulerCore::Stop() {
  std::vector<QueuedTask> abandoned;
  {
    port::MutexLock lock(&mu_);
    stopping_ = true;
    abandoned = queue_.TakeAll();
  }
  changed_.NotifyAll();
  std::call_once(joined_, [this] {
    for (std::thread& worker : workers_) worker.join();
  });
  // `abandoned` is destroyed here, outside the lock: the futures of its
  // jobs become ready with broken_promise.
}

}  // namespace gpuslice::task
