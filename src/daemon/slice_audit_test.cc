#include "daemon/slice_audit.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "audit/recording_process_actions.h"
#include "fake_rm_device.h"
#include "rm/rm_abi.h"

namespace gpuslice::daemon {
namespace {

constexpr uint64_t kNamespace = 7;

// This test process stands for the tenant: it maps a memfd named as the
// daemon names a vGPU's ledger, so the audit's /proc check finds it.
class MappedLedger {
 public:
  explicit MappedLedger(const std::string& vgpu) {
    fd_ = memfd_create(("gpuslice-ledger-" + vgpu).c_str(), MFD_CLOEXEC);
    if (fd_ >= 0 && ftruncate(fd_, 4096) == 0) map_ = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd_, 0);
    if (fd_ >= 0) close(fd_);  // the mapping stays, as "(deleted)"
  }
  ~MappedLedger() {
    if (map_ != MAP_FAILED) munmap(map_, 4096);
  }
  bool ok() const { return map_ != MAP_FAILED; }

 private:
  int fd_ = -1;
  void* map_ = MAP_FAILED;
};

struct Table final : audit::ProcessTable {
  uint32_t ParentOf(uint32_t) const override { return 1; }
  std::optional<NamespacedPid> InNamespace(uint32_t pid) const override { return NamespacedPid{kNamespace, pid}; }
};

using Actions = audit::RecordingProcessActions;

// The tenant's descriptors are the fake device's own (one process here).
struct Descriptors final : TenantDescriptors {
  int DupRmControl(uint32_t, int fd) override { return rm_fds.count(fd) ? fd : -ENODEV; }
  void Close(int) override {}
  std::set<int> rm_fds;
};

class SliceAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ledger_.ok());
    fd_ = dev_.OpenControl();
    descriptors_.rm_fds.insert(fd_);
    rm::Nvos64 client{};
    client.hClass = rm::kClassRootClient;
    ASSERT_EQ(dev_.Ioctl(fd_, rm::IoctlRequest(rm::kEscRmAlloc, sizeof client), &client), 0);
    client_ = client.hObjectNew;
    Group(kCompute, rm::kEngineTypeGraphics);
    Group(kCopy, 2);
  }
  void TearDown() override { close(fd_); }

  void Group(rm::NvHandle handle, uint32_t engine) {
    uint32_t params[4] = {0, 0, 0, engine};
    rm::Nvos64 tsg{client_, client_, handle, rm::kClassChannelGroup, reinterpret_cast<uint64_t>(params), 0,
                   sizeof params, 0, 0, 0};
    ASSERT_EQ(dev_.Ioctl(fd_, rm::IoctlRequest(rm::kEscRmAlloc, sizeof tsg), &tsg), 0);
    ASSERT_EQ(tsg.status, rm::kNvOk);
  }
  // What the tenant does with the raw system call: the fake device itself.
  void TenantSets(rm::NvHandle handle, uint64_t us) {
    rm::Nvos54 c{client_, handle, rm::kCtrlSetTimeslice, 0, reinterpret_cast<uint64_t>(&us), 8, 0};
    ASSERT_EQ(dev_.Ioctl(fd_, rm::IoctlRequest(rm::kEscRmControl, sizeof c), &c), 0);
    ASSERT_EQ(c.status, rm::kNvOk);
  }
  // A best-effort vGPU beside an LC: the tiny slice, ceiling 1000 us.
  node::VgpuView View(const std::string& name = "be") const {
    node::VgpuView v;
    v.name = name;
    v.dir = "/state/vgpus/" + name;
    v.generation = generation_;
    node::VgpuDeviceView d;
    d.gpu_index = 0;
    d.timeslice_us = 50;
    d.slice_ceiling_us = 1000;
    d.copy_slice_ceiling_us = 1024;
    v.devices.push_back(d);
    node::VgpuProcessView p;
    p.pid = static_cast<uint32_t>(getpid());
    p.pid_namespace = kNamespace;
    p.channel_groups.push_back({fd_, client_, kCompute, 0, rm::kEngineTypeGraphics});
    p.channel_groups.push_back({fd_, client_, kCopy, 0, 2});
    v.processes.push_back(p);
    return v;
  }
  std::vector<RaisedSlice> Pass(const std::vector<node::VgpuView>& views) { return PassAll(views).raised; }
  SliceAudit::Findings PassAll(const std::vector<node::VgpuView>& views, SliceAudit* audit = nullptr) {
    now_ns_ += 1'000'000'000;
    return (audit ? audit : &audit_)->Pass(views, {{0, static_cast<uint32_t>(getpid()), 1 << 20}}, now_ns_);
  }
  std::vector<uint64_t> DaemonSets() const {
    std::vector<uint64_t> out;
    for (const auto& c : dev_.set_calls()) out.push_back(c.timeslice_us);
    return out;
  }

  static constexpr rm::NvHandle kCompute = 0x5c000001, kCopy = 0x5c000002;
  MappedLedger ledger_{"be"};
  rm::FakeRmDevice dev_;
  int fd_ = -1;
  rm::NvHandle client_ = 0;
  uint64_t generation_ = 3;
  uint64_t now_ns_ = 0;
  Table table_;
  Actions actions_;
  Descriptors descriptors_;
  std::vector<std::string> counted_;  // kinds acted on
  SliceAudit::OnActed count_ = [this](const std::string&, const char* kind) { counted_.push_back(kind); };
  SliceAudit audit_{SliceAuditActions{}, &descriptors_, &dev_, &table_, &actions_, count_};
};

TEST_F(SliceAuditTest, GroupsWithinTheCeilingAreOnlyRead) {
  TenantSets(kCompute, 1000);  // the co-busy slice: the ceiling itself
  const size_t before = dev_.set_calls().size();
  EXPECT_TRUE(Pass({View()}).empty());
  EXPECT_EQ(dev_.set_calls().size(), before);
  EXPECT_TRUE(actions_.killed.empty());
}

TEST_F(SliceAuditTest, ARaisedSliceIsSetBackThenTheProcessIsKilledWhenItRaisesItAgain) {
  TenantSets(kCompute, 4'000'000);
  auto found = Pass({View()});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].found_us, 4'000'000u);
  EXPECT_EQ(found[0].set_us, 50u) << "the vGPU's own slice, not the ceiling";
  EXPECT_FALSE(found[0].again);
  EXPECT_EQ(dev_.TimesliceOf(client_, kCompute), 50u);
  EXPECT_TRUE(actions_.killed.empty()) << "a first find is set back, not acted on";
  EXPECT_TRUE(counted_.empty());
  EXPECT_TRUE(audit_.Watching(now_ns_)) << "its owner now audits more often";

  TenantSets(kCompute, 4'000'000);
  found = Pass({View()});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].again && found[0].acted);
  EXPECT_EQ(actions_.killed, std::vector<uint32_t>{static_cast<uint32_t>(getpid())});
  EXPECT_EQ(counted_, std::vector<std::string>{"raised_slice"});
  EXPECT_EQ(dev_.TimesliceOf(client_, kCompute), 50u);
  EXPECT_FALSE(audit_.Watching(now_ns_)) << "acted on: nothing left to watch";

  TenantSets(kCompute, 4'000'000);  // (a deny'd process is still there)
  found = Pass({View()});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].acted) << "acted on once";
  EXPECT_EQ(actions_.killed.size(), 1u);
}

TEST_F(SliceAuditTest, AGroupSetBackIsWatchedForAWhile) {
  EXPECT_FALSE(audit_.Watching(now_ns_));
  TenantSets(kCompute, 4'000'000);
  ASSERT_EQ(Pass({View()}).size(), 1u);
  EXPECT_TRUE(audit_.Watching(now_ns_ + SliceAudit::kWatchNs - 1));
  EXPECT_FALSE(audit_.Watching(now_ns_ + SliceAudit::kWatchNs));
}

TEST_F(SliceAuditTest, ChangedLimitsBetweenTwoFindsAreNoSecondStrike) {
  // A slice legal under the limits before: the vGPU's processes may not
  // have applied the new ones yet when the audit reads.
  TenantSets(kCompute, 10'000);
  ASSERT_EQ(Pass({View()}).size(), 1u);
  ++generation_;
  TenantSets(kCompute, 10'000);
  auto found = Pass({View()});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].again);
  EXPECT_TRUE(actions_.killed.empty());
}

TEST_F(SliceAuditTest, CopyEngineGroupsHaveTheirOwnCeiling) {
  TenantSets(kCompute, 50);
  TenantSets(kCopy, 1024);  // the driver's default for a copy group
  EXPECT_TRUE(Pass({View()}).empty());
  TenantSets(kCopy, 4'000'000);
  auto found = Pass({View()});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].compute);
  EXPECT_EQ(found[0].ceiling_us, 1024u);
}

TEST_F(SliceAuditTest, ASlotNamingAProcessOfAnotherVgpuIsNotBelieved) {
  // A tenant of vGPU "other" names this process (which maps only "be"'s
  // ledger) in its slot, to have the audit lower its groups to "other"'s
  // slice and kill it when its own library sets them back.
  TenantSets(kCompute, 10'000);
  node::VgpuView forged = View("other");
  EXPECT_TRUE(Pass({forged}).empty());
  EXPECT_TRUE(Pass({forged}).empty());
  EXPECT_EQ(dev_.TimesliceOf(client_, kCompute), 10'000u);
  EXPECT_TRUE(actions_.killed.empty());
}

TEST_F(SliceAuditTest, WhatIsNotTheRmControlDeviceOrNotAGroupIsLeftAlone) {
  TenantSets(kCompute, 4'000'000);
  node::VgpuView v = View();
  v.processes[0].channel_groups = {{fd_ + 100, client_, kCompute, 0, rm::kEngineTypeGraphics},  // another file
                                   {fd_, client_, 0x7777, 0, rm::kEngineTypeGraphics}};         // no such group
  EXPECT_TRUE(Pass({v}).empty());
  EXPECT_EQ(dev_.TimesliceOf(client_, kCompute), 4'000'000u);
}

TEST_F(SliceAuditTest, ProcessesTheDriverDoesNotListAreNotAudited) {
  TenantSets(kCompute, 4'000'000);
  EXPECT_TRUE(audit_.Pass({View()}, {}, now_ns_).raised.empty());
  EXPECT_EQ(dev_.TimesliceOf(client_, kCompute), 4'000'000u);
}

TEST_F(SliceAuditTest, AProcessWithNoGroupToAuditIsReportedAfterAWhile) {
  node::VgpuView v = View();
  v.processes[0].channel_groups.clear();  // the tenant cleared its list
  int passes = 0;
  while (PassAll({v}).hidden.empty() && passes < 20) ++passes;
  EXPECT_GE(uint64_t(passes + 1) * 1'000'000'000, SliceAudit::kHiddenAfterNs) << "not before its time";
  EXPECT_LT(passes, 20);
  EXPECT_EQ(counted_, std::vector<std::string>{"hidden_groups"});
  EXPECT_TRUE(actions_.killed.empty()) << "reported by default: it may be gpuslice's own failure";
  EXPECT_TRUE(PassAll({v}).hidden.empty()) << "acted on once";

  // Named groups that RM does not answer for hide as well; an operator may kill.
  SliceAudit strict({audit::AuditAction::kKill, audit::AuditAction::kKill}, &descriptors_, &dev_, &table_, &actions_,
                    count_);
  v.processes[0].channel_groups = {{fd_, client_, 0x7777, 0, rm::kEngineTypeGraphics}};
  for (int i = 0; i < 20 && actions_.killed.empty(); ++i) PassAll({v}, &strict);
  EXPECT_EQ(actions_.killed, std::vector<uint32_t>{static_cast<uint32_t>(getpid())});
}

TEST_F(SliceAuditTest, WhatCannotBeAskedOrIsNotTheVgpusIsNeverCalledHidden) {
  // Its groups answer: nothing hidden.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(PassAll({View()}).hidden.empty());
  // The daemon may not take its descriptors: not known to hide anything.
  struct Denied final : TenantDescriptors {
    int DupRmControl(uint32_t, int) override { return -EPERM; }
    void Close(int) override {}
  } denied;
  SliceAudit audit({}, &denied, &dev_, &table_, &actions_, count_);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(PassAll({View()}, &audit).hidden.empty());
  // A slot of another vGPU naming this process, with no groups.
  node::VgpuView forged = View("other");
  forged.processes[0].channel_groups.clear();
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(PassAll({forged}).hidden.empty());
  EXPECT_TRUE(counted_.empty());
}

}  // namespace
}  // namespace gpuslice::daemon
