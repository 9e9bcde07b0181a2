#include "daemon/control_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "daemon/instance_lock.h"
#include "port/fd_passing.h"

namespace gpuslice::daemon {
namespace {

class ControlSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gs-sock-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/sub/gpuslice.sock";
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    std::filesystem::remove_all(dir_);
  }
  // Binds a socket at path_; listens when `live`. A bound, closed socket
  // leaves the file behind with nobody accepting: a stale socket.
  void Bind(bool live) {
    std::filesystem::create_directories(dir_ + "/sub");
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path_.c_str());
    ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    if (live) {
      ASSERT_EQ(listen(fd_, 4), 0);
    } else {
      close(fd_);
      fd_ = -1;
    }
  }
  std::string dir_, path_;
  int fd_ = -1;
};

TEST_F(ControlSocketTest, MissingPathIsReadyAndItsDirectoryIsMade) {
  ASSERT_TRUE(PrepareSocketPath(path_).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/sub"));
}

TEST_F(ControlSocketTest, StaleSocketIsRemoved) {
  Bind(/*live=*/false);
  ASSERT_TRUE(std::filesystem::exists(path_));
  EXPECT_FALSE(port::UnixSocketAnswers(path_));
  Status s = PrepareSocketPath(path_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ControlSocketTest, LiveSocketIsRefused) {
  Bind(/*live=*/true);
  EXPECT_TRUE(port::UnixSocketAnswers(path_));
  Status s = PrepareSocketPath(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("another gpuslice daemon is already serving"), std::string::npos) << s.message();
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST_F(ControlSocketTest, NonSocketAndBadPathsAreRefused) {
  std::filesystem::create_directories(dir_ + "/sub");
  std::ofstream(path_) << "x";
  EXPECT_NE(PrepareSocketPath(path_).message().find("is not a socket"), std::string::npos);
  EXPECT_NE(PrepareSocketPath("relative.sock").message().find("not absolute"), std::string::npos);
  EXPECT_NE(PrepareSocketPath("/tmp/" + std::string(200, 'x')).message().find("shorter path"), std::string::npos);
}

TEST_F(ControlSocketTest, RestrictMakesTheSocketOwnerOnlyOrGroup) {
  Bind(/*live=*/true);
  ASSERT_TRUE(RestrictSocket(path_, std::nullopt).ok());
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_TRUE(RestrictSocket(path_, getgid()).ok());  // our own group: no privilege needed
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, getgid());
}

TEST_F(ControlSocketTest, UnknownGroupNamesTheFix) {
  auto g = LookupGroup("no-such-group-gpuslice");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("groupadd"), std::string::npos);
  EXPECT_EQ(LookupGroup("0").value(), 0u);
}

TEST_F(ControlSocketTest, OneDaemonPerStateDirectory) {
  auto first = InstanceLock::Acquire(dir_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = InstanceLock::Acquire(dir_);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("pid " + std::to_string(getpid())), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace gpuslice::daemon
