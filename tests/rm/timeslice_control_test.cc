#include "rm/timeslice_control.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "fake_rm_device.h"

namespace gpuslice::rm {
namespace {

// A client with one compute channel group on a fake RM device.
struct FakeTsg {
  explicit FakeTsg(FakeRmDevice::Options options = {}) : dev(options) {
    fd = dev.OpenControl();
    Nvos64 client{};
    client.hClass = kClassRootClient;
    EXPECT_EQ(dev.Ioctl(fd, IoctlRequest(kEscRmAlloc, sizeof client), &client), 0);
    uint32_t params[4] = {0, 0, 0, kEngineTypeGraphics};
    Nvos64 a{client.hObjectNew, client.hObjectNew, 0x77, kClassChannelGroup,
             reinterpret_cast<uint64_t>(params), 0, sizeof params, 0, 0, 0};
    EXPECT_EQ(dev.Ioctl(fd, IoctlRequest(kEscRmAlloc, sizeof a), &a), 0);
    EXPECT_EQ(a.status, kNvOk);
    tsg = {fd, client.hObjectNew, 0x77, kEngineTypeGraphics, 0, 1};
  }
  ~FakeTsg() { close(fd); }
  FakeRmDevice dev;
  int fd = -1;
  TsgRef tsg;
};

TEST(TimesliceControlTest, SetsAndReadsBack) {
  FakeTsg s;
  TimesliceControl control(&s.dev);
  uint64_t us = 0;
  ASSERT_TRUE(control.Get(s.tsg, &us).ok);
  EXPECT_EQ(us, 2048u);
  ASSERT_TRUE(control.Set(s.tsg, 3000).ok);
  EXPECT_EQ(s.dev.TimesliceOf(s.tsg.client, s.tsg.handle), 3000u);
  ASSERT_TRUE(control.Get(s.tsg, &us).ok);
  EXPECT_EQ(us, 3000u);
  EXPECT_EQ(control.params_size(), 8u);
}

TEST(TimesliceControlTest, DetectsTheParameterSizeTheDriverAccepts) {
  FakeTsg s({/*params_size=*/24, kNvOk});
  TimesliceControl control(&s.dev);
  ASSERT_TRUE(control.Set(s.tsg, 500).ok);
  EXPECT_EQ(control.params_size(), 24u);
  EXPECT_EQ(s.dev.TimesliceOf(s.tsg.client, s.tsg.handle), 500u);
  // The probe used GET; the one SET went out at the detected size.
  auto calls = s.dev.set_calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].params_size, 24u);
}

TEST(TimesliceControlTest, NoAcceptableSizeIsAFailureNamingTheStatus) {
  FakeTsg s({/*params_size=*/12, kNvOk});
  TimesliceControl control(&s.dev);
  ControlResult r = control.Set(s.tsg, 500);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, kNvErrInvalidParamStruct);
  char buf[64];
  EXPECT_STREQ(r.Describe(buf, sizeof buf), "RM status 0x3a");
  EXPECT_EQ(control.params_size(), 0u);
  EXPECT_EQ(s.dev.TimesliceOf(s.tsg.client, s.tsg.handle), 2048u);
}

TEST(TimesliceControlTest, RefusalIsReportedAndChangesNothing) {
  FakeTsg s({kTimesliceParamsSize, kNvErrInsufficientPermissions});
  TimesliceControl control(&s.dev);
  ControlResult r = control.Set(s.tsg, 500);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status, kNvErrInsufficientPermissions);
  EXPECT_EQ(s.dev.TimesliceOf(s.tsg.client, s.tsg.handle), 2048u);
}

TEST(TimesliceControlTest, WrongDescriptorIsRefusedLikeTheDriverDoes) {
  FakeTsg s;
  TimesliceControl control(&s.dev);
  TsgRef elsewhere = s.tsg;
  elsewhere.fd = s.dev.OpenControl();
  EXPECT_EQ(control.Set(elsewhere, 500).status, kNvErrInvalidClient);
  close(elsewhere.fd);
}

TEST(TimesliceControlTest, IoctlFailureIsReportedWithErrno) {
  FakeTsg s;
  TimesliceControl control(&s.dev);
  TsgRef closed = s.tsg;
  closed.fd = 1000000;
  ControlResult r = control.Set(closed, 500);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, ENOTTY);
}

}  // namespace
}  // namespace gpuslice::rm
