#include "metrics/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "config/listen_address.h"

namespace gpuslice::metrics {

MetricsHttpServer::MetricsHttpServer(Registry* registry, HttpServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Start() {
  if (server_) return Status::Error("metrics server: already started");
  StatusOr<config::ListenAddress> addr = config::ParseListenAddress(options_.address);
  if (!addr.ok()) return Status::Error("metrics address: " + addr.status().message());
  if (!options_.allow_remote && !config::IsLoopbackHost(addr->host)) {
    return Status::Error("metrics address: \"" + options_.address +
                         "\" is not a loopback address; set metrics.allow_remote: true to serve other hosts, "
                         "or use 127.0.0.1:PORT");
  }
  auto server = std::make_unique<httplib::Server>();
  // httplib's default also sets SO_REUSEPORT, which would let a second
  // daemon bind the same port and steal half the scrapes; SO_REUSEADDR alone
  // still allows a restart while old connections sit in TIME_WAIT.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Scrapes come every few seconds from one or two Prometheus servers; two
  // workers are plenty and keep the daemon's thread count small.
  server->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server->set_read_timeout(5, 0);
  server->set_write_timeout(5, 0);
  server->set_payload_max_length(4096);  // only GETs come here
  server->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_->Render(), kTextFormatContentType);
  });
  server->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    const Status health = options_.health_check ? options_.health_check() : Status::Ok();
    res.status = health.ok() ? 200 : 503;
    res.set_content(health.ok() ? "ok\n" : health.message() + "\n", "text/plain; charset=utf-8");
  });

  errno = 0;
  int port = addr->port;
  bool bound = false;
  if (port == 0) {
    port = server->bind_to_any_port(addr->host);
    bound = port > 0;
  } else {
    bound = server->bind_to_port(addr->host, port);
  }
  if (!bound) {
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
  server_ = std::move(server);
  host_ = addr->host;
  port_ = static_cast<uint16_t>(port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() does nothing until the listen loop has marked itself
  // running, so Stop() right after Start() would hang in join; wait for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server_->is_running() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  if (!server_->is_running()) {
    Stop();
    return Status::Error("metrics server on " + bound_address() + ": the listener did not start within 5 s");
  }
  return Status::Ok();
}

void MetricsHttpServer::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  port_ = 0;
}

std::string MetricsHttpServer::bound_address() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

}  // namespace gpuslice::metrics
