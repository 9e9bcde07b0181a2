// http_server.h — serves a Registry over HTTP: GET /metrics (the text
// format) and GET /healthz, on one background thread.
//
// Binds loopback by default; an address that is not loopback is refused
// unless `allow_remote` (a metrics endpoint tells anyone who can reach it
// which workloads run here). Start() binds synchronously, so a busy port or a
// bad address comes back as a Status naming it, then serves on a thread it
// starts; Stop() (or the destructor) ends that thread and waits for it.
//
// Why its own small server: a client that sends half a request and then
// nothing, or a byte at a time, must not keep scrapes waiting. With a pool of
// blocking workers (cpp-httplib's), 64 such connections kept /metrics from
// answering for over 10 s. Here one thread polls every connection without
// blocking; each must send its whole request within `request_deadline_ms`
// of being accepted, and be written to within a deadline too, or it is
// closed. Beyond `max_connections`, the connection closest to its deadline
// is closed to make room. Each connection carries one request (HTTP/1.0 or
// 1.1, `Connection: close`); requests over 4 KiB are refused.
//
// Threads: Start() and Stop() from one owning thread (the daemon's main).
// Requests are served on the server's thread; it calls Registry::Render()
// and the health check. Start() blocks only while binding.
#ifndef GPUSLICE_METRICS_HTTP_SERVER_H_
#define GPUSLICE_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "core/status.h"
#include "metrics/registry.h"

namespace gpuslice::metrics {

struct HttpServerOptions {
  std::string address = "127.0.0.1:9400";  // host:port or [v6]:port; port 0 = any free port
  bool allow_remote = false;
  // /healthz answers 200 "ok" when this returns OK (or is unset), else 503
  // with the message. Runs on the server thread.
  std::function<Status()> health_check;
  // A connection's time to send its request, and then to take the answer.
  int request_deadline_ms = 2000;
  int response_deadline_ms = 5000;
  int max_connections = 128;
};

class MetricsHttpServer {
 public:
  // `registry` must outlive the server.
  MetricsHttpServer(Registry* registry, HttpServerOptions options);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Validates the address, binds it and starts serving. Errors: a malformed
  // address, a non-loopback one without allow_remote, a port in use (named),
  // already started.
  Status Start();
  // Stops serving and joins the thread. Idempotent.
  void Stop();

  // The bound port (the real one when asked for port 0); 0 before Start().
  uint16_t port() const { return port_; }
  // "127.0.0.1:9400", with the bound port.
  std::string bound_address() const;

 private:
  void Serve();
  // The whole answer to one request (its head ends in a blank line).
  std::string Answer(const std::string& request);

  Registry* const registry_;
  const HttpServerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: Stop() writes it
  std::thread thread_;
  std::string host_;
  uint16_t port_ = 0;
};

}  // namespace gpuslice::metrics

#endif  // GPUSLICE_METRICS_HTTP_SERVER_H_
