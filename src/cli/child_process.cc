#include "cli/child_process.h"

#include "cli/session_audit.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslice::cli {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

sigset_t SupervisedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int s : kForwarded) sigaddset(&set, s);
  return set;
}

}  // namespace

void BlockSupervisedSignals() {
  const sigset_t supervised = SupervisedSignals();
  pthread_sigmask(SIG_BLOCK, &supervised, nullptr);
}

StatusOr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                           const std::vector<std::string>& env) {
  if (argv.empty()) return Status::Error("no command given; write it after --, e.g. gpuslice run -- python3 train.py");
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  BecomeChildSubreaper();
  const sigset_t supervised = SupervisedSignals();
  sigset_t previous;
  sigprocmask(SIG_BLOCK, &supervised, &previous);
  // The command gets the forwarded signals unblocked, even when they were
  // blocked before this call (BlockSupervisedSignals).
  sigset_t child_mask = previous;
  for (int s : kForwarded) sigdelset(&child_mask, s);
  sigdelset(&child_mask, SIGCHLD);

  // The child reports an exec failure through this close-on-exec pipe.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Status::Error(std::string("pipe: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) return Status::Error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    close(pipefd[0]);
    sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    execvpe(cargv[0], cargv.data(), cenv.data());
    const int err = errno;
    ssize_t ignored = write(pipefd[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(pipefd[1]);
  int err = 0;
  ssize_t n;
  do {
    n = read(pipefd[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  close(pipefd[0]);
  if (n == sizeof err) {
    waitpid(pid, nullptr, 0);
    return Status::Error("cannot run '" + argv[0] + "': " + strerror(err) +
                         (err == ENOENT ? "; check the command name and PATH" : ""));
  }
  ChildProcess child;
  child.pid_ = pid;
  return child;
}

int ChildProcess::Supervise(int tick_ms, const std::function<void()>& tick) {
  const sigset_t supervised = SupervisedSignals();
  const timespec timeout = {tick_ms / 1000, (tick_ms % 1000) * 1000000L};
  while (true) {
    int status = 0;
    // Any child: the command, or a descendant orphaned to us (a zombie
    // until reaped here).
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done == pid_) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (done > 0) continue;
    siginfo_t info;
    const int sig = sigtimedwait(&supervised, &info, &timeout);
    if (sig < 0) {
      tick();  // timeout (or EINTR): time for periodic work
    } else if (sig != SIGCHLD) {
      kill(pid_, sig);
    }
  }
}

}  // namespace gpuslice::cli
