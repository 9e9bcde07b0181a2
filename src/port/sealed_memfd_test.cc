#include "port/sealed_memfd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "port/fd_passing.h"
#include "port/mapped_file.h"
#include "port/unique_fd.h"

namespace gpuslice::port {
namespace {

TEST(SealedMemfdTest, HoldsItsContentsAndCannotBeResizedByAnyone) {
  const char content[] = "ledger bytes";
  auto fd = CreateSealedMemfd("test", content, sizeof content);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  UniqueFd memfd(fd.value());
  char back[sizeof content] = {};
  ASSERT_EQ(pread(memfd.get(), back, sizeof back, 0), static_cast<ssize_t>(sizeof back));
  EXPECT_STREQ(back, content);

  EXPECT_EQ(ftruncate(memfd.get(), 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(memfd.get(), 1 << 20), -1);
  EXPECT_EQ(errno, EPERM);
  // Seals belong to the memory, not the descriptor: a reopened one is bound too.
  UniqueFd reopened(open(("/proc/self/fd/" + std::to_string(memfd.get())).c_str(), O_RDWR));
  ASSERT_TRUE(reopened.valid());
  EXPECT_EQ(ftruncate(reopened.get(), 0), -1);
  EXPECT_EQ(errno, EPERM);
  // And nobody can take the seals off.
  EXPECT_EQ(fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_TRUE(CheckSealed(memfd.get(), sizeof content, "test").ok());
}

TEST(SealedMemfdTest, StaysWritableThroughASharedMapping) {
  auto fd = CreateSealedMemfd("test", nullptr, 4096);
  ASSERT_TRUE(fd.ok());
  UniqueFd memfd(fd.value());
  auto a = MappedFile::FromFd(memfd.get(), 4096, MappedFile::Access::kReadWrite, "a");
  auto b = MappedFile::FromFd(memfd.get(), 4096, MappedFile::Access::kReadOnly, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  memfd.reset();  // the mappings keep the memory
  static_cast<char*>(a->data())[100] = 42;
  EXPECT_EQ(static_cast<const char*>(b->data())[100], 42);
}

TEST(SealedMemfdTest, CheckRefusesUnsealedOrMisSizedMemory) {
  UniqueFd plain(memfd_create("plain", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(ftruncate(plain.get(), 4096), 0);
  Status s = CheckSealed(plain.get(), 4096, "the ledger");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not sealed"), std::string::npos) << s.message();
  // Sealed against shrinking only: still growable, so still refused.
  ASSERT_EQ(fcntl(plain.get(), F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_FALSE(CheckSealed(plain.get(), 4096, "the ledger").ok());

  auto sealed = CreateSealedMemfd("test", nullptr, 4096);
  ASSERT_TRUE(sealed.ok());
  UniqueFd memfd(sealed.value());
  s = CheckSealed(memfd.get(), 8192, "the ledger");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("4096 bytes, not 8192"), std::string::npos) << s.message();
}

TEST(FdPassingTest, SendsTextAndDescriptorsInOneMessage) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  auto made = CreateSealedMemfd("passed", "xyz", 3);
  ASSERT_TRUE(made.ok());
  UniqueFd memfd(made.value());
  ASSERT_TRUE(SendWithFds(a.get(), "hello", {memfd.get(), memfd.get()}).ok());
  std::string text;
  std::vector<int> fds;
  ASSERT_TRUE(ReceiveWithFds(b.get(), 1000, &text, &fds).ok());
  EXPECT_EQ(text, "hello");
  ASSERT_EQ(fds.size(), 2u);
  for (int fd : fds) {
    EXPECT_TRUE(CheckSealed(fd, 3, "passed").ok());
    EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
  }
}

TEST(FdPassingTest, ReceiveGivesUpAtItsTimeoutOrWhenThePeerCloses) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  std::string text;
  std::vector<int> fds;
  Status s = ReceiveWithFds(b.get(), 10, &text, &fds);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no answer within 10 ms"), std::string::npos) << s.message();
  a.reset();
  s = ReceiveWithFds(b.get(), 1000, &text, &fds);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("closed"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gpuslice::port
