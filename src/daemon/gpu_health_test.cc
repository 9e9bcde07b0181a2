#include "daemon/gpu_health.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

namespace gpuslice::daemon {
namespace {

using std::chrono::seconds;

TEST(GpuHealthTest, ApplicationXidsAreCountedButLeaveTheGpuHealthy) {
  for (uint64_t xid : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(IsCriticalXid(xid)) << xid;
  for (uint64_t xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 999}) EXPECT_TRUE(IsCriticalXid(xid)) << xid;
  GpuHealth h(seconds(60));
  const auto t0 = GpuHealth::Clock::now();
  h.OnXid(0, 13, t0);
  h.OnXid(0, 31, t0);
  const auto s = h.Snapshot();
  EXPECT_TRUE(s.at(0).healthy);
  EXPECT_EQ(s.at(0).last_xid, 0u);
  EXPECT_EQ(s.at(0).xid_counts.at(13), 1u);
}

TEST(GpuHealthTest, ACriticalXidMarksOnlyItsGpuUnhealthyWithTheXid) {
  GpuHealth h(seconds(60));
  const auto t0 = GpuHealth::Clock::now();
  h.OnXid(1, 79, t0);
  const auto s = h.Snapshot();
  EXPECT_FALSE(s.at(1).healthy);
  EXPECT_EQ(s.at(1).last_xid, 79u);
  EXPECT_NE(s.at(1).detail.find("XID 79"), std::string::npos);
  EXPECT_FALSE(s.contains(0));  // never reported: healthy
}

TEST(GpuHealthTest, RecoversAfterAQuietPeriodAndAnotherXidRestartsIt) {
  GpuHealth h(seconds(60));
  const auto t0 = GpuHealth::Clock::now();
  h.OnXid(0, 48, t0);
  h.Tick(t0 + seconds(59));
  EXPECT_FALSE(h.Snapshot().at(0).healthy);
  h.OnXid(0, 48, t0 + seconds(59));  // the quiet period starts again
  h.Tick(t0 + seconds(61));
  EXPECT_FALSE(h.Snapshot().at(0).healthy);
  h.Tick(t0 + seconds(119));
  const auto s = h.Snapshot();
  EXPECT_TRUE(s.at(0).healthy);
  EXPECT_TRUE(s.at(0).detail.empty());
  EXPECT_EQ(s.at(0).xid_counts.at(48), 2u);  // counts survive recovery
}

TEST(GpuHealthTest, QuietPeriodZeroNeverRecoversOnItsOwnButTheOperatorCanClear) {
  GpuHealth h(seconds(0));
  const auto t0 = GpuHealth::Clock::now();
  h.OnXid(0, 79, t0);
  h.OnXid(1, 79, t0);
  h.Tick(t0 + seconds(100000));
  EXPECT_FALSE(h.Snapshot().at(0).healthy);
  h.Clear({1});
  EXPECT_FALSE(h.Snapshot().at(0).healthy);
  EXPECT_TRUE(h.Snapshot().at(1).healthy);
  h.Clear({});
  EXPECT_TRUE(h.Snapshot().at(0).healthy);
}

// What the daemon stores (node/gpu_health_file.h) follows every change of
// health, and only those: an application XID changes nothing to store.
TEST(GpuHealthTest, EveryChangeOfHealthIsReportedForStoringAndARestoredMarkHolds) {
  GpuHealth h(seconds(60));
  std::vector<std::map<uint32_t, bool>> reported;
  h.OnChange([&](const std::map<uint32_t, GpuHealth::State>& s) {
    std::map<uint32_t, bool> healthy;
    for (const auto& [gpu, state] : s) healthy[gpu] = state.healthy;
    reported.push_back(healthy);
  });
  const auto t0 = GpuHealth::Clock::now();
  h.Restore(2, 79, t0 - seconds(30));
  EXPECT_TRUE(reported.empty()) << "a restored mark is what the file already says";
  EXPECT_FALSE(h.Snapshot().at(2).healthy);
  EXPECT_EQ(h.Snapshot().at(2).last_xid, 79u);

  h.OnXid(0, 13, t0);  // an application error
  EXPECT_TRUE(reported.empty());
  h.OnXid(0, 48, t0);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported.back(), (std::map<uint32_t, bool>{{0, false}, {2, false}}));
  h.Clear({0});
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_EQ(reported.back(), (std::map<uint32_t, bool>{{0, true}, {2, false}}));
  h.Clear({0});  // already healthy: nothing changed
  EXPECT_EQ(reported.size(), 2u);
  // The restored GPU's quiet period runs from its XID, not from the restart.
  h.Tick(t0 + seconds(31));
  ASSERT_EQ(reported.size(), 3u);
  EXPECT_EQ(reported.back(), (std::map<uint32_t, bool>{{0, true}, {2, true}}));
}

// The daemon writes one file from each call: two at once would share its
// temporary name, and an older snapshot written last would stay.
TEST(GpuHealthTest, ChangeCallsNeverOverlapAndTheLastSeesTheLatestState) {
  GpuHealth h(seconds(60));
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::map<uint32_t, GpuHealth::State> last;
  h.OnChange([&](const std::map<uint32_t, GpuHealth::State>& s) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    last = s;
    // Stay inside a while, as a file write would; a spin, not sched_yield,
    // which beside busy processes gives up the CPU for a whole timeslice
    // each time (100,000 yields took minutes in a loaded CI run).
    std::atomic<int> spin{0};
    while (spin.fetch_add(1, std::memory_order_relaxed) < 2000) {
    }
    inside.fetch_sub(1);
  });
  const auto t0 = GpuHealth::Clock::now();
  std::thread marker([&] {
    for (int i = 0; i < 5000; ++i) h.OnXid(i % 4, 79, t0);
  });
  for (int i = 0; i < 5000; ++i) h.Clear({static_cast<uint32_t>(i % 4)});
  marker.join();
  EXPECT_FALSE(overlapped);
  const auto now = h.Snapshot();
  ASSERT_EQ(last.size(), now.size());
  for (const auto& [gpu, state] : now) EXPECT_EQ(last.at(gpu).healthy, state.healthy) << "GPU " << gpu;
}

}  // namespace
}  // namespace gpuslice::daemon
