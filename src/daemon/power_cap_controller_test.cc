#include "daemon/power_cap_controller.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpuslice::daemon {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = PowerCapController::Clock;
const PowerCapController::Key kKey{"a", 0};

// A 1 s interval in which the vGPU ran `busy` (0..1) of the time, drawing
// `busy_watts` while it ran.
PowerSample Ran(double busy, double busy_watts) {
  PowerSample s;
  s.seconds = 1;
  s.energy_seconds = 1;
  s.gpu_seconds = busy;
  s.joules = busy * busy_watts;
  return s;
}

// The GPU and the pacer, as the controller sees them: a vGPU that wants
// `demand` of the GPU runs min(demand, budget) and draws `busy_watts` while
// it runs. One Step is one daemon pass, a second apart.
struct Loop {
  PowerCapController controller;
  PowerCapTarget target;
  Clock::time_point now = Clock::time_point() + seconds(1000);
  double demand = 1.0;
  double busy_watts = 300;
  double last_watts = 0;

  uint32_t Step() {
    const double ran = std::min(demand, (target.budget_pct == 0 ? target.ceiling_pct : target.budget_pct) / 100.0);
    last_watts = ran * busy_watts;
    now += seconds(1);
    target.budget_pct = controller.Update(kKey, target, Ran(ran, busy_watts), now);
    return target.budget_pct;
  }
};

TEST(PowerCapControllerTest, StartsAtTheCeilingAndDecidesNothingOnTooLittleEvidence) {
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 0};
  // First sight: the ceiling (the user's cap, else 100), whatever it drew.
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0), 100u);
  target.budget_pct = 100;
  // The next sample straddled the start: dropped.
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(1)), 100u);
  // One second of evidence is below kMinEvidenceSeconds.
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(2)), 100u);
  // Two are enough: 300 W against 150 W.
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(3)), 47u);  // 100 * 150 / 300 * 0.95
}

TEST(PowerCapControllerTest, OverTheCapTheBudgetFallsMultiplicativelyAndToTheFit) {
  Loop loop;
  loop.target = {150, 100, 0};
  uint32_t budget = 100;
  while (budget == 100 && loop.now < Clock::time_point() + seconds(1010)) budget = loop.Step();
  EXPECT_EQ(budget, 47u);
  // A vGPU that used only 60% of a 100% budget at 500 W per GPU-second drew
  // 300 W: B * P / W would say 50%, but only 30% fits 150 W.
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 100};
  c.Update(kKey, target, Ran(0.6, 500), t0);
  c.Update(kKey, target, Ran(0.6, 500), t0 + seconds(1));
  c.Update(kKey, target, Ran(0.6, 500), t0 + seconds(2));
  EXPECT_EQ(c.Update(kKey, target, Ran(0.6, 500), t0 + seconds(3)), 28u);  // 150 / 500 * 0.95
}

TEST(PowerCapControllerTest, HeldByThePacerItSettlesAtOrBelowTheCapAndStays) {
  Loop loop;
  loop.target = {150, 100, 0};
  for (int i = 0; i < 10; ++i) loop.Step();
  // From here on, with the demand unchanged, it never runs over the cap
  // and the budget never moves again (the hysteresis band).
  const uint32_t settled = loop.target.budget_pct;
  for (int i = 0; i < 600; ++i) {
    loop.Step();
    EXPECT_LE(loop.last_watts, 150.0) << "step " << i;
    EXPECT_EQ(loop.target.budget_pct, settled) << "step " << i;
  }
  EXPECT_GE(loop.last_watts, 150.0 * PowerCapController::kRaiseBelow);  // and it uses what it may
}

TEST(PowerCapControllerTest, ThePacersOvershootIsCorrected) {
  // Budget 47% but it ran 55% at 300 W: 165 W > 150 W.
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 47};
  c.Update(kKey, target, Ran(0.55, 300), t0);
  c.Update(kKey, target, Ran(0.55, 300), t0 + seconds(1));
  c.Update(kKey, target, Ran(0.55, 300), t0 + seconds(2));
  EXPECT_EQ(c.Update(kKey, target, Ran(0.55, 300), t0 + seconds(3)), 40u);  // 47 * 150 / 165 * 0.95
}

TEST(PowerCapControllerTest, UnderTheCapItRisesSlowlyAfterAHoldAndNeverPastTheFitOrTheCeiling) {
  Loop loop;
  loop.target = {150, 100, 20};
  loop.busy_watts = 200;  // fits 150 W at 75%: 71% with the margin
  std::vector<uint32_t> budgets;
  std::vector<Clock::time_point> when;
  for (int i = 0; i < 200; ++i) {
    const uint32_t before = loop.target.budget_pct;
    if (loop.Step() != before) {
      budgets.push_back(loop.target.budget_pct);
      when.push_back(loop.now);
    }
    EXPECT_LE(loop.last_watts, 150.0);
  }
  ASSERT_GE(budgets.size(), 3u);
  EXPECT_EQ(budgets.front(), 20u + PowerCapController::kRaiseStepPct);  // additive, not a jump
  for (size_t i = 1; i < budgets.size(); ++i) {
    EXPECT_LE(budgets[i] - budgets[i - 1], PowerCapController::kRaiseStepPct);
    EXPECT_GE(when[i] - when[i - 1], PowerCapController::kRaiseHold);
  }
  // It stops once in the hysteresis band: 62% drew 124 W, below 85% of the
  // cap, so it rose to 65% (130 W), where it holds.
  EXPECT_EQ(loop.target.budget_pct, 65u);
  EXPECT_GE(loop.last_watts, 150.0 * PowerCapController::kRaiseBelow);
  // A user's compute cap of 30% is the ceiling.
  Loop capped;
  capped.target = {150, 30, 0};
  capped.busy_watts = 100;
  for (int i = 0; i < 100; ++i) EXPECT_LE(capped.Step(), 30u);
  EXPECT_EQ(capped.target.budget_pct, 30u);
}

TEST(PowerCapControllerTest, ElasticBothWaysAsTheWorkChanges) {
  Loop loop;
  loop.target = {150, 100, 0};
  for (int i = 0; i < 30; ++i) loop.Step();
  const uint32_t heavy = loop.target.budget_pct;
  EXPECT_LE(heavy, 50u);
  loop.busy_watts = 100;  // lighter work: the whole GPU fits under the cap
  for (int i = 0; i < 200; ++i) loop.Step();
  EXPECT_EQ(loop.target.budget_pct, 100u);
  loop.busy_watts = 600;  // heavier again
  for (int i = 0; i < 30; ++i) loop.Step();
  EXPECT_LE(loop.target.budget_pct, 25u);
  EXPECT_LE(loop.last_watts, 150.0);
}

TEST(PowerCapControllerTest, IdleHoldsTheBudgetAndACapBelowOnePercentsDrawStopsAtTheFloor) {
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 35};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c.Update(kKey, target, Ran(0.0, 0), t0 + seconds(i)), 35u);
  for (int i = 20; i < 40; ++i) EXPECT_EQ(c.Update(kKey, target, Ran(0.001, 300), t0 + seconds(i)), 35u);
  Loop loop;
  loop.target = {1, 100, 0};
  loop.busy_watts = 700;
  for (int i = 0; i < 60; ++i) loop.Step();
  EXPECT_EQ(loop.target.budget_pct, PowerCapController::kFloorPct);
}

TEST(PowerCapControllerTest, NoEnergyMeansNoDecision) {
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 100};
  PowerSample s = Ran(1.0, 300);
  s.energy_seconds = 0;  // the GPU's counter gave no reading
  s.joules = 0;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.Update(kKey, target, s, t0 + seconds(i)), 100u);
}

TEST(PowerCapControllerTest, ABudgetChangedElsewhereRestartsTheEvidence) {
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 100};
  c.Update(kKey, target, Ran(1.0, 300), t0);
  c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(1));
  c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(2));
  // The user lowered the compute cap to 60%: the ceiling pulls the budget
  // down at once, and the old evidence is gone.
  target.ceiling_pct = 60;
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(3)), 60u);
  target.budget_pct = 60;
  EXPECT_EQ(c.Update(kKey, target, Ran(0.6, 300), t0 + seconds(4)), 60u);  // settling
  EXPECT_EQ(c.Update(kKey, target, Ran(0.6, 300), t0 + seconds(5)), 60u);  // 1 s of evidence
  EXPECT_EQ(c.Update(kKey, target, Ran(0.6, 300), t0 + seconds(6)), 47u);  // 60 * 150 / 180 * 0.95
}

TEST(PowerCapControllerTest, RetainForgetsVgpusThatAreGone) {
  PowerCapController c;
  const Clock::time_point t0{};
  PowerCapTarget target{150, 100, 0};
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0), 100u);
  target.budget_pct = 100;
  c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(1));
  c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(2));
  c.Retain({});
  // Forgotten: the next update starts afresh (settles again) rather than
  // deciding on the old evidence.
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(3)), 100u);
  EXPECT_EQ(c.Update(kKey, target, Ran(1.0, 300), t0 + seconds(4)), 100u);
}

}  // namespace
}  // namespace gpuslice::daemon
