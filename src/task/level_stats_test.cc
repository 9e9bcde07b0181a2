#include "task/level_stats.h"

#include <gtest/gtest.h>

namespace gpuslice::task {
namespace {

TEST(LevelStatsTest, CountsFailuresAndSloMisses) {
  LevelStats stats;
  stats.Record(5, 10, true);
  stats.Record(10, 10, false);  // at the SLO is not a miss
  stats.Record(11, 10, true);
  stats.Record(1000, 0, true);  // no SLO: never a miss
  EXPECT_EQ(stats.count(), 4u);
  EXPECT_EQ(stats.failed(), 1u);
  EXPECT_EQ(stats.slo_misses(), 1u);
}

TEST(LevelStatsTest, QuantilesAreNearestRankOverTheWindow) {
  LevelStats stats;
  EXPECT_EQ(stats.LatencyQuantileNs(0.5), std::nullopt);
  for (uint64_t i = 1; i <= 100; ++i) stats.Record(i, 0, true);
  EXPECT_EQ(stats.LatencyQuantileNs(0.5), 50u);
  EXPECT_EQ(stats.LatencyQuantileNs(0.99), 99u);
  EXPECT_EQ(stats.LatencyQuantileNs(1.0), 100u);
  // The window keeps the last kLatencyWindow tasks only.
  for (size_t i = 0; i < kLatencyWindow; ++i) stats.Record(7, 0, true);
  EXPECT_EQ(stats.LatencyQuantileNs(1.0), 7u);
  EXPECT_EQ(stats.count(), 100 + kLatencyWindow);
}

TEST(LevelStatsTest, PressureTurnsOnNearTheSloAndOffWellBelowIt) {
  LevelStats stats;
  // Too few samples: no pressure even at the SLO.
  for (size_t i = 0; i + 1 < kPressureMinSamples; ++i) stats.Record(90, 100, true);
  EXPECT_FALSE(stats.pressure());
  stats.Record(90, 100, true);
  EXPECT_TRUE(stats.pressure()) << "p99 at 90% of the SLO is pressure";
  // Between the thresholds it stays on (hysteresis)...
  for (size_t i = 0; i < kLatencyWindow; ++i) stats.Record(70, 100, true);
  EXPECT_TRUE(stats.pressure());
  // ...and goes off below kPressureOff.
  for (size_t i = 0; i < kLatencyWindow; ++i) stats.Record(50, 100, true);
  EXPECT_FALSE(stats.pressure());
  // Per-task SLOs: 9 ms against 10 ms is pressure too.
  for (size_t i = 0; i < kLatencyWindow; ++i) stats.Record(9'000'000, 10'000'000, true);
  EXPECT_TRUE(stats.pressure());
}

}  // namespace
}  // namespace gpuslice::task
