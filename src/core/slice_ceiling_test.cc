#include "core/slice_ceiling.h"

#include <gtest/gtest.h>

namespace gpuslice::core {
namespace {

DeviceLimit Limit(uint64_t timeslice_us, uint32_t flags = kDeviceFlagPresent) {
  DeviceLimit d{};
  d.timeslice_us = timeslice_us;
  d.flags = flags;
  return d;
}

TEST(SliceCeilingTest, EverySliceTheLibraryMaySetIsWithinIt) {
  // Beside an LC: the tiny slice, or the co-busy one two busy processes take.
  EXPECT_EQ(ComputeSliceCeilingUs(Limit(50)), kCoBusySliceUs);
  // Alone: its policy slice.
  EXPECT_EQ(ComputeSliceCeilingUs(Limit(10'000)), 10'000u);
  // No policy slice: the driver's default.
  EXPECT_EQ(ComputeSliceCeilingUs(Limit(0)), kDriverComputeSliceUs);
  // Backfill turns: the holder's slice.
  EXPECT_EQ(ComputeSliceCeilingUs(Limit(50, kDeviceFlagPresent | kDeviceFlagShareTurns)), kHolderSliceUs);
  // An LC vGPU's own long slice.
  EXPECT_EQ(ComputeSliceCeilingUs(Limit(5'000'000)), 5'000'000u);
}

TEST(SliceCeilingTest, CopyGroupsMayKeepTheDriversDefault) {
  EXPECT_EQ(CopySliceCeilingUs(Limit(50)), kDriverCopySliceUs);
  EXPECT_EQ(CopySliceCeilingUs(Limit(10'000)), 10'000u);
  EXPECT_EQ(SliceCeilingUs(Limit(50), /*compute_engine=*/false), kDriverCopySliceUs);
  EXPECT_EQ(SliceCeilingUs(Limit(50), /*compute_engine=*/true), kCoBusySliceUs);
}

}  // namespace
}  // namespace gpuslice::core
