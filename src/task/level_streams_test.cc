#include "task/level_streams.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "task/scheduler_core.h"

namespace gpuslice::task {
namespace {

// The CUDA driver as a recorder: the current context is per thread, as
// CUDA's is; streams are numbered handles.
class FakeStreamDriver final : public StreamDriver {
 public:
  int CurrentContext(void** context) override {
    *context = t_context;
    return 0;
  }
  int PriorityRange(int* least, int* greatest) override {
    *least = least_;
    *greatest = greatest_;
    return 0;
  }
  int CreateStream(void** stream, int priority) override {
    std::lock_guard<std::mutex> lock(mu);
    if (refuse) return 1;
    created.push_back({t_context, priority});
    *stream = reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + created.size()));
    return 0;
  }
  int Synchronize(void* stream) override {
    std::lock_guard<std::mutex> lock(mu);
    synchronized.push_back(stream);
    return 0;
  }
  void SetRange(int least, int greatest) {
    least_ = least;
    greatest_ = greatest;
  }

  static thread_local void* t_context;
  struct Created {
    void* context;
    int priority;
  };
  std::mutex mu;
  std::vector<Created> created;     // guarded by mu
  std::vector<void*> synchronized;  // guarded by mu
  bool refuse = false;

 private:
  int least_ = 0, greatest_ = -5;  // an H100's range
};
thread_local void* FakeStreamDriver::t_context = nullptr;

void* Context(int n) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x100 * n)); }

TEST(LevelStreamsTest, LatencyCriticalLevelsGetHigherPrioritiesInOrderAndBestEffortTheLeast) {
  FakeStreamDriver driver;
  const LevelTable levels = LevelTable::Defaults();  // critical, high, lc, normal, low, be
  LevelStreams streams(levels, &driver);
  std::vector<int> got;
  for (size_t i = 0; i < levels.levels().size(); ++i) got.push_back(streams.PriorityOf(i));
  EXPECT_EQ(got, (std::vector<int>{-3, -2, -1, 0, 0, 0}));  // python/gpuslice/_streams.py's rule
}

TEST(LevelStreamsTest, OneStreamPerLevelAndContextMadeOnFirstUseAndClampedToTheDevicesRange) {
  FakeStreamDriver driver;
  driver.SetRange(0, -2);
  LevelStreams streams(LevelTable::Defaults(), &driver);
  EXPECT_EQ(streams.StreamFor(0), nullptr) << "no current context: the default stream";
  FakeStreamDriver::t_context = Context(1);
  void* critical = streams.StreamFor(0);
  ASSERT_NE(critical, nullptr);
  EXPECT_EQ(streams.StreamFor(0), critical);
  void* low = streams.StreamFor(4);
  EXPECT_NE(low, critical);
  FakeStreamDriver::t_context = Context(2);
  EXPECT_NE(streams.StreamFor(0), critical);
  FakeStreamDriver::t_context = nullptr;
  ASSERT_EQ(driver.created.size(), 3u);
  EXPECT_EQ(driver.created[0].priority, -2) << "-3 clamped to the device's greatest";
  EXPECT_EQ(driver.created[1].priority, 0);
  EXPECT_EQ(driver.created[2].context, Context(2));
}

TEST(LevelStreamsTest, AStreamTheDriverRefusesIsNotAskedForAgain) {
  FakeStreamDriver driver;
  driver.refuse = true;
  LevelStreams streams(LevelTable::Defaults(), &driver);
  FakeStreamDriver::t_context = Context(1);
  EXPECT_EQ(streams.StreamFor(1), nullptr);
  driver.refuse = false;
  EXPECT_EQ(streams.StreamFor(1), nullptr);
  FakeStreamDriver::t_context = nullptr;
  EXPECT_TRUE(driver.created.empty());
}

class NoAbi final : public TaskAbi {
 public:
  bool Loaded() const override { return false; }
  int SpanBegin() override { return 1; }
  int SpanEnd() override { return 1; }
  int HintBegin() override { return 1; }
  int HintEnd() override { return 1; }
  int Hint(unsigned int) override { return 1; }
  int TaskRecord(const char*, uint64_t, int) override { return 1; }
};

std::unique_ptr<SchedulerCore> Core(StreamDriver* streams, TaskAbi* abi, Notices* notices) {
  CoreOptions options;
  options.workers = 2;
  options.abi = abi;
  options.notices = notices;
  options.streams = streams;
  return std::make_unique<SchedulerCore>(LevelTable::Defaults(), options);
}

template <typename F>
std::future<std::invoke_result_t<F>> Submit(SchedulerCore& core, const std::string& level, F fn) {
  auto resolved = core.Resolve(TaskClass{level}, std::nullopt);
  EXPECT_TRUE(resolved.ok());
  auto job = std::make_unique<detail::FunctionJob<std::invoke_result_t<F>, F>>(std::move(fn));
  auto future = job->future();
  EXPECT_TRUE(core.Submit(*resolved, std::move(job)));
  return future;
}

TEST(LevelStreamsTest, ATaskGetsItsLevelsStreamWhichIsDrainedBeforeItsFutureIsReady) {
  FakeStreamDriver driver;
  NoAbi abi;
  Notices notices([](const std::string&) {});
  auto core = Core(&driver, &abi, &notices);
  auto in_task = [&driver] {
    FakeStreamDriver::t_context = Context(1);  // the task makes its context current
    void* s = CurrentTaskStream();
    EXPECT_EQ(CurrentTaskStream(), s);
    std::lock_guard<std::mutex> lock(driver.mu);
    EXPECT_TRUE(driver.synchronized.empty()) << "drained only once the task is over";
    return s;
  };
  void* critical = Submit(*core, "critical", in_task).get();
  ASSERT_NE(critical, nullptr);
  {
    std::lock_guard<std::mutex> lock(driver.mu);
    EXPECT_EQ(driver.synchronized, std::vector<void*>{critical});  // once, before get() returned
    EXPECT_EQ(driver.created.back().priority, -3);
    driver.synchronized.clear();
  }
  void* low = Submit(*core, "low", in_task).get();
  EXPECT_NE(low, critical);
  std::lock_guard<std::mutex> lock(driver.mu);
  EXPECT_EQ(driver.created.back().priority, 0);
  EXPECT_EQ(driver.synchronized, std::vector<void*>{low});
  EXPECT_EQ(CurrentTaskStream(), nullptr) << "outside a task";
}

TEST(LevelStreamsTest, WithoutStreamsATaskGetsNoStream) {
  NoAbi abi;
  Notices notices([](const std::string&) {});
  auto core = Core(nullptr, &abi, &notices);
  EXPECT_EQ(Submit(*core, "critical",
                   [] {
                     FakeStreamDriver::t_context = Context(1);
                     return CurrentTaskStream();
                   })
                .get(),
            nullptr);
}

}  // namespace
}  // namespace gpuslice::task
