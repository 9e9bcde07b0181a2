#include "core/task_metrics.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/shared_word.h"

namespace gpuslice::core {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

std::unique_ptr<Ledger> NewLedger() { return std::make_unique<Ledger>(); }  // zeroed

const TaskLevelSnapshot* Find(const std::vector<TaskLevelSnapshot>& levels, const std::string& name) {
  for (const auto& l : levels) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

TEST(TaskMetricsTest, EachLevelIsCountedUnderItsNameWithItsFlagsAndLatencies) {
  auto ledger = NewLedger();
  EXPECT_TRUE(TakeTaskLevelSnapshots(*ledger).empty());
  ASSERT_TRUE(RecordTask(ledger.get(), "critical", 300 * kUs, 0));
  ASSERT_TRUE(RecordTask(ledger.get(), "critical", 4 * kMs, kTaskSloMiss));
  ASSERT_TRUE(RecordTask(ledger.get(), "low", 40 * kMs, kTaskFailed));
  ASSERT_TRUE(RecordTask(ledger.get(), "critical", 200 * kUs, kTaskFailed | kTaskSloMiss));

  const auto levels = TakeTaskLevelSnapshots(*ledger);
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels[0].name, "critical");  // in the order first recorded
  EXPECT_EQ(levels[1].name, "low");
  EXPECT_EQ(levels[0].latency.count, 3u);
  EXPECT_EQ(levels[0].latency.sum_ns, 4500 * kUs);
  EXPECT_EQ(levels[0].latency.buckets[LcLatencyBucketIndex(4 * kMs)], 1u);
  EXPECT_EQ(levels[0].failed, 1u);
  EXPECT_EQ(levels[0].slo_misses, 2u);
  EXPECT_EQ(levels[1].latency.count, 1u);
  EXPECT_EQ(levels[1].failed, 1u);
  EXPECT_EQ(levels[1].slo_misses, 0u);
  // Quantiles come from the buckets, as the LC histogram's do.
  EXPECT_NEAR(*LcLatencyQuantileSeconds(levels[1].latency, 0.5), 0.035, 0.016);
}

TEST(TaskMetricsTest, ANameThatIsNoLevelNameIsRefusedAndCountsNothing) {
  auto ledger = NewLedger();
  for (const char* bad : {"", "Critical", "a b", "x/y", "123456789012345678901234567890123"}) {
    EXPECT_FALSE(RecordTask(ledger.get(), bad, kMs, 0)) << bad;
  }
  EXPECT_TRUE(RecordTask(ledger.get(), "12345678901234567890123456789012", kMs, 0));  // 32: the longest
  EXPECT_FALSE(RecordTask(nullptr, "lc", kMs, 0));
  const auto levels = TakeTaskLevelSnapshots(*ledger);
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_EQ(levels[0].latency.count, 1u);
  EXPECT_EQ(LoadAcquire(ledger->task_levels[1].state), 0u);
}

TEST(TaskMetricsTest, NamesPastTheRowsAreCountedUnderOther) {
  auto ledger = NewLedger();
  for (uint32_t i = 0; i < kTaskLevelRows + 3; ++i) {
    ASSERT_TRUE(RecordTask(ledger.get(), "level-" + std::to_string(i), kMs, i == kTaskLevelRows ? kTaskFailed : 0));
  }
  ASSERT_TRUE(RecordTask(ledger.get(), "level-0", kMs, 0));  // still its own row
  const auto levels = TakeTaskLevelSnapshots(*ledger);
  ASSERT_EQ(levels.size(), kTaskLevelRows + 1);
  EXPECT_EQ(Find(levels, "level-0")->latency.count, 2u);
  const TaskLevelSnapshot* other = Find(levels, "other");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->latency.count, 3u);
  EXPECT_EQ(other->failed, 1u);
  EXPECT_EQ(Find(levels, "level-" + std::to_string(kTaskLevelRows)), nullptr);
}

TEST(TaskMetricsTest, ARowLeftHalfClaimedByAKilledWriterIsSkippedAndCostsNoCount) {
  auto ledger = NewLedger();
  ASSERT_TRUE(RecordTask(ledger.get(), "high", kMs, 0));
  StoreRelease(ledger->task_levels[1].state, 1u);  // a claimer killed before writing its name
  ASSERT_TRUE(RecordTask(ledger.get(), "low", kMs, 0));
  ASSERT_TRUE(RecordTask(ledger.get(), "high", kMs, 0));
  EXPECT_EQ(LoadAcquire(ledger->task_levels[2].state), 2u);
  EXPECT_STREQ(ledger->task_levels[2].name, "low");
  const auto levels = TakeTaskLevelSnapshots(*ledger);
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(Find(levels, "high")->latency.count, 2u);
  EXPECT_EQ(Find(levels, "low")->latency.count, 1u);
}

TEST(TaskMetricsTest, RowsOfOneNameAreAddedAndAForgedNameIsShownAsOther) {
  auto ledger = NewLedger();
  ASSERT_TRUE(RecordTask(ledger.get(), "high", kMs, 0));
  // Two processes claimed a row each for one name at once.
  TaskLevelRow& twin = ledger->task_levels[1];
  std::strcpy(twin.name, "high");
  twin.count = twin.buckets[0] = 5;
  twin.slo_misses = 2;
  StoreRelease(twin.state, 2u);
  // A tenant wrote a name no level can have, unterminated.
  TaskLevelRow& forged = ledger->task_levels[2];
  std::memset(forged.name, 'Z', sizeof forged.name);
  forged.count = forged.buckets[3] = 7;
  StoreRelease(forged.state, 2u);
  const auto levels = TakeTaskLevelSnapshots(*ledger);
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(Find(levels, "high")->latency.count, 6u);
  EXPECT_EQ(Find(levels, "high")->slo_misses, 2u);
  EXPECT_EQ(Find(levels, "other")->latency.count, 7u);
}

TEST(TaskMetricsTest, ThreadsAndProcessesRecordingAtOnceLoseNoTask) {
  void* p = mmap(nullptr, sizeof(Ledger), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* ledger = static_cast<Ledger*>(p);  // zero-filled
  constexpr int kEach = 2000;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::thread t([&] {
      for (int i = 0; i < kEach; ++i) RecordTask(ledger, i % 2 ? "a" : "b", kMs, 0);
    });
    for (int i = 0; i < kEach; ++i) RecordTask(ledger, i % 2 ? "b" : "c", kMs, kTaskSloMiss);
    t.join();
    _exit(0);
  }
  for (int i = 0; i < kEach; ++i) RecordTask(ledger, i % 2 ? "c" : "a", kMs, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto levels = TakeTaskLevelSnapshots(*ledger);
  ASSERT_EQ(levels.size(), 3u);
  uint64_t total = 0;
  for (const auto& l : levels) total += l.latency.count;
  EXPECT_EQ(total, 3u * kEach);
  EXPECT_EQ(Find(levels, "a")->latency.count, static_cast<uint64_t>(kEach));
  EXPECT_EQ(Find(levels, "c")->slo_misses, static_cast<uint64_t>(kEach / 2));
  munmap(p, sizeof(Ledger));
}

}  // namespace
}  // namespace gpuslice::core
