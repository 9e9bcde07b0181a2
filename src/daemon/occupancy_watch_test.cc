#include "daemon/occupancy_watch.h"

#include <gtest/gtest.h>

#include <map>

namespace gpuslice::daemon {
namespace {

// Host pid -> (namespace 7, host pid + 1000): every process is in a container.
class ContainerTable final : public audit::ProcessTable {
 public:
  uint32_t ParentOf(uint32_t) const override { return 0; }
  std::optional<NamespacedPid> InNamespace(uint32_t pid) const override {
    if (pid == kGone) return std::nullopt;
    return NamespacedPid{7, pid + 1000};
  }
  static constexpr uint32_t kGone = 99;
};

node::VgpuView View(const std::string& name, std::vector<uint32_t> gpus, std::vector<uint32_t> host_pids) {
  node::VgpuView v;
  v.name = name;
  for (uint32_t g : gpus) {
    node::VgpuDeviceView d;
    d.gpu_index = g;
    v.devices.push_back(d);
  }
  for (uint32_t pid : host_pids) {
    node::VgpuProcessView p;
    p.pid = pid + 1000;
    p.pid_namespace = 7;
    v.processes.push_back(p);
  }
  return v;
}

std::vector<port::GpuInfo> Gpus() {
  std::vector<port::GpuInfo> gpus(2);
  for (uint32_t i = 0; i < 2; ++i) {
    gpus[i].index = i;
    gpus[i].uuid[0] = static_cast<uint8_t>(i + 1);
  }
  return gpus;
}

TEST(OccupancyOfTest, AVgpuIsOnTheGpusWhereTheDriverListsItsProcesses) {
  const std::vector<node::VgpuView> views = {View("a", {0, 1}, {10}), View("b", {0}, {20}), View("idle", {0}, {})};
  ClaimedPids claimed;
  const auto o = OccupancyOf(views, {{0, 10, 0}, {0, 20, 1 << 20}, {0, 10, 0}}, ContainerTable(), Gpus(), &claimed);
  EXPECT_EQ(claimed, (ClaimedPids{{{1}, {10, 20}}}));
  const auto& gpu0 = o.gpus.at({1});
  EXPECT_EQ(gpu0.vgpus, (std::set<std::string>{"a", "b"}));
  EXPECT_TRUE(gpu0.other_pids.empty());
  // GPU 1 is known and has no process: "a" is not on it.
  EXPECT_TRUE(o.gpus.at({2}).vgpus.empty());
}

TEST(OccupancyOfTest, AProcessNoLedgerOfTheGpuClaimsIsAContenderOfItsOwn) {
  // 30: in no ledger; 99: gone from /proc; 11: claimed by "b", which is not on GPU 1.
  const std::vector<node::VgpuView> views = {View("a", {0}, {10}), View("b", {0}, {11})};
  const auto o = OccupancyOf(views, {{0, 30, 0}, {0, ContainerTable::kGone, 0}, {1, 11, 0}}, ContainerTable(), Gpus());
  EXPECT_TRUE(o.gpus.at({1}).vgpus.empty());
  EXPECT_EQ(o.gpus.at({1}).other_pids, (std::set<uint32_t>{30, ContainerTable::kGone}));
  EXPECT_EQ(o.gpus.at({2}).other_pids, (std::set<uint32_t>{11}));
}

TEST(OccupancyOfTest, AForgedClaimAddsAContenderAndHidesNoOne) {
  // "thief" writes b's process into its own ledger: both count.
  const std::vector<node::VgpuView> views = {View("b", {0}, {20}), View("thief", {0}, {20})};
  const auto o = OccupancyOf(views, {{0, 20, 0}}, ContainerTable(), Gpus());
  EXPECT_EQ(o.gpus.at({1}).vgpus, (std::set<std::string>{"b", "thief"}));
}

TEST(OccupancyLingerTest, WhatWasSeenStaysForTheLingerAndThenGoes) {
  OccupancyLinger linger(30);
  node::GpuOccupancy seen;
  seen.gpus[{1}].vgpus = {"a"};
  seen.gpus[{1}].other_pids = {7};
  EXPECT_EQ(linger.Apply(seen, {}, 100), seen);
  const node::GpuOccupancy empty_gpu = [] {
    node::GpuOccupancy o;
    o.gpus[{1}];
    return o;
  }();
  // Gone from the driver's list: still there until 30 after it was last seen.
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 129), seen);
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 130), empty_gpu);
  // Seen again: the linger starts over from then.
  EXPECT_EQ(linger.Apply(seen, {}, 140), seen);
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 169), seen);
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 170), empty_gpu);
}

TEST(OccupancyLingerTest, AProcessThatJoinsALedgerStopsLingeringAsOneOfNone) {
  OccupancyLinger linger(30);
  node::GpuOccupancy first;
  first.gpus[{1}].other_pids = {7};  // an LC's process before it joined its ledger
  EXPECT_EQ(linger.Apply(first, {}, 100), first);
  node::GpuOccupancy joined;
  joined.gpus[{1}].vgpus = {"lc"};
  EXPECT_EQ(linger.Apply(joined, {{{1}, {7}}}, 101), joined);
}

TEST(OccupancyLingerTest, AnEndedProcessOfNoVgpuStopsLingering) {
  bool alive = true;
  OccupancyLinger linger(30, [&alive](uint32_t) { return alive; });
  node::GpuOccupancy seen;
  seen.gpus[{1}].other_pids = {7};
  EXPECT_EQ(linger.Apply(seen, {}, 100), seen);
  node::GpuOccupancy empty_gpu;
  empty_gpu.gpus[{1}];
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 101), seen);
  alive = false;
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 102), empty_gpu);
}

TEST(OccupancyLingerTest, WhatIsThereButIdleDoesNotLinger) {
  OccupancyLinger linger(30);
  node::GpuOccupancy seen;
  seen.gpus[{1}].vgpus = {"a", "b"};
  seen.gpus[{1}].other_pids = {7};
  EXPECT_EQ(linger.Apply(seen, {}, 100), seen);
  // "a" and pid 7 are listed but idle; "b" went away.
  node::GpuOccupancy empty_gpu;
  empty_gpu.gpus[{1}];
  node::GpuOccupancy idle;
  idle.gpus[{1}].vgpus = {"a"};
  idle.gpus[{1}].other_pids = {7};
  node::GpuOccupancy b_lingers;
  b_lingers.gpus[{1}].vgpus = {"b"};
  EXPECT_EQ(linger.Apply(empty_gpu, {}, 101, idle), b_lingers);
}

// Processes 1 and 2 on GPU 0; what each pass finds busy.
TEST(ProcessActivityTest, AListedProcessIsIdleOnceItHasRunNothingForTheWindow) {
  ProcessActivity activity(10);
  const std::vector<audit::GpuProcess> listed = {{0, 1, 0}, {0, 2, 0}};
  auto split = [&](uint64_t now) {
    std::vector<audit::GpuProcess> active, idle;
    activity.Split(listed, now, &active, &idle);
    std::vector<uint32_t> idle_pids;
    for (const auto& p : idle) idle_pids.push_back(p.pid);
    EXPECT_EQ(active.size() + idle.size(), listed.size());
    return idle_pids;
  };
  activity.AddSamples(0, std::vector<port::ProcessUtilization>{}, 100);
  EXPECT_TRUE(split(100).empty());  // newly listed: active for the window
  activity.AddSamples(0, std::vector<port::ProcessUtilization>{{1, 40, 0}, {2, 0, 0}}, 105);
  EXPECT_TRUE(split(109).empty());
  EXPECT_EQ(split(110), (std::vector<uint32_t>{2}));  // a 0% sample is no work
  EXPECT_EQ(split(114), (std::vector<uint32_t>{2}));
  EXPECT_EQ(split(115), (std::vector<uint32_t>{1, 2}));
  // It runs again: active at once.
  activity.AddSamples(0, std::vector<port::ProcessUtilization>{{2, 5, 0}}, 116);
  EXPECT_EQ(split(116), (std::vector<uint32_t>{1}));
  // Samples that cannot be read: nothing is idle.
  activity.AddSamples(0, std::nullopt, 130);
  EXPECT_TRUE(split(130).empty());
}

TEST(ProcessActivityTest, AWindowOfZeroNeverJudgesAProcessIdle) {
  ProcessActivity activity(0);
  std::vector<audit::GpuProcess> active, idle;
  activity.AddSamples(0, std::vector<port::ProcessUtilization>{}, 0);
  activity.Split({{0, 1, 0}}, 1'000'000'000'000, &active, &idle);
  EXPECT_TRUE(idle.empty());
}

TEST(OccupancyCellTest, SetSaysWhetherAnythingChanged) {
  node::OccupancyCell cell;
  EXPECT_FALSE(cell.Get().has_value());
  node::GpuOccupancy o;
  EXPECT_TRUE(cell.Set(o));
  EXPECT_FALSE(cell.Set(o));
  o.gpus[{1}].other_pids = {5};
  EXPECT_TRUE(cell.Set(o));
  EXPECT_EQ(cell.Get()->gpus.at({1}).other_pids, (std::set<uint32_t>{5}));
}

}  // namespace
}  // namespace gpuslice::daemon
