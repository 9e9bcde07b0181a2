#include "core/memory_ledger.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "core/shared_word.h"

namespace gpuslice::core {
namespace {

// Deaths are scripted: a process is gone when the test says so.
class ScriptedProbe : public port::ProcessProbe {
 public:
  port::ProcessIdentity Self() const override { return {}; }
  bool IsGone(const port::ProcessIdentity& who) const override { return dead.count(who.pid) > 0; }
  bool PidIsGone(uint32_t pid, uint64_t) const override { return dead.count(pid) > 0; }
  std::set<uint32_t> dead;
};

struct Vgpu {
  Vgpu(uint64_t limit) : limits(std::make_unique<Limits>()), ledger(std::make_unique<Ledger>()) {
    limits->device_count = 2;
    limits->devices[0].memory_limit_bytes = limit;
    limits->devices[1].memory_limit_bytes = kUnlimited;
    snprintf(limits->name, sizeof limits->name, "test");
  }
  MemoryLedger Process(uint32_t pid, const ScriptedProbe& probe) {
    MemoryLedger l(limits.get(), ledger.get());
    EXPECT_TRUE(l.Attach({pid, 1000 + pid, 0}, probe).ok());
    return l;
  }
  std::unique_ptr<Limits> limits;
  std::unique_ptr<Ledger> ledger;
};

TEST(MemoryLedgerTest, ChargesUpToTheLimitExactly) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  EXPECT_TRUE(a.TryCharge(0, 600));
  EXPECT_TRUE(a.TryCharge(0, 400));
  EXPECT_FALSE(a.TryCharge(0, 1));
  EXPECT_EQ(a.UsedBytes(0), 1000u);
  EXPECT_EQ(a.DeniedAllocations(), 0u);  // counted by the caller, which knows why
  a.CountDenial();
  EXPECT_EQ(a.DeniedAllocations(), 1u);
  a.Uncharge(0, 1);
  EXPECT_TRUE(a.TryCharge(0, 1));
}

TEST(MemoryLedgerTest, ProcessesOfOneVgpuShareOneAccount) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  MemoryLedger b = vgpu.Process(11, probe);
  EXPECT_TRUE(a.TryCharge(0, 700));
  EXPECT_FALSE(b.TryCharge(0, 301));
  EXPECT_TRUE(b.TryCharge(0, 300));
  EXPECT_EQ(a.UsedBytes(0), 1000u);
  EXPECT_EQ(b.MyUsedBytes(0), 300u);
  EXPECT_EQ(a.LiveProcessCount(), 2u);
}

TEST(MemoryLedgerTest, UnlimitedDeviceIsCountedButNeverRefused) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  EXPECT_TRUE(a.TryCharge(1, 1ull << 50));
  EXPECT_EQ(a.UsedBytes(1), 1ull << 50);
}

TEST(MemoryLedgerTest, UnderflowClampsAtZeroInsteadOfWrapping) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  ASSERT_TRUE(a.TryCharge(0, 100));
  a.Uncharge(0, 500);
  EXPECT_EQ(a.UsedBytes(0), 0u);
  EXPECT_TRUE(a.TryCharge(0, 1000));  // no false OOM from a wrapped counter
}

TEST(MemoryLedgerTest, DeadProcessUsageIsReclaimed) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  MemoryLedger b = vgpu.Process(11, probe);
  ASSERT_TRUE(b.TryCharge(0, 900));
  EXPECT_FALSE(a.TryCharge(0, 200));
  EXPECT_EQ(a.ReapDeadProcesses(probe), 0u);  // b is alive: nothing taken
  probe.dead.insert(11);
  EXPECT_EQ(a.ReapDeadProcesses(probe), 1u);
  EXPECT_EQ(a.UsedBytes(0), 0u);
  EXPECT_TRUE(a.TryCharge(0, 1000));
  EXPECT_EQ(a.ReapDeadProcesses(probe), 0u);  // reaped once only
  EXPECT_EQ(vgpu.ledger->reaped_processes, 1u);
}

// A reaper killed between taking a dead process's slot and freeing it
// leaves the slot busy in its name, part of its counters still charged.
TEST(MemoryLedgerTest, AReclaimWhoseReaperDiedIsRedone) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  MemoryLedger b = vgpu.Process(11, probe);
  ASSERT_TRUE(b.TryCharge(0, 100));
  ProcessSlot& slot = vgpu.ledger->slots[1];
  ASSERT_EQ(slot.owner >> 32, 11u);
  StoreSeqCst(slot.owner, BusyWord(12, 0));  // reaper 12 took it, then died
  EXPECT_EQ(a.LiveProcessCount(), 1u);
  EXPECT_EQ(a.ReapDeadProcesses(probe), 0u);  // reaper 12 lives: its job, not ours
  EXPECT_EQ(slot.owner, BusyWord(12, 0));
  EXPECT_EQ(a.UsedBytes(0), 100u);
  probe.dead.insert(12);
  EXPECT_EQ(a.ReapDeadProcesses(probe), 1u);
  EXPECT_EQ(slot.owner, 0u);
  EXPECT_EQ(a.UsedBytes(0), 0u);
  MemoryLedger c = vgpu.Process(13, probe);  // the slot is usable again
  EXPECT_EQ(c.LiveProcessCount(), 2u);
}

// A process killed while it fills in the slot it claimed.
TEST(MemoryLedgerTest, AClaimWhoseClaimerDiedIsUndone) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  StoreSeqCst(vgpu.ledger->slots[1].owner, BusyWord(20, 0));
  StoreSeqCst(vgpu.ledger->slot_high_water, 2u);
  probe.dead.insert(20);
  EXPECT_EQ(a.ReapDeadProcesses(probe), 1u);
  EXPECT_EQ(vgpu.ledger->slots[1].owner, 0u);
}

// The marker of an older gpuslice names no process: never taken over.
TEST(MemoryLedgerTest, AnAnonymousBusyMarkIsLeftAlone) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  StoreSeqCst(vgpu.ledger->slots[1].owner, kSlotReaping);
  StoreSeqCst(vgpu.ledger->slot_high_water, 2u);
  probe.dead.insert(BusyPid(kSlotReaping));
  EXPECT_EQ(a.ReapDeadProcesses(probe), 0u);
  EXPECT_EQ(vgpu.ledger->slots[1].owner, kSlotReaping);
}

TEST(MemoryLedgerTest, DetachReturnsUsageAndFreesTheSlot) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  ASSERT_TRUE(a.TryCharge(0, 1000));
  a.Detach();
  EXPECT_FALSE(a.attached());
  MemoryLedger b = vgpu.Process(11, probe);
  EXPECT_TRUE(b.TryCharge(0, 1000));
  EXPECT_EQ(b.LiveProcessCount(), 1u);
}

TEST(MemoryLedgerTest, FullLedgerReapsThenReportsWhy) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  std::vector<MemoryLedger> procs;
  for (uint32_t pid = 1; pid <= kMaxProcesses; ++pid) procs.push_back(vgpu.Process(pid, probe));
  MemoryLedger extra(vgpu.limits.get(), vgpu.ledger.get());
  Status full = extra.Attach({5000, 1, 0}, probe);
  EXPECT_FALSE(full.ok());
  EXPECT_NE(full.message().find("1024 live processes"), std::string::npos) << full.message();
  probe.dead.insert(7);
  EXPECT_TRUE(extra.Attach({5000, 1, 0}, probe).ok());
}

TEST(MemoryLedgerTest, LiveResizeIsSeenByTheNextCharge) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger a = vgpu.Process(10, probe);
  ASSERT_TRUE(a.TryCharge(0, 800));
  StoreSeqCst(vgpu.limits->devices[0].memory_limit_bytes, 500);
  EXPECT_FALSE(a.TryCharge(0, 1));  // shrunk below use: new allocations refused
  a.Uncharge(0, 400);
  EXPECT_TRUE(a.TryCharge(0, 100));
}

// Many threads, each its own "process", race to charge a shared limit: the
// committed total never exceeds it, and it is filled to the last unit.
TEST(MemoryLedgerTest, RacingChargesNeverOvercommit) {
  ScriptedProbe probe;
  constexpr uint64_t kLimit = 100000;
  constexpr int kThreads = 8;
  Vgpu vgpu(kLimit);
  std::vector<MemoryLedger> procs;
  for (int t = 0; t < kThreads; ++t) procs.push_back(vgpu.Process(100 + t, probe));
  std::atomic<uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const uint64_t bytes = 1 + (i * 7 + t) % 13;
        if (procs[t].TryCharge(0, bytes)) {
          granted += bytes;
          if (i % 3 == 0) {
            procs[t].Uncharge(0, bytes);
            granted -= bytes;
          }
        }
        ASSERT_LE(procs[t].UsedBytes(0), kLimit + 13 * kThreads);  // transient, before back-off
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(granted.load(), kLimit);
  EXPECT_EQ(procs[0].UsedBytes(0), granted.load());
  EXPECT_GE(granted.load(), kLimit - 13);  // filled: no lasting false refusals
}

TEST(MemoryLedgerTest, AnOpenIpcHandleIsSeenByEveryProcessUntilClosedOrReaped) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger exporter = vgpu.Process(10, probe);
  MemoryLedger importer = vgpu.Process(11, probe);
  EXPECT_FALSE(exporter.IpcHandleOpen(42));
  importer.RecordIpcOpen(42);
  importer.RecordIpcOpen(42);  // opened twice
  EXPECT_TRUE(exporter.IpcHandleOpen(42));
  EXPECT_FALSE(exporter.IpcHandleOpen(43));
  importer.ForgetIpcOpen(42);
  EXPECT_TRUE(exporter.IpcHandleOpen(42));  // once more open
  importer.ForgetIpcOpen(42);
  EXPECT_FALSE(exporter.IpcHandleOpen(42));

  // A dead importer's handles count until its slot is reaped.
  importer.RecordIpcOpen(7);
  probe.dead.insert(11);
  EXPECT_TRUE(exporter.IpcHandleOpen(7));
  EXPECT_EQ(exporter.ReapDeadProcesses(probe), 1u);
  EXPECT_FALSE(exporter.IpcHandleOpen(7));
}

TEST(MemoryLedgerTest, MoreOpenIpcHandlesThanASlotKeepsCountAsAnyHandleOpen) {
  ScriptedProbe probe;
  Vgpu vgpu(1000);
  MemoryLedger exporter = vgpu.Process(10, probe);
  MemoryLedger importer = vgpu.Process(11, probe);
  for (uint64_t h = 1; h < ProcessSlot::kOpenIpcHandles; ++h) importer.RecordIpcOpen(h);
  EXPECT_FALSE(exporter.IpcHandleOpen(999));
  importer.RecordIpcOpen(1000);  // no entry left for it
  EXPECT_TRUE(exporter.IpcHandleOpen(999));
  importer.Detach();
  EXPECT_FALSE(exporter.IpcHandleOpen(999));
}

TEST(MemoryLedgerTest, IpcHandleHashIsNeverAFreeOrOverflowWord) {
  unsigned char a[kIpcHandleBytes] = {}, b[kIpcHandleBytes] = {};
  b[63] = 1;
  EXPECT_NE(IpcHandleHash(a), IpcHandleHash(b));
  for (const unsigned char* h : {a, b}) {
    EXPECT_NE(IpcHandleHash(h), 0u);
    EXPECT_NE(IpcHandleHash(h), kIpcOpenOverflow);
  }
}

TEST(ReapSpacingTest, GrowsWithTheProcessesThatEachReapTheWholeLedger) {
  constexpr uint64_t kInterval = 200'000'000;
  EXPECT_EQ(ReapSpacingNs(kInterval, 0), kInterval);
  EXPECT_EQ(ReapSpacingNs(kInterval, kReapersPerInterval), kInterval);
  EXPECT_EQ(ReapSpacingNs(kInterval, 40), 5 * kInterval) << "40 runs: each reaps a fifth as often";
  // In all, the vGPU's runs still reap about kReapersPerInterval times per
  // interval, whatever their number.
  for (uint32_t runs : {16u, 40u, 500u}) {
    EXPECT_NEAR(static_cast<double>(runs) * kInterval / ReapSpacingNs(kInterval, runs), kReapersPerInterval, 0.5);
  }
}

}  // namespace
}  // namespace gpuslice::core
