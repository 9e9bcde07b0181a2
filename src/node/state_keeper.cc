#include "node/state_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/pacing_board.h"
#include "core/vgpu_layout.h"
#include "port/fd_passing.h"
#include "port/sealed_memfd.h"

namespace gpuslice::node {
namespace {

constexpr int kControlReceiveTimeoutMs = 1000;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool StatOf(const std::string& path, dev_t* dev, ino_t* ino) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

void Say(const char* format, const std::string& what) {
  fprintf(stderr, "gpuslice-state-keeper[%d]: ", static_cast<int>(getpid()));
  fprintf(stderr, format, what.c_str());
  fputc('\n', stderr);
}

}  // namespace

std::string StateKeeperSocketPath(const std::string& root) { return root + "/" + kStateKeeperSocketName; }

StatusOr<StateKeeper> StateKeeper::Listen(const std::string& root) {
  const std::string path = StateKeeperSocketPath(root);
  auto fd = port::ListenUnix(path, 0600);
  if (!fd.ok()) return fd.status();
  StateKeeper keeper;
  keeper.root_ = root;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  keeper.instance_ = std::to_string(now.tv_sec * 1'000'000'000ll + now.tv_nsec);
  keeper.control_ = port::UniqueFd(fd.value());
  StatOf(path, &keeper.control_dev_, &keeper.control_ino_);
  return keeper;
}

bool StateKeeper::Step(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Vgpu*> owners;
  if (!replaced_) fds.push_back({control_.get(), POLLIN, 0});
  for (auto& [name, v] : vgpus_) {
    fds.push_back({v.listen.get(), POLLIN, 0});
    owners.push_back(&v);
  }
  const int r = poll(fds.data(), fds.size(), timeout_ms);
  if (r > 0) {
    const size_t first_vgpu = replaced_ ? 0 : 1;
    for (size_t i = first_vgpu; i < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) != 0) HandOut(*owners[i - first_vgpu]);
    }
    // Last: a control request may drop a vGPU, which `owners` points into.
    if (!replaced_ && (fds[0].revents & POLLIN) != 0) ServeControl();
  }
  struct stat st;
  if (stat((root_ + "/vgpus").c_str(), &st) != 0) {
    Say("the state directory %s is gone; exiting", root_);
    return false;
  }
  if (!replaced_) {
    dev_t dev;
    ino_t ino;
    if (!StatOf(StateKeeperSocketPath(root_), &dev, &ino) || dev != control_dev_ || ino != control_ino_) {
      // Another keeper answers there now (the daemon thought this one dead):
      // this one serves what it has until those vGPUs are gone.
      replaced_ = true;
      control_.reset();
    }
  }
  DropGone();
  return !(replaced_ && vgpus_.empty());
}

void StateKeeper::HandOut(Vgpu& v) {
  std::vector<std::pair<core::GpuUuid, int>> boards;
  for (const core::GpuUuid& u : v.gpus) {
    auto it = boards_.find(u);
    if (it != boards_.end()) boards.emplace_back(u, it->second.get());
  }
  // Everyone waiting, without blocking: a client that connects and never
  // reads costs one socket buffer, not the keeper's attention.
  for (;;) {
    const int conn = accept4(v.listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (conn < 0) return;
    (void)core::SendState(conn, v.ledger.get(), boards);
    close(conn);
  }
}

void StateKeeper::ServeControl() {
  const int conn = accept4(control_.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  port::UniqueFd c(conn);
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != geteuid()) {
    (void)port::SendWithFds(conn, "error only the keeper's own user may ask it", {});
    return;
  }
  std::string request;
  std::vector<int> raw;
  if (!port::ReceiveWithFds(conn, kControlReceiveTimeoutMs, &request, &raw).ok()) {
    for (int fd : raw) close(fd);
    return;
  }
  std::vector<port::UniqueFd> fds;
  for (int fd : raw) fds.emplace_back(fd);
  std::vector<int> out;
  const std::string answer = Handle(request, fds, &out);
  (void)port::SendWithFds(conn, answer, out);
}

std::string StateKeeper::Handle(const std::string& request, std::vector<port::UniqueFd>& fds, std::vector<int>* out) {
  const std::vector<std::string> lines = Lines(request);
  const std::string& verb = lines[0];
  if (verb == "ping") return "ok " + std::to_string(getpid()) + " " + instance_;
  if (verb == "get-board") {
    core::GpuUuid u{};
    if (lines.size() != 2 || !core::ParseUuidHex(lines[1], &u)) return "error bad get-board request";
    auto it = boards_.find(u);
    if (it == boards_.end()) return "ok none";
    out->push_back(it->second.get());
    return "ok";
  }
  if (verb == "board") {
    core::GpuUuid u{};
    if (lines.size() != 2 || !core::ParseUuidHex(lines[1], &u) || fds.size() != 1) return "error bad board request";
    if (Status s = port::CheckSealed(fds[0].get(), sizeof(core::Board), "board " + lines[1]); !s.ok()) {
      return "error " + s.message();
    }
    // The first board of a GPU stays: vGPUs already handed it share it.
    if (boards_.find(u) == boards_.end()) boards_.emplace(u, std::move(fds[0]));
    return "ok";
  }
  if (verb == "vgpu") {
    if (lines.size() < 3 || fds.size() != 2) return "error bad vgpu request";
    Vgpu v;
    v.socket_path = lines[2];
    for (size_t i = 3; i < lines.size(); ++i) {
      core::GpuUuid u{};
      if (!core::ParseUuidHex(lines[i], &u)) return "error bad GPU '" + lines[i] + "'";
      if (boards_.find(u) == boards_.end()) return "error no board for GPU " + lines[i] + "; send it first";
      v.gpus.push_back(u);
    }
    if (Status s = port::CheckSealed(fds[1].get(), sizeof(core::Ledger), "ledger of " + lines[1]); !s.ok()) {
      return "error " + s.message();
    }
    if (!StatOf(v.socket_path, &v.dev, &v.ino)) return "error no socket at " + v.socket_path;
    // Non-blocking, so that HandOut's accept loop ends when nobody waits.
    const int flags = fcntl(fds[0].get(), F_GETFL);
    if (flags < 0 || fcntl(fds[0].get(), F_SETFL, flags | O_NONBLOCK) != 0) {
      return "error the socket of " + lines[1] + " is unusable";
    }
    v.listen = std::move(fds[0]);
    v.ledger = std::move(fds[1]);
    vgpus_.insert_or_assign(lines[1], std::move(v));
    return "ok";
  }
  if (verb == "drop") {
    if (lines.size() != 2) return "error bad drop request";
    vgpus_.erase(lines[1]);
    return "ok";
  }
  return "error unknown request '" + verb + "'";
}

void StateKeeper::DropGone() {
  for (auto it = vgpus_.begin(); it != vgpus_.end();) {
    dev_t dev;
    ino_t ino;
    if (!StatOf(it->second.socket_path, &dev, &ino) || dev != it->second.dev || ino != it->second.ino) {
      it = vgpus_.erase(it);
    } else {
      ++it;
    }
  }
}

int RunStateKeeper(const std::string& root, int ready_fd) {
  if (ready_fd >= 0) {
    // Detach: the intermediate process exits at once (the daemon reaps it),
    // so the keeper is nobody's child to be reaped or signalled with it.
    const pid_t child = fork();
    if (child < 0) {
      perror("gpuslice state-keeper: fork");
      return 2;
    }
    if (child > 0) _exit(0);
    setsid();
  }
  auto keeper = StateKeeper::Listen(root);
  if (!keeper.ok()) {
    Say("cannot start: %s", keeper.status().message());
    return 2;
  }
  if (ready_fd >= 0) {
    const char ready = 1;
    (void)!write(ready_fd, &ready, 1);
    close(ready_fd);
  }
  Say("serving the vGPUs' sealed state of %s", root);
  while (keeper->Step(1000)) {
  }
  return 0;
}

}  // namespace gpuslice::node
