#include "daemon/control_listener.h"

#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslice::daemon {
namespace {

constexpr char kPeerPrefix[] = "fd:";

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

}  // namespace

StatusOr<std::unique_ptr<ControlListener>> ControlListener::Listen(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return Status::Error("socket path " + path + " is too long");
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  port::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return Status::Error(Errno("socket"));
  // bind creates the file with the umask's mode: owner-only from its first
  // instant, before the daemon sets its final mode.
  const mode_t old_umask = umask(0177);
  const int bound = bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  umask(old_umask);
  if (bound != 0) {
    errno = bind_errno;
    return Status::Error(Errno("cannot listen on " + path) +
                         "; check that its directory is writable, or set socket.path");
  }
  if (listen(fd.get(), SOMAXCONN) != 0) return Status::Error(Errno("listen on " + path));
  port::UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake.get() < 0) return Status::Error(Errno("eventfd"));
  return std::unique_ptr<ControlListener>(new ControlListener(std::move(fd), std::move(wake)));
}

ControlListener::ControlListener(port::UniqueFd listen_fd, port::UniqueFd wake_fd)
    : listen_fd_(std::move(listen_fd)), wake_fd_(std::move(wake_fd)) {}

ControlListener::~ControlListener() { Stop(); }

void ControlListener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void ControlListener::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof one);
  thread_.join();
}

void ControlListener::AcceptLoop(grpc::Server* server) {
  pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
  int timeout_ms = -1;
  bool starved = false;  // out of descriptors, and said so
  for (;;) {
    if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      spdlog::error("control socket: {}; no more connections are accepted", strerror(errno));
      return;
    }
    timeout_ms = -1;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: the connection waits in the backlog; look again
        // shortly rather than spin on it, and say so once.
        if (!starved) spdlog::warn("control socket: cannot accept a connection: {}; retrying", strerror(errno));
        starved = true;
        timeout_ms = 100;
      }
      continue;
    }
    starved = false;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("control socket: cannot read a caller's credentials: {}; its connection is closed", strerror(errno));
      close(fd);
      continue;
    }
    {
      port::MutexLock lock(&mu_);
      callers_[fd] = Caller{cred.pid, cred.uid, cred.gid};
      ++accepted_;
    }
    // gRPC owns the descriptor from here, and closes it.
    grpc::AddInsecureChannelFromFd(server, fd);
  }
}

std::optional<ControlListener::Caller> ControlListener::CallerOf(const grpc::ServerContext& context) const {
  const std::string peer = context.peer();
  if (peer.rfind(kPeerPrefix, 0) != 0) return std::nullopt;
  const std::string number = peer.substr(sizeof kPeerPrefix - 1);
  if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  port::MutexLock lock(&mu_);
  auto it = callers_.find(std::stoi(number));
  if (it == callers_.end()) return std::nullopt;
  return it->second;
}

uint64_t ControlListener::accepted() const {
  port::MutexLock lock(&mu_);
  return accepted_;
}

}  // namespace gpuslice::daemon
