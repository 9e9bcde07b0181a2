#include "core/memory_wait.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/memory_ledger.h"

namespace gpuslice::core {
namespace {

struct LedgerFixture : ::testing::Test {
  std::unique_ptr<Ledger> ledger = std::make_unique<Ledger>();
  void SetUp() override { *ledger = {}; }
  ProcessSlot* Live(uint32_t i, uint32_t pid) {
    ledger->slots[i].owner = static_cast<uint64_t>(pid) << 32 | 1;
    if (ledger->slot_high_water <= i) ledger->slot_high_water = i + 1;
    return &ledger->slots[i];
  }
};

using MemoryWaitTest = LedgerFixture;

TEST_F(MemoryWaitTest, APostedRequestIsPendingWithItsDeviceAndBytes) {
  EXPECT_FALSE(AnyPendingMemoryWait(*ledger));
  PostMemoryWait(Live(3, 100), 2, 5ull << 30);
  EXPECT_TRUE(AnyPendingMemoryWait(*ledger));
  const std::vector<MemoryWait> waits = PendingMemoryWaits(*ledger);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].slot, 3u);
  EXPECT_EQ(waits[0].device, 2u);
  EXPECT_EQ(waits[0].bytes, 5ull << 30);
}

TEST_F(MemoryWaitTest, DeviceZeroIsARequestNotNone) {
  PostMemoryWait(Live(0, 100), 0, 1);
  ASSERT_EQ(PendingMemoryWaits(*ledger).size(), 1u);
  EXPECT_EQ(PendingMemoryWaits(*ledger)[0].device, 0u);
}

TEST_F(MemoryWaitTest, AnAnswerReachesTheRequestItAnswersOnly) {
  ProcessSlot* slot = Live(1, 100);
  PostMemoryWait(slot, 0, 1ull << 30);
  const MemoryWait asked = PendingMemoryWaits(*ledger).at(0);
  // The process gave up and asked again (another size) before the answer.
  PostMemoryWait(slot, 0, 2ull << 30);
  EXPECT_FALSE(AnswerNoRelief(ledger.get(), asked));
  EXPECT_FALSE(MemoryWaitRefused(slot));
  const MemoryWait again = PendingMemoryWaits(*ledger).at(0);
  EXPECT_TRUE(AnswerNoRelief(ledger.get(), again));
  EXPECT_TRUE(MemoryWaitRefused(slot));
  EXPECT_TRUE(PendingMemoryWaits(*ledger).empty()) << "an answered request is not pending";
  EXPECT_FALSE(AnyPendingMemoryWait(*ledger));
  ClearMemoryWait(slot);
  EXPECT_FALSE(MemoryWaitRefused(slot));
}

TEST_F(MemoryWaitTest, FreeBusyAndScribbledSlotsAreNotRequests) {
  Live(0, 100);
  ledger->slots[0].memory_wait = MemoryWaitWord(0, 1);
  ledger->slots[0].owner = 0;  // freed
  Live(1, 101);
  ledger->slots[1].memory_wait = MemoryWaitWord(0, 1);
  ledger->slots[1].owner = BusyWord(101, 7);
  Live(2, 102);
  ledger->slots[2].memory_wait = 42;  // no device bits
  Live(3, 103);
  ledger->slots[3].memory_wait = 0x7full << 56 | 1;  // device 126
  EXPECT_TRUE(PendingMemoryWaits(*ledger).empty());
  EXPECT_FALSE(AnyPendingMemoryWait(*ledger));
}

TEST_F(MemoryWaitTest, HugeRequestsAreClamped) {
  PostMemoryWait(Live(0, 100), 1, ~0ull);
  const MemoryWait w = PendingMemoryWaits(*ledger).at(0);
  EXPECT_EQ(w.device, 1u);
  EXPECT_EQ(w.bytes, kMemoryWaitMaxBytes);
}

TEST_F(MemoryWaitTest, AReapedSlotLosesItsRequest) {
  // A process that dies waiting leaves no request: the reaper zeroes its slot.
  class Dead : public port::ProcessProbe {
   public:
    port::ProcessIdentity Self() const override { return {}; }
    bool IsGone(const port::ProcessIdentity&) const override { return gone; }
    bool gone = false;
  } probe;
  auto limits = std::make_unique<Limits>();
  limits->device_count = 1;
  limits->devices[0].memory_limit_bytes = kUnlimited;
  MemoryLedger dying(limits.get(), ledger.get());
  ASSERT_TRUE(dying.Attach({100, 1100, 0}, probe).ok());
  dying.PostMemoryWait(0, 1 << 20);
  ASSERT_EQ(PendingMemoryWaits(*ledger).size(), 1u);
  probe.gone = true;
  MemoryLedger reaper(limits.get(), ledger.get());
  EXPECT_EQ(reaper.ReapDeadProcesses(probe), 1u);
  EXPECT_TRUE(PendingMemoryWaits(*ledger).empty());
}

}  // namespace
}  // namespace gpuslice::core
