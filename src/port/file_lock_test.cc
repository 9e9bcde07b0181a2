#include "port/file_lock.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace gpuslice::port {
namespace {

using std::chrono::milliseconds;

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/file_lock_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/.lock";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(FileLockTest, AHeldLockEndsTheWaitWithAnErrorNamingItsHolderAndTheFix) {
  auto held = LockFile(path_, LockMode::kExclusive, milliseconds{0});
  ASSERT_TRUE(held.ok()) << held.status().message();
  // flock locks belong to open files: a second open conflicts, even here.
  auto again = LockFile(path_, LockMode::kExclusive, milliseconds{20});
  ASSERT_FALSE(again.ok());
  const std::string& why = again.status().message();
  EXPECT_NE(why.find(path_ + " is still locked after 20 ms by pid " + std::to_string(getpid())), std::string::npos)
      << why;
  EXPECT_NE(why.find("systemctl status gpuslice"), std::string::npos) << why;
  EXPECT_FALSE(LockFile(path_, LockMode::kShared, milliseconds{0}).ok());
}

TEST_F(FileLockTest, SharedHoldersShareAndKeepAnExclusiveOneOut) {
  auto first = LockFile(path_, LockMode::kShared, milliseconds{0});
  auto second = LockFile(path_, LockMode::kShared, milliseconds{0});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(LockFile(path_, LockMode::kExclusive, milliseconds{0}).ok());
  first->reset();
  EXPECT_FALSE(LockFile(path_, LockMode::kExclusive, milliseconds{0}).ok());
  second->reset();
  EXPECT_TRUE(LockFile(path_, LockMode::kExclusive, milliseconds{0}).ok());
}

// The system call `tid` of this process is in, from /proc (-1 if unread).
long SyscallOf(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  in >> number;
  return number;
}

TEST_F(FileLockTest, AWaiterGetsTheLockItsHolderReleases) {
  auto held = LockFile(path_, LockMode::kExclusive, milliseconds{0});
  ASSERT_TRUE(held.ok());
  std::atomic<pid_t> waiter_tid{0};
  Status got = Status::Error("not run");
  std::thread waiter([&] {
    waiter_tid = static_cast<pid_t>(syscall(SYS_gettid));
    auto lock = LockFile(path_, LockMode::kExclusive, milliseconds{60'000});
    got = lock.ok() ? Status::Ok() : lock.status();
  });
  // Released only once the waiter sleeps between tries, which it does only
  // after a try found the lock held: the release then ends a real wait.
  // (A waiter that gave up at once has no task left to read: -1.)
  long call = 0;
  while (call != SYS_clock_nanosleep && call != -1) {
    std::this_thread::yield();
    const pid_t tid = waiter_tid.load();
    if (tid != 0) call = SyscallOf(tid);
  }
  held->reset();
  waiter.join();
  EXPECT_EQ(call, SYS_clock_nanosleep) << "the waiter never slept between tries";
  EXPECT_TRUE(got.ok()) << got.message();
}

TEST_F(FileLockTest, AnUnopenableLockIsAnErrorNamingIt) {
  auto lock = LockFile(dir_ + "/missing/.lock", LockMode::kExclusive, milliseconds{0});
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find("cannot open lock " + dir_ + "/missing/.lock"), std::string::npos);
}

}  // namespace
}  // namespace gpuslice::port
