#include "task/scheduler_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpuslice/gpuslice.h"

namespace gpuslice::task {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

class FakeClock final : public Clock {
 public:
  uint64_t NowNs() override { return now_.load(); }
  void Advance(uint64_t ns) { now_ += ns; }

 private:
  std::atomic<uint64_t> now_{1'000'000'000};
};

// gpuslice's C API as a recorder: what was called, and whether a span is open.
class FakeAbi final : public TaskAbi {
 public:
  explicit FakeAbi(bool loaded = true, int span_status = GPUSLICE_OK) : loaded_(loaded), span_status_(span_status) {}
  bool Loaded() const override { return loaded_; }
  int SpanBegin() override {
    ++span_begins;
    ++open;
    return span_status_;
  }
  int SpanEnd() override {
    ++span_ends;
    --open;
    return GPUSLICE_OK;
  }
  int HintBegin() override { return GPUSLICE_OK; }
  int HintEnd() override { return GPUSLICE_OK; }
  int Hint(unsigned int usec) override {
    ++hints;
    last_hint_usec = usec;
    return GPUSLICE_OK;
  }
  int TaskRecord(const char* level, uint64_t latency_ns, int flags) override {
    std::lock_guard<std::mutex> lock(mu);
    records.push_back({level, latency_ns, flags});
    return task_record_status;
  }
  struct Record {
    std::string level;
    uint64_t latency_ns;
    int flags;
  };
  std::mutex mu;
  std::vector<Record> records;  // guarded by mu
  int task_record_status = GPUSLICE_OK;
  std::atomic<int> span_begins{0}, span_ends{0}, open{0}, hints{0};
  std::atomic<unsigned> last_hint_usec{0};

 private:
  const bool loaded_;
  const int span_status_;
};

// A Job over a function, like the public header's, with a future.
template <typename F>
auto MakeJob(F fn) {
  using R = std::invoke_result_t<F>;
  auto job = std::make_unique<detail::FunctionJob<R, F>>(std::move(fn));
  auto future = job->future();
  return std::make_pair(std::move(job), std::move(future));
}

class SchedulerCoreTest : public testing::Test {
 protected:
  std::unique_ptr<SchedulerCore> Make(int workers, FakeAbi* abi = nullptr, Notices* notices = nullptr,
                                      bool slo_reaction = true) {
    CoreOptions options;
    options.workers = workers;
    options.slo_reaction = slo_reaction;
    options.clock = &clock_;
    options.abi = abi ? abi : &abi_;
    options.notices = notices ? notices : &notices_;
    return std::make_unique<SchedulerCore>(LevelTable::Defaults(), options);
  }

  template <typename F>
  auto Submit(SchedulerCore& core, const std::string& level, F fn, microseconds slo = microseconds(0)) {
    auto resolved = core.Resolve(TaskClass{level, slo}, std::nullopt);
    EXPECT_TRUE(resolved.ok()) << resolved.status().message();
    auto [job, future] = MakeJob(std::move(fn));
    EXPECT_TRUE(core.Submit(*resolved, std::move(job)));
    return std::move(future);
  }

  const LevelMetrics& Of(const std::vector<LevelMetrics>& all, const std::string& level) {
    for (const LevelMetrics& m : all) {
      if (m.level == level) return m;
    }
    ADD_FAILURE() << "no level " << level;
    return all.front();
  }

  FakeClock clock_;
  FakeAbi abi_;
  std::vector<std::string> said_;
  std::mutex said_mu_;
  Notices notices_{[this](const std::string& line) {
    std::lock_guard<std::mutex> lock(said_mu_);
    said_.push_back(line);
  }};
};

TEST_F(SchedulerCoreTest, FuturesResolveWithTheTasksResults) {
  auto core = Make(2);
  auto a = Submit(*core, "high", [] { return 41 + 1; });
  auto b = Submit(*core, "low", [] { return std::string("done"); });
  bool ran = false;
  auto c = Submit(*core, "be", [&ran] { ran = true; });
  EXPECT_EQ(a.get(), 42);
  EXPECT_EQ(b.get(), "done");
  c.get();
  EXPECT_TRUE(ran);
}

TEST_F(SchedulerCoreTest, ExceptionsPropagateAndCountAsFailed) {
  auto core = Make(1);
  auto f = Submit(*core, "critical", []() -> int { throw std::out_of_range("bad index"); });
  EXPECT_THROW(f.get(), std::out_of_range);
  const auto m = core->Metrics();
  EXPECT_EQ(Of(m, "critical").count, 1u);
  EXPECT_EQ(Of(m, "critical").failed, 1u);
}

TEST_F(SchedulerCoreTest, LatencyIsFromSubmitToEndAndMissesCountAgainstEachTasksSlo) {
  auto core = Make(1);
  for (int i = 0; i < 4; ++i) {
    // 5 ms each, against SLOs of 6 ms (met) and 4 ms (missed).
    Submit(*core, "high", [this] { clock_.Advance(5'000'000); }, microseconds(i % 2 ? 6000 : 4000)).get();
  }
  Submit(*core, "normal", [this] { clock_.Advance(1'000'000); }).get();
  const auto m = core->Metrics();
  EXPECT_EQ(Of(m, "high").count, 4u);
  EXPECT_EQ(Of(m, "high").slo_misses, 2u);
  EXPECT_EQ(Of(m, "high").p50, milliseconds(5));
  EXPECT_EQ(Of(m, "high").p99, milliseconds(5));
  EXPECT_EQ(Of(m, "normal").count, 1u);
  EXPECT_EQ(Of(m, "normal").slo_misses, 0u);
  EXPECT_EQ(Of(m, "critical").count, 0u);
  EXPECT_EQ(Of(m, "critical").p99, milliseconds(0));
  EXPECT_TRUE(Of(m, "high").latency_critical);
  EXPECT_FALSE(Of(m, "normal").latency_critical);
}

TEST_F(SchedulerCoreTest, EveryFinishedTaskGoesIntoTheVgpusMetricsWithItsLatencyAndFlags) {
  auto core = Make(1);
  Submit(*core, "high", [this] { clock_.Advance(5'000'000); }, microseconds(4000)).get();  // missed
  Submit(*core, "high", [this] { clock_.Advance(3'000'000); }, microseconds(4000)).get();  // met
  auto f = Submit(*core, "normal", []() -> int { throw std::runtime_error("x"); });
  EXPECT_THROW(f.get(), std::runtime_error);
  Submit(*core, "low", [this] { clock_.Advance(1'000'000); }).get();  // no SLO: never a miss
  std::lock_guard<std::mutex> lock(abi_.mu);
  ASSERT_EQ(abi_.records.size(), 4u);
  EXPECT_EQ(abi_.records[0].level, "high");
  EXPECT_EQ(abi_.records[0].latency_ns, 5'000'000u);
  EXPECT_EQ(abi_.records[0].flags, GPUSLICE_TASK_SLO_MISS);
  EXPECT_EQ(abi_.records[1].flags, 0);
  EXPECT_EQ(abi_.records[2].level, "normal");
  EXPECT_EQ(abi_.records[2].flags, GPUSLICE_TASK_FAILED);
  EXPECT_EQ(abi_.records[3].level, "low");
  EXPECT_EQ(abi_.records[3].latency_ns, 1'000'000u);
  EXPECT_EQ(abi_.records[3].flags, 0);
}

TEST_F(SchedulerCoreTest, ALibraryWithoutTaskMetricsIsSaidOnceAndTasksStillRun) {
  FakeAbi old_library;
  old_library.task_record_status = kNoTaskRecord;
  auto core = Make(1, &old_library);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Submit(*core, "normal", [i] { return i; }).get(), i);
  ASSERT_EQ(said_.size(), 1u);
  EXPECT_NE(said_[0].find("older than the task API's metrics"), std::string::npos) << said_[0];
}

TEST_F(SchedulerCoreTest, LatencyCriticalTasksRunInARequestSpanAndBestEffortOnesDoNot) {
  auto core = Make(1);
  EXPECT_EQ(Submit(*core, "critical", [this] { return abi_.open.load(); }).get(), 1);
  EXPECT_EQ(Submit(*core, "lc", [this] { return abi_.open.load(); }).get(), 1);
  EXPECT_EQ(Submit(*core, "normal", [this] { return abi_.open.load(); }).get(), 0);
  EXPECT_EQ(Submit(*core, "be", [this] { return abi_.open.load(); }).get(), 0);
  EXPECT_EQ(abi_.span_begins, 2);
  EXPECT_EQ(abi_.span_ends, 2);
  // Even a task that throws closes its span.
  auto f = Submit(*core, "high", []() -> int { throw std::runtime_error("x"); });
  EXPECT_THROW(f.get(), std::runtime_error);
  EXPECT_EQ(abi_.span_ends, 3);
  EXPECT_EQ(abi_.open, 0);
}

// One worker, held busy by a task until `gate` opens; then the queued tasks
// run one at a time, in the order the levels say.
TEST_F(SchedulerCoreTest, QueuedTasksStartHighestLevelFirst) {
  auto core = Make(1);
  std::promise<void> started, gate;
  std::shared_future<void> open = gate.get_future().share();
  auto first = Submit(*core, "be", [&started, open] {
    started.set_value();
    open.wait();
  });
  started.get_future().wait();
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::future<void>> done;
  for (const char* level : {"low", "normal", "be", "high", "critical", "lc"}) {
    done.push_back(Submit(*core, level, [&mu, &order, level] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(level);
    }));
  }
  EXPECT_EQ(Of(core->Metrics(), "low").queued, 1u);
  EXPECT_EQ(first.wait_for(milliseconds(0)), std::future_status::timeout) << "a running task's future is not ready";
  gate.set_value();
  first.get();
  for (auto& f : done) f.get();
  EXPECT_EQ(order, (std::vector<std::string>{"critical", "high", "lc", "normal", "low", "be"}));
}

TEST_F(SchedulerCoreTest, StopAbandonsQueuedTasksAndRefusesNewOnes) {
  auto core = Make(1);
  std::promise<void> started, gate;
  std::shared_future<void> open = gate.get_future().share();
  auto running = Submit(*core, "high", [&started, open] {
    started.set_value();
    open.wait();
    return 1;
  });
  started.get_future().wait();
  auto queued = Submit(*core, "high", [] { return 2; });
  std::thread stopper([&core] { core->Stop(); });
  // Stop takes the queue before it waits for the running task.
  while (Of(core->Metrics(), "high").queued != 0) std::this_thread::yield();
  gate.set_value();
  stopper.join();
  EXPECT_EQ(running.get(), 1) << "a running task finishes";
  try {
    queued.get();
    ADD_FAILURE() << "an abandoned task's future must not hold a value";
  } catch (const std::future_error& e) {
    EXPECT_EQ(e.code(), std::future_errc::broken_promise);
  }
  auto [job, future] = MakeJob([] { return 3; });
  EXPECT_FALSE(core->Submit(*core->Resolve(TaskClass{"high"}, std::nullopt), std::move(job)));
}

TEST_F(SchedulerCoreTest, SloPressureTurnsOnAndHintsGpusliceAtSubmit) {
  auto core = Make(1);
  const microseconds slo(10'000);
  for (size_t i = 0; i < kPressureMinSamples; ++i) {
    EXPECT_FALSE(Of(core->Metrics(), "critical").slo_pressure);
    // 9 ms against 10 ms: 90% of the SLO.
    Submit(*core, "critical", [this] { clock_.Advance(9'000'000); }, slo).get();
  }
  EXPECT_EQ(abi_.hints, 0) << "no hint before the level was under pressure";
  EXPECT_TRUE(Of(core->Metrics(), "critical").slo_pressure);
  EXPECT_EQ(Of(core->Metrics(), "critical").slo_misses, 0u);
  Submit(*core, "critical", [] {}, slo).get();
  EXPECT_EQ(abi_.hints, 1);
  EXPECT_EQ(abi_.last_hint_usec, 10'000u);
  // Best-effort tasks never hint, nor do other levels.
  Submit(*core, "normal", [] {}).get();
  Submit(*core, "high", [] {}, slo).get();
  EXPECT_EQ(abi_.hints, 1);
}

TEST_F(SchedulerCoreTest, WithoutTheSloReactionPressureIsReportedAndChangesNothing) {
  auto core = Make(1, nullptr, nullptr, /*slo_reaction=*/false);
  const microseconds slo(10'000);
  for (size_t i = 0; i < kPressureMinSamples; ++i) {
    Submit(*core, "critical", [this] { clock_.Advance(9'000'000); }, slo).get();
  }
  EXPECT_TRUE(Of(core->Metrics(), "critical").slo_pressure);
  Submit(*core, "critical", [] {}, slo).get();
  EXPECT_EQ(abi_.hints, 0) << "no pre-preemption hint without the reaction";
}

TEST_F(SchedulerCoreTest, OutsideGpusliceTasksRunAndItIsSaidOnce) {
  FakeAbi absent(/*loaded=*/false, GPUSLICE_NOT_IN_VGPU);
  auto a = Make(1, &absent);
  auto b = Make(1, &absent);
  EXPECT_EQ(Submit(*a, "critical", [] { return 7; }).get(), 7);
  EXPECT_EQ(Submit(*b, "critical", [] { return 8; }).get(), 8);
  ASSERT_EQ(said_.size(), 1u);
  EXPECT_NE(said_[0].find("not loaded"), std::string::npos) << said_[0];
}

TEST_F(SchedulerCoreTest, ABestEffortVgpuIsSaidOnce) {
  FakeAbi be_vgpu(/*loaded=*/true, GPUSLICE_NOT_LATENCY_CRITICAL);
  auto core = Make(1, &be_vgpu);
  for (int i = 0; i < 3; ++i) Submit(*core, "high", [] {}).get();
  ASSERT_EQ(said_.size(), 1u);
  EXPECT_NE(said_[0].find("--priority lc"), std::string::npos) << said_[0];
  EXPECT_EQ(be_vgpu.span_ends, 3) << "a span that holds nothing is still ended (the library times it)";
}

TEST_F(SchedulerCoreTest, ResolveNamesWhatIsWrong) {
  auto core = Make(1);
  auto unknown = core->Resolve(TaskClass{"urgent"}, std::nullopt);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("critical, high, lc, normal, low, be"), std::string::npos)
      << unknown.status().message();
  auto wrong_class = core->Resolve(TaskClass{"normal"}, true);
  ASSERT_FALSE(wrong_class.ok());
  EXPECT_NE(wrong_class.status().message().find("best-effort"), std::string::npos);
  auto negative = core->Resolve(TaskClass{"high", microseconds(-1)}, true);
  EXPECT_FALSE(negative.ok());
  auto ok = core->Resolve(TaskClass{"high", microseconds(0)}, true);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->slo_ns, 0u);
}

}  // namespace
}  // namespace gpuslice::task
