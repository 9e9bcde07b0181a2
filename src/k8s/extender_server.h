// extender_server.h — the HTTP server in front of Extender (extender.h):
//   POST <prefix>/filter, <prefix>/prioritize, <prefix>/bind; GET /healthz.
//
// Listens on loopback unless told otherwise: the scheduler runs the extender
// as a sidecar and reaches it on 127.0.0.1. A non-loopback address needs
// allow_remote (the protocol has no authentication).
//
// Start() binds before returning, so a port-in-use error comes back as a
// Status; the server then runs on its own thread pool until Stop() or
// destruction. Stop() blocks until in-flight requests finish.
#ifndef GPUSLICE_K8S_EXTENDER_SERVER_H_
#define GPUSLICE_K8S_EXTENDER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "k8s/extender.h"

namespace gpuslice::k8s {

struct ExtenderServerConfig {
  std::string listen = "127.0.0.1:8900";  // host:port; port 0 picks a free one
  bool allow_remote = false;
  std::string url_prefix = "/gpuslice";  // the scheduler's urlPrefix path
  size_t max_body_bytes = 64u << 20;     // a NodeList of 5,000 nodes fits
};

class ExtenderServer {
 public:
  static StatusOr<std::unique_ptr<ExtenderServer>> Start(const ExtenderServerConfig& config, Extender* extender);
  ~ExtenderServer();
  uint16_t port() const { return port_; }
  void Stop();

 private:
  struct Impl;
  ExtenderServer() = default;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_EXTENDER_SERVER_H_
