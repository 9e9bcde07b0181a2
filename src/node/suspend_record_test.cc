#include "node/suspend_record.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace gpuslice::node {
namespace {

TEST(SuspendRecordTest, RoundTripsThroughTheFile) {
  char tmpl[] = "/tmp/suspend-record-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto missing = ReadSuspendRecord(dir);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->state, SuspendState::kRunning);

  SuspendRecord r;
  r.state = SuspendState::kSuspended;
  r.pids = {12, 34};
  r.bytes = 1 << 20;
  r.since_unix_ms = 1700000000123;
  r.detail = "resume failed: pid 12: failed";
  r.suspended_seconds_total = 2.5;
  r.bytes_moved_total = 3 << 20;
  r.suspends = 2;
  r.resumes = 1;
  r.last_suspend_seconds = 0.25;
  r.last_resume_seconds = 0.5;
  ASSERT_TRUE(WriteSuspendRecord(dir, r).ok());
  auto back = ReadSuspendRecord(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->state, SuspendState::kSuspended);
  EXPECT_EQ(back->pids, r.pids);
  EXPECT_EQ(back->bytes, r.bytes);
  EXPECT_EQ(back->since_unix_ms, r.since_unix_ms);
  EXPECT_EQ(back->detail, r.detail);
  EXPECT_EQ(back->suspended_seconds_total, 2.5);
  EXPECT_EQ(back->bytes_moved_total, r.bytes_moved_total);
  EXPECT_EQ(back->suspends, 2u);
  EXPECT_EQ(back->resumes, 1u);
  EXPECT_EQ(back->last_resume_seconds, 0.5);
  std::filesystem::remove_all(dir);
}

TEST(SuspendRecordTest, RejectsAnUnknownState) {
  EXPECT_FALSE(ParseSuspendRecord("state frozen\n").ok());
  EXPECT_TRUE(ParseSuspendRecord("state resuming\nfuture_key 1\n").ok());
}

}  // namespace
}  // namespace gpuslice::node
