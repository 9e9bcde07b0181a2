#include "daemon/cap_audit.h"

#include <gtest/gtest.h>

#include <set>

#include "audit/recording_process_actions.h"

namespace gpuslice::daemon {
namespace {

constexpr uint64_t kNamespace = 4026531836;
constexpr uint64_t kSecond = 1'000'000'000;

struct Table final : audit::ProcessTable {
  uint32_t ParentOf(uint32_t) const override { return 1; }
  std::optional<NamespacedPid> InNamespace(uint32_t pid) const override { return NamespacedPid{kNamespace, pid}; }
};

node::VgpuView Vgpu(const std::string& name, uint32_t cap_pct, std::vector<uint32_t> pids) {
  node::VgpuView v;
  v.name = name;
  node::VgpuDeviceView d;
  d.gpu_index = 0;
  d.compute_cap_pct = cap_pct;
  d.effective_compute_cap_pct = cap_pct;
  v.devices.push_back(d);
  for (uint32_t pid : pids) {
    node::VgpuProcessView p;
    p.pid = pid;
    p.pid_namespace = kNamespace;
    v.processes.push_back(p);
  }
  return v;
}

// A GPU whose processes run `share` of each one-second pass.
SampledPass Second(uint64_t at_s, std::map<uint32_t, double> share) {
  SampledPass p;
  p.gpu_index = 0;
  p.start_us = at_s * 1'000'000;
  p.end_us = (at_s + 1) * 1'000'000;
  p.pid_seconds = std::move(share);
  return p;
}

struct Fixture {
  // `window_s`: 5 s verdicts, quicker to script than the default 30.
  explicit Fixture(CapAction action = CapAction::kThrottle, uint64_t window_s = 5) {
    CapAuditConfig c;
    c.action = action;
    c.window_ns = window_s * kSecond;
    audit.emplace(c, &table, &actions, &throttle, [this](uint32_t pid, const node::VgpuView& v) {
      return members.count({pid, v.name}) > 0;
    });
  }
  // Passes of one second from `from_s`; `use(duty)` is the capped process's
  // share of the GPU when it runs `duty` of the time (what a throttle does
  // to a process whose work its host launches).
  std::vector<OverCap> Run(uint64_t from_s, int passes, const std::vector<node::VgpuView>& views,
                           const std::function<std::map<uint32_t, double>(double duty)>& use) {
    std::vector<OverCap> last;
    for (int i = 0; i < passes; ++i) {
      const auto targets = throttle.targets();
      const double duty = targets.count("a@0") ? targets.at("a@0").duty : 1.0;
      last = audit->Pass({Second(from_s + i, use(duty))}, views, (from_s + i + 1) * kSecond);
      for (const OverCap& o : last) found += o.found ? 1 : 0;
    }
    return last;
  }
  Table table;
  audit::RecordingProcessActions actions;
  // No thread: these tests read the throttle's targets, not its signals.
  CapThrottle throttle{&actions, "", 100'000'000, /*run_thread=*/false};
  std::set<std::pair<uint32_t, std::string>> members{{101, "a"}, {102, "a"}, {201, "b"}};
  std::optional<ComputeCapAudit> audit;
  int found = 0;
};

TEST(ComputeCapAudit, AnHonestCappedVgpuAloneIsLeftAlone) {
  Fixture f;
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101})};
  const auto over = f.Run(0, 20, views, [](double) { return std::map<uint32_t, double>{{101, 0.31}}; });
  EXPECT_TRUE(over.empty());
  EXPECT_EQ(f.found, 0);
  EXPECT_TRUE(f.throttle.targets().empty());
}

TEST(ComputeCapAudit, AVgpuOverItsCapAloneIsThrottledDownToIt) {
  Fixture f;
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101, 102})};
  // Its library does nothing: free, its two processes use 0.95 of the GPU.
  const auto use = [](double duty) { return std::map<uint32_t, double>{{101, 0.60 * duty}, {102, 0.35 * duty}}; };
  // 1.9 s used of the 2.0 s that 5 s at 30% + 10% allow: no verdict yet.
  EXPECT_TRUE(f.Run(0, 2, views, use).empty());
  EXPECT_TRUE(f.throttle.targets().empty());
  // 2.85 s: over whatever the window's last 2 s hold.
  auto over = f.Run(2, 1, views, use);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_TRUE(over[0].found);
  EXPECT_NEAR(over[0].used, 0.95, 1e-9);
  EXPECT_NEAR(over[0].allowed, 0.30, 1e-9);
  ASSERT_EQ(f.throttle.targets().count("a@0"), 1u);
  EXPECT_EQ(f.throttle.targets().at("a@0").pids, (std::vector<uint32_t>{101, 102}));
  // Fitted pass by pass, its use comes to its cap and stays there.
  over = f.Run(3, 20, views, use);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_FALSE(over[0].found);
  EXPECT_NEAR(0.95 * f.throttle.targets().at("a@0").duty, 0.30, 0.01);
  EXPECT_EQ(f.found, 1);
  EXPECT_TRUE(f.actions.killed.empty());
}

TEST(ComputeCapAudit, AThrottleFollowsAnAppThatSpeedsUpAndLetsGoOfOneThatSlowsDown) {
  Fixture f;
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101})};
  f.Run(0, 15, views, [](double duty) { return std::map<uint32_t, double>{{101, 0.95 * duty}}; });
  const double at_first = f.throttle.targets().at("a@0").duty;
  // The same process now needs half the duty for the same use.
  f.Run(15, 20, views, [](double duty) { return std::map<uint32_t, double>{{101, std::min(1.0, 1.9 * duty)}}; });
  EXPECT_NEAR(f.throttle.targets().at("a@0").duty, at_first / 2, 0.01);
  // And then uses under its cap even unthrottled: it runs free again.
  f.Run(35, 20, views, [](double duty) { return std::map<uint32_t, double>{{101, 0.2 * duty}}; });
  EXPECT_DOUBLE_EQ(f.throttle.targets().at("a@0").duty, 1.0);
}

TEST(ComputeCapAudit, NothingIsMeasuredBesideABusyNeighbour) {
  Fixture f;
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101}), Vgpu("b", 0, {201})};
  // NVML's samples of processes that time-slice overlap: they say nothing
  // of a share, so 60% beside a busy neighbour is no verdict.
  const auto over = f.Run(0, 20, views, [](double) { return std::map<uint32_t, double>{{101, 0.60}, {201, 0.55}}; });
  EXPECT_TRUE(over.empty());
  EXPECT_TRUE(f.throttle.targets().empty());
  // Alone time adds up across the gaps between a neighbour's runs.
  f.Run(20, 5, views, [](double) { return std::map<uint32_t, double>{{101, 0.9}}; });
  EXPECT_EQ(f.throttle.targets().count("a@0"), 1u);
}

TEST(ComputeCapAudit, AProcessThatDoesNotMapTheVgpusLedgerIsNeverActedOn) {
  // A tenant whose ledger slot names its neighbour's pid: the neighbour
  // does not map that ledger, so it is neither measured nor touched.
  Fixture f(CapAction::kKill);
  node::VgpuView a = Vgpu("a", 30, {101, 201});
  const std::vector<node::VgpuView> views = {a, Vgpu("b", 0, {201})};
  f.Run(0, 20, views, [](double) { return std::map<uint32_t, double>{{201, 1.0}}; });
  EXPECT_TRUE(f.actions.killed.empty());
  EXPECT_EQ(f.found, 0);
}

TEST(ComputeCapAudit, UncappedVgpusAreNotAudited) {
  Fixture f;
  const std::vector<node::VgpuView> views = {Vgpu("a", 0, {101})};
  f.Run(0, 20, views, [](double) { return std::map<uint32_t, double>{{101, 1.0}}; });
  EXPECT_EQ(f.found, 0);
  EXPECT_TRUE(f.throttle.targets().empty());
}

TEST(ComputeCapAudit, KillKillsItsProcessesOnThatGpu) {
  Fixture f(CapAction::kKill);
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101, 102})};
  f.Run(0, 2, views, [](double) { return std::map<uint32_t, double>{{101, 0.5}, {102, 0.3}}; });
  EXPECT_TRUE(f.actions.killed.empty()) << "1.6 s used: within the 2.0 s a 5 s window allows";
  f.Run(2, 1, views, [](double) { return std::map<uint32_t, double>{{101, 0.5}, {102, 0.3}}; });
  EXPECT_EQ(f.actions.killed, (std::vector<uint32_t>{101, 102}));
  EXPECT_TRUE(f.throttle.targets().empty());
}

TEST(ComputeCapAudit, AnHonestBurstyJobsIdleTimeIsInItsWindow) {
  // A job capped at 30% that runs 1 s of every 5 at the whole GPU: NVML has
  // no sample of it in the other 4. Those passes, in which nobody else ran
  // either, are alone time at 0; without them its window held only its
  // bursts (100%), and it was reported.
  Fixture f(CapAction::kReport);
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101})};
  for (uint64_t s = 0; s < 60; ++s) {
    f.Run(s, 1, views, [s](double) {
      return s % 5 == 0 ? std::map<uint32_t, double>{{101, 1.0}} : std::map<uint32_t, double>{};
    });
  }
  EXPECT_EQ(f.found, 0);
}

TEST(ComputeCapAudit, TheDefaultWindowLeavesAnHonestJobThatQueuesSecondsOfWorkAlone) {
  // Its library holds it to 30%: 3 s at the whole GPU, then 7 s waiting
  // for its cap's tokens. A 5 s window that holds a burst reads 60%, over;
  // the default 30 s, at most 30% here.
  Fixture f(CapAction::kKill, CapAuditConfig{}.window_ns / kSecond);
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101})};
  for (uint64_t s = 0; s < 90; ++s) {
    f.Run(s, 1, views, [s](double) {
      return s % 10 < 3 ? std::map<uint32_t, double>{{101, 1.0}} : std::map<uint32_t, double>{};
    });
  }
  EXPECT_TRUE(f.actions.killed.empty());
  // An escape at 60% of the GPU throughout is killed on the same window.
  f.Run(90, 30, views, [](double) { return std::map<uint32_t, double>{{101, 0.6}}; });
  EXPECT_EQ(f.actions.killed, (std::vector<uint32_t>{101}));
}

TEST(ComputeCapAudit, AnEscapeIsFoundOnceItHasSpentItsWholeWindowsAllowance) {
  // The default 30 s window at a 30% cap and a 10% margin allows 12 s.
  Fixture f(CapAction::kKill, CapAuditConfig{}.window_ns / kSecond);
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101})};
  const auto free = [](double) { return std::map<uint32_t, double>{{101, 0.95}}; };
  f.Run(0, 12, views, free);  // 11.4 s
  EXPECT_TRUE(f.actions.killed.empty());
  f.Run(12, 1, views, free);  // 12.35 s: found 17 s before its window is full
  EXPECT_EQ(f.actions.killed, (std::vector<uint32_t>{101}));
  // Half the GPU spends it in 24 s; an honest job queueing 3 s of every 10
  // never does (the test above).
  Fixture half(CapAction::kKill, CapAuditConfig{}.window_ns / kSecond);
  half.Run(0, 23, views, [](double) { return std::map<uint32_t, double>{{101, 0.5}}; });
  EXPECT_TRUE(half.actions.killed.empty());
  half.Run(23, 2, views, [](double) { return std::map<uint32_t, double>{{101, 0.5}}; });
  EXPECT_EQ(half.actions.killed, (std::vector<uint32_t>{101}));
}

TEST(ComputeCapAudit, ReportTellsEachEpisodeOnceAndTouchesNothing) {
  Fixture f(CapAction::kReport);
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101})};
  f.Run(0, 10, views, [](double) { return std::map<uint32_t, double>{{101, 0.8}}; });
  EXPECT_EQ(f.found, 1);
  f.Run(10, 10, views, [](double) { return std::map<uint32_t, double>{{101, 0.3}}; });
  f.Run(20, 10, views, [](double) { return std::map<uint32_t, double>{{101, 0.8}}; });
  EXPECT_EQ(f.found, 2);
  EXPECT_TRUE(f.actions.log.empty());
  EXPECT_TRUE(f.throttle.targets().empty());
}

TEST(ComputeCapAudit, AThrottleEndsWithTheCapAndDropsProcessesThatEnded) {
  Fixture f;
  std::vector<node::VgpuView> views = {Vgpu("a", 30, {101, 102})};
  f.Run(0, 6, views, [](double duty) { return std::map<uint32_t, double>{{101, 0.5 * duty}, {102, 0.5 * duty}}; });
  ASSERT_EQ(f.throttle.targets().at("a@0").pids.size(), 2u);
  // Stopped through a whole pass, 102 has no sample in it: still throttled.
  f.audit->Pass({Second(6, {{101, 0.15}})}, views, 7 * kSecond);
  EXPECT_EQ(f.throttle.targets().at("a@0").pids, (std::vector<uint32_t>{101, 102}));
  // 102 ended (its pid no longer maps the ledger): it is signalled no more.
  f.members.erase({102, "a"});
  f.audit->Pass({}, views, 7 * kSecond);
  EXPECT_EQ(f.throttle.targets().at("a@0").pids, (std::vector<uint32_t>{101}));
  EXPECT_EQ(f.actions.continued, (std::vector<uint32_t>{102}));
  // The cap lifted: the throttle ends and its process is continued.
  views = {Vgpu("a", 0, {101})};
  f.audit->Pass({}, views, 8 * kSecond);
  EXPECT_TRUE(f.throttle.targets().empty());
  EXPECT_EQ(f.actions.continued, (std::vector<uint32_t>{102, 101}));
}

TEST(ComputeCapAudit, AThrottledProcessThatIsContinuedByAnotherIsKilled) {
  Table table;
  audit::RecordingProcessActions actions;
  // 101 runs through every stop window: its sibling sends it SIGCONT.
  CapThrottle throttle(&actions, "", 100'000'000, false, nullptr, [](uint32_t pid) { return pid != 101; });
  CapAuditConfig config;
  config.window_ns = 5 * kSecond;
  ComputeCapAudit audit(config, &table, &actions, &throttle,
                        [](uint32_t pid, const node::VgpuView&) { return pid < 200; });
  const std::vector<node::VgpuView> views = {Vgpu("a", 30, {101, 102})};
  for (uint64_t s = 0; s < 6; ++s) audit.Pass({Second(s, {{101, 0.5}, {102, 0.4}})}, views, (s + 1) * kSecond);
  ASSERT_EQ(throttle.targets().count("a@0"), 1u);
  for (int i = 0; i <= CapThrottle::kTamperPeriods; ++i) throttle.Cycle([](uint64_t) { return true; });
  EXPECT_TRUE(actions.killed.empty());
  const auto over = audit.Pass({}, views, 7 * kSecond);
  EXPECT_EQ(actions.killed, (std::vector<uint32_t>{101}));
  ASSERT_EQ(over.size(), 1u);
  EXPECT_TRUE(over[0].tampered);
  EXPECT_NE(Describe(over[0]).find("another process continues it"), std::string::npos);
}

TEST(ComputeCapAudit, ParsesItsActions) {
  EXPECT_EQ(audit::ParseCapAction("throttle").value(), CapAction::kThrottle);
  EXPECT_EQ(audit::ParseCapAction("kill").value(), CapAction::kKill);
  EXPECT_EQ(audit::ParseCapAction("report").value(), CapAction::kReport);
  auto bad = audit::ParseCapAction("deny");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("report, throttle or kill"), std::string::npos);
}

}  // namespace
}  // namespace gpuslice::daemon
