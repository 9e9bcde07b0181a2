#include "core/gate_wait_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <thread>
#include <vector>

namespace gpuslice::core {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 5'000'000'000;  // CLOCK_MONOTONIC of a machine up for a while
constexpr uint64_t kBuffer = 240 * kMs;

constexpr uint64_t kResume = 10 * kMs;

// One launch waiting from `from` until `to`, as the pacer's wait loop does:
// it starts only if the budget allows, and spends it every `every` (the
// stretch between two looks that both saw it wait). Returns when the budget
// let it go ahead: `from` if it never waited, `to` if it was never let go.
uint64_t Wait(GateWaitBudget& budget, uint64_t from, uint64_t to, uint64_t every = 30 * kUs) {
  if (!budget.Allows(from)) return from;
  for (uint64_t now = from + every; now <= to; now += every) {
    if (!budget.Spend(now - every, now)) return now;
  }
  return to;
}

TEST(GateWaitBudgetTest, WhatIsOwedIsTheLesserOfTheCapAndTheTurnShare) {
  EXPECT_EQ(OwedPermille(30, 0), 300u) << "a cap alone";
  EXPECT_EQ(OwedPermille(0, 250), 250u) << "a turn share alone";
  EXPECT_EQ(OwedPermille(30, 250), 250u);
  EXPECT_EQ(OwedPermille(20, 250), 200u);
  EXPECT_EQ(OwedPermille(0, 0), 0u) << "nothing owed: no bound";
}

TEST(GateWaitBudgetTest, AProcessOwedNothingNeverRunsOut) {
  GateWaitBudget budget;
  budget.Configure(0, kBuffer, kResume);
  EXPECT_EQ(Wait(budget, kT0, kT0 + 60'000 * kMs, kMs), kT0 + 60'000 * kMs);
}

TEST(GateWaitBudgetTest, AWaitNoDebtExplainsEndsAfterTheBufferAndWhatTheShareEarnsMeanwhile) {
  // A forger keeps a 30% vGPU's tokens deep in debt: one long wait. It
  // earns (1 - 7/8 * 30%) = 73.75% of its wall time while it waits, so the
  // buffer runs out after buffer / 26.25% = 914 ms.
  GateWaitBudget budget;
  budget.Configure(300, kBuffer, kResume);
  const uint64_t released = Wait(budget, kT0, kT0 + 60'000 * kMs);
  EXPECT_NEAR(static_cast<double>(released - kT0) / kMs, 914.3, 1);
}

TEST(GateWaitBudgetTest, OnceSpentItWaitsOnlyTheShareOfTheTimeNotOwed) {
  // Forged tokens for good: after the buffer, launches every 100 us each
  // wait until the budget lets them go. Over 10 s they wait 73.75% of the
  // time (the cap's 30% less an eighth of it is left to launch in), never
  // all of it.
  GateWaitBudget budget;
  budget.Configure(300, kBuffer, kResume);
  uint64_t now = Wait(budget, kT0, kT0 + 60'000 * kMs);
  const uint64_t start = now;
  uint64_t waited = 0;
  while (now < start + 10'000 * kMs) {
    const uint64_t released = Wait(budget, now, now + 60'000 * kMs, 10 * kUs);
    waited += released - now;
    now = released + 100 * kUs;  // a launch's worth of work, then the next launch
  }
  EXPECT_NEAR(100.0 * static_cast<double>(waited) / static_cast<double>(now - start), 73.75, 1.5);
}

TEST(GateWaitBudgetTest, OnceSpentLaunchesGoAheadUntilATurnsWorthIsEarned) {
  // Spent out by a forged debt, the process launches without waiting until
  // it has earned a turn's worth (10 ms at 73.75%: 13.6 ms), then waits
  // until that is spent (10 ms at a net 26.25%: 38 ms): long runs each way,
  // not one launch at a time.
  GateWaitBudget budget;
  budget.Configure(300, kBuffer, kResume);
  uint64_t now = Wait(budget, kT0, kT0 + 60'000 * kMs);
  EXPECT_FALSE(budget.Allows(now + 13 * kMs));
  EXPECT_TRUE(budget.Allows(now + 14 * kMs));
  now += 14 * kMs;
  const uint64_t released = Wait(budget, now, now + 60'000 * kMs);
  EXPECT_NEAR(static_cast<double>(released - now) / kMs, 40, 2);
}

TEST(GateWaitBudgetTest, AnHonestSharesWaitsNeverRunItOut) {
  // Turns of r (a quantum, or one overrun to the drain timeout), each
  // followed by a wait of what the share leaves: an honest 30% vGPU alone,
  // GPU-bound, waits r * (1 - cap) / cap for its tokens to come back; one of
  // three busy vGPUs weighted 20/30/50 under exclusive turns, owed 20%,
  // waits for the others' 4 r. That is what the share earns, so turn after
  // turn leaves the budget where it was, and a turn's overshoot stays within
  // the buffer.
  struct Case {
    uint32_t owed_permille;
    uint64_t wait_per_turn, per;  // the wait after each turn: turn * wait_per_turn / per
  };
  for (const Case& c : {Case{300, 70, 30}, Case{200, 4, 1}}) {
    for (const uint64_t turn : {10 * kMs, 50 * kMs, 210 * kMs}) {
      GateWaitBudget budget;
      budget.Configure(c.owed_permille, kBuffer, kResume);
      uint64_t now = kT0;
      for (int cycle = 0; cycle < 500; ++cycle) {
        now += turn;
        const uint64_t wait = turn * c.wait_per_turn / c.per;
        ASSERT_EQ(Wait(budget, now, now + wait), now + wait)
            << "owed " << c.owed_permille << " permille, turns of " << turn / kMs << " ms, cycle " << cycle;
        now += wait;
      }
    }
  }
}

TEST(GateWaitBudgetTest, ARunOnOfItsOwnWorkIsVouchedFor) {
  // A turn whose queue runs on 3 s past it: the run-on is charged, and
  // paying it back takes 3 s / 30% = 10 s of waiting. Vouched by the
  // process whose work it was, the whole wait is explained; unvouched, the
  // budget runs out long before.
  for (const bool vouched : {true, false}) {
    GateWaitBudget budget;
    budget.Configure(300, kBuffer, kResume);
    if (vouched) budget.Vouch(3000 * kMs);
    const uint64_t wait = 3000 * kMs + 7000 * kMs;  // the run-on, then the payback
    const uint64_t released = Wait(budget, kT0, kT0 + wait);
    if (vouched) {
      EXPECT_EQ(released, kT0 + wait);
    } else {
      EXPECT_LT(released, kT0 + 1000 * kMs);
    }
  }
}

TEST(GateWaitBudgetTest, IdleTimeBanksNoMoreThanTheBuffer) {
  // A minute idle, then a forged debt: the wait ends as it would have at
  // once, not a minute later.
  GateWaitBudget budget;
  budget.Configure(300, kBuffer, kResume);
  const uint64_t later = kT0 + 60'000 * kMs;
  EXPECT_NEAR(static_cast<double>(Wait(budget, later, later + 60'000 * kMs) - later) / kMs, 914.3, 1);
}

TEST(GateWaitBudgetTest, ThreadsWaitingAtOnceSpendEachNanosecondOnce) {
  // Eight threads waiting through the same stretch spend it once, as one
  // thread would: the buffer lasts as long. Interleaved as a scheduler
  // might: round robin, each thread 30 us on.
  GateWaitBudget budget;
  budget.Configure(300, kBuffer, kResume);
  uint64_t last[8];
  std::fill(std::begin(last), std::end(last), kT0);
  ASSERT_TRUE(budget.Allows(kT0));
  uint64_t released = 0;
  for (uint64_t now = kT0 + 30 * kUs; released == 0 && now < kT0 + 2000 * kMs; now += 30 * kUs) {
    for (int t = 0; t < 8 && released == 0; ++t) {
      if (!budget.Spend(last[t], now + t)) released = now + t;
      last[t] = now + t;
    }
  }
  EXPECT_NEAR(static_cast<double>(released - kT0) / kMs, 914.3, 1);
}

TEST(GateWaitBudgetTest, RealThreadsNeverSpendMoreThanTheWallTime) {
  // Four threads on one clock, 80 ms of it: spent once, 80 ms is well within
  // the buffer; spent by each thread, 320 ms would run it out.
  GateWaitBudget budget;
  budget.Configure(300, kBuffer, kResume);
  std::atomic<uint64_t> clock{kT0};
  std::atomic<int> ran_out{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      uint64_t last = kT0;
      for (int i = 0; i < 20000; ++i) {
        const uint64_t now = clock.fetch_add(kUs) + kUs;
        if (!budget.Spend(last, now)) ran_out.fetch_add(1);
        last = now;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ran_out.load(), 0);
}

TEST(GateWaitBudgetTest, ALowerShareMayWaitLongerBeforeItRunsOut) {
  // The bound follows the share owed: at 5% a vGPU honestly waits 95% of the
  // time, and the buffer lasts buffer / 4.375% = 5.49 s of waiting.
  GateWaitBudget budget;
  budget.Configure(50, kBuffer, kResume);
  EXPECT_NEAR(static_cast<double>(Wait(budget, kT0, kT0 + 60'000 * kMs) - kT0) / kMs, 5485.7, 5);
}

}  // namespace
}  // namespace gpuslice::core
