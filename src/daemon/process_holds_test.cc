#include "daemon/process_holds.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "audit/recording_process_actions.h"

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

TEST_F(ProcessHoldsTest, KillsPassThroughBothFaces) {
  start_ = {{100, 7}};
  holds_.for_audits()->Stop(100);
  EXPECT_TRUE(holds_.for_throttle()->Kill(100));
  EXPECT_TRUE(holds_.for_audits()->Kill(100));
  EXPECT_EQ(system_.killed, (std::vector<uint32_t>{100, 100}));
}

}  // namespace
}  // namespace gpuslice::daemon
