#include "rm/ioctl_hook.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdarg>
#include <vector>

#include "rm/rm_abi.h"
#include "rm/tsg_registry.h"

namespace gpuslice::rm {
namespace {

// The applier's advice (interposer/timeslice_applier.cc) as a test sets it.
std::atomic<uint64_t> g_advice{0};
uint64_t Advice(int /*device*/) { return g_advice.load(); }

// The driver below the hook: records each SET_TIMESLICE's value; the first
// time, a pass of the applier "runs" while the SET is on its way, storing a
// new slice (and setting it, which this SET then overwrites).
std::vector<uint64_t> g_driver_sets;
uint64_t g_advice_during_first_set = 0;
int Driver(int /*fd*/, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  auto* c = static_cast<Nvos54*>(va_arg(ap, void*));
  va_end(ap);
  g_driver_sets.push_back(*reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(c->params)));
  if (g_driver_sets.size() == 1 && g_advice_during_first_set != 0) g_advice.store(g_advice_during_first_set);
  c->status = kNvOk;
  return 0;
}

class RewrittenSliceTest : public ::testing::Test {
 protected:
  static constexpr int kFd = 41;
  static constexpr NvHandle kClient = 0xc1d00001, kGroup = 0x5c000001;

  void SetUp() override {
    Registry().Clear();
    Registry().Add(TsgRef{kFd, kClient, kGroup, kEngineTypeGraphics, 0, 1});
    SetSliceAdvisor(&Advice);
    g_driver_sets.clear();
  }
  void TearDown() override {
    SetSliceAdvisor(nullptr);
    Registry().Clear();
    g_advice_during_first_set = 0;
  }

  // libcuda's own SET_TIMESLICE of 2048 us as it makes a context.
  int DriverSetsItsSlice(Nvos54* c) {
    c->hClient = kClient;
    c->hObject = kGroup;
    c->cmd = kCtrlSetTimeslice;
    c->params = reinterpret_cast<uint64_t>(&params_);
    c->paramsSize = sizeof params_;
    params_ = 2048;
    return ObservedIoctl(&Driver, kFd, IoctlRequest(kEscRmControl, sizeof(Nvos54)), c, nullptr);
  }

  uint64_t params_ = 0;
};

TEST_F(RewrittenSliceTest, ADriverSetCarriesTheAdviceOnce) {
  g_advice = 10000;
  Nvos54 c{};
  EXPECT_EQ(DriverSetsItsSlice(&c), 0);
  EXPECT_EQ(g_driver_sets, (std::vector<uint64_t>{10000}));
}

TEST_F(RewrittenSliceTest, AdviceThatMovedWhileTheSetWasOnItsWayIsSetAgain) {
  // An LC came: the pass stored 50 us while the driver's SET carried 10 ms.
  g_advice = 10000;
  g_advice_during_first_set = 50;
  Nvos54 c{};
  EXPECT_EQ(DriverSetsItsSlice(&c), 0);
  EXPECT_EQ(g_driver_sets, (std::vector<uint64_t>{10000, 50}));
  EXPECT_EQ(c.status, kNvOk);
}

TEST_F(RewrittenSliceTest, NoAdviceLeavesTheDriversValue) {
  g_advice = 0;  // no policy slice yet: the driver's default stands
  Nvos54 c{};
  EXPECT_EQ(DriverSetsItsSlice(&c), 0);
  EXPECT_EQ(g_driver_sets, (std::vector<uint64_t>{2048}));
}

}  // namespace
}  // namespace gpuslice::rm
