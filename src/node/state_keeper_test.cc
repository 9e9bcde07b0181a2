#include "node/state_keeper.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/memory_ledger.h"
#include "core/pacing_board.h"
#include "core/state_handout.h"
#include "core/vgpu_store.h"
#include "node/state_keeper_client.h"
#include "node/state_recovery.h"
#include "port/mapped_file.h"
#include "port/sealed_memfd.h"

namespace gpuslice::node {
namespace {

// A keeper serving in a thread of the test, as the real one does in its own
// process; the client finds it by its socket and so starts none.
class StateKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuslice-keeper-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    std::filesystem::create_directories(root_ + "/vgpus");
    StartKeeper();
  }
  void TearDown() override {
    StopKeeper();
    std::filesystem::remove_all(root_);
  }
  void StartKeeper() {
    auto keeper = StateKeeper::Listen(root_);
    ASSERT_TRUE(keeper.ok()) << keeper.status().message();
    keeper_.emplace(std::move(keeper.value()));
    stop_ = false;
    thread_ = std::thread([this] {
      while (!stop_.load() && keeper_->Step(20)) {
      }
    });
  }
  void StopKeeper() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // A vGPU made through a client that is gone since; the keeper serves it still.
  std::string MadeByAGoneClient(const std::string& name) {
    auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
    EXPECT_TRUE(client.ok());
    if (!client.ok()) return "";
    core::VgpuStore store(root_);
    store.set_state_publisher(client.value().get());
    bool created;
    auto made = store.CreateOrJoin(Spec(name, 64 << 20, 1), true, &created);
    EXPECT_TRUE(made.ok());
    return made.ok() ? made.value() : "";
  }

  // Maps `dir`'s ledger and first board as an application does, and closes
  // the handed descriptors: only the mappings hold the memory then.
  static void MapAsAnApplication(const std::string& dir, std::optional<port::MappedFile>* ledger,
                                 std::optional<port::MappedFile>* board) {
    auto state = core::FetchState(dir);
    ASSERT_TRUE(state.ok());
    auto l = port::MappedFile::FromFd(state->ledger.get(), sizeof(core::Ledger), port::MappedFile::Access::kReadWrite,
                                      "ledger");
    auto b = port::MappedFile::FromFd(state->boards[0].fd.get(), sizeof(core::Board),
                                      port::MappedFile::Access::kReadWrite, "board");
    ASSERT_TRUE(l.ok() && b.ok());
    ledger->emplace(std::move(l.value()));
    board->emplace(std::move(b.value()));
  }
  static core::VgpuSpec Spec(const std::string& name, uint64_t limit, uint8_t gpu) {
    core::VgpuSpec spec;
    spec.name = name;
    core::DeviceSpec d;
    d.uuid[0] = gpu;
    d.memory_limit_bytes = limit;
    spec.devices.push_back(d);
    return spec;
  }

  std::string root_;
  std::optional<StateKeeper> keeper_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

TEST_F(StateKeeperTest, ADaemonMadeVgpuHasNoFileToTruncateAndSharesOneSealedLedger) {
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(client.value()->keeper_pid(), getpid());
  core::VgpuStore store(root_);
  store.set_state_publisher(client.value().get());
  bool created = false;
  auto dir = store.CreateOrJoin(Spec("a", 64 << 20, 1), true, &created);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  ASSERT_TRUE(created);

  struct stat st;
  EXPECT_NE(lstat((dir.value() + "/ledger").c_str(), &st), 0);
  EXPECT_NE(lstat((dir.value() + "/boards").c_str(), &st), 0);
  EXPECT_NE(lstat((root_ + "/boards").c_str(), &st), 0);
  ASSERT_EQ(lstat(core::StateSocketPath(dir.value()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Two openers map the same memory: a charge through one is seen by the other.
  auto one = core::VgpuHandle::Open(dir.value(), port::MappedFile::Access::kReadOnly);
  auto two = core::VgpuHandle::Open(dir.value(), port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(one.ok() && two.ok()) << one.status().message();
  core::MemoryLedger ledger(&one->limits(), &one->ledger());
  ASSERT_TRUE(ledger.Attach(port::SystemProcessProbe().Self(), port::SystemProcessProbe()).ok());
  ASSERT_TRUE(ledger.TryCharge(0, 5 << 20));
  EXPECT_EQ(core::MemoryLedger(&two->limits(), &two->ledger()).UsedBytes(0), 5u << 20);

  // Every descriptor a process of the vGPU can get refuses to be resized.
  auto state = core::FetchState(dir.value());
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->boards.size(), 1u);
  for (int fd : {state->ledger.get(), state->boards[0].fd.get()}) {
    EXPECT_EQ(ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(ftruncate(fd, 1 << 30), -1);
    EXPECT_EQ(errno, EPERM);
  }
  EXPECT_EQ(core::MemoryLedger(&two->limits(), &two->ledger()).UsedBytes(0), 5u << 20);
  ledger.Detach();
}

TEST_F(StateKeeperTest, VgpusOnOneGpuShareItsBoardAndOthersGetTheirs) {
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  core::VgpuStore store(root_);
  store.set_state_publisher(client.value().get());
  bool created;
  auto a = store.CreateOrJoin(Spec("a", 1 << 20, 1), true, &created);
  auto b = store.CreateOrJoin(Spec("b", 1 << 20, 1), true, &created);
  auto c = store.CreateOrJoin(Spec("c", 1 << 20, 2), true, &created);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto sa = core::FetchState(a.value()), sb = core::FetchState(b.value()), sc = core::FetchState(c.value());
  ASSERT_TRUE(sa.ok() && sb.ok() && sc.ok());
  auto ma =
      port::MappedFile::FromFd(sa->boards[0].fd.get(), sizeof(core::Board), port::MappedFile::Access::kReadWrite, "a");
  auto mb =
      port::MappedFile::FromFd(sb->boards[0].fd.get(), sizeof(core::Board), port::MappedFile::Access::kReadWrite, "b");
  auto mc =
      port::MappedFile::FromFd(sc->boards[0].fd.get(), sizeof(core::Board), port::MappedFile::Access::kReadWrite, "c");
  ASSERT_TRUE(ma.ok() && mb.ok() && mc.ok());
  auto* board_a = static_cast<core::Board*>(ma->data());
  EXPECT_TRUE(core::ValidateBoard(*board_a, "a").ok());
  board_a->vclock = 12345;
  EXPECT_EQ(static_cast<core::Board*>(mb->data())->vclock, 12345u);
  EXPECT_NE(static_cast<core::Board*>(mc->data())->vclock, 12345u);
  // Ledgers stay per vGPU.
  EXPECT_NE(sa->ledger.get(), -1);
  struct stat la, lb;
  ASSERT_EQ(fstat(sa->ledger.get(), &la), 0);
  ASSERT_EQ(fstat(sb->ledger.get(), &lb), 0);
  EXPECT_NE(la.st_ino, lb.st_ino);
}

TEST_F(StateKeeperTest, ARestartedClientGetsTheSameMemoryAndRemovalLetsItGo) {
  std::string dir;
  {
    auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
    ASSERT_TRUE(client.ok());
    core::VgpuStore store(root_);
    store.set_state_publisher(client.value().get());
    bool created;
    auto made = store.CreateOrJoin(Spec("a", 64 << 20, 1), true, &created);
    ASSERT_TRUE(made.ok());
    dir = made.value();
    auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
    ASSERT_TRUE(handle.ok());
    handle->ledger().gate_waits = 777;  // any byte the next opener must see
  }                                     // the daemon's side is gone; the keeper is not
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  core::VgpuStore store(root_);
  store.set_state_publisher(client.value().get());
  auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->ledger().gate_waits, 777u);
  bool created;
  auto b = store.CreateOrJoin(Spec("b", 1 << 20, 1), true, &created);  // new client, same GPU
  ASSERT_TRUE(b.ok()) << b.status().message();

  auto removed = store.RemoveIfUnused("a");
  ASSERT_TRUE(removed.ok() && removed.value());
  StopKeeper();
  EXPECT_EQ(keeper_->vgpu_count(), 1u);   // b
  EXPECT_EQ(keeper_->board_count(), 1u);  // the first board of GPU 1 stayed
}

TEST_F(StateKeeperTest, AVgpuWhoseDirectoryVanishedIsDroppedAndTheKeeperEndsWithItsStateDirectory) {
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  core::VgpuStore store(root_);
  store.set_state_publisher(client.value().get());
  bool created;
  auto a = store.CreateOrJoin(Spec("a", 1 << 20, 1), true, &created);
  ASSERT_TRUE(a.ok());
  StopKeeper();
  EXPECT_EQ(keeper_->vgpu_count(), 1u);
  std::filesystem::remove_all(a.value());  // as a standalone command's removal would
  EXPECT_TRUE(keeper_->Step(0));
  EXPECT_EQ(keeper_->vgpu_count(), 0u);
  std::filesystem::remove_all(root_ + "/vgpus");
  EXPECT_FALSE(keeper_->Step(0));
}

// A keeper that dies loses nothing while the daemon lives: the daemon's
// client (here one that found the vGPU at start, as a restarted daemon's
// does) gives a new keeper the very same memory, on a new socket at the old
// path.
TEST_F(StateKeeperTest, ANewKeeperIsGivenTheSameMemoryByTheDaemon) {
  const std::string dir = MadeByAGoneClient("a");
  ASSERT_FALSE(dir.empty());
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.value()->Adopt(), 1u);
  auto before = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(before.ok());
  before->ledger().gate_waits = 4242;
  auto board_before = core::FetchState(dir);
  ASSERT_TRUE(board_before.ok());
  auto mapped_board = port::MappedFile::FromFd(board_before->boards[0].fd.get(), sizeof(core::Board),
                                               port::MappedFile::Access::kReadWrite, "board");
  ASSERT_TRUE(mapped_board.ok());
  static_cast<core::Board*>(mapped_board->data())->vclock = 99;

  StopKeeper();
  keeper_.reset();  // its descriptors close: as if it were killed
  EXPECT_FALSE(core::FetchState(dir, 100).ok());
  StartKeeper();
  ASSERT_TRUE(client.value()->Check().ok());

  auto after = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(after->ledger().gate_waits, 4242u);
  auto board_after = core::FetchState(dir);
  ASSERT_TRUE(board_after.ok());
  auto remapped = port::MappedFile::FromFd(board_after->boards[0].fd.get(), sizeof(core::Board),
                                           port::MappedFile::Access::kReadOnly, "board");
  ASSERT_TRUE(remapped.ok());
  EXPECT_EQ(static_cast<const core::Board*>(remapped->data())->vclock, 99u);
  // Nothing more to do while the keeper lives.
  ASSERT_TRUE(client.value()->Check().ok());
}

// The Kubernetes plugins open each vGPU's socket to every uid (a
// container's processes may run as any user); the socket a new keeper gets
// at the old path is opened the same way.
TEST_F(StateKeeperTest, SocketsKeepTheirAccessWhenANewKeeperServesThem) {
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {0666, std::nullopt});
  ASSERT_TRUE(client.ok());
  core::VgpuStore store(root_);
  store.set_state_publisher(client.value().get());
  bool created;
  auto a = store.CreateOrJoin(Spec("a", 1 << 20, 1), true, &created);
  ASSERT_TRUE(a.ok());
  const std::string socket = core::StateSocketPath(a.value());
  struct stat st;
  ASSERT_EQ(stat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);

  StopKeeper();
  keeper_.reset();
  StartKeeper();
  ASSERT_TRUE(client.value()->Check().ok());
  struct stat again;
  ASSERT_EQ(stat(socket.c_str(), &again), 0);
  EXPECT_EQ(again.st_mode & 0777, 0666u);
  EXPECT_TRUE(core::FetchState(a.value()).ok());
}

// Opening /proc/<pid>/map_files needs CAP_SYS_ADMIN, which a CI container
// may lack.
bool CanOpenMapFiles() {
  auto made = port::CreateSealedMemfd("gpuslice-probe", nullptr, 4096);
  if (!made.ok()) return false;
  port::UniqueFd fd(made.value());
  auto mapped = port::MappedFile::FromFd(fd.get(), 4096, port::MappedFile::Access::kReadOnly, "probe");
  auto id = IdentityOf(fd.get());
  return mapped.ok() && id.ok() && OpenMappedMemory("/proc", id.value(), 4096, "probe").ok();
}

// The keeper and its client both gone (a DaemonSet rollout, both killed):
// the memory lives only in the applications' mappings. A new client finds it
// there by the record it left, and serves the very same memory again, so the
// vGPU's new processes charge the ledger its running ones do.
TEST_F(StateKeeperTest, WhenKeeperAndClientAreBothGoneTheMemoryIsRecoveredFromAProcessThatMapsIt) {
  const std::string dir = MadeByAGoneClient("a");
  ASSERT_FALSE(dir.empty());
  std::optional<port::MappedFile> app_ledger, app_board;  // an application's mappings
  MapAsAnApplication(dir, &app_ledger, &app_board);
  ASSERT_TRUE(app_ledger && app_board);
  StopKeeper();
  keeper_.reset();  // and the keeper
  auto* ledger = static_cast<core::Ledger*>(app_ledger->data());
  ledger->gate_waits = 31337;
  static_cast<core::Board*>(app_board->data())->vclock = 77;
  ASSERT_FALSE(core::FetchState(dir, 100).ok());

  StartKeeper();
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  if (!CanOpenMapFiles()) GTEST_SKIP() << "opening /proc/<pid>/map_files needs CAP_SYS_ADMIN";
  ASSERT_EQ(client.value()->Adopt(), 1u);
  auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadWrite);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->ledger().gate_waits, 31337u);
  handle->ledger().gate_waits = 4;  // and it is the same memory, not a copy
  EXPECT_EQ(ledger->gate_waits, 4u);
  auto state = core::FetchState(dir);
  ASSERT_TRUE(state.ok());
  auto board = port::MappedFile::FromFd(state->boards[0].fd.get(), sizeof(core::Board),
                                        port::MappedFile::Access::kReadOnly, "board");
  ASSERT_TRUE(board.ok());
  EXPECT_EQ(static_cast<const core::Board*>(board->data())->vclock, 77u);
}

// A node upgraded to a new board version, keeper and daemon both restarted:
// the ledger is recovered from the running applications, but their board,
// of the old version, is not taken (this version's libraries would refuse
// it and run unpaced): the GPU gets a new one.
TEST_F(StateKeeperTest, ARecoveredBoardOfAnotherVersionIsReplaced) {
  const std::string dir = MadeByAGoneClient("a");
  ASSERT_FALSE(dir.empty());
  std::optional<port::MappedFile> app_ledger, app_board;  // an application's mappings
  MapAsAnApplication(dir, &app_ledger, &app_board);
  ASSERT_TRUE(app_ledger && app_board);
  StopKeeper();
  keeper_.reset();
  static_cast<core::Ledger*>(app_ledger->data())->gate_waits = 31337;
  auto* old_board = static_cast<core::Board*>(app_board->data());
  old_board->header.version = core::kBoardVersion - 1;  // as the earlier gpuslice made it
  old_board->vclock = 77;

  StartKeeper();
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  if (!CanOpenMapFiles()) GTEST_SKIP() << "opening /proc/<pid>/map_files needs CAP_SYS_ADMIN";
  ASSERT_EQ(client.value()->Adopt(), 1u);
  auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadWrite);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->ledger().gate_waits, 31337u) << "the ledger is still recovered";
  auto state = core::FetchState(dir);
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(core::IsCurrentBoard(state->boards[0].fd.get()));
  auto board = port::MappedFile::FromFd(state->boards[0].fd.get(), sizeof(core::Board),
                                        port::MappedFile::Access::kReadOnly, "board");
  ASSERT_TRUE(board.ok());
  EXPECT_EQ(static_cast<const core::Board*>(board->data())->vclock, 0u) << "a new board, not the old one";
}

// A keeper that outlived an upgrade holds a board of the version before.
// The daemon hands everything to a new keeper with a new board
// (tests/daemon/test_sealed_state.py); where no new keeper can start (here:
// no gpuslice binary), nothing is lost: the old keeper serves on, and the
// daemon reads the board the applications get.
TEST_F(StateKeeperTest, AnOldBoardThatNoNewKeeperCanReplaceStaysInService) {
  const std::string dir = MadeByAGoneClient("a");
  ASSERT_FALSE(dir.empty());
  std::optional<port::MappedFile> app_ledger, app_board;
  MapAsAnApplication(dir, &app_ledger, &app_board);
  ASSERT_TRUE(app_ledger && app_board);
  static_cast<core::Ledger*>(app_ledger->data())->gate_waits = 4242;
  auto* old_board = static_cast<core::Board*>(app_board->data());
  old_board->header.version = core::kBoardVersion - 1;
  old_board->vclock = 77;

  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.value()->Adopt(), 1u);
  auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->ledger().gate_waits, 4242u);
  auto state = core::FetchState(dir);
  ASSERT_TRUE(state.ok());
  auto handed = port::MappedFile::FromFd(state->boards[0].fd.get(), sizeof(core::Board),
                                         port::MappedFile::Access::kReadOnly, "board");
  ASSERT_TRUE(handed.ok());
  EXPECT_EQ(static_cast<const core::Board*>(handed->data())->vclock, 77u);
  auto daemons = client.value()->MapBoard(state->boards[0].uuid);
  ASSERT_TRUE(daemons.ok()) << daemons.status().message();
  EXPECT_EQ(static_cast<const core::Board*>(daemons->data())->vclock, 77u) << "the daemon reads another board";
}

// What a tenant might plant: a sealed memfd named and sized like the lost
// ledger. It is not the recorded inode, so it is not taken, and the vGPU
// stays refused (fails closed) rather than charging the tenant's memory.
TEST_F(StateKeeperTest, APlantedLookAlikeOfALostLedgerIsNotTaken) {
  const std::string dir = MadeByAGoneClient("a");
  ASSERT_FALSE(dir.empty());
  StopKeeper();
  keeper_.reset();  // nobody maps the ledger: it is gone
  auto planted = port::CreateSealedMemfd("gpuslice-ledger-a", nullptr, sizeof(core::Ledger));
  ASSERT_TRUE(planted.ok());
  port::UniqueFd planted_fd(planted.value());
  auto mapped =
      port::MappedFile::FromFd(planted_fd.get(), sizeof(core::Ledger), port::MappedFile::Access::kReadWrite, "planted");
  ASSERT_TRUE(mapped.ok());

  StartKeeper();
  auto client = StateKeeperClient::Connect(root_, "/nonexistent/gpuslice", {});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.value()->Adopt(), 0u);
  EXPECT_FALSE(core::FetchState(dir, 100).ok());
}

}  // namespace
}  // namespace gpuslice::node
