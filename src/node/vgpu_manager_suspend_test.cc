// VgpuManager's suspend state machine, with the driver and host memory
// behind their seams (checkpoint_driver.h, host_memory.h). The whole path
// across real processes is tests/daemon/test_suspend_resume.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "core/memory_ledger.h"
#include "node/suspend_record.h"
#include "node/vgpu_manager.h"

namespace gpuslice::node {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Every process starts running; each call moves it on, or fails as told.
class StateDriver final : public CheckpointDriver {
 public:
  std::map<uint32_t, ProcessCheckpointState> states;
  std::vector<std::string> calls;
  bool fail_restore = false;

  CheckpointResult Lock(uint32_t pid, std::chrono::milliseconds) override {
    return Step("lock", pid, ProcessCheckpointState::kRunning, ProcessCheckpointState::kLocked);
  }
  CheckpointResult Checkpoint(uint32_t pid) override {
    return Step("checkpoint", pid, ProcessCheckpointState::kLocked, ProcessCheckpointState::kCheckpointed);
  }
  CheckpointResult Restore(uint32_t pid) override {
    if (fail_restore) {
      calls.push_back("restore");
      states[pid] = ProcessCheckpointState::kFailed;
      return {999, "CUDA_ERROR_UNKNOWN"};
    }
    return Step("restore", pid, ProcessCheckpointState::kCheckpointed, ProcessCheckpointState::kLocked);
  }
  CheckpointResult Unlock(uint32_t pid) override {
    return Step("unlock", pid, ProcessCheckpointState::kLocked, ProcessCheckpointState::kRunning);
  }
  ProcessCheckpointState State(uint32_t pid) override { return states[pid]; }

 private:
  CheckpointResult Step(const char* op, uint32_t pid, ProcessCheckpointState from, ProcessCheckpointState to) {
    calls.push_back(op);
    if (states[pid] != from) return {401, "CUDA_ERROR_ILLEGAL_STATE"};
    states[pid] = to;
    return {};
  }
};

class VgpuManagerSuspendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gs-suspend-XXXXXX";
    root_ = mkdtemp(tmpl);
    port::GpuInfo g;
    g.index = 0;
    g.uuid[0] = 0xfa;
    g.uuid_text = FormatGpuUuid(g.uuid.data());
    g.memory_total_bytes = 1024 * kMiB;
    devices_.gpus.push_back(g);
  }
  void TearDown() override {
    if (ledger_) ledger_->Detach();
    ledger_.reset();
    handle_.reset();
    std::filesystem::remove_all(root_);
  }

  std::unique_ptr<VgpuManager> Manager() {
    ManagerOptions o;
    o.grace = std::chrono::milliseconds(0);
    o.host_memory = [this] { return available_; };
    auto m = std::make_unique<VgpuManager>(core::VgpuStore(root_), &devices_, &schedule_, o);
    m->SetCheckpointDriver(&driver_, "");
    return m;
  }
  // A vGPU "a" whose one process (this one) holds 40 MiB.
  std::string CreateHeld(VgpuManager* m) {
    CreateOptions c;
    c.name = "a";
    c.gpus = {"0"};
    c.memory_limit_bytes = 64 * kMiB;
    CreateResult r;
    EXPECT_TRUE(m->Create(c, &r).ok());
    auto handle = core::VgpuHandle::Open(r.dir, port::MappedFile::Access::kReadOnly);
    EXPECT_TRUE(handle.ok());
    handle_ = std::make_unique<core::VgpuHandle>(std::move(handle.value()));
    ledger_ = std::make_unique<core::MemoryLedger>(&handle_->limits(), &handle_->ledger());
    EXPECT_TRUE(ledger_->Attach(port::SystemProcessProbe().Self(), port::SystemProcessProbe()).ok());
    EXPECT_TRUE(ledger_->TryCharge(0, 40 * kMiB));
    return r.dir;
  }
  static uint32_t Self() { return static_cast<uint32_t>(getpid()); }

  std::string root_;
  NodeDevices devices_;
  ScheduleWorker schedule_{
      [this](LimitsChange* change) { return ApplyNodeSchedule(core::VgpuStore(root_), {}, nullptr, change); },
      ScheduleWorker::Passes::kInline};
  StateDriver driver_;
  std::optional<uint64_t> available_ = 1024 * kMiB;
  std::unique_ptr<core::VgpuHandle> handle_;
  std::unique_ptr<core::MemoryLedger> ledger_;
};

TEST_F(VgpuManagerSuspendTest, SuspendAndResumeMoveTheStateAndCountBytes) {
  auto m = Manager();
  const std::string dir = CreateHeld(m.get());
  VgpuView after;
  ASSERT_TRUE(m->Suspend({.name = "a"}, &after).ok());
  EXPECT_EQ(after.suspend_state, "suspended");
  EXPECT_EQ(after.suspended_bytes, 40 * kMiB);
  EXPECT_EQ(driver_.states[Self()], ProcessCheckpointState::kCheckpointed);
  // A second suspend is refused, and names the state.
  const ApiStatus again = m->Suspend({.name = "a"}, nullptr);
  EXPECT_EQ(again.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("is suspended"), std::string::npos) << again.message();
  // Persisted: a new manager (a restarted daemon) sees it suspended, and keeps it so.
  auto restarted = Manager();
  EXPECT_EQ(restarted->RecoverSuspends(), 0u);
  std::vector<VgpuView> views;
  ASSERT_TRUE(restarted->List("a", &views).ok());
  EXPECT_EQ(views[0].suspend_state, "suspended");

  ASSERT_TRUE(restarted->Resume("a", &after).ok());
  EXPECT_EQ(after.suspend_state, "running");
  EXPECT_EQ(after.suspend_bytes_moved_total, 80 * kMiB);
  EXPECT_EQ(after.suspends, 1u);
  EXPECT_EQ(after.resumes, 1u);
  EXPECT_EQ(driver_.states[Self()], ProcessCheckpointState::kRunning);
  EXPECT_EQ(restarted->Resume("a", nullptr).code(), ApiCode::kFailedPrecondition);
}

TEST_F(VgpuManagerSuspendTest, ASuspendThatWouldNotFitInHostMemoryIsRefusedBeforeAnyLock) {
  auto m = Manager();
  CreateHeld(m.get());
  available_ = 16 * kMiB;
  const ApiStatus s = m->Suspend({.name = "a"}, nullptr);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("holds 40 MiB of device memory, more than the host's 16 MiB"), std::string::npos)
      << s.message();
  EXPECT_TRUE(driver_.calls.empty());
  available_ = std::nullopt;  // unknown: refused too
  EXPECT_EQ(m->Suspend({.name = "a"}, nullptr).code(), ApiCode::kFailedPrecondition);
  std::vector<VgpuView> views;
  ASSERT_TRUE(m->List("a", &views).ok());
  EXPECT_EQ(views[0].suspend_state, "running");
}

TEST_F(VgpuManagerSuspendTest, AFailedRestoreKeepsTheVgpuSuspendedWithTheProcessStates) {
  auto m = Manager();
  CreateHeld(m.get());
  ASSERT_TRUE(m->Suspend({.name = "a"}, nullptr).ok());
  driver_.fail_restore = true;
  VgpuView after;
  const ApiStatus s = m->Resume("a", &after);
  EXPECT_EQ(s.code(), ApiCode::kInternal);
  EXPECT_EQ(after.suspend_state, "suspended");
  EXPECT_NE(after.suspend_detail.find("pid " + std::to_string(Self()) + ": failed"), std::string::npos)
      << after.suspend_detail;
}

TEST_F(VgpuManagerSuspendTest, RestartFindingAnInterruptedSuspendUnlocksEveryProcess) {
  auto m = Manager();
  const std::string dir = CreateHeld(m.get());
  // What a daemon killed between lock and checkpoint leaves behind.
  SuspendRecord r;
  r.state = SuspendState::kSuspending;
  r.pids = {Self()};
  r.bytes = 40 * kMiB;
  ASSERT_TRUE(WriteSuspendRecord(dir, r).ok());
  driver_.states[Self()] = ProcessCheckpointState::kLocked;

  auto restarted = Manager();
  EXPECT_EQ(restarted->RecoverSuspends(), 1u);
  EXPECT_EQ(driver_.states[Self()], ProcessCheckpointState::kRunning);
  std::vector<VgpuView> views;
  ASSERT_TRUE(restarted->List("a", &views).ok());
  EXPECT_EQ(views[0].suspend_state, "running");
  EXPECT_NE(views[0].suspend_detail.find("recovered at daemon start"), std::string::npos);
}

TEST_F(VgpuManagerSuspendTest, WithoutTheCheckpointApiSuspendSaysWhy) {
  ManagerOptions o;
  VgpuManager m(core::VgpuStore(root_), &devices_, &schedule_, o);
  m.SetCheckpointDriver(nullptr, "no libcuda.so.1 found");
  CreateHeld(&m);
  const ApiStatus s = m.Suspend({.name = "a"}, nullptr);
  EXPECT_EQ(s.code(), ApiCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "cannot suspend: no libcuda.so.1 found");
}

TEST_F(VgpuManagerSuspendTest, AResumeAfterAnUnfinishedMigrationPutsTheLimitsBackWhereTheProcessesWere) {
  // A daemon killed between moving the limits to GPU 1 and restoring onto
  // it leaves the vGPU suspended `by migrate`, its limits on GPU 1, its
  // processes checkpointed from GPU 0. A resume restores them without pairs
  // (onto GPU 0): the limits must say GPU 0 again, or the memory audit
  // would find the processes on a GPU their vGPU does not have.
  port::GpuInfo second = devices_.gpus[0];
  second.index = 1;
  second.uuid[15] = 1;
  second.uuid_text = FormatGpuUuid(second.uuid.data());
  devices_.gpus.push_back(second);
  auto m = Manager();
  const std::string dir = CreateHeld(m.get());
  ASSERT_TRUE(m->Suspend({.name = "a", .by = "migrate"}, nullptr).ok());
  auto record = ReadSuspendRecord(dir);
  ASSERT_TRUE(record.ok());
  record->migrating_from = devices_.gpus[0].uuid_text;
  ASSERT_TRUE(WriteSuspendRecord(dir, record.value()).ok());
  LimitsChange moved;
  moved.vgpu = "a";
  moved.gpu_uuids = {second.uuid};
  ASSERT_TRUE(schedule_.ApplyNow(&moved).ok());
  ASSERT_EQ(handle_->limits().devices[0].uuid[15], 1);

  auto restarted = Manager();
  restarted->Adopt();
  VgpuView after;
  ASSERT_TRUE(restarted->Resume("a", &after).ok());
  EXPECT_EQ(handle_->limits().devices[0].uuid[15], 0) << "the limits are back on GPU 0";
  EXPECT_EQ(after.devices[0].gpu_uuid, devices_.gpus[0].uuid_text);
  EXPECT_EQ(driver_.calls.back(), "unlock");
  EXPECT_EQ(ReadSuspendRecord(dir)->migrating_from, "");
}

}  // namespace
}  // namespace gpuslice::node
