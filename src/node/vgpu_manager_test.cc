#include "node/vgpu_manager.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/lc_latency.h"
#include "core/memory_ledger.h"
#include "daemon/control_service.h"
#include "node/node_schedule.h"
#include "node/vgpu_owner.h"
#include "node/vgpu_view.h"

namespace gpuslice::node {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

class VgpuManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gs-manager-XXXXXX";
    root_ = mkdtemp(tmpl);
    for (uint32_t i = 0; i < 2; ++i) {
      port::GpuInfo g;
      g.index = i;
      g.uuid[0] = 0xfa;
      g.uuid[15] = static_cast<uint8_t>(i);
      g.uuid_text = FormatGpuUuid(g.uuid.data());
      g.memory_total_bytes = 1024 * kMiB;
      devices_.gpus.push_back(g);
    }
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::unique_ptr<VgpuManager> Manager(std::chrono::milliseconds grace = std::chrono::milliseconds(0),
                                       std::chrono::milliseconds lc_latency_window = std::chrono::seconds(10),
                                       uint32_t max_overcommit_pct = 0) {
    ManagerOptions o;
    o.max_memory_overcommit_pct = max_overcommit_pct;
    o.grace = grace;
    o.lc_latency_window = lc_latency_window;
    return std::make_unique<VgpuManager>(core::VgpuStore(root_), &devices_, &schedule_, o);
  }
  static CreateOptions Create(const std::string& name, std::optional<uint64_t> memory = 64 * kMiB) {
    CreateOptions o;
    o.name = name;
    o.gpus = {"0"};
    o.memory_limit_bytes = memory;
    return o;
  }
  bool Exists(const std::string& name) const { return std::filesystem::exists(root_ + "/vgpus/" + name); }

  std::string root_;
  NodeDevices devices_;
  std::atomic<int> schedules_{0};
  // The real node schedule, counted (resize's one-bump rule spans both).
  ScheduleWorker schedule_{[this](LimitsChange* change) {
                             ++schedules_;
                             return ApplyNodeSchedule(core::VgpuStore(root_), {}, nullptr, change);
                           },
                           ScheduleWorker::Passes::kInline};  // deterministic, and nothing left to run at TearDown
};

TEST_F(VgpuManagerTest, CreatesJoinsAndRefusesConflictingJoins) {
  auto m = Manager();
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("a"), &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.dir, root_ + "/vgpus/a");
  EXPECT_EQ(r.gpu_uuids, std::vector<std::string>{devices_.gpus[0].uuid_text});

  EXPECT_EQ(m->Create(Create("a"), &r).code(), ApiCode::kAlreadyExists);
  CreateOptions join = Create("a", std::nullopt);
  join.gpus.clear();
  join.join_existing = true;
  ASSERT_TRUE(m->Create(join, &r).ok());
  EXPECT_FALSE(r.created);
  join.memory_limit_bytes = 128 * kMiB;
  ApiStatus s = m->Create(join, &r);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("64 MiB"), std::string::npos) << s.message();
}

TEST_F(VgpuManagerTest, AdmissionHoldsTheLimitsOnAGpuToTheOvercommitRatio) {
  // 1024 MiB GPUs, limits up to 150%: 1536 MiB on one GPU.
  auto m = Manager(std::chrono::milliseconds(0), std::chrono::seconds(10), 150);
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("a", 1024 * kMiB), &r).ok());
  ASSERT_TRUE(m->Create(Create("b", 512 * kMiB), &r).ok());  // 1536: exactly the bound
  const ApiStatus over = m->Create(Create("c", 1 * kMiB), &r);
  EXPECT_EQ(over.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(over.message().find("to 1537 MiB, over the 1536 MiB that 150% of its 1024 MiB allows"), std::string::npos)
      << over.message();
  EXPECT_FALSE(Exists("c"));
  // An unlimited vGPU counts as the whole GPU; the other GPU is free.
  CreateOptions other = Create("d", std::nullopt);
  other.gpus = {"1"};
  EXPECT_TRUE(m->Create(other, &r).ok());
  EXPECT_FALSE(m->Create(
                    [&] {
                      CreateOptions o = Create("e", 600 * kMiB);
                      o.gpus = {"1"};
                      return o;
                    }(),
                    &r)
                   .ok());
  // Joining an existing vGPU is no new limit.
  CreateOptions join = Create("a", std::nullopt);
  join.join_existing = true;
  EXPECT_TRUE(m->Create(join, &r).ok());
  // Without a ratio, anything is admitted.
  auto unchecked = Manager();
  EXPECT_TRUE(unchecked->Create(Create("f", 4096 * kMiB), &r).ok());
}

TEST_F(VgpuManagerTest, BadRequestsAreInvalidArguments) {
  auto m = Manager();
  CreateResult r;
  CreateOptions o = Create("../etc");
  EXPECT_EQ(m->Create(o, &r).code(), ApiCode::kInvalidArgument);
  o = Create("bad\nname" + std::string(500, 'x'));
  ApiStatus hostile = m->Create(o, &r);
  EXPECT_EQ(hostile.code(), ApiCode::kInvalidArgument);
  EXPECT_EQ(hostile.message().find('\n'), std::string::npos);  // one line, however hostile the name
  EXPECT_LT(hostile.message().size(), 200u);
  o = Create("b");
  o.compute_share_pct = 0;
  EXPECT_EQ(m->Create(o, &r).code(), ApiCode::kInvalidArgument);
  o = Create("b");
  o.gpus = {"9"};
  EXPECT_EQ(m->Create(o, &r).code(), ApiCode::kInvalidArgument);
  o = Create("b", 0);
  ApiStatus zero = m->Create(o, &r);
  EXPECT_EQ(zero.code(), ApiCode::kInvalidArgument);
  // Below 1 MiB is refused like 0, with the same words (it passed before).
  o = Create("b", 1);
  ApiStatus one_byte = m->Create(o, &r);
  EXPECT_EQ(one_byte.code(), ApiCode::kInvalidArgument);
  EXPECT_NE(one_byte.message().find("give at least 1 MiB"), std::string::npos) << one_byte.message();
  EXPECT_NE(zero.message().find("give at least 1 MiB"), std::string::npos) << zero.message();
  EXPECT_FALSE(Exists("b"));
  ResizeOptions resize;
  resize.name = "nope";
  resize.compute_share_pct = 50;
  VgpuView v;
  EXPECT_EQ(m->Resize(resize, &v).code(), ApiCode::kNotFound);
  resize.name = "b";
  resize.compute_share_pct = 101;
  EXPECT_EQ(m->Resize(resize, &v).code(), ApiCode::kInvalidArgument);
}

TEST_F(VgpuManagerTest, ResizeRefusesShrinkingBelowUseUnlessForced) {
  auto m = Manager();
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("a"), &r).ok());
  auto handle = core::VgpuHandle::Open(r.dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok());
  core::MemoryLedger ledger(&handle->limits(), &handle->ledger());
  ASSERT_TRUE(ledger.Attach(port::SystemProcessProbe().Self(), port::SystemProcessProbe()).ok());
  ASSERT_TRUE(ledger.TryCharge(0, 40 * kMiB));

  ResizeOptions resize;
  resize.name = "a";
  resize.memory_limit_bytes = 32 * kMiB;
  VgpuView after;
  ApiStatus s = m->Resize(resize, &after);
  ASSERT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("uses 40 MiB on GPU 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--force"), std::string::npos);
  EXPECT_EQ(ledger.LimitBytes(0), 64 * kMiB);

  resize.force = true;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_EQ(ledger.LimitBytes(0), 32 * kMiB);  // the application's own view
  EXPECT_FALSE(ledger.TryCharge(0, 1));        // over the limit: nothing new
  ledger.Uncharge(0, 40 * kMiB);
  EXPECT_TRUE(ledger.TryCharge(0, 16 * kMiB));  // back under it: allocations resume
  EXPECT_EQ(after.devices[0].memory_limit_bytes, 32 * kMiB);

  // Growing needs no force, and lifting the limit is a resize too.
  resize.force = false;
  resize.memory_limit_bytes = core::kUnlimited;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_EQ(ledger.LimitBytes(0), core::kUnlimited);
  ledger.Detach();
}

TEST_F(VgpuManagerTest, ComputeResizeBumpsGenerationAndReschedulesBeforeAnswering) {
  auto m = Manager();
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("a"), &r).ok());
  ASSERT_TRUE(schedule_.ApplyNow().ok());  // the create's own pass, settled
  std::vector<VgpuView> views;
  ASSERT_TRUE(m->List("a", &views).ok());
  const uint64_t generation = views[0].generation;
  const uint64_t passes = schedule_.passes();
  ResizeOptions resize;
  resize.name = "a";
  resize.compute_share_pct = 30;
  resize.priority = core::Priority::kLatencyCritical;
  VgpuView after;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  // One change, one bump, though both the share and the slices changed
  // (the slice written by the node schedule: LC alone gets lc_slice_us).
  EXPECT_EQ(after.generation, generation + 1);
  EXPECT_EQ(after.devices[0].timeslice_us, policy::TimeslicePolicyConfig{}.lc_slice_us);
  EXPECT_EQ(after.devices[0].compute_share_pct, 30u);
  EXPECT_EQ(after.priority, core::Priority::kLatencyCritical);
  EXPECT_GT(schedule_.passes(), passes);  // ApplyNow ran on the caller's thread
}

TEST_F(VgpuManagerTest, EveryResizeBumpsTheGenerationOnce) {
  auto m = Manager();
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("a"), &r).ok());
  ASSERT_TRUE(schedule_.ApplyNow().ok());
  std::vector<VgpuView> views;
  ASSERT_TRUE(m->List("a", &views).ok());
  uint64_t generation = views[0].generation;
  ResizeOptions resize;
  resize.name = "a";
  resize.memory_limit_bytes = 32 * kMiB;  // no slice changes
  VgpuView after;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_EQ(after.generation, ++generation);
  resize.memory_limit_bytes.reset();
  resize.compute_cap_pct = 50;  // the slices stay: the schedule bumps anyway
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_EQ(after.generation, ++generation);
  EXPECT_EQ(after.devices[0].compute_cap_pct, 50u);
}

TEST_F(VgpuManagerTest, APowerBudgetTightensTheEffectiveCapAndTheUsersCapIsKeptApart) {
  auto m = Manager();
  CreateResult r;
  CreateOptions c = Create("a");
  c.compute_cap_pct = 80;
  c.power_cap_watts = 150;
  ASSERT_TRUE(m->Create(c, &r).ok());
  auto view = [&] {
    std::vector<VgpuView> views;
    EXPECT_TRUE(m->List("a", &views).ok());
    return views.at(0);
  };
  EXPECT_EQ(view().power_cap_watts, 150.0);
  EXPECT_EQ(view().devices[0].effective_compute_cap_pct, 80u);
  const uint64_t generation = view().generation;
  // The controller's budget goes into the limits as min(user's cap, budget),
  // with one generation bump; the user's cap stays what the user set.
  ASSERT_TRUE(m->SetPowerBudget("a", {30}).ok());
  VgpuView v = view();
  EXPECT_EQ(v.devices[0].effective_compute_cap_pct, 30u);
  EXPECT_EQ(v.devices[0].compute_cap_pct, 80u);
  EXPECT_EQ(v.devices[0].power_budget_pct, 30u);
  EXPECT_EQ(v.generation, generation + 1);
  ASSERT_TRUE(m->SetPowerBudget("a", {30}).ok());  // no change: no bump
  EXPECT_EQ(view().generation, generation + 1);
  // A budget above the user's cap never lifts the effective cap past it.
  ASSERT_TRUE(m->SetPowerBudget("a", {100}).ok());
  EXPECT_EQ(view().devices[0].effective_compute_cap_pct, 80u);
  ASSERT_TRUE(m->SetPowerBudget("a", {30}).ok());

  // A new compute cap under a power cap is the user's new cap, remembered
  // (and still tightened by the budget).
  ResizeOptions resize;
  resize.name = "a";
  resize.compute_cap_pct = 20;
  VgpuView after;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_EQ(after.devices[0].compute_cap_pct, 20u);
  EXPECT_EQ(after.devices[0].effective_compute_cap_pct, 20u);
  resize.compute_cap_pct = 60;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_EQ(after.devices[0].compute_cap_pct, 60u);
  EXPECT_EQ(after.devices[0].effective_compute_cap_pct, 30u);

  // A restarted manager resumes from the budget in force, not the user's cap.
  m = Manager();
  v = view();
  EXPECT_EQ(v.power_cap_watts, 150.0);
  EXPECT_EQ(v.devices[0].effective_compute_cap_pct, 30u);
  EXPECT_EQ(v.devices[0].power_budget_pct, 30u);
  EXPECT_EQ(v.devices[0].compute_cap_pct, 60u);

  // Removing the power cap gives the user's cap back at once.
  resize.compute_cap_pct.reset();
  resize.power_cap_watts = 0;
  ASSERT_TRUE(m->Resize(resize, &after).ok());
  EXPECT_FALSE(after.power_cap_watts.has_value());
  EXPECT_EQ(after.devices[0].effective_compute_cap_pct, 60u);
  EXPECT_EQ(after.devices[0].power_budget_pct, 0u);
  ASSERT_TRUE(m->SetPowerBudget("a", {5}).ok());  // a late budget for an uncapped vGPU is ignored
  EXPECT_EQ(view().devices[0].effective_compute_cap_pct, 60u);

  // Bad watts are refused with the fix.
  resize.power_cap_watts = -3;
  EXPECT_EQ(m->Resize(resize, &after).code(), ApiCode::kInvalidArgument);
  c.name = "b";
  c.power_cap_watts = 1e9;
  const ApiStatus big = m->Create(c, &r);
  EXPECT_EQ(big.code(), ApiCode::kInvalidArgument);
  EXPECT_NE(big.message().find("watts, not milliwatts"), std::string::npos) << big.message();
}

TEST_F(VgpuManagerTest, GcRemovesUnusedEphemeralVgpusOnly) {
  auto m = Manager();
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("ephemeral"), &r).ok());
  CreateOptions p = Create("kept");
  p.persistent = true;
  ASSERT_TRUE(m->Create(p, &r).ok());
  CreateOptions leased = Create("leased");
  leased.client_pid = static_cast<uint32_t>(getpid());  // alive: kept until it releases
  ASSERT_TRUE(m->Create(leased, &r).ok());

  GcResult gc = m->CollectGarbage();
  EXPECT_EQ(gc.removed, std::vector<std::string>{"ephemeral"});
  EXPECT_FALSE(Exists("ephemeral"));
  EXPECT_TRUE(Exists("kept"));
  EXPECT_TRUE(Exists("leased"));

  bool deleted = false;
  ASSERT_TRUE(m->Delete("leased", /*if_unused=*/true, static_cast<uint32_t>(getpid()), &deleted).ok());
  EXPECT_TRUE(deleted);
  ASSERT_TRUE(m->Delete("kept", /*if_unused=*/true, 0, &deleted).ok());
  EXPECT_FALSE(deleted);  // persistent: only an explicit delete
  ASSERT_TRUE(m->Delete("kept", /*if_unused=*/false, 0, &deleted).ok());
  EXPECT_TRUE(deleted);
  EXPECT_EQ(m->Delete("kept", false, 0, &deleted).code(), ApiCode::kNotFound);
}

TEST_F(VgpuManagerTest, AClientPidThatNeverExitsKeepsNothing) {
  auto m = Manager();
  CreateResult r;
  // init would have kept an ephemeral vGPU for as long as the node runs.
  CreateOptions o = Create("init");
  o.client_pid = 1;
  ApiStatus s = m->Create(o, &r);
  EXPECT_EQ(s.code(), ApiCode::kInvalidArgument);
  EXPECT_NE(s.message().find("client_pid 1"), std::string::npos) << s.message();
  EXPECT_FALSE(Exists("init"));
  // A pid that does not exist keeps it only for the grace (0 here).
  o = Create("ghost");
  o.client_pid = 4194304 + 7;  // above pid_max's ceiling: never a process
  ASSERT_TRUE(m->Create(o, &r).ok());
  EXPECT_EQ(m->CollectGarbage().removed, std::vector<std::string>{"ghost"});
  ResizeOptions resize;
  resize.name = "x";
  resize.memory_limit_bytes = 1;
  VgpuView v;
  EXPECT_EQ(m->Resize(resize, &v).code(), ApiCode::kInvalidArgument);
}

TEST_F(VgpuManagerTest, GraceKeepsAJustHandedOutVgpu) {
  auto m = Manager(std::chrono::hours(1));
  CreateResult r;
  ASSERT_TRUE(m->Create(Create("fresh"), &r).ok());
  EXPECT_TRUE(m->CollectGarbage().removed.empty());
  EXPECT_TRUE(Exists("fresh"));
}

TEST_F(VgpuManagerTest, DeleteRefusesAVgpuInUse) {
  auto m = Manager();
  CreateResult r;
  CreateOptions p = Create("busy");
  p.persistent = true;
  ASSERT_TRUE(m->Create(p, &r).ok());
  auto handle = core::VgpuHandle::Open(r.dir, port::MappedFile::Access::kReadOnly);
  core::MemoryLedger ledger(&handle->limits(), &handle->ledger());
  ASSERT_TRUE(ledger.Attach(port::SystemProcessProbe().Self(), port::SystemProcessProbe()).ok());
  bool deleted = true;
  ApiStatus s = m->Delete("busy", false, 0, &deleted);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("1 running process"), std::string::npos) << s.message();
  EXPECT_FALSE(deleted);
  ledger.Detach();
  ASSERT_TRUE(m->Delete("busy", false, 0, &deleted).ok());
  EXPECT_TRUE(deleted);
}

// One flipped header byte: the vGPU is listed as corrupt, `set` says so,
// and nothing deletes it while its processes cannot be counted.
TEST_F(VgpuManagerTest, ACorruptVgpuIsListedAsCorruptAndNeverRemoved) {
  CreateResult r;
  ASSERT_TRUE(Manager()->Create(Create("bad"), &r).ok());
  {
    auto ledger = port::MappedFile::Open(r.dir + "/ledger", sizeof(core::Ledger), port::MappedFile::Access::kReadWrite);
    ASSERT_TRUE(ledger.ok());
    static_cast<uint8_t*>(ledger->data())[3] ^= 1;  // the magic
  }
  auto m = Manager();  // a daemon (re)started after the damage
  std::vector<VgpuView> views;
  ASSERT_TRUE(m->List("", &views).ok());
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].name, "bad");
  EXPECT_NE(views[0].corrupt.find("corrupted (ledger: bad magic)"), std::string::npos) << views[0].corrupt;
  control::v1::Vgpu proto;
  daemon::ToProto(views[0], &proto);
  EXPECT_EQ(proto.state(), "corrupt");
  ASSERT_TRUE(m->List("bad", &views).ok());

  ResizeOptions resize;
  resize.name = "bad";
  resize.memory_limit_bytes = 32 * kMiB;
  VgpuView after;
  ApiStatus s = m->Resize(resize, &after);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("corrupted"), std::string::npos) << s.message();

  EXPECT_TRUE(m->CollectGarbage().removed.empty());
  bool deleted = true;
  ASSERT_TRUE(m->Delete("bad", /*if_unused=*/true, 0, &deleted).ok());
  EXPECT_FALSE(deleted);
  EXPECT_EQ(m->Delete("bad", false, 0, &deleted).code(), ApiCode::kFailedPrecondition);
  EXPECT_FALSE(deleted);
  EXPECT_TRUE(Exists("bad"));
  core::VgpuStore store(root_);
  auto removed = store.RemoveIfUnused("bad");
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed.value());
  EXPECT_TRUE(Exists("bad"));
  removed = store.RemoveIfUnused("bad", /*force=*/true);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed.value());
  EXPECT_FALSE(Exists("bad"));
}

TEST_F(VgpuManagerTest, AConfiguredGroupMayReachNewVgpusAndUseOnlyItsOwn) {
  ManagerOptions o;
  o.grace = std::chrono::milliseconds(0);
  o.group = getgid();  // our own group: changing to it needs no privilege
  VgpuManager m(core::VgpuStore(root_), &devices_, &schedule_, o);
  CreateResult r;
  ASSERT_TRUE(m.Create(Create("shared"), &r).ok());
  auto mode = [](const std::string& path) {
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_gid, getgid()) << path;
    return st.st_mode & 0777;
  };
  EXPECT_EQ(mode(root_), 0710u);  // reach, not list
  EXPECT_EQ(mode(r.dir), 0750u);
  EXPECT_EQ(mode(r.dir + "/limits"), 0444u);  // still nobody's to write
  // Made in-process, so this process's user owns it, and its accounting is
  // that owner's alone (vgpu_owner.h); members reach only their own.
  EXPECT_EQ(mode(r.dir + "/ledger"), 0600u);
  EXPECT_EQ(mode(r.dir + "/members"), 0600u);
}

// Ownership (vgpu_owner.h): the creator, root and the operator may change
// a vGPU; anyone else is refused every change, and the vGPU stays as it was.
TEST_F(VgpuManagerTest, OnlyTheOwnerOrTheOperatorMayChangeAVgpu) {
  ManagerOptions o;
  o.grace = std::chrono::milliseconds(0);
  o.operator_uid = 4000;
  VgpuManager m(core::VgpuStore(root_), &devices_, &schedule_, o);
  constexpr uid_t kAlice = 4201, kBob = 4202;
  CreateOptions c = Create("alices");
  c.caller = kAlice;
  CreateResult r;
  ASSERT_TRUE(m.Create(c, &r).ok());
  EXPECT_EQ(LoadOwner(r.dir), kAlice);

  ResizeOptions shrink;
  shrink.name = "alices";
  shrink.memory_limit_bytes = 1 * kMiB;
  shrink.force = true;
  shrink.caller = kBob;
  VgpuView after;
  ApiStatus s = m.Resize(shrink, &after);
  EXPECT_EQ(s.code(), ApiCode::kPermissionDenied);
  EXPECT_NE(s.message().find("cannot resize vGPU 'alices': it belongs to uid 4201"), std::string::npos) << s.message();
  CreateOptions join = Create("alices", std::nullopt);
  join.join_existing = true;
  join.caller = kBob;
  EXPECT_EQ(m.Create(join, &r).code(), ApiCode::kPermissionDenied);
  bool deleted = false;
  EXPECT_EQ(m.Delete("alices", /*if_unused=*/false, 0, &deleted, kBob).code(), ApiCode::kPermissionDenied);
  EXPECT_EQ(m.Delete("alices", /*if_unused=*/true, 0, &deleted, kBob).code(), ApiCode::kPermissionDenied);
  SuspendOptions suspend;
  suspend.name = "alices";
  suspend.caller = kBob;
  EXPECT_EQ(m.Suspend(suspend, &after).code(), ApiCode::kPermissionDenied);
  EXPECT_EQ(m.Resume("alices", &after, kBob).code(), ApiCode::kPermissionDenied);
  MigrateOptions migrate;
  migrate.name = "alices";
  migrate.gpu = "1";
  migrate.caller = kBob;
  EXPECT_EQ(m.Migrate(migrate, &after).code(), ApiCode::kPermissionDenied);
  std::vector<VgpuView> views;
  ASSERT_TRUE(m.List("alices", &views).ok());
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].devices[0].memory_limit_bytes, 64 * kMiB);
  EXPECT_FALSE(deleted);

  // The owner, root and the operator may.
  for (uid_t who : {kAlice, uid_t{0}, uid_t{4000}}) {
    ResizeOptions grow = shrink;
    grow.memory_limit_bytes = (128 + who % 7) * kMiB;
    grow.caller = who;
    EXPECT_TRUE(m.Resize(grow, &after).ok()) << who;
  }
  join.caller = kAlice;
  EXPECT_TRUE(m.Create(join, &r).ok());
  EXPECT_TRUE(m.Delete("alices", /*if_unused=*/false, 0, &deleted, kAlice).ok());
  EXPECT_TRUE(deleted);
}

// A vGPU that records no owner (made before owners were, or whose file is
// gone) is the operator's alone; in-process callers (standalone commands)
// pass no caller and may change anything.
TEST_F(VgpuManagerTest, AVgpuWithoutAnOwnerIsTheOperators) {
  ManagerOptions o;
  o.operator_uid = 4000;
  VgpuManager m(core::VgpuStore(root_), &devices_, &schedule_, o);
  CreateResult r;
  ASSERT_TRUE(m.Create(Create("old"), &r).ok());
  EXPECT_EQ(LoadOwner(r.dir), geteuid());  // in-process: this process's user
  ASSERT_EQ(unlink((r.dir + "/" + kOwnerFile).c_str()), 0);
  ResizeOptions resize;
  resize.name = "old";
  resize.compute_share_pct = 50;
  resize.caller = 4201;
  VgpuView after;
  ApiStatus s = m.Resize(resize, &after);
  EXPECT_EQ(s.code(), ApiCode::kPermissionDenied);
  EXPECT_NE(s.message().find("records no owner"), std::string::npos) << s.message();
  resize.caller.reset();
  EXPECT_TRUE(m.Resize(resize, &after).ok());
}

TEST(VgpuOwnerTest, AnOwnerFileThatIsNotOneUidNamesNoOwner) {
  char tmpl[] = "/tmp/gs-owner-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  EXPECT_EQ(LoadOwner(dir), std::nullopt);  // missing
  for (const char* text : {"", "abc\n", "-1\n", "12 34\n", "99999999999\n", "4294967295\n"}) {
    std::ofstream(dir + "/" + kOwnerFile) << text;
    EXPECT_EQ(LoadOwner(dir), std::nullopt) << text;
  }
  std::ofstream(dir + "/" + kOwnerFile) << "4201\n";
  EXPECT_EQ(LoadOwner(dir), 4201u);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(MayChange(std::nullopt, std::nullopt, 4000));
  EXPECT_TRUE(MayChange(0, 4201, 4000));
  EXPECT_TRUE(MayChange(4000, std::nullopt, 4000));
  EXPECT_TRUE(MayChange(4201, 4201, 4000));
  EXPECT_FALSE(MayChange(4202, 4201, 4000));
  EXPECT_FALSE(MayChange(4201, std::nullopt, 4000));
}

// A restarted daemon finds every vGPU in the store, with its persistence,
// its limits and its accounting, and reaps the processes that died while
// no daemon ran.
TEST_F(VgpuManagerTest, AdoptsTheStoreAndReapsWhoDiedMeanwhile) {
  std::string dir;
  {
    auto first = Manager();
    CreateResult r;
    CreateOptions p = Create("kept", 100 * kMiB);
    p.persistent = true;
    ASSERT_TRUE(first->Create(p, &r).ok());
    dir = r.dir;
  }
  // A process that charges 30 MiB, then dies.
  const pid_t child = fork();
  if (child == 0) {
    auto h = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
    core::MemoryLedger l(&h->limits(), &h->ledger());
    if (!l.Attach(port::SystemProcessProbe().Self(), port::SystemProcessProbe()).ok() || !l.TryCharge(0, 30 * kMiB)) {
      _exit(1);
    }
    _exit(0);  // dies holding its slot, as after kill -9
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);

  auto second = Manager();
  EXPECT_EQ(second->Adopt(), 1u);
  std::vector<VgpuView> views;
  ASSERT_TRUE(second->List("", &views).ok());
  ASSERT_EQ(views.size(), 1u);
  EXPECT_TRUE(views[0].persistent);
  EXPECT_EQ(views[0].devices[0].memory_limit_bytes, 100 * kMiB);
  EXPECT_EQ(views[0].devices[0].memory_used_bytes, 30 * kMiB);
  GcResult gc = second->CollectGarbage();
  EXPECT_EQ(gc.reaped_processes, 1u);
  ASSERT_TRUE(second->List("kept", &views).ok());
  EXPECT_EQ(views[0].devices[0].memory_used_bytes, 0u);
  EXPECT_EQ(views[0].reaped_processes, 1u);
  EXPECT_TRUE(views[0].processes.empty());
}

// What a vGPU's view says about its LC latency after `record` more requests.
class LcLatencyTest : public VgpuManagerTest {
 protected:
  void Make(VgpuManager& m) {
    CreateOptions o = Create("lat");
    o.priority = core::Priority::kLatencyCritical;
    CreateResult r;
    ASSERT_TRUE(m.Create(o, &r).ok());
    auto h = core::VgpuHandle::Open(r.dir, port::MappedFile::Access::kReadOnly);
    ASSERT_TRUE(h.ok()) << h.status().message();
    handle_ = std::make_unique<core::VgpuHandle>(std::move(h.value()));
  }
  void Record(int n, uint64_t ns) {
    for (int i = 0; i < n; ++i) core::RecordLcLatency(&handle_->ledger(), ns);
  }
  static LcLatencyView View(VgpuManager& m) {
    std::vector<VgpuView> views;
    EXPECT_TRUE(m.List("lat", &views).ok());
    return views.empty() ? LcLatencyView{} : views[0].lc_latency;
  }
  std::unique_ptr<core::VgpuHandle> handle_;
};

constexpr uint64_t kUs = 1000;

TEST_F(LcLatencyTest, QuantilesAreOverTheRequestsSinceTheLastSampleElseTheLifetime) {
  auto m = Manager(std::chrono::milliseconds(0), /*lc_latency_window=*/std::chrono::milliseconds(0));
  Make(*m);
  LcLatencyView v = View(*m);
  EXPECT_EQ(v.lifetime.count, 0u);
  EXPECT_FALSE(v.p50_seconds.has_value());
  EXPECT_FALSE(v.p99_seconds.has_value());
  EXPECT_FALSE(v.window_seconds.has_value());

  // No sample yet: the lifetime.
  Record(100, 2000 * kUs);
  v = View(*m);
  EXPECT_EQ(v.lifetime.count, 100u);
  EXPECT_EQ(v.lifetime.sum_ns, 100 * 2000 * kUs);
  EXPECT_FALSE(v.window_seconds.has_value());
  EXPECT_NEAR(*v.p99_seconds, 1.995e-3, 1e-9);  // 99 of 100 through (1.5, 2] ms

  // Sampled after them, and nothing since: still the lifetime, said so.
  m->SampleLcLatency();
  v = View(*m);
  EXPECT_FALSE(v.window_seconds.has_value());
  EXPECT_EQ(v.window_requests, 0u);
  EXPECT_NEAR(*v.p99_seconds, 1.995e-3, 1e-9);

  // Fast requests since the sample: the quantiles are theirs alone.
  Record(50, 80 * kUs);
  v = View(*m);
  EXPECT_EQ(v.lifetime.count, 150u);
  ASSERT_TRUE(v.window_seconds.has_value());
  EXPECT_GE(*v.window_seconds, 0.0);
  EXPECT_EQ(v.window_requests, 50u);
  EXPECT_NEAR(*v.p99_seconds, 99.5e-6, 1e-9);  // 49.5 of 50 through (50, 100] µs
  EXPECT_NEAR(*v.p50_seconds, 75e-6, 1e-9);

  // The control API carries the same.
  std::vector<VgpuView> views;
  ASSERT_TRUE(m->List("lat", &views).ok());
  control::v1::Vgpu pb;
  daemon::ToProto(views[0], &pb);
  EXPECT_EQ(pb.lc_latency().requests(), 150u);
  EXPECT_NEAR(pb.lc_latency().sum_seconds(), 0.204, 1e-12);
  ASSERT_EQ(pb.lc_latency().bucket_counts_size(), static_cast<int>(core::kLcLatencyBuckets));
  EXPECT_EQ(pb.lc_latency().bucket_counts(static_cast<int>(core::LcLatencyBucketIndex(80 * kUs))), 50u);
  EXPECT_EQ(pb.lc_latency().bucket_counts(static_cast<int>(core::LcLatencyBucketIndex(2000 * kUs))), 100u);
  EXPECT_NEAR(pb.lc_latency().p99_seconds(), 99.5e-6, 1e-9);
  EXPECT_TRUE(pb.lc_latency().has_window_seconds());
  EXPECT_EQ(pb.lc_latency().window_requests(), 50u);

  // With a zero window the next sample is the new baseline.
  m->SampleLcLatency();
  v = View(*m);
  EXPECT_FALSE(v.window_seconds.has_value());
  EXPECT_NEAR(*v.p99_seconds, 1.9925e-3, 1e-9);  // lifetime: rank 148.5 of 150 is 98.5 of the 100 slow
}

TEST_F(LcLatencyTest, TheBaselineIsTheNewestSampleAWindowOldOrElseTheOldest) {
  auto m = Manager(std::chrono::milliseconds(0), /*lc_latency_window=*/std::chrono::hours(1));
  Make(*m);
  m->SampleLcLatency();
  Record(10, 80 * kUs);
  m->SampleLcLatency();
  Record(10, 80 * kUs);
  m->SampleLcLatency();
  // No sample is an hour old: the oldest kept is the baseline, so the window
  // holds every request since the first sample, not just the last second's.
  const LcLatencyView v = View(*m);
  ASSERT_TRUE(v.window_seconds.has_value());
  EXPECT_EQ(v.window_requests, 20u);
}

TEST_F(LcLatencyTest, AFreshManagerWithoutSamplesReportsTheLifetime) {
  auto m = Manager();
  Make(*m);
  Record(3, 300 * kUs);
  auto reader = Manager();  // a standalone `gpuslice ls`: no samples
  const LcLatencyView v = View(*reader);
  EXPECT_EQ(v.lifetime.count, 3u);
  EXPECT_FALSE(v.window_seconds.has_value());
  EXPECT_NEAR(*v.p50_seconds, 250e-6, 1e-9);  // 1.5 of 3 through (200, 300] µs
}

// Levels (issue 12): a name resolves through the node's levels to a level
// word in the limits, which is what the pacing board and the node schedule
// order by; views name it back.
TEST_F(VgpuManagerTest, PriorityLevelsResolveToLevelWordsAndBack) {
  ManagerOptions o;
  auto levels = task::LevelTable::Parse(
      "levels:\n  - {name: gold, class: lc}\n  - {name: silver, class: lc}\n  - {name: bronze, class: be}\n"
      "  - {name: scrap, class: be}\n",
      "test");
  ASSERT_TRUE(levels.ok()) << levels.status().message();
  o.levels = levels.value();
  VgpuManager m(core::VgpuStore(root_), &devices_, &schedule_, o);
  CreateResult r;
  CreateOptions gold = Create("g");
  gold.priority_level = "gold";
  ASSERT_TRUE(m.Create(gold, &r).ok());
  auto handle = core::VgpuHandle::Open(r.dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->limits().devices[0].priority, core::LevelWord(core::Priority::kLatencyCritical, 1));
  std::vector<VgpuView> views;
  ASSERT_TRUE(m.List("g", &views).ok());
  EXPECT_EQ(views[0].priority, core::Priority::kLatencyCritical);
  EXPECT_EQ(views[0].priority_rank, 1u);
  EXPECT_EQ(views[0].priority_level, "gold");
  control::v1::Vgpu pb;
  daemon::ToProto(views[0], &pb);
  EXPECT_EQ(pb.priority_level(), "gold");
  EXPECT_EQ(pb.priority_rank(), 1u);

  // `lc` is the lowest LC level: joining gold with it is a different level.
  CreateOptions join = Create("g", std::nullopt);
  join.gpus.clear();
  join.join_existing = true;
  join.priority = core::Priority::kLatencyCritical;
  ApiStatus s = m.Create(join, &r);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("priority gold"), std::string::npos) << s.message();
  join.priority.reset();
  join.priority_level = "gold";
  EXPECT_TRUE(m.Create(join, &r).ok());

  // Resize by name; the schedule pass writes it with one bump.
  ResizeOptions down;
  down.name = "g";
  down.priority_level = "bronze";
  VgpuView after;
  ASSERT_TRUE(m.Resize(down, &after).ok());
  EXPECT_EQ(handle->limits().devices[0].priority, core::LevelWord(core::Priority::kBestEffort, 1));
  EXPECT_EQ(after.priority_level, "bronze");

  // Unknown names and contradictions are refused by name, nothing changed.
  down.priority_level = "platinum";
  s = m.Resize(down, &after);
  EXPECT_EQ(s.code(), ApiCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gold, silver, lc, bronze, scrap, be"), std::string::npos) << s.message();
  down.priority_level = "gold";
  down.priority = core::Priority::kBestEffort;
  EXPECT_EQ(m.Resize(down, &after).code(), ApiCode::kInvalidArgument);
  EXPECT_EQ(handle->limits().devices[0].priority, core::LevelWord(core::Priority::kBestEffort, 1));
  CreateOptions bad = Create("x");
  bad.priority_level = "platinum";
  EXPECT_EQ(m.Create(bad, &r).code(), ApiCode::kInvalidArgument);
  EXPECT_FALSE(Exists("x"));
}

}  // namespace
}  // namespace gpuslice::node
