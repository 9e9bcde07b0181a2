// http_server.h — serves a Registry over HTTP: GET /metrics (the text
// format) and GET /healthz, with cpp-httplib, on one background thread.
//
// Binds loopback by default; an address that is not loopback is refused
// unless `allow_remote` (a metrics endpoint tells anyone who can reach it
// which workloads run here). Start() binds synchronously, so a busy port or a
// bad address comes back as a Status naming it, then serves on a thread it
// starts; Stop() (or the destructor) ends that thread and waits for it.
//
// Threads: Start() and Stop() from one owning thread (the daemon's main).
// Requests are served on the server's threads; they call Registry::Render()
// and the health check there. Start() blocks only while binding.
#ifndef GPUSLICE_METRICS_HTTP_SERVER_H_
#define GPUSLICE_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "metrics/registry.h"

namespace httplib {
class Server;
}

namespace gpuslice::metrics {

struct HttpServerOptions {
  std::string address = "127.0.0.1:9400";  // host:port or [v6]:port; port 0 = any free port
  bool allow_remote = false;
  // /healthz answers 200 "ok" when this returns OK (or is unset), else 503
  // with the message. Runs on a server thread.
  std::function<Status()> health_check;
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
  Registry* const registry_;
  const HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  uint16_t port_ = 0;
};

}  // namespace gpuslice::metrics

#endif  // GPUSLICE_METRICS_HTTP_SERVER_H_
