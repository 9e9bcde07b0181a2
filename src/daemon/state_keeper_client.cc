#include "daemon/state_keeper_client.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/pacing_board.h"
#include "daemon/state_keeper.h"
#include "port/fd_passing.h"
#include "port/sealed_memfd.h"
#include "port/unique_fd.h"

extern char** environ;

namespace gpuslice::daemon {
namespace {

constexpr int kAnswerTimeoutMs = 5000;
// A keeper starts in milliseconds; this bounds a broken one.
constexpr int kStartTimeoutMs = 10000;

}  // namespace

StatusOr<std::unique_ptr<StateKeeperClient>> StateKeeperClient::Connect(const std::string& root,
                                                                        const std::string& exe,
                                                                        std::optional<gid_t> group) {
  std::unique_ptr<StateKeeperClient> client(new StateKeeperClient(root, exe, group));
  std::lock_guard<std::mutex> lock(client->mu_);
  if (Status s = client->EnsureKeeperLocked(); !s.ok()) return s;
  return client;
}

StatusOr<std::string> StateKeeperClient::Ask(const std::string& request, const std::vector<int>& fds) {
  auto conn = port::ConnectUnix(StateKeeperSocketPath(root_));
  if (!conn.ok()) return conn.status();
  port::UniqueFd socket(conn.value());
  if (Status s = port::SendWithFds(socket.get(), request, fds); !s.ok()) return s;
  std::string answer;
  std::vector<int> none;
  if (Status s = port::ReceiveWithFds(socket.get(), kAnswerTimeoutMs, &answer, &none); !s.ok()) return s;
  for (int fd : none) close(fd);
  if (answer.compare(0, 2, "ok") != 0) return Status::Error("the state keeper refused: " + answer);
  return answer;
}

Status StateKeeperClient::EnsureKeeperLocked() {
  auto pong = Ask("ping", {});
  if (pong.ok()) {
    const pid_t pid = static_cast<pid_t>(strtol(pong->c_str() + 3, nullptr, 10));
    if (keeper_pid_ != pid) {
      if (keeper_pid_ != 0) boards_sent_.clear();
      keeper_pid_ = pid;
      spdlog::info("state keeper {} holds the vGPUs' sealed state", keeper_pid_);
    }
    return Status::Ok();
  }
  if (keeper_pid_ != 0) {
    spdlog::error("the state keeper {} is gone ({}): vGPUs made before cannot hand out their state, so their new "
                  "processes are refused device memory until those vGPUs are made again; starting a new keeper",
                  keeper_pid_, pong.status().message());
  }
  boards_sent_.clear();
  if (Status s = SpawnKeeper(); !s.ok()) return s;
  pong = Ask("ping", {});
  if (!pong.ok()) return Status::Error("the state keeper started but does not answer: " + pong.status().message());
  keeper_pid_ = static_cast<pid_t>(strtol(pong->c_str() + 3, nullptr, 10));
  spdlog::info("started state keeper {}", keeper_pid_);
  return Status::Ok();
}

Status StateKeeperClient::SpawnKeeper() {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Status::Error(std::string("pipe: ") + strerror(errno));
  port::UniqueFd read_end(ready[0]), write_end(ready[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto 3 clears close-on-exec there: the keeper's readiness byte.
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 3);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::string arg0 = "gpuslice", arg1 = "state-keeper", arg2 = "--state-dir", arg3 = root_, arg4 = "--ready-fd",
              arg5 = "3";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), arg3.data(), arg4.data(), arg5.data(), nullptr};
  pid_t pid = 0;
  const int err = posix_spawn(&pid, exe_.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return Status::Error("cannot start the state keeper " + exe_ + ": " + strerror(err));
  write_end.reset();
  // The spawned process forks the keeper and exits at once.
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  pollfd p{read_end.get(), POLLIN, 0};
  char byte = 0;
  if (poll(&p, 1, kStartTimeoutMs) != 1 || read(read_end.get(), &byte, 1) != 1) {
    return Status::Error("the state keeper (" + exe_ + " state-keeper) did not start; see its lines in this log");
  }
  return Status::Ok();
}

Status StateKeeperClient::Publish(const std::string& name, const std::string& socket_path, int listen_fd,
                                  int ledger_fd, const std::vector<core::GpuUuid>& gpus) {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = PublishLocked(name, socket_path, listen_fd, ledger_fd, gpus);
  if (s.ok()) return s;
  // The keeper may have died since: start another and try once more.
  if (Status k = EnsureKeeperLocked(); !k.ok()) return k;
  return PublishLocked(name, socket_path, listen_fd, ledger_fd, gpus);
}

Status StateKeeperClient::PublishLocked(const std::string& name, const std::string& socket_path, int listen_fd,
                                        int ledger_fd, const std::vector<core::GpuUuid>& gpus) {
  for (const core::GpuUuid& u : gpus) {
    if (boards_sent_.count(u) != 0) continue;
    auto board = std::make_unique<core::Board>();
    core::InitBoard(board.get());
    auto memfd = port::CreateSealedMemfd(("gpuslice-board-" + core::UuidHex(u)).c_str(), board.get(),
                                         sizeof(core::Board));
    if (!memfd.ok()) return memfd.status();
    port::UniqueFd fd(memfd.value());
    auto answer = Ask("board\n" + core::UuidHex(u), {fd.get()});
    if (!answer.ok()) return answer.status();
    boards_sent_.insert(u);
  }
  if (group_) {
    // Group members' processes connect to the socket (connect needs write).
    if (chown(socket_path.c_str(), static_cast<uid_t>(-1), *group_) != 0 || chmod(socket_path.c_str(), 0660) != 0) {
      spdlog::warn("cannot share {} with group {}: {}", socket_path, *group_, strerror(errno));
    }
  }
  std::string request = "vgpu\n" + name + "\n" + socket_path;
  for (const core::GpuUuid& u : gpus) request += "\n" + core::UuidHex(u);
  auto answer = Ask(request, {listen_fd, ledger_fd});
  return answer.ok() ? Status::Ok() : answer.status();
}

void StateKeeperClient::Withdraw(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  // Best effort: the keeper also drops a vGPU whose socket path is gone.
  (void)Ask("drop\n" + name, {});
}

}  // namespace gpuslice::daemon
