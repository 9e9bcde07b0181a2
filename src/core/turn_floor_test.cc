#include "core/turn_floor.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/vgpu_layout.h"

namespace gpuslice::core {
namespace {

constexpr uint8_t kGpu[16] = {1};
constexpr uint8_t kOtherGpu[16] = {2};

RosterEntry On(const uint8_t* gpu, uint64_t id, Priority level_class, uint32_t rank, uint32_t weight) {
  RosterEntry e;
  memcpy(e.gpu.data(), gpu, 16);
  e.vgpu_id = id;
  e.level = LevelWord(level_class, rank);
  e.weight = weight;
  return e;
}

TEST(TurnFloorTest, IsTheWeightOverItsLevelsWeightsOnItsGpu) {
  const std::vector<RosterEntry> roster = {
      On(kGpu, 1, Priority::kBestEffort, 0, 20), On(kGpu, 2, Priority::kBestEffort, 0, 30),
      On(kGpu, 3, Priority::kBestEffort, 0, 50), On(kGpu, 4, Priority::kLatencyCritical, 0, 100),
      On(kOtherGpu, 5, Priority::kBestEffort, 0, 100)};
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 1), 200u);
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 3), 500u);
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 4), 0u) << "an LC vGPU takes no turns";
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 5), 0u) << "not on this GPU";
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 9), 0u) << "not listed";
}

TEST(TurnFloorTest, IsNoneBelowAHigherBestEffortLevel) {
  const std::vector<RosterEntry> roster = {On(kGpu, 1, Priority::kBestEffort, 0, 50),
                                           On(kGpu, 2, Priority::kBestEffort, 1, 50)};
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 1), 0u) << "a lower level may rightly get only the guard's turns";
  EXPECT_EQ(TurnFloorPermille(roster, kGpu, 2), 1000u);
}

TEST(TurnFloorTest, WhatIsOwedWhileWaitingForTurnsLeavesCappedLcVgpusTheirCaps) {
  // A capped LC vGPU takes turns and wins each by its level: a best-effort
  // vGPU waits for them however honest everyone is. An uncapped one takes
  // none.
  RosterEntry capped_lc = On(kGpu, 4, Priority::kLatencyCritical, 0, 100);
  capped_lc.cap_pct = 40;
  std::vector<RosterEntry> roster = {On(kGpu, 1, Priority::kBestEffort, 0, 20),
                                     On(kGpu, 2, Priority::kBestEffort, 0, 80),
                                     On(kGpu, 3, Priority::kLatencyCritical, 0, 100)};
  EXPECT_EQ(OwedTurnPermille(roster, kGpu, 1), 100u) << "half its floor";
  roster.push_back(capped_lc);
  EXPECT_EQ(OwedTurnPermille(roster, kGpu, 1), 60u);
  EXPECT_EQ(OwedTurnPermille(roster, kGpu, 2), 240u);
  EXPECT_EQ(OwedTurnPermille(roster, kGpu, 4), 0u) << "an LC vGPU has no floor";
  capped_lc.vgpu_id = 5;
  capped_lc.cap_pct = 60;
  roster.push_back(capped_lc);
  EXPECT_EQ(OwedTurnPermille(roster, kGpu, 2), 0u) << "LC caps may take every turn";
}

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kWindowMs = TurnFloorWatch::kWindowNs / kMs;

// `ms` milliseconds of wanting the GPU, one sample a millisecond, holding the
// turn `held_permille` of them.
void Feed(TurnFloorWatch* watch, uint32_t ms, uint32_t held_permille) {
  for (uint32_t i = 0; i < ms; ++i) watch->Sample(true, i % 1000 < held_permille, kMs);
}

TEST(TurnFloorWatchTest, AVgpuHeldToUnderHalfItsFloorIsStarvedUntilItGetsItsTurnsAgain) {
  TurnFloorWatch watch;
  watch.SetFloor(300);
  Feed(&watch, kWindowMs, 200);
  EXPECT_FALSE(watch.starved()) << "below the floor but above half of it: turns are coarse";
  Feed(&watch, kWindowMs - 1, 10);
  EXPECT_FALSE(watch.starved()) << "no verdict before the window is full";
  EXPECT_TRUE(watch.Sample(true, false, kMs)) << "the verdict changed";
  EXPECT_TRUE(watch.starved());
  EXPECT_EQ(watch.held_permille(), 10u);
  Feed(&watch, kWindowMs, 10);
  EXPECT_TRUE(watch.starved());
  Feed(&watch, kWindowMs, 400);
  EXPECT_FALSE(watch.starved());
}

TEST(TurnFloorWatchTest, OnlyTimeTheVgpuWantsTheGpuCounts) {
  TurnFloorWatch watch;
  watch.SetFloor(500);
  for (uint32_t i = 0; i < 10 * kWindowMs; ++i) watch.Sample(false, false, kMs);
  EXPECT_FALSE(watch.starved()) << "an idle vGPU is owed nothing";
  Feed(&watch, kWindowMs, 0);
  EXPECT_TRUE(watch.starved());
}

TEST(TurnFloorWatchTest, WithoutAFloorNothingIsStarved) {
  TurnFloorWatch watch;
  Feed(&watch, 3 * kWindowMs, 0);
  EXPECT_FALSE(watch.starved());
}

TEST(TurnFloorWatchTest, TimeNotSamplesCounts) {
  // Held in short samples (the compute thread looks more often while it
  // holds the turn), not held in long ones: 100 ms in 1 s held.
  TurnFloorWatch watch;
  watch.SetFloor(400);
  for (int i = 0; i < 400; ++i) watch.Sample(true, true, kMs / 4);
  for (int i = 0; i < 900; ++i) watch.Sample(true, false, kMs);
  EXPECT_TRUE(watch.starved()) << "400 of 1300 samples, but 10% of the time";
  EXPECT_EQ(watch.held_permille(), 100u);
}

}  // namespace
}  // namespace gpuslice::core
