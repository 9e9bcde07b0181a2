#include "node/state_keeper_client.h"

#include <dirent.h>
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
#include <utility>

#include "core/pacing_board.h"
#include "core/state_handout.h"
#include "node/state_keeper.h"
#include "node/state_recovery.h"
#include "node/vgpu_owner.h"
#include "port/fd_passing.h"
#include "port/sealed_memfd.h"

extern char** environ;

namespace gpuslice::node {
namespace {

constexpr int kAnswerTimeoutMs = 5000;
// A keeper starts in milliseconds; this bounds a broken one.
constexpr int kStartTimeoutMs = 10000;

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

// A new, sealed board for GPU `u`.
StatusOr<port::UniqueFd> NewBoard(const core::GpuUuid& u) {
  auto board = std::make_unique<core::Board>();
  core::InitBoard(board.get());
  auto memfd =
      port::CreateSealedMemfd(("gpuslice-board-" + core::UuidHex(u)).c_str(), board.get(), sizeof(core::Board));
  if (!memfd.ok()) return memfd.status();
  return port::UniqueFd(memfd.value());
}

}  // namespace

StatusOr<std::unique_ptr<StateKeeperClient>> StateKeeperClient::Connect(const std::string& root, const std::string& exe,
                                                                        Options options) {
  std::unique_ptr<StateKeeperClient> client(new StateKeeperClient(root, exe, std::move(options)));
  port::MutexLock lock(&client->mu_);
  bool fresh = false;
  if (Status s = client->EnsureKeeperLocked(&fresh); !s.ok()) return s;
  return client;
}

StatusOr<std::string> StateKeeperClient::Ask(const std::string& request, const std::vector<int>& fds,
                                             std::vector<port::UniqueFd>* received) {
  auto conn = port::ConnectUnix(StateKeeperSocketPath(root_));
  if (!conn.ok()) return conn.status();
  port::UniqueFd socket(conn.value());
  if (Status s = port::SendWithFds(socket.get(), request, fds); !s.ok()) return s;
  std::string answer;
  std::vector<int> raw;
  if (Status s = port::ReceiveWithFds(socket.get(), kAnswerTimeoutMs, &answer, &raw); !s.ok()) return s;
  for (int fd : raw) {
    if (received != nullptr) {
      received->emplace_back(fd);
    } else {
      close(fd);
    }
  }
  if (answer.compare(0, 2, "ok") != 0) return Status::Error("the state keeper refused: " + answer);
  return answer;
}

Status StateKeeperClient::EnsureKeeperLocked(bool* fresh) {
  *fresh = false;
  auto pong = Ask("ping", {});
  if (!pong.ok()) {
    if (keeper_pid_ != 0) {
      spdlog::error("the state keeper {} is gone ({}); starting another and handing it every vGPU's state", keeper_pid_,
                    pong.status().message());
    }
    if (Status s = SpawnKeeper(); !s.ok()) return s;
    pong = Ask("ping", {});
    if (!pong.ok()) return Status::Error("the state keeper started but does not answer: " + pong.status().message());
  }
  // "ok <pid> <instance>"
  const std::string& text = pong.value();
  const size_t space = text.find(' ', 3);
  const pid_t pid = static_cast<pid_t>(strtol(text.c_str() + 3, nullptr, 10));
  const std::string instance = space == std::string::npos ? "" : text.substr(space + 1);
  if (instance != keeper_instance_ || pid != keeper_pid_) {
    *fresh = !keeper_instance_.empty();
    spdlog::info("state keeper {} holds the vGPUs' sealed state", pid);
    keeper_pid_ = pid;
    keeper_instance_ = instance;
  }
  return Status::Ok();
}

Status StateKeeperClient::SpawnKeeper() {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Status::Error(Errno("pipe"));
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

Status StateKeeperClient::EnsureBoardLocked(const core::GpuUuid& u, port::UniqueFd found) {
  if (boards_.count(u) != 0) return Status::Ok();
  // The keeper's board first: applications of earlier vGPUs map it.
  std::vector<port::UniqueFd> held;
  auto answer = Ask("get-board\n" + core::UuidHex(u), {}, &held);
  if (!answer.ok()) return answer.status();
  if (held.size() == 1 && port::CheckSealed(held[0].get(), sizeof(core::Board), "board").ok()) {
    const bool current = core::IsCurrentBoard(held[0].get());
    boards_.emplace(u, std::move(held[0]));
    if (!current) RenewStaleBoardsLocked();
    return Status::Ok();
  }
  // A board found in the mappings of applications of another gpuslice
  // version (a node upgraded with both daemon and keeper restarted) is
  // refused by this version's: a new one, while those keep theirs.
  if (found.get() >= 0 && !core::IsCurrentBoard(found.get())) {
    spdlog::warn(
        "the pacing board of GPU {} that running applications map is of another gpuslice version; "
        "a new one is made, and those applications pace on the old one until they exit",
        core::UuidHex(u));
    found = port::UniqueFd();
  }
  if (found.get() < 0) {
    auto board = NewBoard(u);
    if (!board.ok()) return board.status();
    found = std::move(board.value());
  }
  answer = Ask("board\n" + core::UuidHex(u), {found.get()});
  if (!answer.ok()) return answer.status();
  boards_.emplace(u, std::move(found));
  return Status::Ok();
}

void StateKeeperClient::ShareSocket(const std::string& socket_path) const {
  // In group mode the socket is its vGPU's owner's alone where it can be
  // (vgpu_owner.h), as the manager made it: a socket served again keeps it.
  uid_t uid = static_cast<uid_t>(-1);
  mode_t mode = options_.socket_mode;
  if (options_.socket_group) {
    const GroupGrant grant = GrantInGroupMode(LoadOwner(socket_path.substr(0, socket_path.rfind('/'))));
    uid = grant.uid;
    mode = grant.mode;
    if (chown(socket_path.c_str(), uid, *options_.socket_group) != 0) {
      spdlog::warn("cannot share {} with group {}: {}", socket_path, *options_.socket_group, strerror(errno));
    }
  }
  if (mode != 0600 && chmod(socket_path.c_str(), mode) != 0) {
    spdlog::warn("cannot open {} to mode {:o}: {}", socket_path, mode, strerror(errno));
  }
}

Status StateKeeperClient::Publish(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                                  const std::vector<core::GpuUuid>& gpus) {
  port::MutexLock lock(&mu_);
  bool fresh = false;
  if (Status s = EnsureKeeperLocked(&fresh); !s.ok()) return s;
  if (fresh) {
    if (Status s = ReseedLocked(); !s.ok()) return s;
  }
  if (Status s = PublishLocked(name, socket_path, listen_fd, ledger_fd, gpus); !s.ok()) return s;
  const int copy = fcntl(ledger_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return Status::Error(Errno("dup"));
  served_.insert_or_assign(name, Served{socket_path, port::UniqueFd(copy), gpus});
  return Status::Ok();
}

Status StateKeeperClient::PublishLocked(const std::string& name, const std::string& socket_path, int listen_fd,
                                        int ledger_fd, const std::vector<core::GpuUuid>& gpus) {
  for (const core::GpuUuid& u : gpus) {
    if (Status s = EnsureBoardLocked(u); !s.ok()) return s;
  }
  ShareSocket(socket_path);
  RecordLocked(socket_path, ledger_fd, gpus);
  std::string request = "vgpu\n" + name + "\n" + socket_path;
  for (const core::GpuUuid& u : gpus) request += "\n" + core::UuidHex(u);
  auto answer = Ask(request, {listen_fd, ledger_fd});
  return answer.ok() ? Status::Ok() : answer.status();
}

void StateKeeperClient::Withdraw(const std::string& name) {
  port::MutexLock lock(&mu_);
  served_.erase(name);
  // Best effort: the keeper also drops a vGPU whose socket path is gone.
  (void)Ask("drop\n" + name, {});
}

size_t StateKeeperClient::Adopt() {
  port::MutexLock lock(&mu_);
  DIR* d = opendir((root_ + "/vgpus").c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(d);
  size_t adopted = 0;
  // vGPUs whose keeper is gone too, recovered together below: one pass over
  // the node's processes finds all their memory.
  struct Lost {
    std::string name, dir, why;
    StatusOr<StateRecord> record;
  };
  std::vector<Lost> lost;
  for (const std::string& name : names) {
    const std::string dir = root_ + "/vgpus/" + name;
    struct stat st;
    if (lstat((dir + "/ledger").c_str(), &st) == 0 || !core::HandsOutState(dir)) continue;
    auto state = core::FetchState(dir);
    if (!state.ok()) {
      lost.push_back(Lost{name, dir, state.status().message(), ReadStateRecord(dir)});
      continue;
    }
    Served served{core::StateSocketPath(dir), std::move(state->ledger), {}};
    for (core::HandedBoard& b : state->boards) {
      served.gpus.push_back(b.uuid);
      if (boards_.count(b.uuid) == 0) boards_.emplace(b.uuid, std::move(b.fd));
    }
    RecordLocked(served.socket_path, served.ledger.get(), served.gpus);  // vGPUs made before records
    served_.insert_or_assign(name, std::move(served));
    ++adopted;
  }
  std::vector<WantedMemory> wanted;
  for (const Lost& v : lost) {
    if (!v.record.ok()) continue;
    wanted.push_back({v.record->ledger, sizeof(core::Ledger), "ledger of vGPU '" + v.name + "'"});
    for (const auto& [uuid, id] : v.record->boards) {
      wanted.push_back({id, sizeof(core::Board), "board of GPU " + core::UuidHex(uuid)});
    }
  }
  std::vector<StatusOr<port::UniqueFd>> opened = OpenMappedMemories(options_.proc_root, wanted);
  size_t next = 0;
  for (Lost& v : lost) {
    Status s = v.record.status();
    if (s.ok()) {
      StatusOr<port::UniqueFd> ledger = std::move(opened[next++]);
      std::vector<std::pair<core::GpuUuid, StatusOr<port::UniqueFd>>> boards;
      for (const auto& board : v.record->boards) boards.emplace_back(board.first, std::move(opened[next++]));
      s = RecoverLocked(v.name, v.dir, std::move(ledger), std::move(boards));
    }
    if (!s.ok()) {
      spdlog::error(
          "vGPU '{}': {}; its state cannot be recovered ({}), so its new processes are refused device "
          "memory until it is made again",
          v.name, v.why, s.message());
      continue;
    }
    spdlog::warn("vGPU '{}': recovered its ledger from a process that maps it, and serves it again", v.name);
    ++adopted;
  }
  RenewStaleBoardsLocked();
  return adopted;
}

void StateKeeperClient::RenewStaleBoardsLocked() {
  std::map<core::GpuUuid, port::UniqueFd> stale;
  for (auto& [uuid, fd] : boards_) {
    if (core::IsCurrentBoard(fd.get())) continue;
    auto board = NewBoard(uuid);
    if (!board.ok()) {
      spdlog::error("cannot make a pacing board for GPU {}: {}", core::UuidHex(uuid), board.status().message());
      continue;
    }
    stale.emplace(uuid, std::exchange(fd, std::move(board.value())));
  }
  if (stale.empty()) return;
  spdlog::warn(
      "the state keeper {} holds the pacing boards of another gpuslice version for {} GPU(s), which this "
      "version's applications refuse; handing every vGPU to a new keeper with new boards (running "
      "applications keep theirs until they exit)",
      keeper_pid_, stale.size());
  Status s = SpawnKeeper();
  if (!s.ok()) {
    for (auto& [uuid, fd] : stale) boards_[uuid] = std::move(fd);  // nothing was handed over
  } else {
    bool fresh = false;
    s = EnsureKeeperLocked(&fresh);
    if (s.ok()) s = fresh ? ReseedLocked() : Status::Error("the old keeper still answers");
  }
  if (!s.ok()) {
    spdlog::error(
        "cannot hand the vGPUs to a new state keeper ({}): applications of this version refuse the old "
        "boards and run unpaced there, caps not enforced. Fix: stop the daemon, stop the `gpuslice "
        "state-keeper` process, start the daemon",
        s.message());
  }
}

Status StateKeeperClient::Check() {
  port::MutexLock lock(&mu_);
  bool fresh = false;
  if (Status s = EnsureKeeperLocked(&fresh); !s.ok()) return s;
  return fresh ? ReseedLocked() : Status::Ok();
}

void StateKeeperClient::RecordLocked(const std::string& socket_path, int ledger_fd,
                                     const std::vector<core::GpuUuid>& gpus) {
  StateRecord record;
  auto ledger = IdentityOf(ledger_fd);
  if (!ledger.ok()) return;
  record.ledger = ledger.value();
  for (const core::GpuUuid& u : gpus) {
    auto it = boards_.find(u);
    if (it == boards_.end()) continue;
    if (auto id = IdentityOf(it->second.get()); id.ok()) record.boards.emplace_back(u, id.value());
  }
  const std::string dir = socket_path.substr(0, socket_path.rfind('/'));
  if (Status s = WriteStateRecord(dir, record); !s.ok()) {
    spdlog::warn("{}; the vGPU cannot be recovered if the keeper and this process both die", s.message());
  }
}

Status StateKeeperClient::RecoverLocked(const std::string& name, const std::string& dir,
                                        StatusOr<port::UniqueFd> ledger,
                                        std::vector<std::pair<core::GpuUuid, StatusOr<port::UniqueFd>>> boards) {
  if (!ledger.ok()) return ledger.status();
  std::vector<core::GpuUuid> gpus;
  for (auto& [uuid, board] : boards) {
    gpus.push_back(uuid);
    // A board nobody maps any more is made anew by PublishLocked: it holds
    // only pacing turns, no charge.
    if (!board.ok()) continue;
    if (Status s = EnsureBoardLocked(uuid, std::move(board.value())); !s.ok()) return s;
  }
  // The dead keeper's socket file stays and refuses connections; the
  // vGPU's processes will find a new one at the same path.
  const std::string socket_path = core::StateSocketPath(dir);
  auto listening = port::ListenUnix(socket_path, 0600);
  if (!listening.ok()) return listening.status();
  port::UniqueFd listen_fd(listening.value());
  if (Status s = PublishLocked(name, socket_path, listen_fd.get(), ledger->get(), gpus); !s.ok()) return s;
  served_.insert_or_assign(name, Served{socket_path, std::move(ledger.value()), gpus});
  return Status::Ok();
}

Status StateKeeperClient::ReseedLocked() {
  for (const auto& [uuid, fd] : boards_) {
    if (auto a = Ask("board\n" + core::UuidHex(uuid), {fd.get()}); !a.ok()) return a.status();
  }
  size_t served = 0;
  for (auto it = served_.begin(); it != served_.end();) {
    Served& v = it->second;
    const std::string dir = v.socket_path.substr(0, v.socket_path.rfind('/'));
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) {  // removed meanwhile
      it = served_.erase(it);
      continue;
    }
    // The dead keeper's socket file stays and refuses connections; a new one
    // at the same path is what the vGPU's processes will find.
    auto listening = port::ListenUnix(v.socket_path, 0600);
    if (!listening.ok()) return listening.status();
    port::UniqueFd listen_fd(listening.value());
    if (Status s = PublishLocked(it->first, v.socket_path, listen_fd.get(), v.ledger.get(), v.gpus); !s.ok()) return s;
    ++served;
    ++it;
  }
  spdlog::warn("handed {} vGPU(s) and {} board(s) to the new state keeper {}", served, boards_.size(), keeper_pid_);
  return Status::Ok();
}

StatusOr<port::MappedFile> StateKeeperClient::MapBoard(const core::GpuUuid& uuid) const {
  port::MutexLock lock(&mu_);
  auto it = boards_.find(uuid);
  if (it == boards_.end()) return Status::Error("no board yet for GPU " + core::UuidHex(uuid));
  return port::MappedFile::FromFd(it->second.get(), sizeof(core::Board), port::MappedFile::Access::kReadOnly,
                                  "board of GPU " + core::UuidHex(uuid));
}

}  // namespace gpuslice::node
