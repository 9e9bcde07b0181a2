#include "daemon/process_holds.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "audit/recording_process_actions.h"
#include "daemon/cap_throttle.h"

namespace gpuslice::daemon {
namespace {

class ProcessHoldsTest : public ::testing::Test {
 protected:
  audit::RecordingProcessActions system_;
  std::map<uint32_t, uint64_t> start_;  // live pids and their start times
  ProcessHolds holds_{&system_, [this](uint32_t pid) -> std::optional<uint64_t> {
                        auto it = start_.find(pid);
                        return it == start_.end() ? std::nullopt : std::optional<uint64_t>(it->second);
                      }};
};

TEST_F(ProcessHoldsTest, TheThrottleNeverContinuesAProcessAnAuditDenied) {
  start_ = {{100, 7}, {200, 9}};
  ASSERT_TRUE(holds_.for_audits()->Stop(100));  // the memory audit denies 100
  // The throttle's period: continue both, then stop both.
  EXPECT_FALSE(holds_.for_throttle()->Continue(100));
  EXPECT_TRUE(holds_.for_throttle()->Continue(200));
  EXPECT_TRUE(holds_.for_throttle()->Stop(100));
  EXPECT_FALSE(holds_.for_throttle()->Continue(100));
  EXPECT_EQ(system_.log, (std::vector<std::string>{"stop 100", "cont 200", "stop 100"}));
  EXPECT_TRUE(holds_.Denied(100));
  EXPECT_FALSE(holds_.Denied(200));
}

TEST_F(ProcessHoldsTest, ADenyLiftedOrAPidReusedIsNoLongerHeld) {
  start_ = {{100, 7}, {300, 11}};
  holds_.for_audits()->Stop(100);
  holds_.for_audits()->Stop(300);
  holds_.for_audits()->Continue(100);  // an operator's continue
  EXPECT_FALSE(holds_.Denied(100));
  EXPECT_TRUE(holds_.for_throttle()->Continue(100));
  start_[300] = 12;  // 300 ended and its pid went to a new process
  EXPECT_FALSE(holds_.Denied(300));
  EXPECT_TRUE(holds_.for_throttle()->Continue(300));
  start_.erase(300);
  EXPECT_FALSE(holds_.Denied(300));
}

TEST(ProcessHoldsAcrossRestarts, ADenyOutlivesItsDaemonAndTheNextOnesThrottleLeftovers) {
  // A process denied by the memory audit and throttled for its cap when the
  // daemon died: the next daemon continues the throttle's leftovers
  // (CapThrottle::ContinueLeftovers) through the throttle's face, and the
  // denied process stays stopped. Before, the new daemon knew no deny and
  // continued it.
  const std::string dir = testing::TempDir();
  const std::string denied = dir + "/audit-denied-" + std::to_string(getpid());
  const std::string leftovers = dir + "/cap-throttle-denied-" + std::to_string(getpid());
  std::map<uint32_t, uint64_t> start = {{100, 7}, {200, 9}, {300, 11}};
  const auto ticks = [&](uint32_t pid) -> std::optional<uint64_t> {
    auto it = start.find(pid);
    return it == start.end() ? std::nullopt : std::optional<uint64_t>(it->second);
  };
  {
    audit::RecordingProcessActions system;
    ProcessHolds first(&system, ticks, denied);
    first.for_audits()->Stop(100);
    first.for_audits()->Stop(300);
  }  // the daemon dies
  {
    std::ofstream out(leftovers);
    out << "100 7\n200 9\n";
  }
  start[300] = 12;  // 300 ended and its pid went to a new process
  audit::RecordingProcessActions system;
  ProcessHolds next(&system, ticks, denied);
  EXPECT_TRUE(next.Denied(100));
  EXPECT_FALSE(next.Denied(300));
  EXPECT_EQ(CapThrottle::ContinueLeftovers(leftovers, next.for_throttle(), ticks), 1);
  EXPECT_EQ(system.log, (std::vector<std::string>{"cont 200"}));
  // An operator's continue lifts the deny, for the daemon after this one too.
  next.for_audits()->Continue(100);
  audit::RecordingProcessActions third_system;
  ProcessHolds third(&third_system, ticks, denied);
  EXPECT_FALSE(third.Denied(100));
  unlink(denied.c_str());
}

TEST_F(ProcessHoldsTest, KillsPassThroughBothFaces) {
  start_ = {{100, 7}};
  holds_.for_audits()->Stop(100);
  EXPECT_TRUE(holds_.for_throttle()->Kill(100));
  EXPECT_TRUE(holds_.for_audits()->Kill(100));
  EXPECT_EQ(system_.killed, (std::vector<uint32_t>{100, 100}));
}

}  // namespace
}  // namespace gpuslice::daemon
