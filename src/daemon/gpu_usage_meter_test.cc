#include "daemon/gpu_usage_meter.h"

#include <gtest/gtest.h>

namespace gpuslice::daemon {
namespace {

GpuUsageMeter::Interval At(uint64_t start_s, uint64_t end_s, std::map<std::string, double> gpu_seconds,
                           uint64_t energy_mj) {
  GpuUsageMeter::Interval in;
  in.start_us = start_s * 1'000'000;
  in.end_us = end_s * 1'000'000;
  in.gpu_seconds = std::move(gpu_seconds);
  in.energy_mj = energy_mj;
  return in;
}

TEST(GpuUsageMeterTest, EnergySplitsIntoIdleAndTheVgpusByGpuTimeAndAddsUp) {
  GpuUsageMeter m;
  m.Add(At(0, 1, {}, 1'000'000));         // baseline reading
  m.Add(At(1, 2, {}, 1'000'000 + 70'000));  // nothing ran: 70 W is the idle power
  // 3 s, 1110 J: a ran 1 s, b 0.5 s; 1.5 s idle at 70 W, the rest split 2:1.
  m.Add(At(2, 5, {{"a", 1.0}, {"b", 0.5}}, 1'070'000 + 1'110'000));
  const auto t = m.totals();
  EXPECT_DOUBLE_EQ(t.idle_watts.at(0), 70.0);
  EXPECT_DOUBLE_EQ(t.idle_joules.at(0), 70.0 + 105.0);
  EXPECT_DOUBLE_EQ(t.joules.at({0, "a"}), 670.0);
  EXPECT_DOUBLE_EQ(t.joules.at({0, "b"}), 335.0);
  EXPECT_DOUBLE_EQ(t.gpu_seconds.at({0, "a"}), 1.0);
  EXPECT_DOUBLE_EQ(t.device_joules.at(0), 1180.0);
  EXPECT_DOUBLE_EQ(t.idle_joules.at(0) + t.joules.at({0, "a"}) + t.joules.at({0, "b"}), t.device_joules.at(0));
}

TEST(GpuUsageMeterTest, AVgpuThatKeepsTheGpuBusyPaysForAllOfItAndTheFloorIsTheLowestPowerSeen) {
  GpuUsageMeter m;
  m.Add(At(0, 1, {{"a", 1.0}}, 0));
  m.Add(At(1, 2, {{"a", 1.0}}, 300'000));  // busy all along: all 300 J are a's
  m.Add(At(2, 3, {{"a", 0.9}}, 500'000));  // 200 W, a tenth idle: 20 J idle at the lowest power seen
  const auto t = m.totals();
  EXPECT_DOUBLE_EQ(t.idle_watts.at(0), 200.0);  // busy fractions 1.0 and 0.9: too close to fit a line
  EXPECT_DOUBLE_EQ(t.idle_joules.at(0), 20.0);
  EXPECT_DOUBLE_EQ(t.joules.at({0, "a"}), 480.0);
}

// Found on an H100: a standalone `gpuslice run` opens NVML once its job
// runs, so it never sees the GPU idle, and with the lowest power of a busy
// interval as the idle power it put most of a capped job's power in the
// idle line and held 229 W under a 190 W cap. The line through power
// against busy fraction finds the idle power instead.
TEST(GpuUsageMeterTest, WithNoIdleIntervalTheIdlePowerIsTheInterceptOfPowerAgainstBusyFraction) {
  GpuUsageMeter m;
  uint64_t mj = 1'000'000;
  m.Add(At(0, 1, {{"a", 1.0}}, mj));
  // 80 W idle, 300 W more at full use, a little noise.
  const double busy[] = {1.0, 0.95, 0.5, 0.45, 0.55, 0.5, 0.6};
  const double noise[] = {2, -3, 1, 0, -2, 3, -1};
  for (int i = 0; i < 7; ++i) {
    mj += static_cast<uint64_t>((80 + 300 * busy[i] + noise[i]) * 1000);
    m.Add(At(1 + i, 2 + i, {{"a", busy[i]}}, mj));
  }
  const auto t = m.totals();
  EXPECT_NEAR(t.idle_watts.at(0), 80.0, 6.0);
  // Once the GPU is seen idle, that is the idle power.
  mj += 75'000;
  m.Add(At(8, 9, {}, mj));
  EXPECT_DOUBLE_EQ(m.totals().idle_watts.at(0), 75.0);
}

TEST(GpuUsageMeterTest, ACounterThatGoesBackStartsOverInsteadOfWrapping) {
  GpuUsageMeter m;
  m.Add(At(0, 1, {}, 5'000'000));
  m.Add(At(1, 2, {{"a", 1.0}}, 1'000));  // the driver was reloaded
  m.Add(At(2, 3, {{"a", 1.0}}, 101'000));
  const auto t = m.totals();
  EXPECT_DOUBLE_EQ(t.device_joules.at(0), 100.0);
  EXPECT_DOUBLE_EQ(t.gpu_seconds.at({0, "a"}), 2.0) << "GPU time counts whatever the energy counter did";
}

TEST(GpuUsageMeterTest, WithoutAnEnergyCounterPowerTimesTimeStandsIn) {
  GpuUsageMeter m;
  GpuUsageMeter::Interval in;
  in.start_us = 0;
  in.end_us = 2'000'000;
  in.gpu_seconds = {{"a", 1.0}};
  in.power_mw = 150'000;
  m.Add(in);
  const auto t = m.totals();
  EXPECT_DOUBLE_EQ(t.device_joules.at(0), 300.0);
  EXPECT_DOUBLE_EQ(t.idle_joules.at(0) + t.joules.at({0, "a"}), 300.0);
}

}  // namespace
}  // namespace gpuslice::daemon
