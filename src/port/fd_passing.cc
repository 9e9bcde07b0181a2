#include "port/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslice::port {
namespace {

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

bool FillAddress(const std::string& path, sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

}  // namespace

Status SendWithFds(int socket, const std::string& text, const std::vector<int>& fds) {
  if (fds.size() > static_cast<size_t>(kMaxFds) || text.empty() || text.size() > kMaxMessage) {
    return Status::Error("message of " + std::to_string(text.size()) + " bytes with " + std::to_string(fds.size()) +
                         " descriptors is too large to send");
  }
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::Error(Errno("sendmsg"));
  if (static_cast<size_t>(n) != text.size()) return Status::Error("sendmsg: message cut short");
  return Status::Ok();
}

Status ReceiveWithFds(int socket, int timeout_ms, std::string* text, std::vector<int>* fds) {
  text->clear();
  fds->clear();
  pollfd p{socket, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Status::Error(Errno("poll"));
  if (r == 0) return Status::Error("no answer within " + std::to_string(timeout_ms) + " ms");
  char buffer[kMaxMessage];
  iovec iov{buffer, sizeof buffer};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::Error(Errno("recvmsg"));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds->push_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    for (int fd : *fds) close(fd);
    fds->clear();
    return Status::Error("recvmsg: more descriptors than expected");
  }
  if (n == 0) return Status::Error("the peer closed without answering");
  text->assign(buffer, static_cast<size_t>(n));
  return Status::Ok();
}

StatusOr<int> ConnectUnix(const std::string& path) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) return Status::Error("socket path too long: " + path);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error(Errno("socket"));
  int r;
  do {
    r = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (r < 0 && errno == EINTR);
  if (r != 0) {
    const Status s = Status::Error(Errno("connect " + path));
    close(fd);
    return s;
  }
  return fd;
}

bool UnixSocketAnswers(const std::string& path) {
  auto fd = ConnectUnix(path);
  if (!fd.ok()) return false;
  close(fd.value());
  return true;
}

StatusOr<int> ListenUnix(const std::string& path, unsigned mode) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) return Status::Error("socket path too long: " + path);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error(Errno("socket"));
  unlink(path.c_str());
  // Not umask around bind: umask is the whole process's, and the daemon's
  // other threads create files. Linux makes the socket file with the
  // socket's own inode mode less the umask, so the fchmod before bind means
  // the file never has more than `mode`, even for the moment before the
  // chmod after it (which restores bits the umask took). Callers also bind
  // where nobody else can enter yet where they can (a vGPU is made in a
  // private temporary directory; a replacement keeper binds in place).
  if (fchmod(fd, mode) != 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), mode) != 0 || listen(fd, 64) != 0) {
    const Status s = Status::Error(Errno("cannot listen on " + path));
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace gpuslice::port
