#include "core/hold_budget.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpuslice::core {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 5'000'000'000;  // CLOCK_MONOTONIC of a machine up for a while

// One launch held from `from` to `to`, checking the gate every `every`, as the
// pacer's wait loop does. Returns whether the budget ran out on the way and
// the time the launch stopped obeying holds (`to` if it never did).
struct Wait {
  bool spent = false;
  uint64_t released_at = 0;
};
Wait HeldLaunch(HoldBudget& budget, uint64_t from, uint64_t to, uint64_t every = 30 * kUs) {
  Wait w{false, to};
  bool first = true;
  for (uint64_t now = from; now < to; now += every) {
    if (!budget.Holds(now)) {
      w.released_at = now;
      return w;
    }
    w.spent |= budget.NoteHeld(now, first);
    first = false;
  }
  return w;
}

TEST(HoldBudgetTest, AHoldThatNeverEndsTakesHalfOfEachWindow) {
  HoldBudget budget;
  budget.Configure(50, 1000 * kMs);
  const Wait w = HeldLaunch(budget, kT0, kT0 + 2000 * kMs);
  EXPECT_TRUE(w.spent);
  // Obeyed for 500 ms of held time (to within a check), then not.
  EXPECT_GE(w.released_at, kT0 + 500 * kMs);
  EXPECT_LE(w.released_at, kT0 + 500 * kMs + 60 * kUs);
  EXPECT_FALSE(budget.Holds(kT0 + 999 * kMs)) << "spent for the rest of the window";
  EXPECT_TRUE(budget.Holds(kT0 + 1000 * kMs)) << "a new window obeys holds again";
  EXPECT_EQ(budget.held_ns(), 0u);
}

TEST(HoldBudgetTest, ShortHoldsUnderTheBudgetAreAlwaysObeyed) {
  // An LC whose requests hold for 2 ms every 10 ms (20%): every hold is
  // obeyed, for seconds.
  HoldBudget budget;
  budget.Configure(50, 1000 * kMs);
  for (uint64_t t = kT0; t < kT0 + 3000 * kMs; t += 10 * kMs) {
    const Wait w = HeldLaunch(budget, t, t + 2 * kMs);
    ASSERT_FALSE(w.spent) << "at " << (t - kT0) / kMs << " ms";
    ASSERT_EQ(w.released_at, t + 2 * kMs);
  }
}

TEST(HoldBudgetTest, TimeBetweenWaitsIsNotCountedAsHeld) {
  HoldBudget budget;
  budget.Configure(50, 1000 * kMs);
  HeldLaunch(budget, kT0, kT0 + 1 * kMs);
  const uint64_t after_one = budget.held_ns();
  EXPECT_LE(after_one, 1 * kMs);
  // A wait 400 ms later: its first note counts nothing of the 400 ms.
  budget.NoteHeld(kT0 + 401 * kMs, /*first=*/true);
  EXPECT_EQ(budget.held_ns(), after_one);
  // A note that is not a wait's first still counts at most a step.
  budget.NoteHeld(kT0 + 800 * kMs, /*first=*/false);
  EXPECT_EQ(budget.held_ns(), after_one + HoldBudget::kMaxStepNs);
}

TEST(HoldBudgetTest, ThreadsHeldTogetherCountTheirTimeOnce) {
  // Eight threads held over the same 300 ms count about 300 ms, not 2.4 s:
  // the budget is not spent.
  HoldBudget budget;
  budget.Configure(50, 1000 * kMs);
  bool first[8] = {true, true, true, true, true, true, true, true};
  // Interleaved as a scheduler might: round robin, each thread 30 us on.
  for (uint64_t now = kT0; now < kT0 + 300 * kMs; now += 30 * kUs) {
    for (int t = 0; t < 8; ++t) {
      ASSERT_TRUE(budget.Holds(now + t));
      budget.NoteHeld(now + t, first[t]);
      first[t] = false;
    }
  }
  EXPECT_LE(budget.held_ns(), 301 * kMs);
  EXPECT_GE(budget.held_ns(), 299 * kMs);
}

TEST(HoldBudgetTest, RealThreadsNeverCountMoreThanTheWallTime) {
  HoldBudget budget;
  budget.Configure(50, 1000 * kMs);
  std::atomic<uint64_t> clock{kT0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      bool first = true;
      for (int i = 0; i < 20000; ++i) {
        const uint64_t now = clock.fetch_add(kUs) + kUs;
        budget.Holds(now);
        budget.NoteHeld(now, first);
        first = false;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(budget.held_ns(), clock.load() - kT0);
}

TEST(HoldBudgetTest, AHundredPercentIsNoBound) {
  HoldBudget budget;
  budget.Configure(100, 1000 * kMs);
  const Wait w = HeldLaunch(budget, kT0, kT0 + 1500 * kMs);
  EXPECT_FALSE(w.spent);
  EXPECT_EQ(w.released_at, kT0 + 1500 * kMs);
}

TEST(HoldBudgetTest, OutOfRangePercentagesAreClamped) {
  HoldBudget none;
  none.Configure(0, 1000 * kMs);  // at least 1%
  EXPECT_TRUE(none.Holds(kT0));
  const Wait w = HeldLaunch(none, kT0, kT0 + 100 * kMs);
  EXPECT_TRUE(w.spent);
  EXPECT_LE(w.released_at, kT0 + 10 * kMs + 60 * kUs);
}

}  // namespace
}  // namespace gpuslice::core
