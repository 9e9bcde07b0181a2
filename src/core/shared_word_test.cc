#include "core/shared_word.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace gpuslice::core {
namespace {

TEST(SharedWordTest, LoadsSeeStoresOfEveryOrdering) {
  uint64_t word = 0;
  StoreRelaxed(word, 1);
  EXPECT_EQ(LoadRelaxed(word), 1u);
  StoreRelease(word, 2);
  EXPECT_EQ(LoadAcquire(word), 2u);
  StoreSeqCst(word, 3);
  EXPECT_EQ(LoadSeqCst(word), 3u);
  const uint64_t& read_only = word;  // a PROT_READ mapping's word is only loaded
  EXPECT_EQ(LoadAcquire(read_only), 3u);
}

TEST(SharedWordTest, FetchAddReturnsTheValueBefore) {
  uint32_t word = 5;
  EXPECT_EQ(FetchAddRelaxed(word, 1), 5u);
  EXPECT_EQ(FetchAddRelease(word, 1), 6u);
  EXPECT_EQ(FetchAddAcqRel(word, ~0u), 7u);  // adding ~0 is subtracting one (the board's busy count)
  EXPECT_EQ(FetchAddSeqCst(word, 2), 6u);
  EXPECT_EQ(FetchSubSeqCst(word, 3), 8u);
  EXPECT_EQ(word, 5u);
}

TEST(SharedWordTest, CompareExchangeLoadsTheCurrentValueOnFailure) {
  uint64_t word = 10;
  uint64_t expected = 9;
  EXPECT_FALSE(CompareExchangeSeqCst(word, expected, 20));
  EXPECT_EQ(expected, 10u);
  EXPECT_TRUE(CompareExchangeAcqRel(word, expected, 20));
  EXPECT_EQ(word, 20u);
  while (!CompareExchangeWeakAcqRel(word, expected, 30)) {
  }
  EXPECT_EQ(word, 30u);
}

TEST(SharedWordTest, RaiseToNeverLowersAWord) {
  uint64_t word = 100;
  RaiseToAcqRel(word, 50);
  EXPECT_EQ(word, 100u);
  RaiseToSeqCst(word, 150);
  EXPECT_EQ(word, 150u);
}

TEST(SharedWordTest, RacingRaisesLeaveTheHighest) {
  uint64_t word = 0;
  std::vector<std::thread> threads;
  for (uint64_t t = 1; t <= 8; ++t) {
    threads.emplace_back([&word, t] {
      for (uint64_t i = 0; i < 10'000; ++i) RaiseToAcqRel(word, i * 8 + t);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(word, 9'999u * 8 + 8);
}

}  // namespace
}  // namespace gpuslice::core
