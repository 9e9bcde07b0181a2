#include "port/wake_word.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpuslice::port {
namespace {

constexpr uint64_t kLongNs = 60'000'000'000ull;  // a lost wake-up fails the test by its timeout

TEST(WakeWordTest, AWakeBetweenArmAndSleepIsNotLost) {
  WakeWord word;
  word.Arm();
  word.Wake();
  EXPECT_TRUE(word.SleepArmed(kLongNs));
  EXPECT_FALSE(word.armed());
}

TEST(WakeWordTest, AWakeBeforeArmDoesNotCutTheNextSleepShort) {
  WakeWord word;
  word.Wake();  // nobody asleep: nothing to do
  word.Arm();
  EXPECT_FALSE(word.SleepArmed(1'000'000)) << "timed out, as nothing woke it";
  EXPECT_FALSE(word.armed());
}

TEST(WakeWordTest, ASleepingThreadIsWoken) {
  WakeWord word;
  bool woken = false;
  word.Arm();
  std::thread sleeper([&] { woken = word.SleepArmed(kLongNs); });
  word.Wake();
  sleeper.join();
  EXPECT_TRUE(woken);
}

TEST(WakeWordTest, DisarmCallsTheSleepOff) {
  WakeWord word;
  word.Arm();
  word.Disarm();
  EXPECT_FALSE(word.armed());
  EXPECT_TRUE(word.SleepArmed(kLongNs)) << "a disarmed word does not sleep";
}

}  // namespace
}  // namespace gpuslice::port
