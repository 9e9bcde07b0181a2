// scheduler.h — the task API in C++: a Scheduler runs an application's work
// on its own worker threads, level by level, and tells gpuslice which of it
// is latency-critical.
//
//   gpuslice::Scheduler sched;                        // or Scheduler({.config_path = "gpuslice.yaml"})
//   auto infer = sched.latency_critical("high", std::chrono::milliseconds(10));
//   std::future<int> f = sched.submit(infer, [](int x) { return x + 1; }, 41);
//   int y = f.get();                                  // 42; a task's exception is rethrown here
//   for (const gpuslice::LevelMetrics& m : sched.metrics()) ...
//
// Levels. A task runs at a level: the built-in `lc` (latency-critical) and
// `be` (best-effort), plus the levels of a YAML config (docs/task-api.md),
// by default critical and high (latency-critical) and normal and low
// (best-effort). Every latency-critical level is above every best-effort one.
// A free worker starts the highest level's oldest task; best-effort work
// never takes a scheduler's last free worker (so a latency-critical task
// never waits behind a long best-effort one), and a task that has waited 1 s
// starts first whatever its level (no level starves).
//
// gpuslice. A latency-critical task runs inside a request span
// (gpuslice_span_begin/end, gpuslice.h, found with dlsym): in a vGPU run with
// --priority lc, best-effort vGPUs on the same GPUs launch nothing new while
// it runs, and its time goes into the vGPU's LC latency histogram. Outside
// gpuslice (no library loaded, or no vGPU) every call still works and the
// tasks still run, without gpuslice's holds; the scheduler says so once on
// stderr. Nothing here needs linking against gpuslice's library.
//
// CUDA streams. With SchedulerOptions::cuda_streams, a task that calls
// gpuslice::current_task_stream() gets its level's own CUDA stream (a
// CUstream, made on first use per level and context, in the calling
// thread's current context), latency-critical levels at higher stream
// priorities than best-effort ones: the GPU then starts a latency-critical
// kernel's thread blocks ahead of best-effort blocks still waiting for SMs
// in the same process. The task launches its work there; the worker
// synchronises that stream before the task's future is ready, so results
// are complete when get() returns. Work the submitter issued on other
// streams is not waited for: order it with an event where a task needs it.
//
// SLOs. A task's latency is from submit() to its end (queueing included). A
// task that took longer than its SLO is an SLO miss. When the recent p99 of a
// level's latency over SLO reaches 80%, the level is under pressure until it
// falls below 60%: lower levels' tasks do not start while it has work queued
// or running (a task that has waited 1 s still does), and each of its tasks gives gpuslice a pre-preemption hint at
// submit (gpuslice_hint), so other vGPUs' best-effort work drains while the
// task waits for a worker.
//
// Thread-safety: every member function may be called from any thread at
// once. submit() takes a short lock and allocates; it never waits for other
// tasks. metrics() copies the recent latencies (allocates). The destructor
// waits for the tasks running now; tasks still queued are abandoned, and
// their futures throw std::future_error (broken_promise). A scheduler
// destroyed by one of its own tasks is stopped by another thread once that
// task is over.
//
// Names follow issue 12's shape (submit, metrics), the same as the Python
// package's, so that one guide serves both.
#ifndef GPUSLICE_SCHEDULER_H_
#define GPUSLICE_SCHEDULER_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpuslice {

namespace task {
class SchedulerCore;
}  // namespace task

// What a task is: its level and, optionally, its SLO. Made by
// Scheduler::latency_critical() and best_effort(), which check the level.
struct TaskClass {
  std::string level = "be";
  std::chrono::microseconds slo{0};  // 0: the level's SLO from the config, if any
};

// One level's counts since the scheduler started, and its recent latencies.
struct LevelMetrics {
  std::string level;
  bool latency_critical = false;
  uint64_t count = 0;       // tasks finished, whether they returned or threw
  uint64_t failed = 0;      // of those, the ones that threw
  uint64_t slo_misses = 0;  // of those, the ones that took longer than their SLO
  uint64_t queued = 0;      // waiting for a worker now
  // Quantiles of the last 1024 tasks' latencies (submit to end); 0 before
  // any task has finished.
  std::chrono::nanoseconds p50{0};
  std::chrono::nanoseconds p99{0};
  std::chrono::microseconds slo{0};  // the level's configured SLO; 0: none
  bool slo_pressure = false;         // the SLO reaction is on (see above)
};

struct SchedulerOptions {
  // A YAML file with a `levels:` list (docs/task-api.md); empty: the default
  // levels. A bad file throws std::invalid_argument naming the problem.
  std::string config_path;
  int workers = 4;  // worker threads, at least 1
  // The SLO reaction (docs/task-api.md, section 5). false: SLO pressure is
  // still measured and reported, but holds nothing back and hints nothing.
  bool slo_reaction = true;
  // Each level's tasks get a CUDA stream of their level's priority from
  // current_task_stream() (above). libcuda is found with dlsym; nothing links it.
  bool cuda_streams = false;
};

// The running task's CUDA stream (a CUstream), when its scheduler has
// cuda_streams: made on first use for the task's level in the calling
// thread's current CUDA context, with the level's stream priority. nullptr
// outside such a task, without a current context, or without libcuda: use
// the default stream then. Call it from the task, after making a context
// current (the CUDA runtime does so at its first call on a thread). Streams
// live as long as the process: not after a context is reset or destroyed.
void* current_task_stream();

namespace detail {
// A submitted task, type-erased. The scheduler calls Run() on a worker, then
// records the task's metrics, then Publish() (so that a caller woken by the
// future sees the task counted). A Job never run is destroyed unpublished.
class Job {
 public:
  virtual ~Job() = default;
  virtual bool Run() noexcept = 0;  // false: the task threw
  virtual void Publish() noexcept = 0;
};

template <typename R, typename Fn>
class FunctionJob final : public Job {
 public:
  explicit FunctionJob(Fn fn) : fn_(std::move(fn)) {}
  std::future<R> future() { return promise_.get_future(); }
  bool Run() noexcept override {
    try {
      if constexpr (std::is_void_v<R>) {
        fn_();
        result_ = true;
      } else {
        result_.emplace(fn_());
      }
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }
  void Publish() noexcept override {
    if (error_) {
      promise_.set_exception(error_);
    } else if constexpr (std::is_void_v<R>) {
      promise_.set_value();
    } else {
      promise_.set_value(std::move(*result_));
    }
  }

 private:
  Fn fn_;
  std::promise<R> promise_;
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result_{};
  std::exception_ptr error_;
};
}  // namespace detail

class Scheduler {
 public:
  Scheduler();
  explicit Scheduler(SchedulerOptions options);  // throws std::invalid_argument
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // A latency-critical task class at `level` (a latency-critical level) with
  // `slo` (0: the level's). Throws std::invalid_argument for an unknown or
  // best-effort level, or a negative SLO.
  TaskClass latency_critical(const std::string& level = "lc",
                             std::chrono::microseconds slo = std::chrono::microseconds(0)) const;
  // A best-effort task class at `level` (a best-effort level).
  TaskClass best_effort(const std::string& level = "be") const;

  // Runs fn(args...) on a worker; the future holds its result or exception.
  // The function and arguments are moved (or copied) into the task. Throws
  // std::invalid_argument for a task class of an unknown level, and
  // std::logic_error after the scheduler began to stop.
  template <typename F, typename... Args>
  auto submit(const TaskClass& task_class, F&& fn, Args&&... args)
      -> std::future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    using R = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;
    static_assert(!std::is_reference_v<R>, "submit a function that returns a value, not a reference");
    auto bound = [fn = std::forward<F>(fn), tuple = std::make_tuple(std::forward<Args>(args)...)]() mutable -> R {
      return std::apply(std::move(fn), std::move(tuple));
    };
    auto job = std::make_unique<detail::FunctionJob<R, decltype(bound)>>(std::move(bound));
    std::future<R> future = job->future();
    Enqueue(task_class, std::move(job));
    return future;
  }

  // Every level's metrics, highest level first.
  std::vector<LevelMetrics> metrics() const;

  // The names of the levels, highest first (equal levels in config order).
  std::vector<std::string> levels() const;

 private:
  void Enqueue(const TaskClass& task_class, std::unique_ptr<detail::Job> job);

  std::unique_ptr<task::SchedulerCore> core_;
};

}  // namespace gpuslice

#endif  // GPUSLICE_SCHEDULER_H_
