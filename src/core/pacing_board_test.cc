#include "core/pacing_board.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/gate_wait_budget.h"
#include "core/turn_floor.h"

namespace gpuslice::core {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

// A GPU and its applications, stepped in 10 µs ticks on a fake clock. Each
// application launches kernels of a fixed length whenever the board lets it
// and its queue is not full; the GPU runs the queued kernels of one
// application at a time (if several have work queued, they alternate each
// tick, which is what the board must prevent from mattering).
class Simulation {
 public:
  struct App {
    int member = -1;
    uint64_t kernel_ns = 100 * kUs;
    size_t depth = 16;
    // Demand pattern: launches only while (now % period) < on (period 0 = always).
    uint64_t period_ns = 0;
    uint64_t on_ns = 0;
    // Or a training: steps of `step_kernels` launched as fast as allowed,
    // each followed by a synchronisation (wait for the queue to drain) and a
    // host pause of `pause_ns`.
    size_t step_kernels = 0;
    uint64_t pause_ns = 0;
    size_t launched_in_step = 0;
    uint64_t pause_until = 0;
    std::deque<uint64_t> queue;  // remaining ns of each queued kernel
    uint64_t gpu_ns = 0;         // GPU time received
    // Its launches call the board with a clock read this long ago (a
    // process descheduled between reading the clock and using it).
    uint64_t clock_lag_ns = 0;
    // Host time between two launches (a launch-bound application: its GPU
    // idles whenever this exceeds its kernels' time).
    uint64_t launch_gap_ns = 0;
    uint64_t next_launch_ns = 0;
    bool busy = false;
    bool alive = true;
    // Its ticks charge a capped vGPU's run-on as it goes (ChargeRunOn), as
    // the library's do; false: a busy mark nobody vouches for.
    bool vouches = true;
    // A process's bound on its waits for its own cap's tokens and others'
    // turns (core/gate_wait_budget.h), kept as the library keeps it: waits
    // spent between two consecutive looks that both saw one, its run-on
    // vouched for at its ticks, and once spent, launches go ahead. Its
    // share of the turns is what the roster would say
    // (core::OwedTurnPermille, from every app's spec).
    std::shared_ptr<GateWaitBudget> gate_budget = std::make_shared<GateWaitBudget>();  // App is copied
    uint32_t owed_turn_permille = 0;
    uint64_t wait_seen_ns = 0;    // the last look that saw it wait for what the budget covers
    uint64_t run_on_seen_ns = 0;  // the last tick that saw its run-on
    uint64_t went_ahead = 0;
    bool ahead_queued = false;  // work launched ahead of the board is queued: no run-on to vouch for
  };

  Simulation() : board_(std::make_unique<Board>()) { InitBoard(board_.get()); }

  App& Add(uint64_t id, MemberSpec spec, uint64_t kernel_ns = 100 * kUs) {
    App app;
    app.member = JoinBoard(board_.get(), id, spec, now_);
    app.kernel_ns = kernel_ns;
    specs_.push_back(spec);
    apps_.push_back(app);
    // The node's roster, rewritten as each vGPU arrives.
    RosterEntry entry;
    entry.vgpu_id = id;
    entry.level = LevelWord(spec.priority, spec.rank);
    entry.weight = spec.weight;
    entry.cap_pct = spec.cap_pct;
    roster_.push_back(entry);
    for (size_t i = 0; i < apps_.size(); ++i) {
      apps_[i].owed_turn_permille = OwedTurnPermille(roster_, roster_[0].gpu.data(), roster_[i].vgpu_id);
    }
    return apps_.back();
  }

  // What the library's tick gives its budget.
  uint32_t OwedPermille(size_t i) const { return core::OwedPermille(specs_[i].cap_pct, apps_[i].owed_turn_permille); }

  void Run(uint64_t duration_ns) {
    const uint64_t end = now_ + duration_ns;
    int rr = 0;
    for (; now_ < end; now_ += tick_ns_) {
      for (size_t i = 0; i < apps_.size(); ++i) {
        App& a = apps_[i];
        if (!a.alive) continue;
        if (now_ % kMs == 0) {
          Heartbeat(board_.get(), a.member, specs_[i], now_);
          if (a.busy && a.vouches) ChargeRunOn(board_.get(), a.member, now_, config_);
          a.gate_budget->Configure(budgets_ ? OwedPermille(i) : 0, GateWaitBufferNs(config_), config_.min_quantum_ns);
          if (!a.busy) a.ahead_queued = false;
          const bool run_on =
              a.busy && a.vouches && !a.ahead_queued && specs_[i].cap_pct != 0 && TurnHolder(*board_) != a.member;
          if (run_on && a.run_on_seen_ns != 0) a.gate_budget->Vouch(now_ - a.run_on_seen_ns);
          a.run_on_seen_ns = run_on ? now_ : 0;
        }
        if (forged_debt_of_ == a.member) {
          // Another tenant writes this row's tokens a long way into debt.
          board_->members[a.member].cap_tokens_ns = -1'000'000'000'000'000;
          board_->members[a.member].cap_stamp_ns = now_;
        }
        if (turn_forged_by_ == a.member) {
          // This tenant writes itself into the turn, as cuda_app's
          // forge_turns does: holder + 1, a new sequence, the quantum
          // field full, started now (pacing_board.cc, struct Turn).
          const uint64_t sequence = ((board_->turn >> 8) + 1) & 0xffff;
          board_->turn = static_cast<uint64_t>(a.member + 1) | sequence << 8 | 255ull << 24 | (now_ / 1000) << 32;
          board_->members[a.member].vtime = 0;
          board_->members[a.member].busy_processes = 1;
        }
        bool wants = a.period_ns == 0 || now_ % a.period_ns < a.on_ns;
        if (a.step_kernels > 0 && a.launched_in_step == a.step_kernels) {
          wants = false;
          if (a.queue.empty() && a.pause_until == 0) a.pause_until = now_ + a.pause_ns;
          if (a.pause_until != 0 && now_ >= a.pause_until) {
            a.launched_in_step = 0;
            a.pause_until = 0;
            wants = true;
          }
        }
        const uint64_t seen = now_ - a.clock_lag_ns;
        while (wants && a.queue.size() < a.depth && now_ >= a.next_launch_ns &&
               (a.step_kernels == 0 || a.launched_in_step < a.step_kernels)) {
          if (TryEnter(board_.get(), a.member, seen, config_) == GateDecision::kGo) {
            a.wait_seen_ns = 0;
          } else if (!GoesAhead(a, seen)) {
            NoteWaiting(board_.get(), a.member, seen, config_);
            break;
          }
          a.next_launch_ns = now_ + a.launch_gap_ns;
          a.queue.push_back(a.kernel_ns);
          ++a.launched_in_step;
          NoteLaunch(board_.get(), a.member, seen);
          if (!a.busy) NoteBusy(board_.get(), a.member, a.busy = true, seen);
        }
      }
      // The GPU: one application's kernel per tick, round robin among those
      // with work (overlap, which exclusive turns should make rare).
      std::vector<size_t> ready;
      for (size_t i = 0; i < apps_.size(); ++i) {
        if (apps_[i].alive && !apps_[i].queue.empty()) ready.push_back(i);
      }
      // Under backfill turns the holder's long slice and the others' short
      // ones give the holder the GPU whenever it has work (switch costs are
      // not modelled).
      if (config_.backfill) {
        const int holder = TurnHolder(*board_);
        for (size_t i : ready) {
          if (apps_[i].member == holder) ready = {i};
        }
      }
      if (!ready.empty()) {
        App& a = apps_[ready[rr++ % ready.size()]];
        uint64_t& left = a.queue.front();
        const uint64_t ran = left < tick_ns_ ? left : tick_ns_;
        left -= ran;
        a.gpu_ns += ran;
        if (left == 0) a.queue.pop_front();
        if (ready.size() > 1) overlap_ns_ += tick_ns_;
        gpu_busy_ns_ += tick_ns_;
      }
      for (App& a : apps_) {
        if (a.alive && a.busy && a.queue.empty()) NoteBusy(board_.get(), a.member, a.busy = false, now_);
      }
      AdvanceTurn(board_.get(), now_, config_);
    }
  }

  // The library's gate (interposer/pacer.cc, EnterGate) for a launch the
  // board keeps waiting: whether it goes ahead, its waits for its cap's
  // tokens and others' turns spent.
  bool GoesAhead(App& a, uint64_t seen) {
    const bool budgeted = WaitsForOwnCap(*board_, a.member, seen, config_) ||
                          (a.owed_turn_permille != 0 && TurnHolder(*board_) != a.member);
    const bool consecutive = a.wait_seen_ns != 0 && a.wait_seen_ns + tick_ns_ == seen;
    a.wait_seen_ns = budgeted ? seen : 0;
    if (!budgeted) return false;
    // A wait starts only if the budget allows it, and goes on while it is
    // not spent.
    if (consecutive ? a.gate_budget->Spend(seen - tick_ns_, seen) : a.gate_budget->Allows(seen)) return false;
    ++a.went_ahead;
    a.wait_seen_ns = 0;  // the launch went: its next one starts a new wait
    a.ahead_queued = true;
    return true;
  }

  void Reset() {
    for (App& a : apps_) a.gpu_ns = 0;
    overlap_ns_ = gpu_busy_ns_ = 0;
  }
  double Share(size_t i) const {
    uint64_t total = 0;
    for (const App& a : apps_) total += a.gpu_ns;
    return total == 0 ? 0 : 100.0 * static_cast<double>(apps_[i].gpu_ns) / static_cast<double>(total);
  }
  double Fraction(size_t i, uint64_t window_ns) const {
    return 100.0 * static_cast<double>(apps_[i].gpu_ns) / static_cast<double>(window_ns);
  }

  // The simulation's step; a divisor of 1 ms (its processes tick each ms).
  uint64_t tick_ns_ = 10 * kUs;
  std::unique_ptr<Board> board_;
  std::vector<App> apps_;
  std::vector<MemberSpec> specs_;
  uint64_t now_ = 1'000'000'000;
  PacingConfig config_;
  uint64_t overlap_ns_ = 0;
  uint64_t gpu_busy_ns_ = 0;
  std::vector<RosterEntry> roster_;
  // Whether processes bound their waits (core/gate_wait_budget.h).
  bool budgets_ = true;
  int forged_debt_of_ = -1;  // the member whose tokens a forger keeps in debt
  int turn_forged_by_ = -1;  // the member that writes itself into the turn
};

MemberSpec Share(uint32_t pct) { return MemberSpec{pct, 0, Priority::kBestEffort}; }

TEST(PacingBoardTest, TwoBusyVgpusSplitTheGpuByShare) {
  for (auto [a, b] : {std::pair{30u, 70u}, std::pair{10u, 90u}, std::pair{50u, 50u}}) {
    Simulation sim;
    sim.Add(1, Share(a));
    sim.Add(2, Share(b));
    sim.Run(200 * kMs);
    sim.Reset();
    sim.Run(3000 * kMs);
    EXPECT_NEAR(sim.Share(0), a, 1.0) << a << "/" << b;
    EXPECT_NEAR(sim.Share(1), b, 1.0) << a << "/" << b;
    EXPECT_EQ(sim.overlap_ns_, 0u) << "turns are exclusive";
    EXPECT_GT(sim.gpu_busy_ns_, 2900 * kMs) << "the GPU is kept busy";
  }
}

TEST(PacingBoardTest, ThreeWaySplit) {
  Simulation sim;
  sim.Add(1, Share(20), 50 * kUs);
  sim.Add(2, Share(30), 200 * kUs);
  sim.Add(3, Share(50), 20 * kUs);
  sim.Run(200 * kMs);
  sim.Reset();
  sim.Run(3000 * kMs);
  EXPECT_NEAR(sim.Share(0), 20, 1.0);
  EXPECT_NEAR(sim.Share(1), 30, 1.0);
  EXPECT_NEAR(sim.Share(2), 50, 1.0);
}

TEST(PacingBoardTest, SharesAreWorkConserving) {
  // B (90%) only wants the GPU 20 ms of every 100 ms; A (10%) gets the rest.
  Simulation sim;
  sim.Add(1, Share(10));
  Simulation::App& b = sim.Add(2, Share(90));
  b.period_ns = 100 * kMs;
  b.on_ns = 20 * kMs;
  sim.Run(1000 * kMs);
  sim.Reset();
  sim.Run(2000 * kMs);
  EXPECT_GT(sim.gpu_busy_ns_, 1900 * kMs) << "idle time is handed to whoever wants it";
  EXPECT_GT(sim.Fraction(0, 2000 * kMs), 75.0);
}

TEST(PacingBoardTest, TrainingsPausingBetweenStepsStillSplitByShare) {
  // Trainings: 55 ms of work a step, launched at once, then a
  // synchronisation (the GPU drains) and a 1 ms host pause. Each pause must
  // not hand the other vGPU a turn it is not owed: it would queue a whole
  // step of its own in it.
  for (auto shares : {std::vector<uint32_t>{10, 90}, std::vector<uint32_t>{30, 70},
                      std::vector<uint32_t>{20, 30, 50}}) {
    Simulation sim;
    for (uint32_t share : shares) {
      Simulation::App& app = sim.Add(share, Share(share), 100 * kUs);
      app.depth = 1000;
      app.step_kernels = 550;
      app.pause_ns = 1 * kMs;
    }
    sim.Run(500 * kMs);
    sim.Reset();
    sim.Run(6000 * kMs);
    for (size_t i = 0; i < shares.size(); ++i) EXPECT_NEAR(sim.Share(i), shares[i], 1.5) << shares[0] << " " << i;
    EXPECT_GT(sim.gpu_busy_ns_, 5700 * kMs) << "pauses cost at most the pauses";
  }
}

TEST(PacingBoardTest, HardCapHoldsWhenAlone) {
  for (uint32_t cap : {30u, 10u, 75u}) {
    Simulation sim;
    sim.Add(1, MemberSpec{100, cap, Priority::kBestEffort}, 20 * kUs);
    EXPECT_TRUE(PacingNeeded(*sim.board_, 0, sim.now_));
    sim.Run(500 * kMs);
    sim.Reset();
    sim.Run(4000 * kMs);
    EXPECT_NEAR(sim.Fraction(0, 4000 * kMs), cap, 1.5) << "cap " << cap;
  }
}

TEST(PacingBoardTest, ALatencyCriticalVgpusCapHoldsAsABestEffortOnes) {
  // Alone, and beside a best-effort vGPU that always has work: the LC wins
  // the turn by its level whenever it has tokens, so it gets its cap, and
  // the other gets the rest. (Uncapped, an LC is never paced alone.)
  for (bool backfill : {false, true}) {
    for (bool beside : {false, true}) {
      Simulation sim;
      sim.config_.backfill = backfill;
      sim.Add(1, MemberSpec{100, 30, Priority::kLatencyCritical}, 20 * kUs);
      if (beside) sim.Add(2, Share(100));
      EXPECT_TRUE(PacingNeeded(*sim.board_, 0, sim.now_, sim.config_));
      sim.Run(500 * kMs);
      sim.Reset();
      sim.Run(3000 * kMs);
      EXPECT_NEAR(sim.Fraction(0, 3000 * kMs), 30, 1.5) << "backfill " << backfill << ", beside " << beside;
      if (beside) {
        EXPECT_GT(sim.Fraction(1, 3000 * kMs), 65.0) << "backfill " << backfill;
      }
    }
  }
}

TEST(PacingBoardTest, ACappedLatencyCriticalVgpuTakesTheTurnFromBestEffortAtOnce) {
  for (bool backfill : {false, true}) {
    Board board;
    InitBoard(&board);
    PacingConfig config;
    config.backfill = backfill;
    uint64_t now = 5'000'000'000;
    const int be = JoinBoard(&board, 1, Share(100), now);
    const int lc = JoinBoard(&board, 2, MemberSpec{100, 50, Priority::kLatencyCritical}, now);
    ASSERT_EQ(TryEnter(&board, be, now, config), GateDecision::kGo);
    NoteBusy(&board, be, true, now);
    ASSERT_EQ(TurnHolder(board), be);
    // The LC's first look finds the BE's turn; it waits and says so.
    now += kUs;
    EXPECT_EQ(TryEnter(&board, lc, now, config), GateDecision::kWait);
    NoteWaiting(&board, lc, now, config);
    // Its next: a higher level outruns the holder, whose turn passes at
    // once under backfill turns, at the BE's drain under exclusive ones.
    now += kUs;
    if (!backfill) {
      EXPECT_EQ(TryEnter(&board, lc, now, config), GateDecision::kWait) << "the BE's work is still queued";
      EXPECT_EQ(TryEnter(&board, be, now, config), GateDecision::kWait) << "the BE launches no more meanwhile";
      NoteBusy(&board, be, false, now);
    }
    EXPECT_EQ(TryEnter(&board, lc, now, config), GateDecision::kGo) << "backfill " << backfill;
    EXPECT_EQ(TurnHolder(board), lc);
    EXPECT_EQ(LaunchMayGo(&board, be, config), backfill) << "the BE backfills only where the node backfills";
  }
}

TEST(PacingBoardTest, ACappedLatencyCriticalVgpuOutOfTokensHoldsNobody) {
  // Its span would otherwise keep the BE waiting while it waits for its own
  // tokens: the GPU idle for up to kMaxHoldNs.
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const int lc = JoinBoard(&board, 1, MemberSpec{100, 10, Priority::kLatencyCritical}, now);
  const int be = JoinBoard(&board, 2, Share(100), now);
  HoldBestEffort(&board, lc, now + kMaxHoldNs, now);
  EXPECT_TRUE(LaunchesHeld(board, be, now + kUs)) << "with tokens, its span holds";
  // One 30 ms turn spends its 20 ms burst and 10 ms more; at 10% of the
  // time they come back some 100 ms later.
  ASSERT_EQ(TryEnter(&board, lc, now), GateDecision::kGo);
  NoteBusy(&board, lc, true, now);
  now += 30 * kMs;
  NoteBusy(&board, lc, false, now);
  AdvanceTurn(&board, now + kMs);
  EXPECT_EQ(TryEnter(&board, lc, now + 2 * kMs), GateDecision::kWait);
  EXPECT_FALSE(LaunchesHeld(board, be, now + 2 * kMs)) << "out of tokens, it holds nobody";
  EXPECT_TRUE(LaunchesHeld(board, be, now + 120 * kMs)) << "its tokens back, its span holds again";
}

TEST(PacingBoardTest, ACapHoldsWhenItsQueueOutlastsTheDrainTimeout) {
  // 16 queued kernels of 20 to 200 ms: 320 ms to 3.2 s of work per turn,
  // more than a turn waits for its holder's drain (quantum + drain
  // timeout). What ran on after the turn passed is charged as it runs;
  // before, it was not, and the cap gave 37% and 91% with 20 and 50 ms
  // kernels; charged once drained but for at most member_timeout_ns, 45%
  // with 100 ms kernels, and 83% on the fake driver with 50 ms kernels
  // launched back to back.
  for (uint64_t kernel_ms : {1ull, 20ull, 50ull, 100ull, 200ull}) {
    for (bool backfill : {false, true}) {
      Simulation sim;
      sim.config_.backfill = backfill;
      // Long queues make long cycles (3.2 s of work, then 7.5 s of waiting
      // at 30%): a window of many cycles, at a coarser step.
      const uint64_t window = kernel_ms < 100 ? 6000 * kMs : 24 * kernel_ms * 16 * kMs;
      if (kernel_ms >= 100) sim.tick_ns_ = 100 * kUs;
      sim.Add(1, MemberSpec{100, 30, Priority::kBestEffort}, kernel_ms * kMs).depth = 16;
      sim.Run(500 * kMs);
      sim.Reset();
      sim.Run(window);
      EXPECT_NEAR(sim.Fraction(0, window), 30, 3) << kernel_ms << " ms kernels, backfill " << backfill;
    }
  }
}

TEST(PacingBoardTest, NoHonestJobWaitsLongerThanItsShareExplains) {
  // Every paced process bounds its waits for its own cap's tokens and for
  // others' turns by the share it is owed (core/gate_wait_budget.h); an
  // honest job must never reach that bound, or its launches would go ahead
  // of its cap and its turn. Nor may its credit drift down: turn after turn
  // it must come back to the full buffer (a drift of 16 ms a turn, its own
  // drain counted as a wait for its tokens, ran 1 ms kernels out within
  // 4 s). Long queues (run-ons of seconds), steps, launch gaps, busy
  // neighbours capped and not, a cap above the floor, weights of 20/30/50,
  // both turn modes, caps from 10% to 70%.
  struct Neighbour {
    uint32_t weight = 100;
    uint32_t cap = 0;
    uint64_t kernel_ns = 100 * kUs;
    size_t step_kernels = 0;
    uint64_t pause_ns = 0;
    uint64_t launch_gap_ns = 0;
  };
  struct Case {
    const char* name;
    uint32_t cap;
    uint64_t kernel_ns;
    size_t depth;
    uint64_t window_ns;
    uint64_t tick_ns = 10 * kUs;
    size_t step_kernels = 0;
    uint64_t pause_ns = 0;
    uint64_t launch_gap_ns = 0;
    std::vector<Neighbour> neighbours = {};
    uint32_t weight = 100;
  };
  const Neighbour busy;
  const Neighbour capped{100, 40};
  const Neighbour stepping{100, 0, 100 * kUs, 40, 2 * kMs};
  const Neighbour launch_bound{100, 0, 50 * kUs, 0, 0, 80 * kUs};
  const std::vector<Case> cases = {
      {"gpu-bound", 30, 100 * kUs, 16, 2000 * kMs},
      {"gpu-bound 10%", 10, 100 * kUs, 16, 2000 * kMs},
      {"gpu-bound 70%", 70, 100 * kUs, 16, 2000 * kMs},
      {"1 ms kernels", 30, 1 * kMs, 16, 2000 * kMs, 50 * kUs},
      {"20 ms kernels", 30, 20 * kMs, 16, 6000 * kMs, 50 * kUs},
      {"50 ms kernels", 30, 50 * kMs, 16, 6000 * kMs, 50 * kUs},
      {"200 ms kernels", 30, 200 * kMs, 16, 12 * 200 * 16 * kMs, 100 * kUs},
      {"steps", 30, 100 * kUs, 64, 2000 * kMs, 10 * kUs, 40, 2 * kMs},
      {"launch-bound", 30, 50 * kUs, 16, 2000 * kMs, 10 * kUs, 0, 0, 80 * kUs},
      {"beside a busy neighbour", 30, 100 * kUs, 16, 2000 * kMs, 10 * kUs, 0, 0, 0, {busy}},
      {"two capped", 30, 100 * kUs, 16, 2000 * kMs, 10 * kUs, 0, 0, 0, {capped}},
      {"70% beside two busy", 70, 100 * kUs, 16, 2000 * kMs, 10 * kUs, 0, 0, 0, {busy, busy}},
      {"20 ms kernels beside a stepping one", 30, 20 * kMs, 16, 6000 * kMs, 50 * kUs, 0, 0, 0, {stepping}},
      // Uncapped: they wait only for others' turns, and only under
      // exclusive turns.
      {"uncapped, 20/30/50", 0, 100 * kUs, 16, 2000 * kMs, 10 * kUs, 0, 0, 0, {Neighbour{30}, Neighbour{50}}, 20},
      {"uncapped steps beside busy and launch-bound",
       0,
       100 * kUs,
       64,
       2000 * kMs,
       10 * kUs,
       40,
       2 * kMs,
       0,
       {busy, launch_bound}},
      {"uncapped launch-bound beside a capped one", 0, 50 * kUs, 16, 2000 * kMs, 10 * kUs, 0, 0, 80 * kUs, {capped}},
      {"uncapped 20 ms kernels beside steps", 0, 20 * kMs, 16, 6000 * kMs, 50 * kUs, 0, 0, 0, {stepping, busy}},
  };
  const uint64_t buffer = GateWaitBufferNs(PacingConfig{});
  for (const Case& c : cases) {
    for (bool backfill : {false, true}) {
      Simulation sim;
      sim.config_.backfill = backfill;
      sim.tick_ns_ = c.tick_ns;
      Simulation::App& app = sim.Add(1, MemberSpec{c.weight, c.cap, Priority::kBestEffort}, c.kernel_ns);
      app.depth = c.depth;
      app.step_kernels = c.step_kernels;
      app.pause_ns = c.pause_ns;
      app.launch_gap_ns = c.launch_gap_ns;
      for (size_t i = 0; i < c.neighbours.size(); ++i) {
        const Neighbour& n = c.neighbours[i];
        Simulation::App& other = sim.Add(2 + i, MemberSpec{n.weight, n.cap, Priority::kBestEffort}, n.kernel_ns);
        other.depth = n.step_kernels != 0 ? 64 : 16;
        other.step_kernels = n.step_kernels;
        other.pause_ns = n.pause_ns;
        other.launch_gap_ns = n.launch_gap_ns;
      }
      sim.Run(500 * kMs);
      sim.Reset();
      // The most credit each budgeted process had over the window's last
      // quarter: back at the full buffer unless its waits outrun its share.
      std::vector<uint64_t> most(sim.apps_.size(), 0);
      for (uint64_t ran = 0; ran < c.window_ns; ran += 50 * kMs) {
        sim.Run(50 * kMs);
        for (size_t i = 0; i < sim.apps_.size() && ran >= c.window_ns * 3 / 4; ++i) {
          most[i] = std::max(most[i], sim.apps_[i].gate_budget->CreditNs(sim.now_));
        }
      }
      for (size_t i = 0; i < sim.apps_.size(); ++i) {
        const Simulation::App& a = sim.apps_[i];
        EXPECT_EQ(a.went_ahead, 0u) << c.name << ", backfill " << backfill << ", member " << a.member;
        if (sim.OwedPermille(i) != 0) {
          EXPECT_GE(most[i], buffer * 9 / 10) << c.name << ", backfill " << backfill << ", member " << a.member;
        }
      }
      if (c.cap != 0 && c.launch_gap_ns == 0 && c.step_kernels == 0 && c.neighbours.empty()) {
        EXPECT_NEAR(sim.Fraction(0, c.window_ns), c.cap, 3) << c.name << ", backfill " << backfill;
      }
    }
  }
}

TEST(PacingBoardTest, AForgedDebtHoldsACappedVgpuForAtMostWhatItsCapExplains) {
  // Another tenant keeps a 30% vGPU's tokens deep in debt. Without the
  // bound its launches waited for tokens that never came (the gate's last
  // resort was a minute per launch); with it, the vGPU launches in the
  // seven eighths of its cap's time the budget leaves it, and gets the GPU
  // time that buys.
  for (bool budgets : {false, true}) {
    Simulation sim;
    sim.budgets_ = budgets;
    Simulation::App& victim = sim.Add(1, MemberSpec{100, 30, Priority::kBestEffort});
    sim.forged_debt_of_ = victim.member;
    sim.Run(2000 * kMs);  // the buffer, spent
    sim.Reset();
    sim.Run(4000 * kMs);
    if (budgets) {
      EXPECT_GT(sim.apps_[0].went_ahead, 0u);
      EXPECT_GE(sim.Fraction(0, 4000 * kMs), 30 * 7 / 8 - 3);
    } else {
      EXPECT_LT(sim.Fraction(0, 4000 * kMs), 1) << "the forgery held nothing: the test no longer tests the bound";
    }
  }
}

TEST(PacingBoardTest, AForgedTurnHoldsAVgpuForAtMostWhatItsShareExplains) {
  // Another tenant writes itself into the turn every tick (busy, its
  // virtual time 0). A capped vGPU waits at the gate for turns in either
  // mode, an uncapped one under exclusive turns; without the bound each of
  // their launches waited for the gate's 2 s fail-open bound (not
  // modelled here: they never launched). With it, each launches in the
  // seven eighths of its owed share the budget leaves it: half its floor
  // beside the forger (25%), less than its cap (30%).
  struct Case {
    const char* name;
    uint32_t cap;
    bool backfill;
    double owed_pct;
  };
  for (const Case& c : {Case{"capped, exclusive", 30, false, 25}, Case{"capped, backfill", 30, true, 25},
                        Case{"uncapped, exclusive", 0, false, 25}}) {
    for (bool budgets : {false, true}) {
      Simulation sim;
      sim.config_.backfill = c.backfill;
      sim.budgets_ = budgets;
      Simulation::App& forger = sim.Add(1, MemberSpec{100, 0, Priority::kBestEffort});
      forger.depth = 0;  // launches nothing: it only writes
      sim.turn_forged_by_ = forger.member;
      sim.Add(2, MemberSpec{100, c.cap, Priority::kBestEffort});
      sim.Run(2000 * kMs);  // the buffer, spent
      sim.Reset();
      sim.Run(4000 * kMs);
      const Simulation::App& victim = sim.apps_[1];
      if (budgets) {
        EXPECT_GT(victim.went_ahead, 0u) << c.name;
        EXPECT_GE(sim.Fraction(1, 4000 * kMs), c.owed_pct * 7 / 8 - 3) << c.name;
        if (c.cap != 0) {
          EXPECT_LE(sim.Fraction(1, 4000 * kMs), c.cap + 3) << c.name << ": past its cap";
        }
      } else {
        EXPECT_LT(sim.Fraction(1, 4000 * kMs), 1) << c.name
                                                  << ": the forgery held nothing; the test no longer "
                                                     "tests the bound";
      }
    }
  }
}

TEST(PacingBoardTest, ARunOnNobodyVouchesForCostsAtMostTheMemberTimeout) {
  // A capped vGPU whose busy mark outlives the process that set it (killed
  // with work queued): nothing ticks for it, and the mark never clears.
  // Charged from the turn's end for as long as the mark stays, its debt
  // would grow faster than its cap earns, and the vGPU would never get
  // another turn. Charged for at most member_timeout_ns, it gets its cap.
  Simulation sim;
  Simulation::App& app = sim.Add(1, MemberSpec{100, 30, Priority::kBestEffort}, 50 * kMs);
  app.depth = 16;
  app.vouches = false;
  sim.Run(500 * kMs);
  sim.Reset();
  sim.Run(6000 * kMs);
  EXPECT_GT(sim.apps_[0].gpu_ns, 0u) << "it still gets turns";
  EXPECT_GT(sim.Fraction(0, 6000 * kMs), 30.0) << "what nobody vouched for past the timeout went uncharged";
}

// A vGPU capped at 30% takes a turn at `*now` and queues `queue_ms` of
// work; the board advances each millisecond until it has run (its turn
// passes at the drain timeout), and `each_ms` runs at each of them.
// Returns its member; `*now` is then the end of its queue.
int QueueCappedWork(Board* board, const PacingConfig& config, uint64_t* now, uint64_t queue_ms,
                    const std::function<void(int member, uint64_t now)>& each_ms = nullptr) {
  const int job = JoinBoard(board, 1, MemberSpec{100, 30, Priority::kBestEffort}, *now);
  EXPECT_EQ(TryEnter(board, job, *now, config), GateDecision::kGo);
  NoteLaunch(board, job, *now);
  NoteBusy(board, job, true, *now);
  for (const uint64_t end = *now + queue_ms * kMs; *now < end; *now += kMs) {
    AdvanceTurn(board, *now, config);
    if (each_ms) each_ms(job, *now);
  }
  return job;
}

TEST(PacingBoardTest, ARunOnIsChargedOnceWhoeverChargesIt) {
  // The process's ticks charge its run-on as it goes; its drain, seen by
  // the board, settles the rest. Together they charge the time from the
  // turn's end to the drain once.
  Board board;
  InitBoard(&board);
  const PacingConfig config;
  uint64_t now = 5'000'000'000;
  const int job = QueueCappedWork(&board, config, &now, 2000, [&](int member, uint64_t at) {
    ChargeRunOn(&board, member, at, config);
    ChargeRunOn(&board, member, at, config);  // a second busy process of the vGPU
  });
  EXPECT_NEAR(static_cast<double>(board.members[job].charged_ns), 2000.0 * kMs, 2.0 * kMs)
      << "past the timeout too, while it vouches";
  NoteBusy(&board, job, false, now);  // drained at 2 s
  now += 100 * kMs;
  AdvanceTurn(&board, now, config);
  ChargeRunOn(&board, job, now, config);  // a late tick: drained, nothing more
  EXPECT_NEAR(static_cast<double>(board.members[job].charged_ns), 2000.0 * kMs, 2.0 * kMs);
}

TEST(PacingBoardTest, AWaitForItsOwnCapIsToldFromAWaitForOthers) {
  // The gate's 2 s bound on a wait for others (a stuck holder) must not cut
  // short a wait for the vGPU's own cap to pay back its debt.
  Board board;
  InitBoard(&board);
  const PacingConfig config;
  uint64_t now = 5'000'000'000;
  const int free = JoinBoard(&board, 2, Share(100), now);
  EXPECT_FALSE(WaitsForOwnCap(board, free, now, config)) << "uncapped";
  // A turn whose queue ran 300 ms, past the drain timeout.
  bool first = true;
  const int capped = QueueCappedWork(&board, config, &now, 300, [&](int member, uint64_t at) {
    if (first) {
      EXPECT_FALSE(WaitsForOwnCap(board, member, at, config)) << "in its turn, with a turn's worth";
    }
    first = false;
  });
  EXPECT_TRUE(WaitsForOwnCap(board, capped, now, config)) << "its run-on, not yet charged, counts";
  NoteBusy(&board, capped, false, now);
  NoteWaiting(&board, capped, now, config);  // its next launch waits: the run-on is settled
  AdvanceTurn(&board, now, config);
  // Its debt, about 200 ms at 30%, is paid back some 700 ms later.
  EXPECT_TRUE(WaitsForOwnCap(board, capped, now + 500 * kMs, config));
  EXPECT_FALSE(WaitsForOwnCap(board, capped, now + 1000 * kMs, config));
}

TEST(PacingBoardTest, AWaitAfterALongQueueDrainsIsNoReturnFromIdle) {
  // A capped job queues 16 kernels of 20 ms at its turn's start, then
  // synchronises: it launches nothing while they run past its turn (passed
  // at the drain timeout), and its next launch waits at the gate. The
  // library notes that wait before the board looks at the turn. It is no
  // return from idle: the job's work ran until the drain, and what ran on
  // after the turn is owed. Before, the wait moved the turn's end to now,
  // and that was charged in every other step only: 39% for a 30% cap on the
  // fake driver, 44.8% on an H200 (docs/benchmarks.md, "A compute cap held
  // from outside").
  Board board;
  InitBoard(&board);
  const PacingConfig config;
  uint64_t now = 5'000'000'000;
  const int job = QueueCappedWork(&board, config, &now, 320);
  EXPECT_NE(TurnHolder(board), job) << "passed at the drain timeout";
  const uint64_t charged_at_turn_end = board.members[job].charged_ns;
  EXPECT_NEAR(static_cast<double>(charged_at_turn_end), 210.0 * kMs, 2.0 * kMs);
  NoteBusy(&board, job, false, now);  // drained at 320 ms
  now += kMs;
  NoteWaiting(&board, job, now, config);  // its next launch waits
  EXPECT_EQ(TryEnter(&board, job, now, config), GateDecision::kWait) << "it owes more than it has";
  EXPECT_NEAR(static_cast<double>(board.members[job].charged_ns), 320.0 * kMs, 3.0 * kMs)
      << "what ran on after its turn is charged";
}

TEST(PacingBoardTest, CapAndShareTogether) {
  // A is capped at 20%; B takes what A may not.
  Simulation sim;
  sim.Add(1, MemberSpec{50, 20, Priority::kBestEffort});
  sim.Add(2, Share(50));
  sim.Run(500 * kMs);
  sim.Reset();
  sim.Run(3000 * kMs);
  EXPECT_NEAR(sim.Fraction(0, 3000 * kMs), 20, 1.5);
  EXPECT_GT(sim.Fraction(1, 3000 * kMs), 75.0);
}

PacingConfig Backfill() {
  PacingConfig config;
  config.backfill = true;
  return config;
}

// GPU time each app got in a window, over what it gets alone in the same
// window (its fraction of alone).
std::vector<double> FractionsOfAlone(const std::vector<Simulation::App>& apps, uint64_t window_ns,
                                     const std::vector<double>& alone_gpu_pct) {
  std::vector<double> out;
  for (size_t i = 0; i < apps.size(); ++i) {
    out.push_back(100.0 * static_cast<double>(apps[i].gpu_ns) / static_cast<double>(window_ns) / alone_gpu_pct[i] *
                  100.0);
  }
  return out;
}

TEST(PacingBoardTest, BackfillTurnsStillSplitBusyVgpusByShare) {
  for (auto [a, b] : {std::pair{30u, 70u}, std::pair{10u, 90u}, std::pair{50u, 50u}}) {
    Simulation sim;
    sim.config_ = Backfill();
    sim.Add(1, Share(a));
    sim.Add(2, Share(b));
    sim.Run(200 * kMs);
    sim.Reset();
    sim.Run(3000 * kMs);
    EXPECT_NEAR(sim.Share(0), a, 1.0) << a << "/" << b;
    EXPECT_NEAR(sim.Share(1), b, 1.0) << a << "/" << b;
    EXPECT_GT(sim.gpu_busy_ns_, 2900 * kMs);
  }
}

// Launch-bound trainings: a 50 us kernel per 100 us of host work, so each
// keeps the GPU half busy alone. Exclusive turns idle the GPU while the
// holder's host side works; backfill turns run the other in those gaps.
TEST(PacingBoardTest, BackfillTurnsFillWhatExclusiveTurnsLeaveIdle) {
  double busy_pct[2];
  for (bool backfill : {false, true}) {
    Simulation sim;
    sim.config_.backfill = backfill;
    for (uint64_t id : {1u, 2u}) {
      Simulation::App& app = sim.Add(id, Share(50), 50 * kUs);
      app.launch_gap_ns = 100 * kUs;
    }
    sim.Run(200 * kMs);
    sim.Reset();
    sim.Run(2000 * kMs);
    busy_pct[backfill] = 100.0 * static_cast<double>(sim.gpu_busy_ns_) / static_cast<double>(2000 * kMs);
    const auto fractions = FractionsOfAlone(sim.apps_, 2000 * kMs, {50.0, 50.0});
    for (double f : fractions) EXPECT_GE(f, 45.0) << "each keeps at least its share; backfill " << backfill;
    if (backfill) {
      EXPECT_GT(fractions[0] + fractions[1], 180.0) << "both run near their alone speed";
    }
  }
  EXPECT_LT(busy_pct[0], 60.0) << "exclusive turns: the GPU idles during the holder's host work";
  EXPECT_GT(busy_pct[1], 90.0) << "backfill turns: it does not";
}

// A GPU-bound 25% vGPU beside a launch-bound 75% one: each keeps its floor,
// and the GPU-bound one fills the launch-bound one's gaps.
TEST(PacingBoardTest, BackfillTurnsKeepEachFloorBetweenDifferentJobs) {
  Simulation sim;
  sim.config_ = Backfill();
  sim.Add(1, Share(25), 500 * kUs);
  Simulation::App& launch_bound = sim.Add(2, Share(75), 50 * kUs);
  launch_bound.launch_gap_ns = 80 * kUs;
  launch_bound.depth = 4;
  sim.Run(200 * kMs);
  sim.Reset();
  sim.Run(3000 * kMs);
  const auto fractions = FractionsOfAlone(sim.apps_, 3000 * kMs, {100.0, 100.0 * 50 / 80});
  EXPECT_GE(fractions[0], 25.0 - 2.0);
  EXPECT_GE(fractions[1], 75.0 - 2.0);
  EXPECT_GT(sim.gpu_busy_ns_, 2900 * kMs);
}

// The turn floor (core/turn_floor.h) must never call an honest vGPU starved:
// each vGPU of each mix, watched as its process watches it (a look every
// millisecond), holds the turn at least half its floor of the time it wants
// the GPU. Mixes of different jobs: GPU-bound, launch-bound, trainings that
// pause each step.
TEST(PacingBoardTest, NoHonestMixStarvesAVgpuOfItsTurnFloor) {
  struct Job {
    uint32_t share;
    uint64_t kernel_ns, launch_gap_ns;
    size_t step_kernels;
  };
  const std::vector<std::vector<Job>> mixes = {
      {{25, 500 * kUs, 0, 0}, {75, 50 * kUs, 80 * kUs, 0}},
      {{75, 500 * kUs, 0, 0}, {25, 50 * kUs, 80 * kUs, 0}},
      {{20, 500 * kUs, 0, 0}, {30, 50 * kUs, 80 * kUs, 0}, {50, 200 * kUs, 0, 40}},
      {{10, 100 * kUs, 0, 20}, {90, 1000 * kUs, 0, 0}},
  };
  for (const std::vector<Job>& mix : mixes) {
    Simulation sim;
    sim.config_ = Backfill();
    uint32_t weights = 0;
    for (size_t i = 0; i < mix.size(); ++i) {
      Simulation::App& app = sim.Add(i + 1, Share(mix[i].share), mix[i].kernel_ns);
      app.launch_gap_ns = mix[i].launch_gap_ns;
      app.step_kernels = mix[i].step_kernels;
      app.pause_ns = 2 * kMs;
      weights += mix[i].share;
    }
    std::vector<TurnFloorWatch> watches(mix.size());
    for (size_t i = 0; i < mix.size(); ++i) watches[i].SetFloor(1000 * mix[i].share / weights);
    sim.Run(200 * kMs);
    for (int ms = 0; ms < 4000; ++ms) {
      sim.Run(kMs);
      for (size_t i = 0; i < mix.size(); ++i) {
        const bool holds = TurnHolder(*sim.board_) == sim.apps_[i].member;
        watches[i].Sample(holds || !sim.apps_[i].queue.empty(), holds, kMs);
        ASSERT_FALSE(watches[i].starved()) << "mix " << &mix - &mixes[0] << ", vGPU " << i << " held the turn "
                                           << watches[i].held_permille() << " permille, floor "
                                           << watches[i].floor_permille();
      }
    }
  }
}

TEST(PacingBoardTest, BackfillTurnsNeverLetACappedVgpuBackfill) {
  Simulation sim;
  sim.config_ = Backfill();
  sim.Add(1, MemberSpec{50, 20, Priority::kBestEffort});
  Simulation::App& other = sim.Add(2, Share(50), 50 * kUs);
  other.launch_gap_ns = 100 * kUs;  // leaves gaps a capped vGPU must not fill
  sim.Run(500 * kMs);
  sim.Reset();
  sim.Run(3000 * kMs);
  EXPECT_NEAR(sim.Fraction(0, 3000 * kMs), 20, 1.5);
}

TEST(PacingBoardTest, BackfillTurnsStillHoldBestEffortForLatencyCritical) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  const int lc = JoinBoard(&board, 3, MemberSpec{100, 0, Priority::kLatencyCritical}, now);
  ASSERT_EQ(TryEnter(&board, a, now, Backfill()), GateDecision::kGo);
  ASSERT_EQ(TurnHolder(board), a);
  EXPECT_EQ(TryEnter(&board, b, now, Backfill()), GateDecision::kGo) << "b backfills";
  EXPECT_GE(board.members[b].demand_ns, now) << "and is marked as demanding";
  HoldBestEffort(&board, lc, now + 5 * kMs, now);
  EXPECT_EQ(TryEnter(&board, a, now + kMs, Backfill()), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, b, now + kMs, Backfill()), GateDecision::kWait);
}

// A training blocked behind the others' work launches nothing, yet has
// work queued: it still gets its turns.
TEST(PacingBoardTest, BackfillTurnsGiveABlockedTrainingItsTurnsAmongThree) {
  Simulation sim;
  sim.config_ = Backfill();
  Simulation::App& training = sim.Add(1, Share(20), 100 * kUs);
  training.depth = 1000;
  training.step_kernels = 200;
  training.pause_ns = 1 * kMs;
  sim.Add(2, Share(30), 100 * kUs);
  sim.Add(3, Share(50), 100 * kUs);
  sim.Run(500 * kMs);
  sim.Reset();
  sim.Run(3000 * kMs);
  EXPECT_NEAR(sim.Share(0), 20, 2.0);
  EXPECT_NEAR(sim.Share(1), 30, 2.0);
  EXPECT_NEAR(sim.Share(2), 50, 2.0);
}

// A process reads the clock, is descheduled (a CPU-starved or throttled
// container), and meanwhile another process starts a turn: its `now` is
// older than the turn's start. The turn is brand new, not 2^32 µs old
// (the start is kept in µs mod 2^32): nobody may be charged for it.
TEST(PacingBoardTest, AStaleClockSeesABrandNewTurnNotAWrappedOne) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const PacingConfig config;
  const int a = JoinBoard(&board, 1, Share(30), now);
  const int b = JoinBoard(&board, 2, Share(70), now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  NoteLaunch(&board, a, now);
  NoteBusy(&board, a, true, now);
  NoteWaiting(&board, b, now);
  // A's quantum ends, it drains, and B takes the turn and launches.
  now += config.quantum_ns + kMs;
  NoteBusy(&board, a, false, now);
  NoteWaiting(&board, b, now);
  ASSERT_EQ(TryEnter(&board, b, now), GateDecision::kGo);
  NoteLaunch(&board, b, now);
  NoteBusy(&board, b, true, now);
  const uint64_t a_charged = board.members[a].charged_ns;
  const uint64_t b_turns = board.members[b].turns;
  EXPECT_NEAR(static_cast<double>(a_charged), static_cast<double>(config.quantum_ns + kMs), 2.0 * kUs);
  // A's gate and an AdvanceTurn with a clock read 5 ms before B's turn began.
  for (uint64_t lag : {1 * kUs, 5 * kMs}) {
    const uint64_t stale = now - lag;
    AdvanceTurn(&board, stale);
    NoteWaiting(&board, a, stale);
    EXPECT_EQ(TryEnter(&board, a, stale), GateDecision::kWait) << lag;
    EXPECT_EQ(TurnHolder(board), b) << "B's turn has just begun; " << lag;
    EXPECT_EQ(board.members[b].charged_ns, 0u) << lag;
    EXPECT_EQ(board.members[b].turns, b_turns) << lag;
    EXPECT_EQ(TryEnter(&board, b, stale), GateDecision::kGo) << "B holds a fresh turn; " << lag;
  }
  EXPECT_EQ(board.members[a].charged_ns, a_charged);
  // B's turn runs its quantum and ends as usual, charged what it took.
  now += config.quantum_ns + kMs;
  NoteBusy(&board, b, false, now);
  NoteWaiting(&board, a, now);
  AdvanceTurn(&board, now);
  EXPECT_EQ(board.members[b].turns, b_turns + 1) << "B, owed more, has the next turn too";
  EXPECT_NEAR(static_cast<double>(board.members[b].charged_ns), static_cast<double>(config.quantum_ns + kMs),
              2.0 * kUs);
}

TEST(PacingBoardTest, SharesHoldWhenAProcessUsesStaleClockReads) {
  for (uint64_t lag : {30 * kUs, 2 * kMs}) {
    Simulation sim;
    Simulation::App& a = sim.Add(1, Share(30));
    a.clock_lag_ns = lag;
    sim.Add(2, Share(70));
    sim.Run(200 * kMs);
    sim.Reset();
    sim.Run(3000 * kMs);
    EXPECT_NEAR(sim.Share(0), 30, 1.5) << lag;
    EXPECT_EQ(sim.overlap_ns_, 0u) << lag;
    // Turns follow one another: together they were charged the 3.2 s they
    // lasted (give or take the lag: A starts its own turns that early).
    uint64_t charged = 0;
    for (const Simulation::App& app : sim.apps_) charged += sim.board_->members[app.member].charged_ns;
    EXPECT_LE(charged, 3200 * kMs + 10 * kMs) << lag;
    EXPECT_GT(charged, 3000 * kMs) << lag;
  }
}

TEST(PacingBoardTest, PacingIsOnlyNeededUnderContentionOrCap) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 11, Share(30), now);
  EXPECT_FALSE(PacingNeeded(board, a, now)) << "a vGPU alone runs unpaced, whatever its share";
  const int lc = JoinBoard(&board, 12, MemberSpec{100, 0, Priority::kLatencyCritical}, now);
  EXPECT_TRUE(PacingNeeded(board, a, now)) << "beside LC, BE goes through the gate (LC may hold it)";
  EXPECT_FALSE(PacingNeeded(board, lc, now)) << "LC never does";
  const int b = JoinBoard(&board, 13, Share(70), now);
  EXPECT_TRUE(PacingNeeded(board, a, now));
  EXPECT_TRUE(PacingNeeded(board, b, now));
  // The others' processes all die: their heartbeats stop and A is alone again.
  EXPECT_FALSE(PacingNeeded(board, a, now + 2'000'000'000));
  EXPECT_EQ(TryEnter(&board, lc, now), GateDecision::kGo) << "LC never waits";
  const int capped_lc = JoinBoard(&board, 14, MemberSpec{100, 40, Priority::kLatencyCritical}, now + 2'000'000'000);
  EXPECT_TRUE(PacingNeeded(board, capped_lc, now + 2'000'000'000)) << "a capped LC, even alone";
}

TEST(PacingBoardTest, JoinFindsTheSameEntryAndReusesDeadOnes) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 7, Share(30), now);
  EXPECT_EQ(JoinBoard(&board, 7, Share(30), now), a) << "a second process of the vGPU";
  for (int i = 1; i < kBoardMembers; ++i) ASSERT_GE(JoinBoard(&board, 100 + i, Share(10), now), 0);
  EXPECT_EQ(JoinBoard(&board, 999, Share(10), now), -1) << "full";
  // Later, only vGPU 7 still heartbeats: the others' entries are reusable.
  Heartbeat(&board, a, Share(30), now + 1'500'000'000);
  EXPECT_GE(JoinBoard(&board, 999, Share(10), now + 1'600'000'000), 0);
}

// vGPUs starting together each get an entry of their own. (Claiming an
// entry by its id first, then stamping its heartbeat, let a second joiner
// find the new id beside the dead owner's heartbeat and take the entry too:
// two vGPUs on one entry, neither paced, one missing from the board; seen
// 1 start in 60 with two CPU hogs.)
TEST(PacingBoardTest, VgpusJoiningAtOnceGetAnEntryEach) {
  constexpr int kJoiners = 2;
  auto board = std::make_unique<Board>();
  int collisions = 0;
  for (int round = 0; round < 1000; ++round) {
    InitBoard(board.get());
    // Round 1 onwards: entries left behind by vGPUs dead for 2 s.
    const uint64_t now = 5'000'000'000 + static_cast<uint64_t>(round % 2) * 2'000'000'000;
    if (round % 2 == 1) {
      for (int i = 0; i < kJoiners; ++i) JoinBoard(board.get(), 1000 + 2 * i + 1, Share(50), now - 2'000'000'000);
    }
    std::atomic<int> ready{0};
    int member[kJoiners];
    std::vector<std::thread> threads;
    for (int t = 0; t < kJoiners; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        for (int spins = 0; ready.load() < kJoiners; ++spins) {
          if (spins > 10000) std::this_thread::yield();  // a busy machine
        }
        member[t] = JoinBoard(board.get(), 2 * t + 1, Share(50), now);
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kJoiners; ++t) {
      ASSERT_GE(member[t], 0);
      collisions += board->members[member[t]].vgpu_id != static_cast<uint64_t>(2 * t + 1);
    }
  }
  EXPECT_EQ(collisions, 0) << "joiners that share an entry with another vGPU";
}

TEST(PacingBoardTest, AHolderThatNeverDrainsIsPassedOver) {
  // A process of A was killed with work queued: A stays "busy" forever.
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const PacingConfig config;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  NoteLaunch(&board, a, now);
  NoteBusy(&board, a, true, now);
  uint64_t waited = 0;
  while (TryEnter(&board, b, now) != GateDecision::kGo) {
    NoteWaiting(&board, b, now);
    Heartbeat(&board, a, Share(50), now);  // its other processes live on
    Heartbeat(&board, b, Share(50), now);
    now += kMs;
    waited += kMs;
    ASSERT_LT(waited, 1000 * kMs) << "B must not wait for ever";
  }
  EXPECT_GE(waited, config.quantum_ns);
  EXPECT_LE(waited, config.quantum_ns + config.drain_timeout_ns + 2 * kMs);
}

TEST(PacingBoardTest, AForgedQuantumHoldsTheTurnNoLongerThanTheNodesQuantum) {
  // A tenant wrote its vGPU into the turn with the longest quantum the word
  // holds (255 ms) and a busy mark, then died (cuda_app forge_turns): its
  // capped neighbour, which waits for turns in either mode, waits out the
  // node's quantum, and under exclusive turns the drain timeout, not the
  // forged quantum (455 ms before under exclusive turns; under backfill
  // turns a holder ahead of its fair share loses the turn anyway).
  const MemberSpec capped{100, 50, Priority::kBestEffort};
  for (const bool backfill : {false, true}) {
    Board board;
    InitBoard(&board);
    uint64_t now = 5'000'000'000;
    PacingConfig config;
    config.backfill = backfill;
    const int forger = JoinBoard(&board, 1, Share(50), now);
    const int victim = JoinBoard(&board, 2, capped, now);
    NoteBusy(&board, forger, true, now);
    board.turn = static_cast<uint64_t>(forger + 1) | 1ull << 8 | 255ull << 24 | (now / 1000) << 32;
    uint64_t waited = 0;
    while (TryEnter(&board, victim, now, config) != GateDecision::kGo) {
      NoteWaiting(&board, victim, now, config);
      Heartbeat(&board, forger, Share(50), now);  // the forger's row lives on in another process
      Heartbeat(&board, victim, capped, now);
      AdvanceTurn(&board, now, config);
      now += kMs;
      waited += kMs;
      ASSERT_LT(waited, 1000 * kMs) << "the victim must not wait for ever";
    }
    EXPECT_LE(waited, config.quantum_ns + (backfill ? 0 : config.drain_timeout_ns) + 2 * kMs)
        << "backfill " << backfill;
  }
}

// A process's launching thread marks it busy, and before it tells the board
// (a CPU-starved thread is descheduled anywhere), its compute thread finds
// the work done, clears the mark and tells the board first: the board hears
// "drained", then "busy", from a process that has drained. (Dropping the
// drain at a count of 0 left the vGPU busy for ever: each of its turns then
// lasted quantum + drain timeout, 210 ms, charged to it, the GPU idle; with
// two CPU hogs that took one vGPU of a 30/70 pair from 30% to 1-23%.)
TEST(PacingBoardTest, ADrainHeardBeforeItsLaunchIsNotLost) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const PacingConfig config;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  for (int turn = 0; turn < 3; ++turn) {
    // A holds the turn, launches, and the two notes arrive swapped.
    const uint64_t start = now;
    while (TryEnter(&board, a, now) != GateDecision::kGo) {
      NoteWaiting(&board, a, now);
      now += 10 * kUs;
      ASSERT_LT(now - start, 20 * kMs);
    }
    NoteLaunch(&board, a, now);
    NoteBusy(&board, a, false, now);
    NoteBusy(&board, a, true, now + kUs);
    const uint64_t charged = board.members[a].charged_ns;
    // B waits: A has drained and launches nothing more.
    const uint64_t asked = now;
    while (TryEnter(&board, b, now) != GateDecision::kGo) {
      NoteWaiting(&board, b, now);
      now += 10 * kUs;
      ASSERT_LT(now - asked, config.quantum_ns + config.drain_timeout_ns + kMs) << "turn " << turn;
    }
    EXPECT_LE(now - asked, config.quantum_ns) << "a drained holder hands over by its quantum's end; turn " << turn;
    EXPECT_LE(board.members[a].charged_ns - charged, 100 * kUs) << "turn " << turn;
    // B launches and drains in order; A asks for the turn again.
    NoteLaunch(&board, b, now);
    NoteBusy(&board, b, true, now);
    now += kMs;
    NoteBusy(&board, b, false, now);
    NoteWaiting(&board, a, now);
    Heartbeat(&board, a, Share(50), now);
    Heartbeat(&board, b, Share(50), now);
  }
}

TEST(PacingBoardTest, AnIdleHolderHandsOverAtOnce) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  NoteLaunch(&board, a, now);
  NoteBusy(&board, a, true, now);
  now += 100 * kUs;
  NoteBusy(&board, a, false, now);  // drained, and launches nothing more
  uint64_t waited = 0;
  while (TryEnter(&board, b, now) != GateDecision::kGo) {
    NoteWaiting(&board, b, now);
    now += 10 * kUs;
    waited += 10 * kUs;
    ASSERT_LT(waited, 10 * kMs);
  }
  EXPECT_LE(waited, PacingConfig{}.idle_handover_ns + 20 * kUs);
  EXPECT_EQ(TurnHolder(board), b);
}

// After the gate said go and the process marked itself busy, a launch looks
// once more (LaunchMayGo). Only exclusive turns are the holder's alone.
TEST(PacingBoardTest, OnlyTheHolderOfAnExclusiveTurnMayLaunch) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  MemberSpec capped = Share(50);
  capped.cap_pct = 30;
  const int c = JoinBoard(&board, 3, capped, now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  EXPECT_TRUE(LaunchMayGo(&board, a));
  EXPECT_FALSE(LaunchMayGo(&board, b));
  PacingConfig backfill;
  backfill.backfill = true;
  EXPECT_TRUE(LaunchMayGo(&board, b, backfill)) << "an uncapped member backfills";
  EXPECT_FALSE(LaunchMayGo(&board, c, backfill)) << "a capped member's turns stay exclusive";
}

// The turn word's closing bit (pacing_board.cc: bit 7), as a hand-over that
// saw its holder drained leaves it between its close and its last look.
void Close(Board* board) { board->turn |= 1ull << 7; }

TEST(PacingBoardTest, AClosingTurnLetsNoLaunchOfItsHolderThroughAndAMarkedHolderReopensIt) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  NoteLaunch(&board, a, now);
  Close(&board);
  EXPECT_FALSE(LaunchMayGo(&board, a));
  // A turn its holder keeps (its quantum is not over) is reopened by the
  // next look, here A's own gate.
  EXPECT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  EXPECT_TRUE(LaunchMayGo(&board, a));
  // A's quantum is over and B waits; a closer closed the turn, and a launch
  // of A marked its process busy before the closer looked again: whoever
  // looks next reopens the turn, which stays A's.
  NoteBusy(&board, a, true, now);
  NoteWaiting(&board, b, now);
  now += 20 * kMs;
  NoteWaiting(&board, b, now);
  Close(&board);
  AdvanceTurn(&board, now);
  EXPECT_EQ(TurnHolder(board), a);
  EXPECT_EQ(board.turn & (1ull << 7), 0u) << "reopened";
  EXPECT_TRUE(LaunchMayGo(&board, a));
  // Once A has drained, the turn closes and passes at the next look.
  NoteBusy(&board, a, false, now);
  NoteWaiting(&board, b, now);
  AdvanceTurn(&board, now);
  EXPECT_EQ(TurnHolder(board), b);
  EXPECT_EQ(board.turn & (1ull << 7), 0u);
}

TEST(PacingBoardTest, ATurnLeftClosingByADeadCloserIsHandedOverByTheNextLook) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const int a = JoinBoard(&board, 1, Share(50), now);
  const int b = JoinBoard(&board, 2, Share(50), now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  NoteLaunch(&board, a, now);
  now += 20 * kMs;
  NoteWaiting(&board, b, now);
  Close(&board);  // its closer died before its last look
  ASSERT_EQ(TryEnter(&board, b, now), GateDecision::kGo);
  EXPECT_EQ(TurnHolder(board), b);
}

TEST(PacingBoardTest, ANewcomerDoesNotStarveTheIncumbent) {
  Simulation sim;
  sim.Add(1, Share(50));
  sim.Run(2000 * kMs);  // A alone for 2 s
  Simulation::App& b = sim.Add(2, Share(50));
  (void)b;
  sim.Reset();
  sim.Run(500 * kMs);
  EXPECT_NEAR(sim.Share(0), 50, 3.0);
}

// The turn's holder dies with nobody else paced (the last vGPUs on the GPU
// all ended), so the turn word still names its row; a newcomer that takes
// that row over must not be charged the dead holder's turn. It was, on an
// H100: a training joining 34 s later was charged 34 s at its first turn
// and got ~1% of the GPU against its 30% for a minute (docs/benchmarks.md,
// "Workload matrix, run 4").
TEST(PacingBoardTest, ANewcomerOnADeadHoldersRowIsNotChargedItsTurn) {
  for (bool backfill : {false, true}) {
    Simulation sim;
    if (backfill) sim.config_ = Backfill();
    sim.Add(1, Share(50));
    sim.Add(2, Share(50));
    sim.Run(500 * kMs);
    const int holder = TurnHolder(*sim.board_);
    ASSERT_GE(holder, 0);
    for (auto& app : sim.apps_) app.alive = false;  // every process ends...
    sim.now_ += 30'000 * kMs;                       // ...and nothing runs the board
    Simulation next;
    next.board_ = std::move(sim.board_);
    next.now_ = sim.now_;
    next.config_ = sim.config_;
    next.Add(3, Share(30));
    next.Add(4, Share(70));
    ASSERT_TRUE(next.apps_[0].member == holder || next.apps_[1].member == holder) << "no newcomer took the row";
    next.Run(200 * kMs);
    next.Reset();
    next.Run(2000 * kMs);
    EXPECT_NEAR(next.Share(0), 30, 3.0) << (backfill ? "backfill" : "exclusive");
    for (const auto& app : next.apps_) {
      EXPECT_LE(next.board_->members[app.member].charged_ns, 2300 * kMs) << "charged time it never had";
    }
  }
}

// A hand-over from a holder whose heartbeat is older than half the member
// timeout charges nobody. Such a row may be a dead vGPU's, and a newcomer
// may claim it between the charge's computation and its landing after the
// CAS: it would then start its life owing the dead vGPU's turn
// (verification/handover.pml, MUT_CHARGE_STALE). Here A's processes were
// killed with work queued, 600 ms into a turn nobody else wanted.
// A and B at equal shares on a fresh board, A holding a turn with work queued.
struct BusyHolder {
  Board board;
  uint64_t now = 5'000'000'000;
  int a = -1;
  int b = -1;
  void Start() {
    InitBoard(&board);
    a = JoinBoard(&board, 1, Share(50), now);
    b = JoinBoard(&board, 2, Share(50), now);
    ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
    NoteLaunch(&board, a, now);
    NoteBusy(&board, a, true, now);
  }
};

TEST(PacingBoardTest, AHandOverFromAStaleHolderChargesNobody) {
  BusyHolder h;
  ASSERT_NO_FATAL_FAILURE(h.Start());  // and A heartbeats no more
  Board& board = h.board;
  uint64_t& now = h.now;
  const int a = h.a, b = h.b;
  const PacingConfig config;
  const uint64_t charged = board.members[a].charged_ns;
  const uint64_t vtime = board.members[a].vtime;
  now += config.member_timeout_ns / 2 + 100 * kMs;
  Heartbeat(&board, b, Share(50), now);
  uint64_t waited = 0;
  while (TryEnter(&board, b, now) != GateDecision::kGo) {
    NoteWaiting(&board, b, now);
    now += kMs;
    waited += kMs;
    ASSERT_LT(waited, config.member_timeout_ns) << "B must get the turn";
  }
  EXPECT_EQ(TurnHolder(board), b);
  EXPECT_EQ(board.members[a].charged_ns, charged) << "the stale holder's turn was charged to its row";
  EXPECT_EQ(board.members[a].vtime, vtime);
}

// A row's floor later than a hand-over's clock read is a claim made since
// that read (JoinBoard raises the floor first): none of the turn is the
// newcomer's yet, so nothing is charged, and the turn counts as just begun.
// Ignoring such a floor charged the newcomer the whole turn
// (verification/handover.pml, MUT_FLOOR_UP_TO_NOW).
TEST(PacingBoardTest, AFloorPastTheHandOversClockChargesNothing) {
  BusyHolder h;
  ASSERT_NO_FATAL_FAILURE(h.Start());
  Board& board = h.board;
  uint64_t& now = h.now;
  const int a = h.a, b = h.b;
  const PacingConfig config;
  now += config.quantum_ns + config.drain_timeout_ns + kMs;  // past its drain timeout
  Heartbeat(&board, a, Share(50), now);
  Heartbeat(&board, b, Share(50), now);
  NoteWaiting(&board, b, now);
  const uint64_t charged = board.members[a].charged_ns;
  const uint64_t vtime = board.members[a].vtime;
  board.members[a].turn_ended_ns = now + kUs;  // a claim, just after this hand-over read its clock
  TryEnter(&board, b, now);
  EXPECT_EQ(board.members[a].charged_ns, charged) << "the turn before the claim was charged to the row";
  EXPECT_EQ(board.members[a].vtime, vtime);
}

TEST(PacingBoardTest, AnLcSpanHoldsBestEffortLaunchesForABoundedTime) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const int be = JoinBoard(&board, 1, Share(100), now);
  const int lc = JoinBoard(&board, 2, MemberSpec{100, 0, Priority::kLatencyCritical}, now);
  ASSERT_EQ(TryEnter(&board, be, now), GateDecision::kGo);
  HoldBestEffort(&board, lc, now + 1'000'000'000, now);  // asks for 1 s
  EXPECT_EQ(TryEnter(&board, be, now + kMs), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, lc, now + kMs), GateDecision::kGo) << "the LC itself never waits";
  ReleaseHold(&board, lc, now + 2 * kMs);
  EXPECT_EQ(TryEnter(&board, be, now + 2 * kMs), GateDecision::kGo);
  // A span never ended (a crashed LC) holds BE for at most kMaxHoldNs.
  now += 10 * kMs;
  HoldBestEffort(&board, lc, now + 1'000'000'000, now);
  Heartbeat(&board, lc, MemberSpec{100, 0, Priority::kLatencyCritical}, now);
  Heartbeat(&board, be, Share(100), now);
  EXPECT_EQ(TryEnter(&board, be, now + kMaxHoldNs - kMs), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, be, now + kMaxHoldNs + kMs), GateDecision::kGo);
}

TEST(PacingBoardTest, AnActiveLcHoldsBestEffortForItsLingerAndABoundedBurst) {
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const MemberSpec lc_spec{100, 0, Priority::kLatencyCritical};
  const int be = JoinBoard(&board, 1, Share(100), now);
  const int lc = JoinBoard(&board, 2, lc_spec, now);
  EXPECT_EQ(TryEnter(&board, be, now), GateDecision::kGo) << "an LC that launched nothing holds nothing";
  NoteLcLaunch(&board, lc, 500, now);
  EXPECT_EQ(TryEnter(&board, be, now + 499 * kUs), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, be, now + 501 * kUs), GateDecision::kGo) << "the linger after its last launch is over";
  // A linger of 0 (GPUSLICE_LC_HOLD=off) holds nothing; one too long is clamped.
  now += 10 * kMs;
  NoteLcLaunch(&board, lc, 0, now);
  EXPECT_EQ(TryEnter(&board, be, now + kUs), GateDecision::kGo);
  now += 10 * kMs;
  NoteLcLaunch(&board, lc, 1'000'000, now);
  EXPECT_EQ(TryEnter(&board, be, now + kMaxLingerUs * kUs - kUs), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, be, now + kMaxLingerUs * kUs + kUs), GateDecision::kGo);
  // An LC that never pauses holds BE for one burst's bound, not for ever.
  now += 10 * kMs;
  const uint64_t burst = now;
  uint64_t released_at = 0;
  for (uint64_t t = burst; t < burst + 3 * kMaxAutoHoldNs; t += 100 * kUs) {
    NoteLcLaunch(&board, lc, 500, t);
    if (t % (10 * kMs) == 0) {
      Heartbeat(&board, lc, lc_spec, t);
      Heartbeat(&board, be, Share(100), t);
    }
    if (released_at == 0 && TryEnter(&board, be, t + kUs) == GateDecision::kGo) released_at = t;
  }
  EXPECT_GE(released_at, burst + kMaxAutoHoldNs - kMs);
  EXPECT_LE(released_at, burst + kMaxAutoHoldNs + kMs);
  // A pause longer than the linger starts a new burst, which holds again.
  now = burst + 3 * kMaxAutoHoldNs + 5 * kMs;
  Heartbeat(&board, lc, lc_spec, now);
  Heartbeat(&board, be, Share(100), now);
  NoteLcLaunch(&board, lc, 500, now);
  EXPECT_EQ(TryEnter(&board, be, now + kUs), GateDecision::kWait);
  // A launch that has waited kMaxAutoHoldNs passes the automatic hold (an LC
  // pausing just past its linger between bursts cannot starve BE), not a span.
  EXPECT_EQ(TryEnter(&board, be, now + kUs, {}, kMaxAutoHoldNs - kUs), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, be, now + kUs, {}, kMaxAutoHoldNs), GateDecision::kGo);
  HoldBestEffort(&board, lc, now + 10 * kMs, now);
  EXPECT_EQ(TryEnter(&board, be, now + kUs, {}, kMaxAutoHoldNs), GateDecision::kWait);
  ReleaseHold(&board, lc, now + 2 * kUs);
  // A dead LC (no heartbeat) holds nothing.
  const uint64_t later = now + 2'000'000'000;
  Heartbeat(&board, be, Share(100), later);
  NoteLcLaunch(&board, lc, 500, later);
  EXPECT_EQ(TryEnter(&board, be, later + kUs), GateDecision::kGo);
}

TEST(PacingBoardTest, HigherLatencyCriticalLiveSeesOnlyLiveLcPeers) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int be = JoinBoard(&board, 1, Share(100), now);
  const int be2 = JoinBoard(&board, 3, Share(100), now);
  EXPECT_FALSE(HigherLatencyCriticalLive(board, be, now)) << "BE peers are not LC";
  const int lc = JoinBoard(&board, 2, MemberSpec{100, 0, Priority::kLatencyCritical}, now);
  EXPECT_TRUE(HigherLatencyCriticalLive(board, be, now));
  EXPECT_TRUE(HigherLatencyCriticalLive(board, be2, now));
  EXPECT_FALSE(HigherLatencyCriticalLive(board, lc, now)) << "an LC does not guard against itself";
  EXPECT_FALSE(HigherLatencyCriticalLive(board, be, now + 2'000'000'000)) << "its heartbeat stopped";
}

TEST(PacingBoardTest, OtherBestEffortBusySeesLiveBestEffortPeersWithWorkQueued) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int me = JoinBoard(&board, 1, Share(100), now);
  const int lc = JoinBoard(&board, 2, MemberSpec{100, 0, Priority::kLatencyCritical}, now);
  const int other = JoinBoard(&board, 3, Share(100), now);
  EXPECT_FALSE(OtherBestEffortBusy(board, me, now)) << "nobody has work queued";
  NoteBusy(&board, me, true, now);
  NoteBusy(&board, lc, true, now);
  EXPECT_FALSE(OtherBestEffortBusy(board, me, now)) << "its own work, and the LC's, are not a neighbour's";
  NoteBusy(&board, other, true, now);
  EXPECT_TRUE(OtherBestEffortBusy(board, me, now));
  EXPECT_FALSE(OtherBestEffortBusy(board, me, now + 2'000'000'000)) << "its heartbeat stopped";
  PacingConfig config;
  static BoardTrust trust;
  trust.Reset({{1, {LevelWord(Priority::kBestEffort, 0), 100, 0}}});
  config.trust = &trust;
  EXPECT_FALSE(OtherBestEffortBusy(board, me, now, config)) << "a row the roster does not list";
}

MemberSpec Level(Priority level_class, uint32_t rank, uint32_t share = 100) {
  return MemberSpec{share, 0, level_class, rank};
}

TEST(PacingBoardTest, ALevelIsHeldOnlyByLatencyCriticalLevelsAboveIt) {
  // critical (lc, rank 1) > lc (rank 0) > high (be, rank 1) > be (rank 0).
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int critical = JoinBoard(&board, 1, Level(Priority::kLatencyCritical, 1), now);
  const int lc = JoinBoard(&board, 2, Level(Priority::kLatencyCritical, 0), now);
  const int lc_peer = JoinBoard(&board, 3, Level(Priority::kLatencyCritical, 0), now);
  const int high = JoinBoard(&board, 4, Level(Priority::kBestEffort, 1), now);
  const int be = JoinBoard(&board, 5, Level(Priority::kBestEffort, 0), now);
  EXPECT_EQ(LevelWord(Priority::kLatencyCritical, 0), 1u) << "the built-in words are unchanged";
  EXPECT_EQ(LevelWord(Priority::kBestEffort, 0), 0u);

  HoldBestEffort(&board, lc, now + 10 * kMs, now);
  EXPECT_TRUE(LaunchesHeld(board, be, now + kUs));
  EXPECT_TRUE(LaunchesHeld(board, high, now + kUs));
  EXPECT_FALSE(LaunchesHeld(board, lc_peer, now + kUs)) << "a level is not held by its own";
  EXPECT_FALSE(LaunchesHeld(board, critical, now + kUs)) << "nor by a lower one";
  EXPECT_EQ(TryEnter(&board, critical, now + kUs), GateDecision::kGo);
  ReleaseHold(&board, lc, now + kUs);

  NoteLcLaunch(&board, critical, 500, now + 2 * kUs);
  EXPECT_TRUE(LaunchesHeld(board, lc, now + 3 * kUs)) << "the automatic hold of a higher LC level";
  EXPECT_EQ(TryEnter(&board, lc, now + 3 * kUs), GateDecision::kWait);
  EXPECT_EQ(TryEnter(&board, lc, now + 3 * kUs, {}, kMaxAutoHoldNs), GateDecision::kGo)
      << "bounded as for best-effort";
  EXPECT_EQ(TryEnter(&board, lc, now + 600 * kUs), GateDecision::kGo) << "its linger is over";
}

TEST(PacingBoardTest, ALowerLatencyCriticalLevelIsPacedAndSlicedOnlyBesideAHigherOne) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int lc = JoinBoard(&board, 1, Level(Priority::kLatencyCritical, 0), now);
  const int be = JoinBoard(&board, 2, Level(Priority::kBestEffort, 3), now);
  EXPECT_FALSE(PacingNeeded(board, lc, now)) << "a BE of any rank is below every LC level";
  EXPECT_FALSE(HigherLatencyCriticalLive(board, lc, now));
  EXPECT_TRUE(HigherLatencyCriticalLive(board, be, now));
  const int critical = JoinBoard(&board, 3, Level(Priority::kLatencyCritical, 2), now);
  EXPECT_TRUE(PacingNeeded(board, lc, now));
  EXPECT_TRUE(HigherLatencyCriticalLive(board, lc, now));
  EXPECT_FALSE(PacingNeeded(board, critical, now));
  EXPECT_FALSE(HigherLatencyCriticalLive(board, critical, now));
  EXPECT_FALSE(PacingNeeded(board, lc, now + 2'000'000'000)) << "the higher level's heartbeat stopped";
}

TEST(PacingBoardTest, TurnsGoToTheHighestBestEffortLevelAndNoLevelStarves) {
  for (bool backfill : {false, true}) {
    Simulation sim;
    sim.config_.backfill = backfill;
    sim.Add(1, Level(Priority::kBestEffort, 0, 90));  // a larger share, a lower level
    sim.Add(2, Level(Priority::kBestEffort, 1, 10));
    sim.Run(200 * kMs);
    sim.Reset();
    sim.Run(5000 * kMs);
    const double starvation_floor =
        100.0 * static_cast<double>(sim.config_.quantum_ns) /
        static_cast<double>(sim.config_.level_starvation_ns + 2 * sim.config_.quantum_ns);
    EXPECT_GT(sim.Share(1), 95.0) << "the higher level, whatever the shares; backfill " << backfill;
    EXPECT_GE(sim.Share(0), starvation_floor * 0.9) << "the lower level still gets its turns; backfill " << backfill;
    EXPECT_GT(sim.gpu_busy_ns_, 4900 * kMs);
  }
}

TEST(PacingBoardTest, AHigherBestEffortLevelTakesTheTurnFromALowerOneAtOnce) {
  // By shares alone (90/10) the higher level would get about 10% of the GPU.
  Simulation sim;
  sim.Add(1, Level(Priority::kBestEffort, 0, 90));
  Simulation::App& high = sim.Add(2, Level(Priority::kBestEffort, 1, 10));
  high.period_ns = 100 * kMs;  // wants the GPU 40 ms of every 100 ms
  high.on_ns = 40 * kMs;
  sim.Run(1000 * kMs);
  sim.Reset();
  sim.Run(2000 * kMs);
  // Its 40 ms windows, less at most the lower level's drain at each start.
  EXPECT_GT(sim.Fraction(1, 2000 * kMs), 38.0);
  EXPECT_GT(sim.gpu_busy_ns_, 1900 * kMs) << "the lower level fills the rest";
}

TEST(PacingBoardTest, HoldingTheTurnIdleIsNotCharged) {
  // A capped vGPU launches once, drains, then sets itself up for 30 s (no
  // launches) while holding the turn: it owes nothing for those 30 s.
  Board board;
  InitBoard(&board);
  uint64_t now = 5'000'000'000;
  const MemberSpec capped{100, 30, Priority::kBestEffort};
  const int a = JoinBoard(&board, 1, capped, now);
  ASSERT_EQ(TryEnter(&board, a, now), GateDecision::kGo);
  NoteLaunch(&board, a, now);
  NoteBusy(&board, a, true, now);
  NoteBusy(&board, a, false, now + kMs);
  now += 30'000 * kMs;
  Heartbeat(&board, a, capped, now);
  uint64_t waited = 0;
  while (TryEnter(&board, a, now) != GateDecision::kGo) {
    NoteWaiting(&board, a, now);
    now += kMs;
    waited += kMs;
    ASSERT_LT(waited, 100 * kMs) << "charged for holding the turn idle";
  }
  EXPECT_GE(board.members[a].cap_tokens_ns, 0);
}

// The roster (core/board_roster.h): what a row claims is believed only from
// it. Each test runs the attack without a trust first, where it works, so
// that it shows what the trust changes.
BoardTrust& TrustOf(std::vector<std::pair<uint64_t, TrustedMember>> members) {
  static BoardTrust trust;
  trust.Reset(members);
  return trust;
}

TEST(PacingBoardTest, AForgedLatencyCriticalRowTheRosterDoesNotListHoldsNobody) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int victim = JoinBoard(&board, 1, Level(Priority::kBestEffort, 0), now);
  JoinBoard(&board, 2, Level(Priority::kBestEffort, 0), now);  // the attacker's own vGPU
  // The attacker writes a row of an id no manager made, claiming LC, and
  // keeps its hold up.
  const int forged = JoinBoard(&board, 0xbad, Level(Priority::kLatencyCritical, 255), now);
  HoldBestEffort(&board, forged, now + kMaxHoldNs, now);
  NoteLcLaunch(&board, forged, kMaxLingerUs, now);
  ASSERT_TRUE(LaunchesHeld(board, victim, now + kUs)) << "without a roster the forgery works";

  PacingConfig config;
  config.trust = &TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 100, 0}},
                           {2, {LevelWord(Priority::kBestEffort, 0), 100, 0}}});
  EXPECT_FALSE(LaunchesHeld(board, victim, now + kUs, true, config));
  EXPECT_TRUE(HigherLatencyCriticalLive(board, victim, now + kUs, config))
      << "slices beside LC follow rows as written (the safe direction; pacing_board.cc)";
  EXPECT_EQ(TryEnter(&board, victim, now + kUs, config), GateDecision::kGo);
}

TEST(PacingBoardTest, ARowClaimingAHigherLevelThanTheRostersHoldsNobody) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int victim = JoinBoard(&board, 1, Level(Priority::kBestEffort, 0), now);
  // A best-effort vGPU's process writes LC into its own row (or another
  // vGPU's), and holds.
  const int attacker = JoinBoard(&board, 2, Level(Priority::kLatencyCritical, 0), now);
  HoldBestEffort(&board, attacker, now + kMaxHoldNs, now);
  ASSERT_TRUE(LaunchesHeld(board, victim, now + kUs));
  ASSERT_TRUE(PacingNeeded(board, victim, now + kUs));

  PacingConfig config;
  config.trust = &TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 100, 0}},
                           {2, {LevelWord(Priority::kBestEffort, 0), 100, 0}}});
  EXPECT_FALSE(LaunchesHeld(board, victim, now + kUs, true, config));
  // And a real LC vGPU the roster lists still holds.
  const int lc = JoinBoard(&board, 3, Level(Priority::kLatencyCritical, 0), now);
  HoldBestEffort(&board, lc, now + 10 * kMs, now);
  config.trust = &TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 100, 0}},
                           {2, {LevelWord(Priority::kBestEffort, 0), 100, 0}},
                           {3, {LevelWord(Priority::kLatencyCritical, 0), 100, 0}}});
  EXPECT_TRUE(LaunchesHeld(board, victim, now + kUs, true, config));
}

TEST(PacingBoardTest, AnUnlistedRowIsNotALiveMember) {
  Board board;
  InitBoard(&board);
  const uint64_t now = 5'000'000'000;
  const int alone = JoinBoard(&board, 1, Level(Priority::kBestEffort, 0), now);
  JoinBoard(&board, 0xbad, Level(Priority::kBestEffort, 0), now);
  ASSERT_TRUE(OthersLive(board, alone, now));
  PacingConfig config;
  config.trust = &TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 100, 0}}});
  EXPECT_FALSE(OthersLive(board, alone, now, config));
  EXPECT_FALSE(PacingNeeded(board, alone, now, config)) << "a vGPU alone on its GPU is not paced";
}

TEST(PacingBoardTest, SharesFollowTheRosterWhateverTheRowsSay) {
  // The 30% vGPU writes weight 100 into its row at every heartbeat (and the
  // 70% one's row says 1). The roster says 30/70.
  auto run = [](const BoardTrust* trust) {
    Simulation sim;
    sim.config_.trust = trust;
    sim.Add(1, Share(100));
    sim.Add(2, Share(1));
    sim.Run(200 * kMs);
    sim.Reset();
    sim.Run(3000 * kMs);
    return sim.Share(0);
  };
  ASSERT_GT(run(nullptr), 90.0) << "without a roster the rows' weights rule";
  EXPECT_NEAR(run(&TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 30, 0}},
                           {2, {LevelWord(Priority::kBestEffort, 0), 70, 0}}})),
              30.0, 1.0);
}

TEST(PacingBoardTest, ACapWipedFromItsRowStillHolds) {
  auto run = [](const BoardTrust* trust) {
    Simulation sim;
    sim.config_.trust = trust;
    sim.Add(1, MemberSpec{100, 0});  // its processes write "no cap"
    sim.Run(3000 * kMs);
    return sim.Fraction(0, 3000 * kMs);
  };
  ASSERT_GT(run(nullptr), 95.0);
  EXPECT_NEAR(run(&TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 100, 30}}})), 30.0, 2.0);
}

// Under shares by slices the uncapped members backfill only while a capped
// one holds the turn: its turn is the GPU time its cap is charged.
TEST(PacingBoardTest, OnlyALiveCappedHolderMakesTheOthersBackfill) {
  const uint64_t now = 5'000'000'000;
  Board board;
  InitBoard(&board);
  const int capped = JoinBoard(&board, 1, MemberSpec{100, 30}, now);
  const int free = JoinBoard(&board, 2, Share(50), now);
  PacingConfig config = Backfill();
  ASSERT_EQ(TryEnter(&board, capped, now, config), GateDecision::kGo);
  ASSERT_EQ(TurnHolder(board), capped);
  EXPECT_TRUE(CappedTurnHeldByOther(board, free, now, config));
  EXPECT_FALSE(CappedTurnHeldByOther(board, capped, now, config)) << "the holder does not backfill itself";
  EXPECT_FALSE(CappedTurnHeldByOther(board, free, now + 2'000'000'000, config)) << "its heartbeat stopped";
  // A row that claims a cap the roster does not give it moves nobody.
  const BoardTrust& trust =
      TrustOf({{1, {LevelWord(Priority::kBestEffort, 0), 100, 0}}, {2, {LevelWord(Priority::kBestEffort, 0), 50, 0}}});
  config.trust = &trust;
  EXPECT_FALSE(CappedTurnHeldByOther(board, free, now, config));

  Board uncapped_board;
  InitBoard(&uncapped_board);
  const int a = JoinBoard(&uncapped_board, 1, Share(50), now);
  const int b = JoinBoard(&uncapped_board, 2, Share(50), now);
  ASSERT_EQ(TryEnter(&uncapped_board, a, now, Backfill()), GateDecision::kGo);
  ASSERT_EQ(TurnHolder(uncapped_board), a);
  EXPECT_FALSE(CappedTurnHeldByOther(uncapped_board, b, now, Backfill())) << "an uncapped holder: slices only";
}

TEST(PacingBoardTest, RejectsAForeignFile) {
  Board board;
  InitBoard(&board);
  EXPECT_TRUE(ValidateBoard(board, "/b").ok());
  board.header.version = 99;
  const Status s = ValidateBoard(board, "/b");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("remove it"), std::string::npos);
}

}  // namespace
}  // namespace gpuslice::core

