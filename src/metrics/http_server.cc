#include "metrics/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "config/listen_address.h"

namespace gpuslice::metrics {
namespace {

constexpr size_t kMaxRequestBytes = 4096;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Response(int status, const char* reason, const char* content_type, const std::string& body,
                     const char* extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra_headers + "\r\n" +
         body;
}

constexpr char kPlainText[] = "text/plain; charset=utf-8";

// One accepted connection: what it has sent, then the answer being written.
struct Connection {
  int fd = -1;
  int64_t deadline_ms = 0;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool answering = false;
};

// Binds a listening, non-blocking socket for host:port; errno set on failure
// (0 when the host does not resolve).
int Bind(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    errno = 0;
    return -1;
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR alone (no SO_REUSEPORT, which would let a second daemon
    // bind the same port and steal half the scrapes) still allows a restart
    // while old connections sit in TIME_WAIT.
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  errno = err;
  return fd;
}

uint16_t BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(Registry* registry, HttpServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Start() {
  if (listen_fd_ >= 0) return Status::Error("metrics server: already started");
  StatusOr<config::ListenAddress> addr = config::ParseListenAddress(options_.address);
  if (!addr.ok()) return Status::Error("metrics address: " + addr.status().message());
  if (!options_.allow_remote && !config::IsLoopbackHost(addr->host)) {
    return Status::Error("metrics address: \"" + options_.address +
                         "\" is not a loopback address; set metrics.allow_remote: true to serve other hosts, "
                         "or use 127.0.0.1:PORT");
  }
  const int fd = Bind(addr->host, addr->port);
  if (fd < 0) {
    const int err = errno;
    const std::string where = "metrics address " + options_.address + ": ";
    if (err == EADDRINUSE) {
      return Status::Error(where + "port " + std::to_string(addr->port) +
                           " is already in use (another gpuslice daemon or exporter?); stop it or set "
                           "metrics.address to a free port");
    }
    if (err == EADDRNOTAVAIL) {
      return Status::Error(where + "no interface of this host has that address; use 127.0.0.1:PORT");
    }
    if (err == EACCES) {
      return Status::Error(where + "permission denied; use a port above 1023 or run as root");
    }
    return Status::Error(where + "cannot bind (" + (err != 0 ? std::strerror(err) : "cannot resolve the host") +
                         "); set metrics.address to host:port on this machine");
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    const int err = errno;
    close(fd);
    return Status::Error("metrics server: cannot make its stop signal (eventfd: " + std::string(std::strerror(err)) +
                         ")");
  }
  listen_fd_ = fd;
  host_ = addr->host;
  port_ = BoundPort(fd);
  thread_ = std::thread([this] { Serve(); });
  return Status::Ok();
}

void MetricsHttpServer::Stop() {
  if (listen_fd_ < 0) return;
  const uint64_t one = 1;
  // One write cannot overflow an eventfd's counter: the thread wakes.
  [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  port_ = 0;
}

std::string MetricsHttpServer::bound_address() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

std::string MetricsHttpServer::Answer(const std::string& request) {
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    return Response(400, "Bad Request", kPlainText, "not an HTTP request line\n");
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET") {
    return Response(405, "Method Not Allowed", kPlainText, "only GET is served here\n", "Allow: GET\r\n");
  }
  if (path == "/metrics") return Response(200, "OK", kTextFormatContentType, registry_->Render());
  if (path == "/healthz") {
    const Status health = options_.health_check ? options_.health_check() : Status::Ok();
    if (health.ok()) return Response(200, "OK", kPlainText, "ok\n");
    return Response(503, "Service Unavailable", kPlainText, health.message() + "\n");
  }
  return Response(404, "Not Found", kPlainText, "not found: this server has /metrics and /healthz\n");
}

void MetricsHttpServer::Serve() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  auto drop = [&conns](size_t i) {
    close(conns[i].fd);
    conns[i] = std::move(conns.back());
    conns.pop_back();
  };
  for (;;) {
    int64_t now = NowMs();
    int timeout = -1;
    for (const Connection& c : conns) {
      const int64_t left = c.deadline_ms > now ? c.deadline_ms - now : 0;
      if (timeout < 0 || left < timeout) timeout = static_cast<int>(left);
    }
    fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    for (const Connection& c : conns) fds.push_back({c.fd, static_cast<short>(c.answering ? POLLOUT : POLLIN), 0});
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      break;  // cannot happen with valid descriptors; serve no more
    }
    if (fds[0].revents != 0) break;  // Stop()
    now = NowMs();
    // Work on the connections polled (new ones are appended after them, and
    // `drop` moves the last one into a freed place: walk down).
    for (size_t i = fds.size() - 2; i-- > 0;) {
      Connection& c = conns[i];
      const short ready = fds[i + 2].revents;
      if (ready == 0) continue;
      if (!c.answering) {
        char buf[1024];
        const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          drop(i);
          continue;
        }
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
        const bool whole = c.in.find("\r\n\r\n") != std::string::npos;
        if (!whole && c.in.size() <= kMaxRequestBytes) continue;
        c.out = whole && c.in.find("\r\n\r\n") < kMaxRequestBytes
                    ? Answer(c.in)
                    : Response(431, "Request Header Fields Too Large", kPlainText, "requests here are at most 4 KiB\n");
        c.answering = true;
        c.deadline_ms = now + options_.response_deadline_ms;
      }
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) c.sent += static_cast<size_t>(n);
      if (c.sent == c.out.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) drop(i);
    }
    for (size_t i = conns.size(); i-- > 0;) {
      if (conns[i].deadline_ms <= now) drop(i);
    }
    if (fds[1].revents & POLLIN) {
      for (int fd; (fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        if (!conns.empty() && static_cast<int>(conns.size()) >= options_.max_connections) {
          size_t oldest = 0;  // the one closest to its deadline makes room
          for (size_t i = 1; i < conns.size(); ++i) {
            if (conns[i].deadline_ms < conns[oldest].deadline_ms) oldest = i;
          }
          drop(oldest);
        }
        conns.push_back({fd, now + options_.request_deadline_ms, {}, {}, 0, false});
      }
    }
  }
  for (Connection& c : conns) close(c.fd);
}

}  // namespace gpuslice::metrics
