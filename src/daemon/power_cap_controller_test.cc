#include "daemon/power_cap_controller.h"

#include <gtest/gtest.h>

namespace gpuslice::daemon {
namespace {

// A vGPU that ran `fraction` of a 5 s window drawing `busy_watts` while it ran.
PowerBudgetInput Ran(double cap, uint32_t user_cap, uint32_t current, double fraction, double busy_watts) {
  PowerBudgetInput in;
  in.cap_watts = cap;
  in.user_cap_pct = user_cap;
  in.current_pct = current;
  in.window_seconds = 5;
  in.gpu_seconds = 5 * fraction;
  in.joules = in.gpu_seconds * busy_watts;
  return in;
}

TEST(PowerCapControllerTest, OverTheCapTheBudgetFallsAtOnceToWhereItsDrawFits) {
  // 300 W while running, all the time: 300 W against a 150 W cap.
  const uint32_t next = NextPowerBudget(Ran(150, 0, 0, 1.0, 300));
  // Fit: 150 / 300 = 50%, less the 5% margin.
  EXPECT_EQ(next, 47u);
  // Held there, it draws 300 * 0.47 = 141 W: at or below the cap.
  EXPECT_LE(300.0 * next / 100.0, 150.0);
}

TEST(PowerCapControllerTest, TheIntegralCorrectionTightensWhenThePacerOvershoots) {
  // Budget 47% but it ran 55% (the pacer's error) at 300 W: 165 W > 150 W.
  const uint32_t next = NextPowerBudget(Ran(150, 0, 47, 0.55, 300));
  EXPECT_LT(next, 47u);
  EXPECT_EQ(next, 42u);  // 47 * 150 / 165
}

TEST(PowerCapControllerTest, BelowTheCapTheBudgetRisesStepwiseButNeverPastTheFit) {
  // The work became lighter: 200 W while running, budget 40% -> 80 W.
  uint32_t budget = 40;
  std::vector<uint32_t> seen;
  for (int pass = 0; pass < 20; ++pass) {
    budget = NextPowerBudget(Ran(150, 0, budget, budget / 100.0, 200));
    seen.push_back(budget);
  }
  EXPECT_EQ(seen.front(), 40u + kRaiseStepPct);  // additive, not a jump
  EXPECT_EQ(budget, 71u);                        // 150 / 200 * 0.95
  for (uint32_t b : seen) EXPECT_LE(200.0 * b / 100.0, 150.0);
}

TEST(PowerCapControllerTest, NeverAboveTheUsersComputeCap) {
  // A light load fits 100% under the power cap; the user's cap is 30%.
  EXPECT_EQ(NextPowerBudget(Ran(300, 30, 30, 0.3, 100)), 30u);
  EXPECT_EQ(NextPowerBudget(Ran(300, 30, 0, 0.0, 0)), 30u);   // first pass: starts at the user's cap
  EXPECT_EQ(NextPowerBudget(Ran(300, 30, 80, 0.3, 100)), 30u);  // a stale budget above it is pulled down
  // No user cap: 100 is the ceiling.
  EXPECT_EQ(NextPowerBudget(Ran(300, 0, 98, 0.98, 100)), 100u);
}

TEST(PowerCapControllerTest, WithoutGpuTimeTheBudgetIsKept) {
  EXPECT_EQ(NextPowerBudget(Ran(150, 0, 35, 0.0, 0)), 35u);
  EXPECT_EQ(NextPowerBudget(Ran(150, 0, 35, 0.001, 300)), 35u);  // below kMinBusyFraction: noise
}

TEST(PowerCapControllerTest, ElasticTowardZeroButNeverBelowOnePercent) {
  // A cap far below even 1% of its draw.
  EXPECT_EQ(NextPowerBudget(Ran(1, 0, 50, 0.5, 700)), 1u);
}

}  // namespace
}  // namespace gpuslice::daemon
