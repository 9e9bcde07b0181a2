#include "k8s/extender_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "config/listen_address.h"

namespace gpuslice::k8s {

struct ExtenderServer::Impl {
  httplib::Server server;
  std::thread thread;
};

StatusOr<std::unique_ptr<ExtenderServer>> ExtenderServer::Start(const ExtenderServerConfig& config,
                                                                Extender* extender) {
  auto address = config::ParseListenAddress(config.listen);
  if (!address.ok()) return Status::Error("--listen: " + address.status().message());
  if (!config::IsLoopbackHost(address->host) && !config.allow_remote) {
    return Status::Error("--listen " + config.listen +
                         " is not a loopback address and the extender protocol has no authentication; run the "
                         "extender beside kube-scheduler on 127.0.0.1, or pass --allow-remote");
  }
  std::string prefix = config.url_prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix[0] != '/') prefix = "/" + prefix;

  std::unique_ptr<ExtenderServer> self(new ExtenderServer());
  self->impl_ = std::make_unique<Impl>();
  httplib::Server& server = self->impl_->server;
  server.set_payload_max_length(config.max_body_bytes);
  using Handler = HttpReply (Extender::*)(std::string_view);
  for (auto [verb, handler] : {std::pair<const char*, Handler>{"/filter", &Extender::Filter},
                               std::pair<const char*, Handler>{"/prioritize", &Extender::Prioritize},
                               std::pair<const char*, Handler>{"/bind", &Extender::Bind}}) {
    server.Post(prefix + verb, [extender, handler = handler](const httplib::Request& req, httplib::Response& res) {
      const HttpReply reply = (extender->*handler)(req.body);
      res.status = reply.status;
      res.set_content(reply.body, "application/json");
    });
  }
  server.Get("/healthz",
             [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });

  int port = address->port;
  if (port == 0) {
    port = server.bind_to_any_port(address->host);
  } else if (!server.bind_to_port(address->host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return Status::Error("cannot listen on " + config.listen + " (in use, or not an address of this host)");
  }
  self->port_ = static_cast<uint16_t>(port);
  self->impl_->thread = std::thread([&server] { server.listen_after_bind(); });
  spdlog::info("listening on {}:{}{}", address->host, port, prefix);
  return self;
}

void ExtenderServer::Stop() {
  if (impl_ == nullptr) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

ExtenderServer::~ExtenderServer() { Stop(); }

}  // namespace gpuslice::k8s
