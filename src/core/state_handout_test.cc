#include "core/state_handout.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/pacing_board.h"
#include "core/vgpu_layout.h"
#include "port/fd_passing.h"
#include "port/sealed_memfd.h"

namespace gpuslice::core {
namespace {

GpuUuid Uuid(uint8_t first) {
  GpuUuid u{};
  u[0] = first;
  u[15] = 0xab;
  return u;
}

class StateHandoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuslice-handout-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static port::UniqueFd Sealed(size_t size) {
    auto fd = port::CreateSealedMemfd("t", nullptr, size);
    EXPECT_TRUE(fd.ok());
    return port::UniqueFd(fd.ok() ? fd.value() : -1);
  }
  // Serves one connection on the vGPU's socket with `serve`, in a thread.
  template <typename Serve>
  std::thread ServeOnce(Serve serve) {
    auto fd = port::ListenUnix(StateSocketPath(dir_), 0600);
    EXPECT_TRUE(fd.ok());
    listen_ = port::UniqueFd(fd.value());
    return std::thread([this, serve] {
      port::UniqueFd conn(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      serve(conn.get());
    });
  }

  std::string dir_;
  port::UniqueFd listen_;
};

TEST_F(StateHandoutTest, FormatsAndParsesTheHandout) {
  const std::string text = FormatHandout({Uuid(1), Uuid(2)});
  EXPECT_EQ(text.substr(0, 24), "gpuslice-state 1\nledger\n");
  auto parsed = ParseHandout(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value(), (std::vector<GpuUuid>{Uuid(1), Uuid(2)}));
  auto other = ParseHandout("gpuslice-state 2\nledger\n");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another version"), std::string::npos);
  EXPECT_FALSE(ParseHandout("gpuslice-state 1\nledger\nboard xyz\n").ok());
  EXPECT_FALSE(ParseHandout("gpuslice-state 1\nledger").ok());
}

TEST_F(StateHandoutTest, FetchReceivesSealedRegionsThatCannotBeTruncated) {
  port::UniqueFd ledger = Sealed(sizeof(Ledger)), board = Sealed(sizeof(Board));
  EXPECT_FALSE(HandsOutState(dir_));
  std::thread server = ServeOnce([&](int conn) { EXPECT_TRUE(SendState(conn, ledger.get(), {{Uuid(7), board.get()}}).ok()); });
  EXPECT_TRUE(HandsOutState(dir_));
  auto state = FetchState(dir_, 5000);
  server.join();
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->boards.size(), 1u);
  EXPECT_GE(state->BoardFd(Uuid(7).data()), 0);
  EXPECT_EQ(state->BoardFd(Uuid(8).data()), -1);
  for (int fd : {state->ledger.get(), state->BoardFd(Uuid(7).data())}) {
    EXPECT_EQ(ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
  }
}

TEST_F(StateHandoutTest, RefusesAnUnsealedLedger) {
  port::UniqueFd plain(memfd_create("plain", MFD_CLOEXEC));
  ASSERT_EQ(ftruncate(plain.get(), sizeof(Ledger)), 0);
  std::thread server = ServeOnce([&](int conn) { EXPECT_TRUE(SendState(conn, plain.get(), {}).ok()); });
  auto state = FetchState(dir_, 5000);
  server.join();
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("not sealed"), std::string::npos) << state.status().message();
}

TEST_F(StateHandoutTest, RefusesABoardOfAnotherSize) {
  port::UniqueFd ledger = Sealed(sizeof(Ledger)), board = Sealed(4096);
  std::thread server = ServeOnce([&](int conn) { EXPECT_TRUE(SendState(conn, ledger.get(), {{Uuid(1), board.get()}}).ok()); });
  auto state = FetchState(dir_, 5000);
  server.join();
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("pacing board"), std::string::npos) << state.status().message();
}

TEST_F(StateHandoutTest, ASocketThatDoesNotAnswerFailsAtTheTimeoutSayingWhy) {
  // Bound and listening, never accepted: a stopped keeper.
  auto fd = port::ListenUnix(StateSocketPath(dir_), 0600);
  ASSERT_TRUE(fd.ok());
  port::UniqueFd listening(fd.value());
  auto state = FetchState(dir_, 20);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("did not hand out its shared state (no answer within 20 ms)"),
            std::string::npos)
      << state.status().message();
  listening.reset();  // nobody listens now: refused at once
  state = FetchState(dir_, 5000);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("connect"), std::string::npos) << state.status().message();
}

}  // namespace
}  // namespace gpuslice::core
