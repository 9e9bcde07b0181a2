#include "policy/timeslice_policy.h"

#include <gtest/gtest.h>

namespace gpuslice::policy {
namespace {

using core::Priority;

TEST(TimeslicePolicyTest, BeSharesSplitThePeriod) {
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 30}, {"b", Priority::kBestEffort, 70}}),
            (std::vector<uint64_t>{3000, 7000}));
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 10}, {"b", Priority::kBestEffort, 90}}),
            (std::vector<uint64_t>{1000, 9000}));
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 20},
                               {"b", Priority::kBestEffort, 30},
                               {"c", Priority::kBestEffort, 50}}),
            (std::vector<uint64_t>{2000, 3000, 5000}));
}

TEST(TimeslicePolicyTest, SharesAreRelativeWeights) {
  // 1:3 whatever the absolute numbers.
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 10}, {"b", Priority::kBestEffort, 30}}),
            (std::vector<uint64_t>{2500, 7500}));
}

TEST(TimeslicePolicyTest, SlicesNeverGoBelowTheSwitchCostFloor) {
  auto s = ComputeTimeslices({{"a", Priority::kBestEffort, 1}, {"b", Priority::kBestEffort, 99}});
  EXPECT_EQ(s[0], 1000u);
}

TEST(TimeslicePolicyTest, LoneBeBesideLcGetsTheSmallestSlice) {
  auto s = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100}, {"a", Priority::kBestEffort, 30}});
  EXPECT_EQ(s, (std::vector<uint64_t>{5000000, 50}));
}

TEST(TimeslicePolicyTest, SeveralBeBesideLcSplitAShortPeriodAboveAFloor) {
  auto s = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 30},
                              {"b", Priority::kBestEffort, 70}});
  EXPECT_EQ(s, (std::vector<uint64_t>{5000000, 600, 1400}));
  auto t = ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 5},
                              {"b", Priority::kBestEffort, 95}});
  EXPECT_EQ(t[1], 250u);
}

TEST(TimeslicePolicyTest, SeveralLcDoNotHoldEachOtherOff) {
  auto s = ComputeTimeslices({{"x", Priority::kLatencyCritical, 100},
                              {"y", Priority::kLatencyCritical, 100},
                              {"a", Priority::kBestEffort, 100}});
  EXPECT_EQ(s, (std::vector<uint64_t>{2048, 2048, 50}));
}

TEST(TimeslicePolicyTest, ALowerLcLevelIsSlicedAsABestEffortBesideAHigherOne) {
  // critical (lc rank 1), two of lc (rank 0), one BE.
  auto s = ComputeTimeslices({{"critical", Priority::kLatencyCritical, 100, 1},
                              {"x", Priority::kLatencyCritical, 100, 0},
                              {"y", Priority::kLatencyCritical, 100, 0},
                              {"a", Priority::kBestEffort, 100}});
  // The lower level at the floor, the BE at the tiny slice: never two at
  // the tiny slice (two at 50 us beside an LC made no progress on an H100).
  EXPECT_EQ(s, (std::vector<uint64_t>{5000000, 250, 250, 50}));
  // Two at the top level share; the one lower level yields to both.
  auto t = ComputeTimeslices({{"c1", Priority::kLatencyCritical, 100, 2},
                              {"c2", Priority::kLatencyCritical, 100, 2},
                              {"x", Priority::kLatencyCritical, 100, 1}});
  EXPECT_EQ(t, (std::vector<uint64_t>{2048, 2048, 250}));
  // critical, high and a BE (the GPU's three levels at once).
  auto u = ComputeTimeslices({{"critical", Priority::kLatencyCritical, 100, 1},
                              {"high", Priority::kLatencyCritical, 100, 0},
                              {"low", Priority::kBestEffort, 100}});
  EXPECT_EQ(u, (std::vector<uint64_t>{5000000, 250, 50}));
}

TEST(TimeslicePolicyTest, ALowerLcLevelKeepsItsSliceBesideAHigherLiveOne) {
  // What a lower-level LC process applies by itself while the higher one is
  // live (timeslice_applier.h): its policy slice, not the tiny default.
  auto s = ComputeTimeslicesBesideLc({{"critical", Priority::kLatencyCritical, 100, 1},
                                      {"high", Priority::kLatencyCritical, 100, 0},
                                      {"low", Priority::kBestEffort, 100}});
  EXPECT_EQ(s, (std::vector<uint64_t>{2048, 250, 50}));
}

TEST(TimeslicePolicyTest, NoTwoVgpusGetTheTinySlice) {
  // Whatever the mix, at most one vGPU on the GPU gets a slice below the
  // floor. (Two arriving at once may both come with the tiny slice until the
  // next schedule; their processes then see each other busy on the board:
  // interposer/timeslice_applier.h.)
  const TimeslicePolicyConfig c;
  for (uint32_t lower_lc = 0; lower_lc <= 3; ++lower_lc) {
    for (uint32_t be = 0; be <= 3; ++be) {
      std::vector<VgpuOnGpu> v{{"top", Priority::kLatencyCritical, 100, 5}};
      for (uint32_t i = 0; i < lower_lc; ++i) v.push_back({"l", Priority::kLatencyCritical, 10 + 20 * i, i});
      for (uint32_t i = 0; i < be; ++i) v.push_back({"b", Priority::kBestEffort, 5 + 30 * i});
      // ... whichever of the BE vGPUs are on the GPU, with or without
      // processes of no vGPU there.
      for (uint32_t absent = 0; absent < (1u << be); ++absent) {
        for (uint32_t others = 0; others <= 1; ++others) {
          for (uint32_t i = 0; i < be; ++i) v[1 + lower_lc + i].on_gpu = ((absent >> i) & 1) == 0;
          const auto s = ComputeTimeslices(v, c, others);
          int tiny = 0;
          for (size_t k = 0; k < s.size(); ++k) tiny += v[k].on_gpu && s[k] < c.be_min_slice_with_lc_us;
          EXPECT_LE(tiny, 1) << lower_lc << " lower LC, " << be << " BE, absent " << absent << ", " << others;
        }
      }
    }
  }
}

TEST(TimeslicePolicyTest, AloneTakesTheWholePeriod) {
  EXPECT_EQ(ComputeTimeslices({{"a", Priority::kBestEffort, 30}}), (std::vector<uint64_t>{10000}));
  EXPECT_EQ(ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100}}), (std::vector<uint64_t>{5000000}));
  EXPECT_TRUE(ComputeTimeslices({}).empty());
}

TEST(TimeslicePolicyTest, SlicesBesideLcAreThoseAnLcWouldBring) {
  // No LC yet: each BE gets what it would with one beside it.
  EXPECT_EQ(ComputeTimeslicesBesideLc({{"a", Priority::kBestEffort, 100}}), (std::vector<uint64_t>{50}));
  EXPECT_EQ(ComputeTimeslicesBesideLc({{"a", Priority::kBestEffort, 30}, {"b", Priority::kBestEffort, 70}}),
            (std::vector<uint64_t>{600, 1400}));
  // An LC already there: the same as the slices now; the LC gets the shared
  // slice, what it would get beside another LC of its level.
  const std::vector<VgpuOnGpu> with_lc = {{"lc", Priority::kLatencyCritical, 100}, {"a", Priority::kBestEffort, 100}};
  EXPECT_EQ(ComputeTimeslicesBesideLc(with_lc), (std::vector<uint64_t>{2048, 50}));
  TimeslicePolicyConfig shared;
  shared.lc_shared_slice_us = 3000;
  EXPECT_EQ(ComputeTimeslicesBesideLc(with_lc, shared), (std::vector<uint64_t>{3000, 50}));
  // Every BE slice beside LC is at most its slice without one.
  TimeslicePolicyConfig config;
  config.be_slice_beside_lc_us = 80;
  const std::vector<VgpuOnGpu> be = {{"a", Priority::kBestEffort, 10}, {"b", Priority::kBestEffort, 90}};
  const auto now = ComputeTimeslices(be, config);
  const auto beside = ComputeTimeslicesBesideLc(be, config);
  for (size_t i = 0; i < be.size(); ++i) EXPECT_LE(beside[i], now[i]);
  EXPECT_EQ(ComputeTimeslicesBesideLc({{"a", Priority::kBestEffort, 100}}, config), (std::vector<uint64_t>{80}));
}

TEST(TimeslicePolicyTest, BesideAnLcOnlyBestEffortVgpusOnTheGpuContend) {
  VgpuOnGpu idle{"idle", Priority::kBestEffort, 50};
  idle.on_gpu = false;
  // The lone BE on the GPU keeps the tiny slice beside the idle one; the
  // idle one's slice is what it gets on arriving (the period split in two).
  EXPECT_EQ(ComputeTimeslices({{"lc", Priority::kLatencyCritical, 100}, {"busy", Priority::kBestEffort, 50}, idle}),
            (std::vector<uint64_t>{5000000, 50, 1000}));
  EXPECT_EQ(ComputeTimeslicesBesideLc({{"busy", Priority::kBestEffort, 50}, idle}), (std::vector<uint64_t>{50, 1000}));
  // Both on it: the split, as before.
  idle.on_gpu = true;
  EXPECT_EQ(ComputeTimeslicesBesideLc({{"busy", Priority::kBestEffort, 50}, idle}),
            (std::vector<uint64_t>{1000, 1000}));
  // A process of no listed vGPU is a contender: the BE no longer takes the
  // tiny slice, and splits the period with it (of no share, it is not paid one).
  idle.on_gpu = false;
  EXPECT_EQ(ComputeTimeslicesBesideLc({{"busy", Priority::kBestEffort, 50}, idle}, {}, 1),
            (std::vector<uint64_t>{2000, 1000}));
  // Without an LC the shares stay slices of the whole set, on the GPU or not.
  EXPECT_EQ(ComputeTimeslices({{"busy", Priority::kBestEffort, 50}, idle}, {}, 1), (std::vector<uint64_t>{5000, 5000}));
  // The lone best-effort contender beside an LC is the one at the tiny slice.
  idle.on_gpu = false;
  EXPECT_EQ(AloneBesideLc({{"lc", Priority::kLatencyCritical, 100}, {"busy", Priority::kBestEffort, 50}, idle}),
            (std::vector<bool>{false, true, false}));
  EXPECT_EQ(AloneBesideLc({{"busy", Priority::kBestEffort, 50}, idle}, 1), (std::vector<bool>{false, false}));
  idle.on_gpu = true;
  EXPECT_EQ(AloneBesideLc({{"busy", Priority::kBestEffort, 50}, idle}), (std::vector<bool>{false, false}));
  // An LC vGPU counts whether or not it is on the GPU.
  VgpuOnGpu lc{"lc", Priority::kLatencyCritical, 100};
  lc.on_gpu = false;
  EXPECT_EQ(ComputeTimeslices({lc, {"busy", Priority::kBestEffort, 50}}), (std::vector<uint64_t>{5000000, 50}));
}

}  // namespace
}  // namespace gpuslice::policy
