#include "daemon/cap_throttle.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

#include "audit/recording_process_actions.h"

namespace gpuslice::daemon {
namespace {

constexpr uint64_t kPeriod = 100'000'000;

// Records how far into the period each wait went; `allow` waits succeed.
struct Waits {
  std::function<bool(uint64_t)> fn() {
    return [this](uint64_t offset) {
      offsets.push_back(offset);
      return offsets.size() <= allow;
    };
  }
  std::vector<uint64_t> offsets;
  size_t allow = 1000;
};

std::optional<uint64_t> FixedTicks(uint32_t pid) {
  return pid == 999 ? std::nullopt : std::optional<uint64_t>(pid * 10);
}

TEST(CapThrottle, EachTargetRunsItsDutyOfThePeriodThenIsStoppedUntilTheNext) {
  audit::RecordingProcessActions actions;
  CapThrottle throttle(&actions, "", kPeriod, /*run_thread=*/false);
  throttle.Set("a@0", {{1, 2}, 0.3});
  throttle.Set("b@0", {{3}, 0.6});
  throttle.Set("c@0", {{4}, 1.0});  // a duty of 1: never stopped
  Waits waits;
  throttle.Cycle(waits.fn());
  EXPECT_EQ(waits.offsets, (std::vector<uint64_t>{30'000'000, 60'000'000, kPeriod}));
  EXPECT_EQ(actions.log, (std::vector<std::string>{"stop 1", "stop 2", "stop 3"}));
  actions.log.clear();
  throttle.Cycle(waits.fn());
  EXPECT_EQ(actions.log, (std::vector<std::string>{"cont 1", "cont 2", "cont 3", "stop 1", "stop 2", "stop 3"}));
}

TEST(CapThrottle, WhatAPeriodStoppedRunsAgainOnceItsThrottleIsCleared) {
  audit::RecordingProcessActions actions;
  CapThrottle throttle(&actions, "", kPeriod, false);
  throttle.Set("a@0", {{1}, 0.5});
  Waits waits;
  throttle.Cycle(waits.fn());
  // Cleared while stopped: continued at once, and again at the next period
  // (the cycle may have stopped it after the clear), then left alone.
  throttle.Clear("a@0");
  throttle.Cycle(waits.fn());
  throttle.Cycle(waits.fn());
  EXPECT_EQ(actions.log, (std::vector<std::string>{"stop 1", "cont 1", "cont 1"}));
}

TEST(CapThrottle, APidDroppedFromATargetIsContinued) {
  audit::RecordingProcessActions actions;
  CapThrottle throttle(&actions, "", kPeriod, false);
  throttle.Set("a@0", {{1, 2}, 0.5});
  throttle.Set("a@0", {{1}, 0.5});
  EXPECT_EQ(actions.continued, (std::vector<uint32_t>{2}));
}

TEST(CapThrottle, EndingMidPeriodContinuesWhatItStopped) {
  audit::RecordingProcessActions actions;
  {
    CapThrottle throttle(&actions, "", kPeriod, false);
    throttle.Set("a@0", {{1}, 0.2});
    throttle.Set("b@0", {{2}, 0.7});
    Waits waits;
    waits.allow = 1;  // the throttle ends during the wait for b's stop
    throttle.Cycle(waits.fn());
    EXPECT_EQ(actions.log, (std::vector<std::string>{"stop 1", "cont 1"}));
    throttle.Cycle(Waits().fn());
    actions.log.clear();
  }
  // Destroyed: every process of every target is continued.
  std::sort(actions.log.begin(), actions.log.end());
  EXPECT_EQ(actions.log, (std::vector<std::string>{"cont 1", "cont 1", "cont 2", "cont 2"}));
}

TEST(CapThrottle, ADaemonThatDiedMidPeriodLeavesWhatTheNextOneContinues) {
  const std::string dir = testing::TempDir();
  const std::string path = dir + "/cap-throttle-" + std::to_string(getpid());
  audit::RecordingProcessActions during;
  auto throttle = std::make_unique<CapThrottle>(&during, path, kPeriod, false, FixedTicks);
  throttle->Set("a@0", {{7, 8}, 0.3});
  throttle->Set("b@0", {{999}, 0.3});  // already gone: not written
  std::ifstream written(path);
  std::string text((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "7 70\n8 80\n");
  // The daemon dies here (its destructor never runs): the next one reads
  // the file. Pid 8 is another process by now (another start time).
  audit::RecordingProcessActions next;
  const int continued = CapThrottle::ContinueLeftovers(
      path, &next, [](uint32_t pid) { return std::optional<uint64_t>(pid == 8 ? 12345 : pid * 10); });
  EXPECT_EQ(continued, 1);
  EXPECT_EQ(next.continued, (std::vector<uint32_t>{7}));
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  // A throttle that ends normally removes its file.
  throttle->Set("a@0", {{7}, 0.3});
  ASSERT_EQ(access(path.c_str(), F_OK), 0);
  throttle.reset();
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(CapThrottle, AProcessContinuedByAnotherInPeriodAfterPeriodIsTampering) {
  audit::RecordingProcessActions actions;
  // Pid 1 is running at the end of every stop window (a sibling sends it
  // SIGCONT); pid 2 is late once (inside a long driver call), then stopped.
  int checks_of_2 = 0;
  CapThrottle throttle(&actions, "", kPeriod, false, FixedTicks, [&](uint32_t pid) {
    if (pid == 2) return ++checks_of_2 != 2;
    return pid != 1;
  });
  throttle.Set("a@0", {{1, 2}, 0.3});
  Waits waits;
  for (int i = 0; i < CapThrottle::kTamperPeriods; ++i) {
    throttle.Cycle(waits.fn());
    EXPECT_TRUE(throttle.TakeTampered().empty()) << "after period " << i;
  }
  // Found again before anyone asked: told once.
  for (int i = 0; i <= CapThrottle::kTamperPeriods; ++i) throttle.Cycle(waits.fn());
  EXPECT_EQ(throttle.TakeTampered(), (std::vector<uint32_t>{1}));
  for (int i = 0; i < 3; ++i) throttle.Cycle(waits.fn());
  EXPECT_TRUE(throttle.TakeTampered().empty());
}

TEST(CapThrottle, ReadsAProcessStartTime) {
  const auto self = ProcessStartTicks(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(ProcessStartTicks(static_cast<uint32_t>(getpid())), self);
  EXPECT_FALSE(ProcessStartTicks(0x7ffffffe).has_value());
  EXPECT_FALSE(ProcessStoppedOrGone(static_cast<uint32_t>(getpid())));
  EXPECT_TRUE(ProcessStoppedOrGone(0x7ffffffe));
}

TEST(CapThrottle, TellsAStoppedProcessFromAContinuedOne) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  const auto pid = static_cast<uint32_t>(child);
  int status = 0;
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  EXPECT_TRUE(ProcessStoppedOrGone(pid));
  ASSERT_EQ(kill(child, SIGCONT), 0);
  ASSERT_EQ(waitpid(child, &status, WCONTINUED), child);
  EXPECT_FALSE(ProcessStoppedOrGone(pid));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(ProcessStoppedOrGone(pid));
}

}  // namespace
}  // namespace gpuslice::daemon
