#include "port/process.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace gpuslice::port {
namespace {

// The state letter /proc shows for `pid`.
char StateOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}
// Its "Threads:" count (-1 when unreadable).
int ThreadsOf(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}
// Polls /proc until `done` (a state the kernel reaches on its own, bounded).
template <typename Done>
bool Eventually(Done done) {
  for (int i = 0; i < 1'000'000; ++i) {
    if (done()) return true;
    sched_yield();
  }
  return done();
}

int g_release_fd = -1;
void* WaitForRelease(void*) {
  char byte;
  (void)!read(g_release_fd, &byte, 1);
  return nullptr;
}

// A process whose main thread ended with pthread_exit reads as a zombie
// while its other threads run on, with its GPU memory: a ledger reaper that
// took it for gone would free its slot under it, and its charge with it.
TEST(ProcessStartTimeTest, AProcessWhoseMainThreadEndedIsNotGoneWhileAnotherThreadRuns) {
  int release[2];
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(release[1]);
    g_release_fd = release[0];
    pthread_t worker;
    if (pthread_create(&worker, nullptr, &WaitForRelease, nullptr) != 0) _exit(3);
    // The main thread ends alone, as with pthread_exit (whose unwinding
    // through the test framework's frames would abort the process); the
    // worker's return ends the process.
    syscall(SYS_exit, 0);
  }
  close(release[0]);
  ASSERT_TRUE(Eventually([&] { return StateOf(child) == 'Z' && ThreadsOf(child) == 2; }))
      << "state " << StateOf(child) << ", threads " << ThreadsOf(child);
  EXPECT_NE(ProcessStartTime(child), 0u);
  EXPECT_FALSE(SystemProcessProbe().PidIsGone(static_cast<uint32_t>(child), 0));

  close(release[1]);  // the worker returns: the whole process is a zombie now
  ASSERT_TRUE(Eventually([&] { return ThreadsOf(child) <= 1; }));
  EXPECT_EQ(ProcessStartTime(child), 0u);
  EXPECT_TRUE(SystemProcessProbe().PidIsGone(static_cast<uint32_t>(child), 0));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace gpuslice::port
