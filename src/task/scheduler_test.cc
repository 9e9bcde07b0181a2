// The public C++ API (include/gpuslice/scheduler.h, request.h) as an
// application uses it: in this test binary gpuslice's library is not
// loaded, so everything must work without it.
#include "gpuslice/scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "gpuslice/gpuslice.h"
#include "gpuslice/request.h"

namespace gpuslice {
namespace {

using std::chrono::milliseconds;

TEST(SchedulerTest, SubmitsMoveOnlyWorkAndGivesFutures) {
  Scheduler sched;
  const TaskClass infer = sched.latency_critical("high", milliseconds(10));
  auto f = sched.submit(infer, [](std::unique_ptr<int> x, int y) { return *x + y; }, std::make_unique<int>(40), 2);
  EXPECT_EQ(f.get(), 42);
  auto g = sched.submit(sched.best_effort(), [] { throw std::invalid_argument("bad batch"); });
  EXPECT_THROW(g.get(), std::invalid_argument);
  const std::vector<LevelMetrics> m = sched.metrics();
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].level, "high");
  EXPECT_EQ(m[1].count, 1u);
  EXPECT_EQ(m[5].level, "be");
  EXPECT_EQ(m[5].failed, 1u);
}

TEST(SchedulerTest, BadInputThrowsNamingTheProblem) {
  Scheduler sched;
  EXPECT_THROW(sched.latency_critical("normal"), std::invalid_argument);
  EXPECT_THROW(sched.best_effort("high"), std::invalid_argument);
  EXPECT_THROW(sched.latency_critical("high", milliseconds(-5)), std::invalid_argument);
  EXPECT_THROW(sched.submit(TaskClass{"urgent"}, [] {}), std::invalid_argument);
  EXPECT_THROW(Scheduler(SchedulerOptions{.config_path = "", .workers = 0}), std::invalid_argument);
  try {
    Scheduler bad(SchedulerOptions{.config_path = "/nonexistent.yaml"});
    ADD_FAILURE() << "a missing config must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent.yaml"), std::string::npos);
  }
}

TEST(SchedulerTest, LevelsComeFromTheConfig) {
  char path[] = "/tmp/gpuslice-task-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "levels:\n  - {name: gold, class: lc, slo_ms: 3}\n  - {name: bronze, class: be}\n";
  Scheduler sched(SchedulerOptions{.config_path = path, .workers = 2});
  std::remove(path);
  EXPECT_EQ(sched.levels(), (std::vector<std::string>{"gold", "lc", "bronze", "be"}));
  EXPECT_EQ(sched.metrics()[0].slo, milliseconds(3));
  EXPECT_EQ(sched.submit(sched.latency_critical("gold"), [] { return 1; }).get(), 1);
  EXPECT_THROW(sched.latency_critical("high"), std::invalid_argument) << "no default levels beside a config's";
}

TEST(SchedulerTest, ATaskMayDestroyItsOwnScheduler) {
  auto sched = std::make_unique<Scheduler>(SchedulerOptions{.workers = 1});
  Scheduler* raw = sched.get();
  std::promise<void> destroyed;
  auto f = raw->submit(raw->best_effort(), [&sched, &destroyed] {
    sched.reset();  // joining itself would throw std::system_error and end the process
    destroyed.set_value();
    return 1;
  });
  destroyed.get_future().wait();
  EXPECT_EQ(f.get(), 1);
}

TEST(SchedulerTest, SpansAndHintsOutsideGpusliceSayNotInVgpu) {
  RequestSpan span;
  EXPECT_EQ(span.status(), GPUSLICE_NOT_IN_VGPU);
  Hint hint;
  EXPECT_EQ(hint.status(), GPUSLICE_NOT_IN_VGPU);
}

}  // namespace
}  // namespace gpuslice
