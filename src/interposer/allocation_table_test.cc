#include "interposer/allocation_table.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpuslice::interposer {
namespace {

TEST(AllocationTableTest, InsertFindErase) {
  AllocationTable t;
  ASSERT_TRUE(t.Init());
  ASSERT_TRUE(t.Insert(0x7f0000001000, AllocationKind::kDevice, {4096, 2, 0}));
  AllocationRecord r;
  ASSERT_TRUE(t.Find(0x7f0000001000, AllocationKind::kDevice, &r));
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.device, 2u);
  EXPECT_FALSE(t.Find(0x7f0000001000, AllocationKind::kManaged, &r));  // kinds are separate
  ASSERT_TRUE(t.Erase(0x7f0000001000, AllocationKind::kDevice, &r));
  EXPECT_FALSE(t.Erase(0x7f0000001000, AllocationKind::kDevice, &r));  // double free uncharges once
  EXPECT_FALSE(t.Find(0x7f0000001000, AllocationKind::kDevice, &r));
}

TEST(AllocationTableTest, TombstonesAreReusedSoChurnNeverFillsTheTable) {
  AllocationTable t;
  ASSERT_TRUE(t.Init());
  AllocationRecord r;
  for (uint64_t i = 0; i < 3 * (1u << AllocationTable::kCapacityLog2); ++i) {
    ASSERT_TRUE(t.Insert(0x1000 + i * 512, AllocationKind::kDevice, {512, 0, 0})) << i;
    ASSERT_TRUE(t.Erase(0x1000 + i * 512, AllocationKind::kDevice, &r)) << i;
  }
}

TEST(AllocationTableTest, AFullTableRefusesUntilAnEntryIsFreed) {
  AllocationTable t;
  ASSERT_TRUE(t.Init(2));  // four entries
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(t.Insert(0x1000 + i * 512, AllocationKind::kDevice, {512, 0, 0})) << i;
  EXPECT_FALSE(t.Insert(0x9000, AllocationKind::kDevice, {512, 0, 0}));
  AllocationRecord r;
  EXPECT_FALSE(t.Find(0x9000, AllocationKind::kDevice, &r));
  ASSERT_TRUE(t.Erase(0x1200, AllocationKind::kDevice, &r));
  EXPECT_TRUE(t.Insert(0x9000, AllocationKind::kDevice, {512, 0, 0}));
  EXPECT_TRUE(t.Find(0x9000, AllocationKind::kDevice, &r));
}

TEST(AllocationTableTest, ClearForgetsEverything) {
  AllocationTable t;
  ASSERT_TRUE(t.Init());
  ASSERT_TRUE(t.Insert(42, AllocationKind::kVmmHandle, {1, 0, 0}));
  t.Clear();
  AllocationRecord r;
  EXPECT_FALSE(t.Find(42, AllocationKind::kVmmHandle, &r));
}

TEST(AllocationTableTest, ConcurrentThreadsKeepTheirOwnKeys) {
  AllocationTable t;
  ASSERT_TRUE(t.Init());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      AllocationRecord r;
      for (uint64_t i = 0; i < 20000; ++i) {
        const uint64_t key = (static_cast<uint64_t>(th) << 40) | (i << 9);
        if (!t.Insert(key, AllocationKind::kDevice, {i + 1, static_cast<uint32_t>(th), 0})) ++failures;
        if (!t.Erase(key, AllocationKind::kDevice, &r) || r.bytes != i + 1 || r.device != static_cast<uint32_t>(th)) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace gpuslice::interposer
