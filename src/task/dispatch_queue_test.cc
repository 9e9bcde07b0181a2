#include "task/dispatch_queue.h"

#include <gtest/gtest.h>

namespace gpuslice::task {
namespace {

class NoJob final : public detail::Job {
 public:
  bool Run() noexcept override { return true; }
  void Publish() noexcept override {}
};

class DispatchQueueTest : public testing::Test {
 protected:
  // Defaults: critical, high, lc, normal, low, be.
  LevelTable table_ = LevelTable::Defaults();

  size_t Level(const char* name) { return *table_.Find(name); }

  void Push(DispatchQueue& q, const char* level, uint64_t submit_ns = 0) {
    QueuedTask task;
    task.level = Level(level);
    task.submit_ns = submit_ns;
    task.job = std::make_unique<NoJob>();
    q.Push(std::move(task));
  }

  // The level Pop starts, or "" when none may start.
  std::string Pop(DispatchQueue& q, uint64_t now_ns = 0) {
    std::optional<QueuedTask> task = q.Pop(now_ns);
    return task ? table_.levels()[task->level].name : "";
  }
};

TEST_F(DispatchQueueTest, HigherLevelsStartFirstAndEachLevelInOrder) {
  DispatchQueue q(table_, 100);
  Push(q, "low");
  Push(q, "be");
  Push(q, "normal");
  Push(q, "high");
  Push(q, "lc");  // `lc` ranks with `high`: submitted later, starts later
  Push(q, "critical");
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) order.push_back(Pop(q));
  EXPECT_EQ(order, (std::vector<std::string>{"critical", "high", "lc", "normal", "low", "be"}));
  EXPECT_EQ(Pop(q), "");
  EXPECT_EQ(q.running_total(), 6u);
}

TEST_F(DispatchQueueTest, NoTaskStartsWithoutAFreeWorker) {
  DispatchQueue q(table_, 1);
  Push(q, "critical");
  Push(q, "critical");
  EXPECT_EQ(Pop(q), "critical");
  EXPECT_EQ(Pop(q), "");
  q.Finished(Level("critical"));
  EXPECT_EQ(Pop(q), "critical");
}

TEST_F(DispatchQueueTest, BestEffortNeverTakesTheLastFreeWorker) {
  DispatchQueue q(table_, 2);
  Push(q, "be");
  Push(q, "be");
  EXPECT_EQ(Pop(q), "be");
  EXPECT_EQ(Pop(q), "") << "the last worker is kept for latency-critical work";
  Push(q, "high");
  EXPECT_EQ(Pop(q), "high");
  // A scheduler of one worker has no worker to keep.
  DispatchQueue one(table_, 1);
  Push(one, "be");
  EXPECT_EQ(Pop(one), "be");
}

TEST_F(DispatchQueueTest, ALevelUnderPressureHoldsLowerLevelsWhileItHasWork) {
  DispatchQueue q(table_, 8);  // workers to spare: only the pressure holds
  q.SetPressure(Level("high"), true);
  Push(q, "high");
  EXPECT_EQ(Pop(q), "high");
  Push(q, "normal");
  Push(q, "lc");  // ranks with `high`: not lower, not held
  Push(q, "critical");
  EXPECT_EQ(Pop(q), "critical") << "a higher level is never held";
  EXPECT_EQ(Pop(q), "lc");
  EXPECT_EQ(Pop(q), "") << "`normal` waits while `high` is under pressure and running";
  Push(q, "high");
  q.Finished(Level("high"));
  EXPECT_EQ(Pop(q), "high");
  EXPECT_EQ(Pop(q), "") << "`high` has work again";
  q.Finished(Level("high"));
  EXPECT_EQ(Pop(q), "normal");
}

TEST_F(DispatchQueueTest, WithoutPressureLowerLevelsRunBesideHigherOnes) {
  DispatchQueue q(table_, 4);
  Push(q, "high");
  EXPECT_EQ(Pop(q), "high");
  Push(q, "normal");
  EXPECT_EQ(Pop(q), "normal");
}

TEST_F(DispatchQueueTest, ATaskThatWaitedTooLongStartsFirst) {
  DispatchQueue q(table_, 8, /*starvation_ns=*/1000);
  Push(q, "low", /*submit_ns=*/0);
  Push(q, "critical", 500);
  Push(q, "high", 500);
  EXPECT_EQ(q.NextAgingNs(), 1000u);
  EXPECT_EQ(Pop(q, 999), "critical");
  EXPECT_EQ(Pop(q, 1000), "low") << "aged: it goes before `high`";
  EXPECT_EQ(Pop(q, 1000), "high");
}

TEST_F(DispatchQueueTest, AgingBypassesPressureButNotTheKeptWorker) {
  DispatchQueue q(table_, 2, 1000);
  q.SetPressure(Level("critical"), true);
  Push(q, "critical", 0);
  EXPECT_EQ(Pop(q, 0), "critical");
  Push(q, "low", 0);
  EXPECT_EQ(Pop(q, 10), "") << "held: `critical` is under pressure, and one worker is left";
  DispatchQueue wide(table_, 3, 1000);
  wide.SetPressure(Level("critical"), true);
  Push(wide, "critical", 0);
  EXPECT_EQ(Pop(wide, 0), "critical");
  Push(wide, "low", 0);
  EXPECT_EQ(Pop(wide, 999), "");
  EXPECT_EQ(Pop(wide, 1000), "low") << "a level under pressure holds others for a bounded time";
  // An aged best-effort task kept off the last worker lets a latency-critical one start.
  wide.SetPressure(Level("critical"), false);
  Push(wide, "low", 0);
  Push(wide, "high", 1500);
  EXPECT_EQ(Pop(wide, 2000), "high");
}

TEST_F(DispatchQueueTest, TakeAllEmptiesTheQueue) {
  DispatchQueue q(table_, 1);
  Push(q, "high");
  Push(q, "be");
  EXPECT_EQ(q.TakeAll().size(), 2u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.NextAgingNs(), std::nullopt);
}

}  // namespace
}  // namespace gpuslice::task
