#include "fake_rm_device.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpuslice::rm {
namespace {

// The fake must behave like the driver where gpuslice depends on it.
TEST(FakeRmDeviceTest, ControlsOnlyOnTheClientsDescriptor) {
  FakeRmDevice dev;
  const int fd = dev.OpenControl(), other = dev.OpenControl();
  Nvos64 client{};
  client.hClass = kClassRootClient;
  ASSERT_EQ(dev.Ioctl(fd, IoctlRequest(kEscRmAlloc, sizeof client), &client), 0);
  ASSERT_EQ(client.status, kNvOk);
  uint32_t params[4] = {0, 0, 0, kEngineTypeGraphics};
  Nvos64 tsg{client.hObjectNew, client.hObjectNew, 0x100, kClassChannelGroup,
             reinterpret_cast<uint64_t>(params), 0, sizeof params, 0, 0, 0};
  ASSERT_EQ(dev.Ioctl(fd, IoctlRequest(kEscRmAlloc, sizeof tsg), &tsg), 0);
  ASSERT_EQ(tsg.status, kNvOk);
  uint64_t us = 0;
  Nvos54 c{client.hObjectNew, 0x100, kCtrlGetTimeslice, 0, reinterpret_cast<uint64_t>(&us), 8, 0};
  ASSERT_EQ(dev.Ioctl(other, IoctlRequest(kEscRmControl, sizeof c), &c), 0);
  EXPECT_EQ(c.status, kNvErrInvalidClient);
  ASSERT_EQ(dev.Ioctl(fd, IoctlRequest(kEscRmControl, sizeof c), &c), 0);
  EXPECT_EQ(c.status, kNvOk);
  EXPECT_EQ(us, FakeRmDevice::kDefaultComputeSliceUs);
  close(fd);
  close(other);
}

TEST(FakeRmDeviceTest, UnknownDescriptorIsNotATty) {
  FakeRmDevice dev;
  Nvos54 c{};
  EXPECT_EQ(dev.Ioctl(0, IoctlRequest(kEscRmControl, sizeof c), &c), -1);
  EXPECT_EQ(errno, ENOTTY);
}

}  // namespace
}  // namespace gpuslice::rm
