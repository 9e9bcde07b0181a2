#include "policy/timeslice_policy.h"

#include <gtest/gtest.h>

namespace gpuslice::policy {
namespace {

using core::Priority;

TEST(TimeslicePolicyTest, BeSharesSplitThePeriod) {
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 30}, {"b", Priority::kBestEffort, 70}}),
            (std::vector<uint64_t>{3000, 7000}));
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 10}, {"b", Priority::kBestEffort, 90}}),
            (std::vector<uint64_t>{1000, 9000}));
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 20},
                               {"b", Priority::kBestEffort, 30},
                               {"c", Priority::kBestEffort, 50}}),
            (std::vector<uint64_t>{2000, 3000, 5000}));
}

TEST(TimeslicePolicyTest, SharesAreRelativeWeights) {
  // 1:3 whatever the absolute numbers.
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 10}, {"b", Priority::kBestEffort, 30}}),
            (std::vector<uint64_t>{2500, 7500}));
}

TEST(TimeslicePolicyTest, SlicesNeverGoBelowTheSwitchCostFloor) {
  auto s = ComputeTimeslices({{"a", Priority::kBestEffort, 1}, {"b", Priority::kBestEffort, 99}});
  EXPECT_EQ(s[0], 1000u);
}

TEST(TimeslicePolicyTest, LoneBeBesideLcGetsTheSmallestSlice) {
  auto s = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100}, {"a", Priority::kBestEffort, 30}});
  EXPECT_EQ(s, (std::vector<uint64_t>{5000000, 50}));
}

TEST(TimeslicePolicyTest, SeveralBeBesideLcSplitAShortPeriodAboveAFloor) {
  auto s = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 30},
                              {"b", Priority::kBestEffort, 70}});
  EXPECT_EQ(s, (std::vector<uint64_t>{5000000, 600, 1400}));
  auto t = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 5},
                              {"b", Priority::kBestEffort, 95}});
  EXPECT_EQ(t[1], 250u);
}

TEST(TimeslicePolicyTest, SeveralLcDoNotHoldEachOtherOff) {
  auto s = ComputeTimeslices({{"x", Priority::kLatencyCritical, 100},
                              {"y", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 100}});
  EXPECT_EQ(s, (std::vector<uint64_t>{2048, 2048, 50}));
}

TEST(TimeslicePolicyTest, AloneTakesTheWholePeriod) {
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 30}}), (std::vector<uint64_t>{10000}));
  EXPECT_EQ(ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100}}), (std::vector<uint64_t>{5000000}));
  EXPECT_TRUE(ComputeTimeslices({}).empty());
}

}  // namespace
}  // namespace gpuslice::policy
