#include "daemon/busy_split.h"

#include <gtest/gtest.h>

namespace gpuslice::daemon {
namespace {

double Sum(const std::map<std::string, double>& m) {
  double s = 0;
  for (const auto& [name, v] : m) s += v;
  return s;
}

TEST(BusySplitTest, WithoutTheBoardsTheSamplesSayWhoRanAndTheBusyTimeHowLong) {
  const auto split = SplitBusyTime(0.9, {}, {{"a", 0.4}, {"", 0.1}});
  EXPECT_NEAR(split.at("a"), 0.72, 1e-9);
  EXPECT_NEAR(split.at(""), 0.18, 1e-9);
  EXPECT_TRUE(SplitBusyTime(0.9, {}, {}).empty()) << "nothing sampled: nobody to give the busy time to";
}

TEST(BusySplitTest, OverlappingSamplesGiveWayToTheBoardsAndThePartsAddUpToTheBusyTime) {
  // Three sharers' samples overlap (about half each, as measured on an
  // H100); the boards saw 0.2/0.3/0.45 of a GPU busy 0.99 of the second.
  const auto split =
      SplitBusyTime(0.99, {{"a", 0.2}, {"b", 0.3}, {"c", 0.45}}, {{"a", 0.47}, {"b", 0.51}, {"c", 0.49}});
  EXPECT_NEAR(Sum(split), 0.99, 1e-9);
  EXPECT_LT(split.at("a"), split.at("b"));
  EXPECT_LT(split.at("b"), split.at("c"));
  EXPECT_NEAR(split.at("c") / Sum(split), 0.45 / 0.99, 0.03);
}

TEST(BusySplitTest, BoardTimeBeyondTheBusyTimeIsScaledDown) {
  const auto split = SplitBusyTime(0.5, {{"a", 0.3}, {"b", 0.7}}, {{"a", 0.5}, {"b", 0.5}});
  EXPECT_NEAR(split.at("a"), 0.15, 1e-9);
  EXPECT_NEAR(split.at("b"), 0.35, 1e-9);
}

TEST(BusySplitTest, TimeTheBoardsDidNotSeeGoesToWhatTheSamplesLeaveUnexplained) {
  // "lc" is not paced, so the boards never credit it; "" is a process of no
  // vGPU. The paced pair is fully explained by the boards.
  const auto split = SplitBusyTime(1.0, {{"a", 0.3}, {"b", 0.3}}, {{"a", 0.3}, {"b", 0.3}, {"lc", 0.3}, {"", 0.1}});
  EXPECT_NEAR(split.at("a"), 0.3, 1e-9);
  EXPECT_NEAR(split.at("b"), 0.3, 1e-9);
  EXPECT_NEAR(split.at("lc"), 0.3, 1e-9);
  EXPECT_NEAR(split.at(""), 0.1, 1e-9);
}

TEST(BusySplitTest, AVgpuWhoseMarksClaimLessThanItsSamplesTakesTheRestFirst) {
  // "x" marks itself idle on the board; the busy time the boards did not
  // explain follows its samples, not the honest vGPU's.
  const auto split = SplitBusyTime(1.0, {{"honest", 0.5}}, {{"honest", 0.5}, {"x", 0.5}});
  EXPECT_NEAR(split.at("honest"), 0.5, 1e-9);
  EXPECT_NEAR(split.at("x"), 0.5, 1e-9);
}

TEST(BusySplitTest, BusyTimeTheBoardsMissedWithNothingUnexplainedFollowsTheBoards) {
  const auto split = SplitBusyTime(1.0, {{"a", 0.2}, {"b", 0.6}}, {{"a", 0.1}, {"b", 0.2}});
  EXPECT_NEAR(split.at("a"), 0.25, 1e-9);
  EXPECT_NEAR(split.at("b"), 0.75, 1e-9);
}

}  // namespace
}  // namespace gpuslice::daemon
