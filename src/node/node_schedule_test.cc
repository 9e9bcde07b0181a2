#include "node/node_schedule.h"

#include "core/board_roster.h"
#include "core/pacing_board.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpuslice::node {
namespace {

using core::Priority;

class NodeScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuslice-schedule-test-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A vGPU on the given GPUs (identified by one distinguishing byte).
  void Create(const std::string& name, std::vector<uint8_t> gpus, uint32_t share = 100,
              Priority priority = Priority::kBestEffort) {
    core::VgpuSpec spec;
    spec.name = name;
    for (uint8_t g : gpus) {
      core::DeviceSpec d;
      d.uuid[0] = g;
      d.compute_share_pct = share;
      d.priority = priority;
      spec.devices.push_back(d);
    }
    bool created = false;
    auto dir = store_.CreateOrJoin(spec, true, &created);
    ASSERT_TRUE(dir.ok()) << dir.status().message();
  }

  core::VgpuHandle Open(const std::string& name) {
    auto h = core::VgpuHandle::Open(store_.DirOf(name), port::MappedFile::Access::kReadOnly);
    EXPECT_TRUE(h.ok()) << h.status().message();
    return std::move(h.value());
  }

  std::string root_;
  core::VgpuStore store_{""};
};

TEST_F(NodeScheduleTest, EmptyOrMissingStoreIsNothingToDo) {
  core::VgpuStore missing(root_ + "/nowhere");
  EXPECT_TRUE(ApplyNodeSchedule(missing).ok());
}

TEST_F(NodeScheduleTest, SharesOnOneGpuBecomeSlicesAndBumpGeneration) {
  store_ = core::VgpuStore(root_);
  Create("a", {1}, 30);
  Create("b", {1}, 70);
  core::VgpuHandle a = Open("a");
  core::VgpuHandle b = Open("b");
  const uint64_t gen_a = a.limits().generation;
  NodeScheduleResult result;
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, &result).ok());
  EXPECT_EQ(result.changed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.limits().devices[0].timeslice_us, 3000u);
  EXPECT_EQ(b.limits().devices[0].timeslice_us, 7000u);
  EXPECT_EQ(a.limits().generation, gen_a + 1);

  // Nothing changed: no generation bump, so processes re-apply nothing.
  result = {};
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, &result).ok());
  EXPECT_TRUE(result.changed.empty());
  EXPECT_EQ(a.limits().generation, gen_a + 1);
}

// The node's share mode reaches every vGPU's limits, where tenants read it
// and cannot write it; changing it is a change its processes must see.
TEST_F(NodeScheduleTest, TheShareModeIsWrittenToEveryVgpuOnTheGpu) {
  store_ = core::VgpuStore(root_);
  Create("a", {1}, 30);
  Create("b", {1}, 70);
  core::VgpuHandle a = Open("a");
  core::VgpuHandle b = Open("b");
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  EXPECT_EQ(a.limits().devices[0].flags & core::kDeviceFlagShareTurns, 0u) << "slices are the default";
  const uint64_t gen_a = a.limits().generation;

  policy::TimeslicePolicyConfig turns;
  turns.be_shares = policy::ShareMode::kTurns;
  NodeScheduleResult result;
  ASSERT_TRUE(ApplyNodeSchedule(store_, turns, &result).ok());
  EXPECT_EQ(result.changed, (std::vector<std::string>{"a", "b"}));
  for (core::VgpuHandle* h : {&a, &b}) {
    EXPECT_EQ(h->limits().devices[0].flags, core::kDeviceFlagPresent | core::kDeviceFlagShareTurns);
    EXPECT_EQ(h->limits().devices[0].timeslice_us, h == &a ? 3000u : 7000u) << "the slices stay the policy's";
  }
  EXPECT_EQ(a.limits().generation, gen_a + 1);

  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  EXPECT_EQ(a.limits().devices[0].flags, core::kDeviceFlagPresent);
  EXPECT_EQ(a.limits().generation, gen_a + 2);

  // The turn style is the node's too: every vGPU on the GPU gets it.
  policy::TimeslicePolicyConfig exclusive;
  exclusive.be_turns = policy::TurnStyle::kExclusive;
  ASSERT_TRUE(ApplyNodeSchedule(store_, exclusive).ok());
  for (core::VgpuHandle* h : {&a, &b}) {
    EXPECT_EQ(h->limits().devices[0].flags, core::kDeviceFlagPresent | core::kDeviceFlagExclusiveTurns);
  }
  EXPECT_EQ(a.limits().generation, gen_a + 3);
}

TEST_F(NodeScheduleTest, AChangeIsWrittenBeforeTheSlicesAndBumpedOnce) {
  store_ = core::VgpuStore(root_);
  Create("a", {1, 2}, 30);
  Create("b", {1}, 70);
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  core::VgpuHandle a = Open("a");
  core::VgpuHandle b = Open("b");
  const uint64_t gen_a = a.limits().generation;
  const uint64_t gen_b = b.limits().generation;

  // The share moves the slices of both vGPUs in the same pass; "a" is bumped
  // once for its values and its slices together.
  LimitsChange change;
  change.vgpu = "a";
  change.compute_share_pct = 70;
  change.memory_limit_bytes = 1 << 20;
  change.compute_cap_pct = {40, 60};
  NodeScheduleResult result;
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, &result, &change).ok());
  EXPECT_TRUE(change.written);
  EXPECT_EQ(result.changed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.limits().generation, gen_a + 1);
  EXPECT_EQ(b.limits().generation, gen_b + 1);
  EXPECT_EQ(a.limits().devices[0].timeslice_us, b.limits().devices[0].timeslice_us);
  EXPECT_EQ(a.limits().devices[1].memory_limit_bytes, 1u << 20);
  EXPECT_EQ(a.limits().devices[0].compute_cap_pct, 40u);
  EXPECT_EQ(a.limits().devices[1].compute_cap_pct, 60u);

  // A change that moves no slice is still bumped, once, and nobody else is.
  change = {};
  change.vgpu = "a";
  change.memory_limit_bytes = 2 << 20;
  result = {};
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, &result, &change).ok());
  EXPECT_EQ(result.changed, (std::vector<std::string>{"a"}));
  EXPECT_EQ(a.limits().generation, gen_a + 2);
  EXPECT_EQ(b.limits().generation, gen_b + 1);
  EXPECT_EQ(a.limits().devices[0].memory_limit_bytes, 2u << 20);
}

TEST_F(NodeScheduleTest, AChangeToAMissingVgpuIsRefusedAndNothingIsWritten) {
  store_ = core::VgpuStore(root_);
  Create("a", {1});
  LimitsChange change;
  change.vgpu = "gone";
  change.compute_share_pct = 50;
  NodeScheduleResult result;
  EXPECT_FALSE(ApplyNodeSchedule(store_, {}, &result, &change).ok());
  EXPECT_FALSE(change.written);
  EXPECT_TRUE(result.changed.empty());
}

TEST_F(NodeScheduleTest, EveryVgpuGetsTheRosterOfTheNodeReadOnly) {
  store_ = core::VgpuStore(root_);
  Create("serving", {1}, 100, Priority::kLatencyCritical);
  Create("train", {1, 2}, 30);
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  auto read = [&](const std::string& name) {
    std::ifstream in(store_.DirOf(name) + "/" + core::kRosterFileName);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string text = read("serving");
  EXPECT_EQ(text, read("train")) << "one roster for the node";
  std::ifstream node_copy(root_ + "/roster.d/roster");
  std::stringstream node_text;
  node_text << node_copy.rdbuf();
  EXPECT_EQ(node_text.str(), text) << "the node's copy, which Kubernetes mounts into pods";
  auto roster = core::ParseRoster(text);
  ASSERT_TRUE(roster.ok()) << roster.status().message();
  ASSERT_EQ(roster->size(), 3u) << text;  // serving on GPU 1, train on GPUs 1 and 2
  for (const core::RosterEntry& e : *roster) {
    struct stat st;
    ASSERT_EQ(stat((store_.DirOf(e.name) + "/limits").c_str(), &st), 0);
    EXPECT_EQ(e.vgpu_id, core::VgpuIdOf(e.name, st.st_ino)) << "the id its processes take on the boards";
    EXPECT_EQ(e.level, core::LevelWord(e.name == "serving" ? Priority::kLatencyCritical : Priority::kBestEffort, 0));
    EXPECT_EQ(e.weight, e.name == "serving" ? 100u : 30u);
  }
  struct stat st;
  ASSERT_EQ(stat((store_.DirOf("train") + "/roster").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);

  // Unchanged: not rewritten. A vGPU removed: gone from the others' rosters.
  const ino_t before = st.st_ino;
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  ASSERT_EQ(stat((store_.DirOf("train") + "/roster").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, before);
  std::filesystem::remove_all(store_.DirOf("serving"));
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  roster = core::ParseRoster(read("train"));
  ASSERT_TRUE(roster.ok());
  EXPECT_EQ(roster->size(), 2u);
}

TEST_F(NodeScheduleTest, LimitsStayReadOnlyOnDisk) {
  store_ = core::VgpuStore(root_);
  Create("a", {1});
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  struct stat st;
  ASSERT_EQ(stat((store_.DirOf("a") + "/limits").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(Open("a").limits().devices[0].timeslice_us, 10000u);
}

TEST_F(NodeScheduleTest, EachGpuIsScheduledOnItsOwn) {
  store_ = core::VgpuStore(root_);
  Create("both", {1, 2}, 50);
  Create("lc", {1}, 100, Priority::kLatencyCritical);
  Create("other", {2}, 50);
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  core::VgpuHandle both = Open("both");
  EXPECT_EQ(both.limits().devices[0].timeslice_us, 50u);    // lone BE beside an LC
  EXPECT_EQ(both.limits().devices[1].timeslice_us, 5000u);  // half of 10 ms
  EXPECT_EQ(Open("lc").limits().devices[0].timeslice_us, 5000000u);
  EXPECT_EQ(Open("other").limits().devices[0].timeslice_us, 5000u);
}

TEST_F(NodeScheduleTest, BesideAnLcOnlyVgpusWithAProcessOnTheGpuContend) {
  store_ = core::VgpuStore(root_);
  Create("lc", {1}, 100, Priority::kLatencyCritical);
  Create("busy", {1, 2}, 50);
  Create("idle", {1}, 50);
  Create("other", {2}, 50);
  GpuOccupancy occupancy;
  std::array<uint8_t, 16> gpu1{1}, gpu2{2};
  occupancy.gpus[gpu1].vgpus = {"lc", "busy"};  // GPU 2 not known: everyone there counts
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, nullptr, nullptr, &occupancy).ok());
  core::VgpuHandle busy = Open("busy");
  core::VgpuHandle idle = Open("idle");
  // The lone BE on GPU 1 keeps the tiny slice; the idle one would split the
  // period on arriving.
  EXPECT_EQ(busy.limits().devices[0].timeslice_us, 50u);
  EXPECT_EQ(busy.limits().devices[0].timeslice_beside_lc_us, 50u);
  EXPECT_EQ(idle.limits().devices[0].timeslice_us, 1000u);
  EXPECT_EQ(busy.limits().devices[1].timeslice_us, 5000u);  // GPU 2: no LC, shares
  EXPECT_EQ(busy.limits().devices[1].timeslice_beside_lc_us, 1000u);
  // ... and says so, so that its processes see a neighbour arrive.
  EXPECT_NE(busy.limits().devices[0].flags & core::kDeviceFlagLoneBestEffort, 0u);
  EXPECT_EQ(busy.limits().devices[1].flags & core::kDeviceFlagLoneBestEffort, 0u);
  EXPECT_EQ(idle.limits().devices[0].flags & core::kDeviceFlagLoneBestEffort, 0u);
  // The idle one's process arrives: both split the period.
  occupancy.gpus[gpu1].vgpus.insert("idle");
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, nullptr, nullptr, &occupancy).ok());
  EXPECT_EQ(busy.limits().devices[0].timeslice_us, 1000u);
  EXPECT_EQ(idle.limits().devices[0].timeslice_us, 1000u);
  EXPECT_EQ(busy.limits().devices[0].flags & core::kDeviceFlagLoneBestEffort, 0u);
  // A process of no vGPU on GPU 1 contends too, whoever is listed.
  occupancy.gpus[gpu1].vgpus = {"lc", "busy"};
  occupancy.gpus[gpu1].other_pids = {4242};
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, nullptr, nullptr, &occupancy).ok());
  EXPECT_GE(busy.limits().devices[0].timeslice_us, 1000u);
  // GPU 2 known and empty: "other" and "busy" there are both idle, and each
  // would split on arriving beside the other (no LC there: shares as before).
  occupancy.gpus[gpu2] = {};
  ASSERT_TRUE(ApplyNodeSchedule(store_, {}, nullptr, nullptr, &occupancy).ok());
  EXPECT_EQ(Open("other").limits().devices[0].timeslice_us, 5000u);
  EXPECT_EQ(Open("other").limits().devices[0].timeslice_beside_lc_us, 50u);
}

TEST_F(NodeScheduleTest, RemovalGivesTheGpuBack) {
  store_ = core::VgpuStore(root_);
  Create("a", {1}, 30);
  Create("b", {1}, 70);
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  core::VgpuHandle a = Open("a");
  ASSERT_EQ(a.limits().devices[0].timeslice_us, 3000u);
  auto removed = store_.RemoveIfUnused("b");
  ASSERT_TRUE(removed.ok() && removed.value());
  ASSERT_TRUE(ApplyNodeSchedule(store_).ok());
  EXPECT_EQ(a.limits().devices[0].timeslice_us, 10000u);
}

TEST_F(NodeScheduleTest, ConcurrentCallersConvergeOnTheLatestSet) {
  store_ = core::VgpuStore(root_);
  for (int i = 0; i < 4; ++i) Create("v" + std::to_string(i), {1}, 25);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { EXPECT_TRUE(ApplyNodeSchedule(store_).ok()); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Open("v" + std::to_string(i)).limits().devices[0].timeslice_us, 2500u);
}

TEST_F(NodeScheduleTest, CorruptedVgpuIsReportedAndOthersStillScheduled) {
  store_ = core::VgpuStore(root_);
  Create("a", {1});
  Create("bad", {1});
  const std::string bad = store_.DirOf("bad") + "/limits";
  ASSERT_EQ(chmod(bad.c_str(), 0644), 0);
  std::filesystem::resize_file(bad, 8);
  Status s = ApplyNodeSchedule(store_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad"), std::string::npos) << s.message();
  EXPECT_EQ(Open("a").limits().devices[0].timeslice_us, 10000u);
}

}  // namespace
}  // namespace gpuslice::node
