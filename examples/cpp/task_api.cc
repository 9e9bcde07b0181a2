// A service with a latency-critical request path and best-effort background
// work, on gpuslice's C++ task API (docs/task-api.md). Runs with or without
// gpuslice: `gpuslice run --priority lc -- ./task_api_example`.
#include <gpuslice/request.h>
#include <gpuslice/scheduler.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace std::chrono_literals;

int Infer(int x) { return 2 * x; }  // stands for: launch kernels, copy back, synchronise

double TrainStep(std::vector<double> batch) { return std::accumulate(batch.begin(), batch.end(), 0.0); }

int main() {
  gpuslice::Scheduler sched;  // or gpuslice::Scheduler({.config_path = "gpuslice.yaml"})
  const gpuslice::TaskClass infer = sched.latency_critical("high", 10ms);
  const gpuslice::TaskClass train = sched.best_effort();

  std::future<double> step = sched.submit(train, TrainStep, std::vector<double>{0.5, 1.5});
  std::future<int> f = sched.submit(infer, Infer, 21);
  if (f.wait_for(1s) != std::future_status::ready) return 1;  // a timeout
  const int y = f.get();                                      // or the task's exception
  std::printf("infer(21) = %d, train step = %.1f\n", y, step.get());

  std::future<int> bad = sched.submit(infer, [](int) -> int { throw std::runtime_error("bad input"); }, 0);
  try {
    bad.get();
  } catch (const std::runtime_error& e) {
    std::printf("the task threw: %s\n", e.what());
  }

  {
    gpuslice::RequestSpan span;  // work on this thread, outside the scheduler, as one request
    Infer(1);
  }

  for (const gpuslice::LevelMetrics& m : sched.metrics()) {
    if (m.count == 0) continue;
    std::printf("%-8s count %llu  failed %llu  SLO misses %llu  p50 %.3f ms  p99 %.3f ms\n", m.level.c_str(),
                static_cast<unsigned long long>(m.count), static_cast<unsigned long long>(m.failed),
                static_cast<unsigned long long>(m.slo_misses), m.p50.count() / 1e6, m.p99.count() / 1e6);
  }
  return y == 42 ? 0 : 1;
}
