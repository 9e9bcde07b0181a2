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
  const auto o = OccupancyOf(views, {{0, 10, 0}, {0, 20, 1 << 20}, {0, 10, 0}}, ContainerTable(), Gpus());
  const auto& gpu0 = o.gpus.at({1});
  EXPECT_EQ(gpu0.vgpus, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(gpu0.other_processes, 0u);
  // GPU 1 is known and has no process: "a" is not on it.
  EXPECT_TRUE(o.gpus.at({2}).vgpus.empty());
}

TEST(OccupancyOfTest, AProcessNoLedgerOfTheGpuClaimsIsAContenderOfItsOwn) {
  // 30: in no ledger; 99: gone from /proc; 11: claimed by "b", which is not on GPU 1.
  const std::vector<node::VgpuView> views = {View("a", {0}, {10}), View("b", {0}, {11})};
  const auto o = OccupancyOf(views, {{0, 30, 0}, {0, ContainerTable::kGone, 0}, {1, 11, 0}}, ContainerTable(), Gpus());
  EXPECT_TRUE(o.gpus.at({1}).vgpus.empty());
  EXPECT_EQ(o.gpus.at({1}).other_processes, 2u);
  EXPECT_EQ(o.gpus.at({2}).other_processes, 1u);
}

TEST(OccupancyOfTest, AForgedClaimAddsAContenderAndHidesNoOne) {
  // "thief" writes b's process into its own ledger: both count.
  const std::vector<node::VgpuView> views = {View("b", {0}, {20}), View("thief", {0}, {20})};
  const auto o = OccupancyOf(views, {{0, 20, 0}}, ContainerTable(), Gpus());
  EXPECT_EQ(o.gpus.at({1}).vgpus, (std::set<std::string>{"b", "thief"}));
}

TEST(OccupancyCellTest, SetSaysWhetherAnythingChanged) {
  node::OccupancyCell cell;
  EXPECT_FALSE(cell.Get().has_value());
  node::GpuOccupancy o;
  EXPECT_TRUE(cell.Set(o));
  EXPECT_FALSE(cell.Set(o));
  o.gpus[{1}].other_processes = 1;
  EXPECT_TRUE(cell.Set(o));
  EXPECT_EQ(cell.Get()->gpus.at({1}).other_processes, 1u);
}

}  // namespace
}  // namespace gpuslice::daemon
