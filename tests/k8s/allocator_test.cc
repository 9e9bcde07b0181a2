// The GPU choice shared by the extender and the plugin: fitting, packing
// policies, and topology for multi-GPU containers.
#include "k8s/allocator.h"

#include <gtest/gtest.h>

#include "k8s/names.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using testing::ReadFixture;

ContainerRequest Request(uint32_t vcore, uint64_t vmemory) {
  ContainerRequest r;
  r.name = "c";
  r.vcore = vcore;
  r.vmemory_units = vmemory;
  return r;
}

std::vector<GpuState> Free(uint32_t n, uint64_t units = 561) {
  std::vector<GpuState> gpus;
  for (uint32_t i = 0; i < n; ++i) gpus.push_back({i, true, 0, 0, units});
  return gpus;
}

NodeTopology Fixture(const char* name) {
  auto topo = ParseTopology(ReadFixture(name));
  EXPECT_TRUE(topo.ok()) << topo.status().message();
  return *topo;
}

TEST(Allocator, BinpackFillsTheFullerGpuSpreadTheEmptier) {
  std::vector<GpuState> gpus = Free(2);
  gpus[1].vcore_used = 60;
  gpus[1].vmemory_used = 200;
  auto packed = ChooseGpus(gpus, nullptr, Request(30, 16), PackingPolicy::kBinpack);
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed->gpus, std::vector<uint32_t>{1});
  auto spread = ChooseGpus(gpus, nullptr, Request(30, 16), PackingPolicy::kSpread);
  ASSERT_TRUE(spread.ok());
  EXPECT_EQ(spread->gpus, std::vector<uint32_t>{0});
  EXPECT_GT(packed->score, 0.0);
  EXPECT_LE(packed->score, 1.0);
}

TEST(Allocator, SkipsGpusThatDoNotFitAndSaysWhy) {
  std::vector<GpuState> gpus = Free(3, 100);
  gpus[0].vcore_used = 80;    // too little vcore
  gpus[1].vmemory_used = 95;  // too little memory
  gpus[2].healthy = false;    // unhealthy
  auto none = ChooseGpus(gpus, nullptr, Request(30, 16), PackingPolicy::kBinpack);
  ASSERT_FALSE(none.ok());
  const std::string m = none.status().message();
  EXPECT_NE(m.find("needs 1 GPU(s) with 30 vcore and 16 vmemory units free"), std::string::npos) << m;
  EXPECT_NE(m.find("GPU 0 20 vcore/100 vmemory free"), std::string::npos) << m;
  EXPECT_NE(m.find("GPU 1 100 vcore/5 vmemory free"), std::string::npos) << m;
  EXPECT_NE(m.find("GPU 2 unhealthy"), std::string::npos) << m;
  gpus[2].healthy = true;
  auto some = ChooseGpus(gpus, nullptr, Request(30, 16), PackingPolicy::kBinpack);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->gpus, std::vector<uint32_t>{2});
}

TEST(Allocator, TwoGpusPreferAnNvlinkPair) {
  const NodeTopology four = Fixture("devices-4gpu-two-nvlink-pairs.json");
  std::vector<GpuState> gpus = Free(4);
  // All free: both NVLink pairs tie; the lowest indices win.
  auto first = ChooseGpus(gpus, &four, Request(200, 0), PackingPolicy::kBinpack);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->gpus, (std::vector<uint32_t>{0, 1}));
  // GPU 0 has a small tenant: a whole-GPU request cannot have it, and
  // {1,2} (PCIe host bridge) loses to the other NVLink pair {2,3}.
  gpus[0].vcore_used = 10;
  auto second = ChooseGpus(gpus, &four, Request(200, 0), PackingPolicy::kBinpack);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->gpus, (std::vector<uint32_t>{2, 3}));
  // With GPUs 0 and 3 taken, only {1,2} is left: across a PCIe host bridge.
  std::vector<GpuState> avail = Free(4);
  avail[0].vcore_used = 10;
  avail[3].vcore_used = 10;
  auto fourth = ChooseGpus(avail, &four, Request(200, 0), PackingPolicy::kBinpack);
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(fourth->gpus, (std::vector<uint32_t>{1, 2}));
  EXPECT_LT(fourth->score, second->score);  // a PCIe pair scores below an NVLink pair
}

TEST(Allocator, NvlinkNodeOutscoresPcieNodeForMultiGpu) {
  const NodeTopology nvlink = Fixture("devices-2gpu-nvlink.json");
  const NodeTopology pcie = Fixture("devices-2gpu-pcie.json");
  auto a = ChooseGpus(Free(2), &nvlink, Request(200, 64), PackingPolicy::kBinpack);
  auto b = ChooseGpus(Free(2), &pcie, Request(200, 64), PackingPolicy::kBinpack);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->score, b->score + 0.3);
}

TEST(Allocator, SixteenGpusUseTheGreedySearchAndStillFindTheNvlinkGroup) {
  NodeTopology topo;
  for (uint32_t i = 0; i < 16; ++i) topo.gpus.push_back({i, "GPU-" + std::to_string(i), "", 1ull << 36, ""});
  for (uint32_t a = 0; a < 16; ++a) {
    for (uint32_t b = a + 1; b < 16; ++b) {
      const bool fast = a >= 8 && b >= 8;
      topo.links.push_back({a, b, fast ? LinkType::kNvlink : LinkType::kSystem, fast ? 18u : 0u});
    }
  }
  auto chosen = ChooseGpus(Free(16), &topo, Request(800, 0), PackingPolicy::kBinpack);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->gpus, (std::vector<uint32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(Allocator, CheckPlacementNamesTheProblem) {
  std::vector<GpuState> gpus = Free(2, 100);
  gpus[1].vcore_used = 90;
  EXPECT_TRUE(CheckPlacement(gpus, {0}, Request(50, 8)).ok());
  EXPECT_NE(CheckPlacement(gpus, {0, 1}, Request(50, 8)).message().find("needs 1 GPU(s) but 2 were chosen"),
            std::string::npos);
  EXPECT_NE(CheckPlacement(gpus, {1}, Request(50, 8)).message().find("GPU 1 has 10 vcore free, the container needs 50"),
            std::string::npos);
  EXPECT_NE(CheckPlacement(gpus, {7}, Request(50, 8)).message().find("no GPU 7"), std::string::npos);
  EXPECT_NE(CheckPlacement(gpus, {0, 0}, Request(200, 0)).message().find("chosen twice"), std::string::npos);
}

TEST(Allocator, PlacePodSeesEarlierContainers) {
  PodRequest pod;
  pod.containers = {Request(60, 50), Request(60, 50)};
  pod.containers[0].name = "a";
  pod.containers[1].name = "b";
  auto placed = PlacePod(Free(2, 100), nullptr, pod, PackingPolicy::kBinpack);
  ASSERT_TRUE(placed.ok());
  EXPECT_NE(placed->gpus.at("a"), placed->gpus.at("b"));  // 60 + 60 > 100 on one GPU
  auto none = PlacePod(Free(1, 100), nullptr, pod, PackingPolicy::kBinpack);
  EXPECT_FALSE(none.ok());
}

TEST(Allocator, ApplyAndTakeBack) {
  std::vector<GpuState> gpus = Free(2, 100);
  ApplyPlacement(gpus, {0, 1}, Request(200, 40));
  EXPECT_EQ(gpus[0].vcore_used, 100u);
  EXPECT_EQ(gpus[1].vmemory_used, 20u);
  ApplyPlacement(gpus, {0, 1}, Request(200, 40), -1);
  EXPECT_EQ(gpus[0].vcore_used, 0u);
  EXPECT_EQ(gpus[1].vmemory_used, 0u);
  EXPECT_FALSE(ParsePackingPolicy("tight").ok());
}

}  // namespace
}  // namespace gpuslice::k8s
