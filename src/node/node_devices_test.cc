#include "node/node_devices.h"

#include <gtest/gtest.h>

#include "node/vgpu_view.h"

namespace gpuslice::node {
namespace {

NodeDevices TwoGpus() {
  NodeDevices d;
  for (uint32_t i = 0; i < 2; ++i) {
    port::GpuInfo g;
    g.index = i;
    g.uuid[0] = 0xfa;
    g.uuid[15] = static_cast<uint8_t>(i);
    g.uuid_text = FormatGpuUuid(g.uuid.data());
    d.gpus.push_back(g);
  }
  return d;
}

TEST(NodeDevicesTest, SelectsByIndexAndUuidInTheOrderGiven) {
  const NodeDevices d = TwoGpus();
  auto chosen = d.Select({"1", d.gpus[0].uuid_text});
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  ASSERT_EQ(chosen->size(), 2u);
  EXPECT_EQ((*chosen)[0].index, 1u);
  EXPECT_EQ((*chosen)[1].index, 0u);
  EXPECT_EQ(d.Select({})->size(), 2u);
}

TEST(NodeDevicesTest, UnknownAndDuplicateGpusAreRefusedWithTheChoices) {
  const NodeDevices d = TwoGpus();
  auto unknown = d.Select({"7"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no GPU '7'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("0, 1"), std::string::npos);
  EXPECT_FALSE(d.Select({"0", "0"}).ok());
  EXPECT_FALSE(NodeDevices{}.Select({}).ok());
}

TEST(NodeDevicesTest, FormatsUuidsAsNvmlDoes) {
  uint8_t uuid[16] = {0xfa, 0xce, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b};
  EXPECT_EQ(FormatGpuUuid(uuid), "GPU-face0000-0000-0000-0000-00000000000b");
  EXPECT_NE(TwoGpus().Find(TwoGpus().gpus[1].uuid.data()), nullptr);
  EXPECT_EQ(TwoGpus().Find(uuid), nullptr);
}

}  // namespace
}  // namespace gpuslice::node
