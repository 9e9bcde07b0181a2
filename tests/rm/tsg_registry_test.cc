#include "rm/tsg_registry.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpuslice::rm {
namespace {

struct AllocCall {
  uint32_t params[8] = {};
  Nvos64 a{};
  AllocCall(NvHandle client, NvHandle object, uint32_t klass, uint32_t engine, uint32_t status = kNvOk) {
    params[kChannelGroupEngineTypeWord] = engine;
    a.hRoot = client;
    a.hObjectParent = client;
    a.hObjectNew = object;
    a.hClass = klass;
    a.pAllocParms = reinterpret_cast<uint64_t>(params);
    a.paramsSize = sizeof params;
    a.status = status;
  }
};

std::vector<TsgRef> All(const TsgRegistry& r) {
  std::vector<TsgRef> out(TsgRegistry::kCapacity);
  out.resize(r.Snapshot(out.data(), TsgRegistry::kCapacity));
  return out;
}

TEST(TsgRegistryTest, LearnsChannelGroupsFromSuccessfulAllocs) {
  TsgRegistry r;
  AllocCall compute(0xc1, 0x10, kClassChannelGroup, kEngineTypeGraphics);
  r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &compute.a, 0, 2);
  auto tsgs = All(r);
  ASSERT_EQ(tsgs.size(), 1u);
  EXPECT_EQ(tsgs[0].fd, 7);
  EXPECT_EQ(tsgs[0].client, 0xc1u);
  EXPECT_EQ(tsgs[0].handle, 0x10u);
  EXPECT_EQ(tsgs[0].engine_type, kEngineTypeGraphics);
  EXPECT_EQ(tsgs[0].device, 2);
}

TEST(TsgRegistryTest, IgnoresOtherClassesFailuresAndOtherIoctls) {
  TsgRegistry r;
  AllocCall channel(0xc1, 0x11, 0xC86F, 0);  // a GPFIFO channel, not a group
  AllocCall refused(0xc1, 0x12, kClassChannelGroup, 1, kNvErrInsufficientPermissions);
  AllocCall ok(0xc1, 0x13, kClassChannelGroup, 1);
  const uint64_t epoch = r.epoch();
  r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &channel.a, 0, -1);
  r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &refused.a, 0, -1);
  r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &ok.a, -1, -1);            // ioctl failed
  r.Observe(7, IoctlRequest(kEscRmControl, sizeof(Nvos64)), &ok.a, 0, -1);           // not an alloc
  r.Observe(7, (3ul << 30) | (48ul << 16) | ('G' << 8) | kEscRmAlloc, &ok.a, 0, -1);  // another driver's 'G'
  EXPECT_TRUE(All(r).empty());
  EXPECT_EQ(r.epoch(), epoch);
}

TEST(TsgRegistryTest, ParamsSizeZeroAsDriver580SendsIt) {
  // Measured on an H200 with driver 580: every NV_ESC_RM_ALLOC from libcuda
  // has paramsSize 0, channel groups included.
  TsgRegistry r;
  AllocCall compute(0xc1, 0x10, kClassChannelGroup, kEngineTypeGraphics);
  compute.a.paramsSize = 0;
  r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &compute.a, 0, -1);
  ASSERT_EQ(All(r).size(), 1u);
  EXPECT_EQ(All(r)[0].engine_type, kEngineTypeGraphics);
  AllocCall no_params(0xc1, 0x11, kClassChannelGroup, kEngineTypeGraphics);
  no_params.a.pAllocParms = 0;
  r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &no_params.a, 0, -1);
  EXPECT_EQ(All(r).size(), 1u);
}

TEST(TsgRegistryTest, ReadsTheOlderNvos21Form) {
  TsgRegistry r;
  uint32_t params[4] = {0, 0, 0, 11};
  Nvos21 a{0xc1, 0xc1, 0x20, kClassChannelGroup, reinterpret_cast<uint64_t>(params), sizeof params, 0};
  r.Observe(3, IoctlRequest(kEscRmAlloc, sizeof a), &a, 0, -1);
  auto tsgs = All(r);
  ASSERT_EQ(tsgs.size(), 1u);
  EXPECT_EQ(tsgs[0].engine_type, 11u);
}

TEST(TsgRegistryTest, FreeOfTheGroupOrItsClientForgetsIt) {
  TsgRegistry r;
  AllocCall a(0xc1, 0x10, kClassChannelGroup, 1), b(0xc1, 0x11, kClassChannelGroup, 11),
      c(0xc2, 0x10, kClassChannelGroup, 1);
  for (auto* x : {&a, &b, &c}) r.Observe(7, IoctlRequest(kEscRmAlloc, sizeof(Nvos64)), &x->a, 0, -1);
  ASSERT_EQ(All(r).size(), 3u);
  Nvos00 free_a{0xc1, 0xc1, 0x10, kNvOk};
  r.Observe(7, IoctlRequest(kEscRmFree, sizeof free_a), &free_a, 0, -1);
  auto left = All(r);
  ASSERT_EQ(left.size(), 2u);
  Nvos00 free_client{0xc1, 0, 0xc1, kNvOk};
  r.Observe(7, IoctlRequest(kEscRmFree, sizeof free_client), &free_client, 0, -1);
  left = All(r);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].client, 0xc2u);
  // Same handles on another descriptor are another client's.
  Nvos00 other_fd{0xc2, 0xc2, 0x10, kNvOk};
  r.Observe(8, IoctlRequest(kEscRmFree, sizeof other_fd), &other_fd, 0, -1);
  EXPECT_EQ(All(r).size(), 1u);
}

TEST(TsgRegistryTest, SerialsAreNeverReusedAndEpochMoves) {
  TsgRegistry r;
  r.Add({1, 0xc1, 0x10, 1, 0, 0});
  const uint64_t first = All(r)[0].serial;
  const uint64_t epoch = r.epoch();
  r.Remove(1, 0xc1, 0x10);
  r.Add({1, 0xc1, 0x10, 1, 0, 0});
  EXPECT_NE(All(r)[0].serial, first);
  EXPECT_GT(r.epoch(), epoch);
}

TEST(TsgRegistryTest, ConcurrentAddRemoveAndSnapshotStayConsistent) {
  TsgRegistry r;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint32_t i = 0; i < 20000; ++i) {
      r.Add({5, 0xc1, 0x1000 + (i % 64), 1, static_cast<int>(i % 64), 0});
      if (i >= 32) r.Remove(5, 0xc1, 0x1000 + ((i - 32) % 64));
    }
    stop = true;
  });
  while (!stop) {
    for (const TsgRef& t : All(r)) {
      // A torn read would pair a handle with another entry's device.
      ASSERT_EQ(t.handle - 0x1000, static_cast<uint32_t>(t.device));
      ASSERT_EQ(t.fd, 5);
    }
  }
  writer.join();
}

}  // namespace
}  // namespace gpuslice::rm
