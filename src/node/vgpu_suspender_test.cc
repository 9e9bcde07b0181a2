#include "node/vgpu_suspender.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace gpuslice::node {
namespace {

// The driver as a state machine per pid, with failures injected per pid
// and operation, and a log of every call.
class ScriptedDriver final : public CheckpointDriver {
 public:
  std::map<uint32_t, ProcessCheckpointState> states;
  std::set<std::pair<uint32_t, std::string>> fail;  // (pid, "lock"|"lock timeout"|"checkpoint"|"restore"|"unlock")
  std::vector<std::string> calls;

  CheckpointResult Lock(uint32_t pid, std::chrono::milliseconds) override {
    calls.push_back("lock " + std::to_string(pid));
    if (fail.count({pid, "lock timeout"})) return {909, "CUDA_ERROR_TIMEOUT"};  // cuda.h's value
    return Step(pid, "lock", ProcessCheckpointState::kRunning, ProcessCheckpointState::kLocked);
  }
  CheckpointResult Checkpoint(uint32_t pid) override {
    calls.push_back("checkpoint " + std::to_string(pid));
    return Step(pid, "checkpoint", ProcessCheckpointState::kLocked, ProcessCheckpointState::kCheckpointed);
  }
  CheckpointResult Restore(uint32_t pid) override {
    calls.push_back("restore " + std::to_string(pid));
    if (fail.count({pid, "restore"})) {
      states[pid] = ProcessCheckpointState::kFailed;
      return {999, "CUDA_ERROR_UNKNOWN"};
    }
    return Step(pid, "restore", ProcessCheckpointState::kCheckpointed, ProcessCheckpointState::kLocked);
  }
  CheckpointResult Unlock(uint32_t pid) override {
    calls.push_back("unlock " + std::to_string(pid));
    return Step(pid, "unlock", ProcessCheckpointState::kLocked, ProcessCheckpointState::kRunning);
  }
  ProcessCheckpointState State(uint32_t pid) override { return states[pid]; }

 private:
  CheckpointResult Step(uint32_t pid, const std::string& op, ProcessCheckpointState from, ProcessCheckpointState to) {
    if (fail.count({pid, op})) return {999, "CUDA_ERROR_UNKNOWN"};
    if (states[pid] != from) return {401, "CUDA_ERROR_ILLEGAL_STATE"};
    states[pid] = to;
    return {};
  }
};

constexpr std::chrono::milliseconds kTimeout{100};

TEST(VgpuSuspenderTest, SuspendLocksAllBeforeCheckpointingAny) {
  ScriptedDriver d;
  ASSERT_TRUE(SuspendProcesses(&d, {1, 2}, kTimeout).ok());
  EXPECT_EQ(d.calls, (std::vector<std::string>{"lock 1", "lock 2", "checkpoint 1", "checkpoint 2"}));
  EXPECT_EQ(d.states[1], ProcessCheckpointState::kCheckpointed);
  EXPECT_EQ(d.states[2], ProcessCheckpointState::kCheckpointed);
}

TEST(VgpuSuspenderTest, ResumeRestoresAllBeforeUnlockingAny) {
  ScriptedDriver d;
  ASSERT_TRUE(SuspendProcesses(&d, {1, 2}, kTimeout).ok());
  d.calls.clear();
  ASSERT_TRUE(ResumeProcesses(&d, {1, 2}).ok());
  EXPECT_EQ(d.calls, (std::vector<std::string>{"restore 1", "restore 2", "unlock 1", "unlock 2"}));
  EXPECT_EQ(d.states[1], ProcessCheckpointState::kRunning);
  EXPECT_EQ(d.states[2], ProcessCheckpointState::kRunning);
}

TEST(VgpuSuspenderTest, LockTimeoutUnlocksTheLockedAndLeavesAllRunning) {
  ScriptedDriver d;
  d.fail.insert({2, "lock timeout"});
  const ApiStatus s = SuspendProcesses(&d, {1, 2, 3}, kTimeout);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("lock of pid 2 timed out after 100 ms"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("every process left running"), std::string::npos);
  EXPECT_EQ(d.calls, (std::vector<std::string>{"lock 1", "lock 2", "unlock 1"}));
  for (uint32_t pid : {1u, 2u, 3u}) EXPECT_EQ(d.states[pid], ProcessCheckpointState::kRunning) << pid;
}

TEST(VgpuSuspenderTest, CheckpointFailureRollsEveryProcessBack) {
  ScriptedDriver d;
  d.fail.insert({2, "checkpoint"});
  const ApiStatus s = SuspendProcesses(&d, {1, 2}, kTimeout);
  EXPECT_EQ(s.code(), ApiCode::kInternal);
  EXPECT_NE(s.message().find("every process left running"), std::string::npos) << s.message();
  EXPECT_EQ(d.states[1], ProcessCheckpointState::kRunning);
  EXPECT_EQ(d.states[2], ProcessCheckpointState::kRunning);
}

TEST(VgpuSuspenderTest, FailedRestoreReportsEachProcessStateAndUnlocksNone) {
  ScriptedDriver d;
  ASSERT_TRUE(SuspendProcesses(&d, {1, 2}, kTimeout).ok());
  d.fail.insert({2, "restore"});
  const ApiStatus s = ResumeProcesses(&d, {1, 2});
  EXPECT_EQ(s.code(), ApiCode::kInternal);
  EXPECT_NE(s.message().find("RESTORE FAILED"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pid 1: locked, pid 2: failed"), std::string::npos) << s.message();
  EXPECT_EQ(d.states[1], ProcessCheckpointState::kLocked);  // never half running
}

TEST(VgpuSuspenderTest, ResumeIsIdempotentFromAnyMixOfStates) {
  // What a restarted daemon finds after a kill -9 in the middle.
  ScriptedDriver d;
  d.states = {{1, ProcessCheckpointState::kCheckpointed},
              {2, ProcessCheckpointState::kLocked},
              {3, ProcessCheckpointState::kRunning}};
  ASSERT_TRUE(ResumeProcesses(&d, {1, 2, 3}).ok());
  for (uint32_t pid : {1u, 2u, 3u}) EXPECT_EQ(d.states[pid], ProcessCheckpointState::kRunning) << pid;
  EXPECT_EQ(d.calls, (std::vector<std::string>{"restore 1", "unlock 1", "unlock 2"}));
}

}  // namespace
}  // namespace gpuslice::node
