#include "node/memory_pressure.h"

#include <gtest/gtest.h>

namespace gpuslice::node {
namespace {

using std::chrono::seconds;
constexpr uint64_t kGiB = 1ull << 30;
const std::string kGpu = "GPU-0";
const std::string kOtherGpu = "GPU-1";

VgpuView Vgpu(const std::string& name, core::Priority level, uint64_t used, uint32_t rank = 0,
              const std::string& gpu = kGpu) {
  VgpuView v;
  v.name = name;
  v.priority = level;
  v.priority_rank = rank;
  VgpuDeviceView d;
  d.gpu_uuid = gpu;
  d.memory_used_bytes = used;
  v.devices.push_back(d);
  return v;
}
VgpuView Suspendable(const std::string& name, uint64_t used, double active = 0, uint32_t rank = 0) {
  VgpuView v = Vgpu(name, core::Priority::kBestEffort, used, rank);
  v.suspendable = true;
  v.devices[0].compute_measured_ratio = active;
  return v;
}
VgpuView Asking(VgpuView v, uint64_t bytes) {
  v.memory_waits.push_back({0, 0, bytes, core::MemoryWaitWord(0, bytes)});
  return v;
}

struct MemoryPressureTest : ::testing::Test {
  MemoryPressurePolicy policy;
  MemoryPressurePolicy::Clock::time_point t0 = MemoryPressurePolicy::Clock::time_point() + seconds(1000);
};

TEST_F(MemoryPressureTest, SuspendsTheLeastActiveOfTheLowestLevelUntilThereIsRoom) {
  const std::vector<VgpuView> vgpus = {
      Asking(Vgpu("lc", core::Priority::kLatencyCritical, 10 * kGiB), 8 * kGiB),
      Suspendable("busy", 30 * kGiB, /*active=*/0.6),
      Suspendable("idle", 30 * kGiB, /*active=*/0.0),
      Suspendable("higher", 30 * kGiB, 0.0, /*rank=*/1),
  };
  const auto d = policy.Decide(vgpus, {{kGpu, 1 * kGiB}}, t0);
  EXPECT_EQ(d.suspend, std::vector<std::string>{"idle"});
  EXPECT_TRUE(d.refuse.empty());
}

TEST_F(MemoryPressureTest, SuspendsAsManyAsTheRequestNeeds) {
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 20 * kGiB),
                                       Suspendable("a", 8 * kGiB, 0.1), Suspendable("b", 8 * kGiB, 0.2),
                                       Suspendable("c", 8 * kGiB, 0.3)};
  const auto d = policy.Decide(vgpus, {{kGpu, 2 * kGiB}}, t0);
  EXPECT_EQ(d.suspend, (std::vector<std::string>{"a", "b", "c"}));  // 2 + 8 + 8 < 20
  const auto less = policy.Decide(vgpus, {{kGpu, 5 * kGiB}}, t0);
  EXPECT_EQ(less.suspend, (std::vector<std::string>{"a", "b"}));  // 5 + 16 >= 20
}

TEST_F(MemoryPressureTest, NeverSuspendsForAnEqualOrLowerLevelOrWithoutOptIn) {
  VgpuView pinned = Vgpu("pinned", core::Priority::kBestEffort, 40 * kGiB);  // not suspendable
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("be", core::Priority::kBestEffort, 0), 8 * kGiB),
                                       Suspendable("peer", 40 * kGiB), pinned};
  const auto d = policy.Decide(vgpus, {{kGpu, 0}}, t0);
  EXPECT_TRUE(d.suspend.empty());
  ASSERT_EQ(d.refuse.size(), 1u) << "nothing may be suspended: answered at once";
  EXPECT_EQ(d.refuse[0].vgpu, "be");
}

TEST_F(MemoryPressureTest, RefusesWhenEveryCandidateTogetherIsNotEnough) {
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 50 * kGiB),
                                       Suspendable("a", 10 * kGiB), Suspendable("b", 10 * kGiB)};
  const auto d = policy.Decide(vgpus, {{kGpu, 1 * kGiB}}, t0);
  EXPECT_TRUE(d.suspend.empty()) << "suspending both would not make the room";
  EXPECT_EQ(d.refuse.size(), 1u);
}

TEST_F(MemoryPressureTest, OnlyVgpusOnTheRequestersGpuAreCandidates) {
  VgpuView elsewhere = Suspendable("elsewhere", 40 * kGiB);
  elsewhere.devices[0].gpu_uuid = kOtherGpu;
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 8 * kGiB), elsewhere};
  const auto d = policy.Decide(vgpus, {{kGpu, 0}, {kOtherGpu, 0}}, t0);
  EXPECT_TRUE(d.suspend.empty());
  EXPECT_EQ(d.refuse.size(), 1u);
}

TEST_F(MemoryPressureTest, ARequestThatFitsAlreadySuspendsNothing) {
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 8 * kGiB),
                                       Suspendable("a", 40 * kGiB)};
  EXPECT_TRUE(policy.Decide(vgpus, {{kGpu, 9 * kGiB}}, t0).empty());
}

TEST_F(MemoryPressureTest, ResumesWhatItSuspendedOnceThereIsRoomAndNobodyWaits) {
  VgpuView a = Suspendable("a", 0);
  a.suspend_state = "suspended";
  a.suspended_bytes = 10 * kGiB;
  VgpuView operators = Suspendable("operators", 0);  // suspended by `gpuslice suspend`, not by the policy
  operators.suspend_state = "suspended";
  operators.suspended_bytes = 1 * kGiB;
  policy.Suspended("a", t0);
  std::vector<VgpuView> vgpus = {Vgpu("lc", core::Priority::kLatencyCritical, 60 * kGiB), a, operators};
  EXPECT_TRUE(policy.Decide(vgpus, {{kGpu, 10 * kGiB}}, t0).resume.empty()) << "no headroom yet";
  EXPECT_EQ(policy.Decide(vgpus, {{kGpu, 11 * kGiB}}, t0).resume, std::vector<std::string>{"a"});
  vgpus[0] = Asking(vgpus[0], 1 * kGiB);
  EXPECT_TRUE(policy.Decide(vgpus, {{kGpu, 40 * kGiB}}, t0).resume.empty()) << "a request waits on its GPU";
}

TEST_F(MemoryPressureTest, AFreshlyResumedVgpuRunsItsMinimumBeforeItIsSuspendedAgain) {
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 8 * kGiB),
                                       Suspendable("a", 40 * kGiB)};
  policy.Suspended("a", t0);
  policy.Resumed("a", t0 + seconds(1));
  const auto soon = policy.Decide(vgpus, {{kGpu, 0}}, t0 + seconds(10));
  EXPECT_TRUE(soon.suspend.empty());
  EXPECT_TRUE(soon.refuse.empty()) << "the request waits: room may come";
  EXPECT_EQ(policy.Decide(vgpus, {{kGpu, 0}}, t0 + seconds(31)).suspend, std::vector<std::string>{"a"});
}

TEST_F(MemoryPressureTest, TheNodeSuspendsAtMostItsRatePerMinute) {
  MemoryPressurePolicy limited(MemoryPressureOptions{seconds(30), 2, 0});
  limited.Suspended("x", t0);
  limited.Suspended("y", t0 + seconds(10));
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 8 * kGiB),
                                       Suspendable("a", 40 * kGiB)};
  EXPECT_TRUE(limited.Decide(vgpus, {{kGpu, 0}}, t0 + seconds(30)).suspend.empty());
  EXPECT_EQ(limited.Decide(vgpus, {{kGpu, 0}}, t0 + seconds(61)).suspend, std::vector<std::string>{"a"});
}

TEST_F(MemoryPressureTest, TheHighestRequesterIsServedFirst) {
  // Room for one: the LC's request is served by suspending the lowest level;
  // the middle level's own request then finds nothing below it left.
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("middle", core::Priority::kBestEffort, 0, /*rank=*/1), 4 * kGiB),
                                       Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 8 * kGiB),
                                       Suspendable("low", 8 * kGiB)};
  const auto d = policy.Decide(vgpus, {{kGpu, 0}}, t0);
  EXPECT_EQ(d.suspend, std::vector<std::string>{"low"});
  ASSERT_EQ(d.refuse.size(), 1u);
  EXPECT_EQ(d.refuse[0].vgpu, "middle");
}

TEST_F(MemoryPressureTest, AVgpuThatIsItselfWaitingIsNoCandidate) {
  const std::vector<VgpuView> vgpus = {Asking(Vgpu("lc", core::Priority::kLatencyCritical, 0), 8 * kGiB),
                                       Asking(Suspendable("a", 40 * kGiB), 1 * kGiB)};
  EXPECT_TRUE(policy.Decide(vgpus, {{kGpu, 0}}, t0).suspend.empty());
}

}  // namespace
}  // namespace gpuslice::node
