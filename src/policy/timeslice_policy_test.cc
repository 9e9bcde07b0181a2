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
}

TEST(TimeslicePolicyTest, SlicesNeverGoBelowTheSwitchCostFloor) {
  auto s = ComputeTimeslices({{"a", Priority::kBestEffort, 1}, {"b", Priority::kBestEffort, 99}});
  EXPECT_EQ(s[0], 1000u);
}

TEST(TimeslicePolicyTest, LcKeepsTheGpuAndBeSlicesShrink) {
  auto s = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 30},
                              {"b", Priority::kBestEffort, 70}});
  EXPECT_EQ(s[0], 5000000u);
  EXPECT_EQ(s[1], 120u);
  EXPECT_EQ(s[2], 280u);
}

TEST(TimeslicePolicyTest, AloneTakesTheWholePeriod) {
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 30}}), (std::vector<uint64_t>{10000}));
}

}  // namespace
}  // namespace gpuslice::policy
