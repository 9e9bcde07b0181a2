#include "audit/memory_audit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "audit/recording_process_actions.h"

namespace gpuslice::audit {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSec = 1'000'000'000;

class FakeTable final : public ProcessTable {
 public:
  uint32_t ParentOf(uint32_t pid) const override {
    auto it = parent.find(pid);
    return it == parent.end() ? 0 : it->second;
  }
  std::optional<NamespacedPid> InNamespace(uint32_t) const override { return std::nullopt; }
  std::map<uint32_t, uint32_t> parent;
};

using RecordingActions = RecordingProcessActions;

struct Fixture {
  // supervisor 100 -> app 101 -> child 102 (dropped LD_PRELOAD); 200 is
  // another tenant's supervisor, 201 its app; 300 belongs to nobody.
  Fixture() {
    table.parent = {{101, 100}, {102, 101}, {100, 1}, {201, 200}, {200, 1}, {300, 1}};
    AuditedVgpu a;
    a.name = "a";
    a.limit_bytes = {{0, 1024 * kMiB}};
    a.ledger = {{101, {{0, 512 * kMiB}}}};
    a.session_roots = {100};
    AuditedVgpu b;
    b.name = "b";
    b.limit_bytes = {{0, 4096 * kMiB}};
    b.ledger = {{201, {{0, 100 * kMiB}}}};
    b.session_roots = {200};
    vgpus = {a, b};
  }
  MemoryAudit Audit(AuditAction action = AuditAction::kKill) {
    AuditConfig c;
    c.action = action;
    c.context_allowance_bytes = 500 * kMiB;
    return MemoryAudit(c, &table, &actions);
  }
  FakeTable table;
  RecordingActions actions;
  std::vector<AuditedVgpu> vgpus;
};

TEST(MemoryAuditTest, AProcessOfASessionThatBypassedTheLibraryIsKilledAfterItsGrace) {
  Fixture f;
  MemoryAudit audit = f.Audit();
  const std::vector<GpuProcess> gpu = {{0, 101, 900 * kMiB}, {0, 102, 4096 * kMiB}, {0, 201, 600 * kMiB}};
  auto first = audit.Check(gpu, f.vgpus, 10 * kSec);
  ASSERT_FALSE(first.empty());
  bool unaccounted = false;
  for (const Violation& v : first) {
    unaccounted |= v.kind == Violation::Kind::kUnaccounted && v.pid == 102 && v.vgpu == "a";
    EXPECT_FALSE(v.acted) << "within its grace";
    EXPECT_TRUE(v.found) << "told in the pass that first sees it";
  }
  EXPECT_TRUE(unaccounted);
  EXPECT_TRUE(f.actions.killed.empty());
  for (const Violation& v : audit.Check(gpu, f.vgpus, 10 * kSec + kSec / 2)) {
    EXPECT_FALSE(v.found) << "told once";
  }
  EXPECT_TRUE(f.actions.killed.empty());
  audit.Check(gpu, f.vgpus, 11 * kSec);
  ASSERT_FALSE(f.actions.killed.empty());
  for (uint32_t pid : f.actions.killed) EXPECT_EQ(pid, 102u) << "only the offender; tenant b is untouched";
  EXPECT_EQ(audit.acted_totals().at("a"), 2u) << "unaccounted, and a over its limit because of it";
  EXPECT_EQ(audit.acted_totals().count("b"), 0u);
  // Acted on once: the next pass (the process not yet gone) does not act again.
  const size_t kills = f.actions.killed.size();
  audit.Check(gpu, f.vgpus, 12 * kSec);
  EXPECT_EQ(f.actions.killed.size(), kills);
}

TEST(MemoryAuditTest, AFoundViolationSaysWhatWillBeDoneAndWhen) {
  Violation v;
  v.kind = Violation::Kind::kUnaccounted;
  v.vgpu = "a";
  v.pid = 102;
  v.used_bytes = 4096 * kMiB;
  v.action = AuditAction::kKill;
  EXPECT_EQ(DescribeFound(v, kSec),
            "found: process 102 of vGPU 'a' holds 4096 MiB on GPU 0 but is in no ledger of it (it bypassed the "
            "gpuslice library); it is killed if this lasts 1.0 s");
  EXPECT_EQ(Describe(v).find("found"), std::string::npos);
}

TEST(MemoryAuditTest, AProcessThatRewroteItsOwnSlotIsFoundOverTheLimit) {
  Fixture f;
  MemoryAudit audit = f.Audit(AuditAction::kDeny);
  f.vgpus[0].ledger[101][0] = 0;  // zeroed its own slot, then allocated 2 GiB
  const std::vector<GpuProcess> gpu = {{0, 101, 2048 * kMiB + 300 * kMiB}};
  audit.Check(gpu, f.vgpus, 10 * kSec);
  auto v = audit.Check(gpu, f.vgpus, 11 * kSec);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Violation::Kind::kOverLimit);
  EXPECT_EQ(v[0].allowed_bytes, 1024 * kMiB + 500 * kMiB);
  EXPECT_TRUE(v[0].acted);
  EXPECT_EQ(f.actions.stopped, (std::vector<uint32_t>{101}));
  EXPECT_TRUE(f.actions.killed.empty());
}

TEST(MemoryAuditTest, WithinTheLimitAndTheAllowanceNothingHappens) {
  Fixture f;
  MemoryAudit audit = f.Audit();
  // 1024 MiB limit + 2 x 500 MiB allowance; the two processes hold 2000 MiB.
  f.vgpus[0].ledger[103] = {{0, 400 * kMiB}};
  const std::vector<GpuProcess> gpu = {{0, 101, 1000 * kMiB}, {0, 103, 1000 * kMiB}};
  EXPECT_TRUE(audit.Check(gpu, f.vgpus, 10 * kSec).empty());
  EXPECT_TRUE(audit.Check(gpu, f.vgpus, 20 * kSec).empty());
  EXPECT_TRUE(f.actions.killed.empty());
}

TEST(MemoryAuditTest, AViolationThatEndsWithinItsGraceIsForgotten) {
  Fixture f;
  MemoryAudit audit = f.Audit();
  audit.Check({{0, 102, 64 * kMiB}}, f.vgpus, 10 * kSec);  // starting up: not yet in the ledger
  f.vgpus[0].ledger[102] = {{0, 64 * kMiB}};
  EXPECT_TRUE(audit.Check({{0, 102, 64 * kMiB}}, f.vgpus, 10 * kSec + kSec / 2).empty());
  f.vgpus[0].ledger.erase(102);  // seen outside the ledger again: a fresh grace
  audit.Check({{0, 102, 64 * kMiB}}, f.vgpus, 11 * kSec);
  EXPECT_TRUE(f.actions.killed.empty());
}

TEST(MemoryAuditTest, ProcessesOfNoVgpuGetTheUnmanagedAction) {
  Fixture f;
  MemoryAudit audit = f.Audit();
  audit.Check({{0, 300, 64 * kMiB}}, f.vgpus, 10 * kSec);
  auto v = audit.Check({{0, 300, 64 * kMiB}}, f.vgpus, 12 * kSec);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Violation::Kind::kUnmanaged);
  EXPECT_EQ(v[0].action, AuditAction::kReport) << "reported, not killed, by default";
  EXPECT_TRUE(f.actions.killed.empty());
  EXPECT_NE(Describe(v[0]).find("belongs to no vGPU"), std::string::npos);
}

TEST(MemoryAuditTest, MemoryNoProcessHoldsIsReportedAndNothingIsActedOn) {
  Fixture f;
  MemoryAudit audit = f.Audit(AuditAction::kKill);
  const std::vector<GpuProcess> gpu = {{0, 101, 512 * kMiB}, {0, 201, 100 * kMiB}};
  // GPU 0 holds 3 GiB more than its processes; GPU 1 only the driver's own.
  const std::map<uint32_t, uint64_t> used = {{0, 612 * kMiB + 3072 * kMiB}, {1, 15 * kMiB}};
  auto first = audit.Check(gpu, f.vgpus, 10 * kSec, used);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, Violation::Kind::kUnattributed);
  EXPECT_EQ(first[0].gpu_index, 0u);
  EXPECT_EQ(first[0].used_bytes, 3072 * kMiB);
  EXPECT_EQ(first[0].action, AuditAction::kReport) << "no process to act on";
  EXPECT_TRUE(first[0].found);
  EXPECT_NE(Describe(first[0]).find("exported file descriptor"), std::string::npos);
  auto later = audit.Check(gpu, f.vgpus, 12 * kSec, used);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_TRUE(later[0].acted) << "reported once its grace is over";
  EXPECT_FALSE(later[0].found);
  EXPECT_TRUE(f.actions.killed.empty());
  EXPECT_TRUE(f.actions.stopped.empty());
  // Back within the allowance: forgotten.
  EXPECT_TRUE(audit.Check(gpu, f.vgpus, 13 * kSec, {{0, 612 * kMiB + 900 * kMiB}}).empty());
}

TEST(MemoryAuditTest, AnAncestryLoopDoesNotHang) {
  Fixture f;
  f.table.parent[400] = 401;
  f.table.parent[401] = 400;
  MemoryAudit audit = f.Audit();
  auto v = audit.Check({{0, 400, kMiB}}, f.vgpus, 10 * kSec);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Violation::Kind::kUnmanaged);
}

TEST(MemoryAuditTest, ActionsParseAndNameTheirValues) {
  EXPECT_EQ(ParseAuditAction("kill").value(), AuditAction::kKill);
  EXPECT_EQ(ParseAuditAction("deny").value(), AuditAction::kDeny);
  EXPECT_EQ(ParseAuditAction("report").value(), AuditAction::kReport);
  auto bad = ParseAuditAction("");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("report, deny or kill"), std::string::npos);
}

TEST(MemoryAuditTest, TheSystemTableReadsThisProcesssParentAndNamespace) {
  const auto self = static_cast<uint32_t>(getpid());
  EXPECT_EQ(SystemProcessTable().ParentOf(self), static_cast<uint32_t>(getppid()));
  EXPECT_EQ(SystemProcessTable().ParentOf(0x7ffffff0u), 0u);
  const auto ns = SystemProcessTable().InNamespace(self);
  ASSERT_TRUE(ns.has_value());
  EXPECT_EQ(ns->pid, self) << "the test runs in one pid namespace";
  EXPECT_NE(ns->pid_namespace, 0u);
  EXPECT_FALSE(SystemProcessTable().InNamespace(0x7ffffff0u).has_value());
}

}  // namespace
}  // namespace gpuslice::audit
