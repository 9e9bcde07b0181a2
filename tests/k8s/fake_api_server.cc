#include "fake_api_server.h"

#include <httplib.h>

#include <chrono>

#include "test_certs.h"

namespace gpuslice::k8s::testing {

using nlohmann::json;

namespace {

json StatusObject(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void Send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

}  // namespace

FakeApiServer::FakeApiServer(Options options) : options_(std::move(options)) {
  if (options_.tls) {
    const TestCertificate cert = MakeSelfSignedCertificate(options_.cert_dir);
    server_ = std::make_unique<httplib::SSLServer>(cert.cert_file.c_str(), cert.key_file.c_str());
    ca_file_ = cert.cert_file;
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& s = *server_;

  // Every request: record, authenticate, inject failures.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const std::string line = req.method + " " + req.path;
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(line);
    if (!options_.token.empty() && req.get_header_value("Authorization") != "Bearer " + options_.token) {
      Send(res, 401, StatusObject(401, "Unauthorized", "Unauthorized"));
      return httplib::Server::HandlerResponse::Handled;
    }
    for (auto it = fail_next_.begin(); it != fail_next_.end(); ++it) {
      if (line.rfind(it->first, 0) == 0) {
        const int status = it->second;
        fail_next_.erase(it);
        Send(res, status, StatusObject(status, "InjectedFailure", "injected failure for " + line));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  s.Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
    if (it == pods_.end()) {
      return Send(res, 404, StatusObject(404, "NotFound", "pods \"" + req.matches[2].str() + "\" not found"));
    }
    Send(res, 200, it->second);
  });
  s.Get("/api/v1/pods", [this](const httplib::Request& req, httplib::Response& res) {
    std::string node;
    const std::string selector = req.get_param_value("fieldSelector");
    if (selector.rfind("spec.nodeName=", 0) == 0) node = selector.substr(14);
    std::lock_guard<std::mutex> lock(mu_);
    json items = json::array();
    for (const auto& [key, pod] : pods_) {
      if (node.empty() || pod["spec"].value("nodeName", "") == node) items.push_back(pod);
    }
    Send(res, 200, {{"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"items", items}});
  });
  s.Get(R"(/api/v1/nodes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = nodes_.find(req.matches[1].str());
    if (it == nodes_.end()) {
      return Send(res, 404, StatusObject(404, "NotFound", "nodes \"" + req.matches[1].str() + "\" not found"));
    }
    Send(res, 200, it->second);
  });
  auto patch = [this](std::map<std::string, json>& objects, const std::string& key, const std::string& kind,
                      const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Content-Type") != "application/merge-patch+json") {
      return Send(res, 415, StatusObject(415, "UnsupportedMediaType", "only merge patches are served"));
    }
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return Send(res, 400, StatusObject(400, "BadRequest", "the patch is not a JSON object"));
    }
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = objects.find(key);
    if (it == objects.end()) return Send(res, 404, StatusObject(404, "NotFound", kind + " \"" + key + "\" not found"));
    it->second.merge_patch(body);
    Send(res, 200, it->second);
  };
  s.Patch(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
          [this, patch](const httplib::Request& req, httplib::Response& res) {
            patch(pods_, req.matches[1].str() + "/" + req.matches[2].str(), "pods", req, res);
          });
  s.Patch(R"(/api/v1/nodes/([^/]+))", [this, patch](const httplib::Request& req, httplib::Response& res) {
    patch(nodes_, req.matches[1].str(), "nodes", req, res);
  });
  s.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
         [this](const httplib::Request& req, httplib::Response& res) {
           const json body = json::parse(req.body, nullptr, false);
           if (body.is_discarded() || body.value("kind", "") != "Binding" || !body.contains("target")) {
             return Send(res, 400, StatusObject(400, "BadRequest", "not a Binding"));
           }
           std::lock_guard<std::mutex> lock(mu_);
           const auto it = pods_.find(req.matches[1].str() + "/" + req.matches[2].str());
           if (it == pods_.end()) return Send(res, 404, StatusObject(404, "NotFound", "pods not found"));
           json& pod = it->second;
           if (body["metadata"].contains("uid") && body["metadata"]["uid"] != pod["metadata"].value("uid", "")) {
             return Send(res, 409, StatusObject(409, "Conflict", "Precondition failed: UID mismatch"));
           }
           if (!pod["spec"].value("nodeName", "").empty()) {
             return Send(res, 409, StatusObject(409, "Conflict", "pod is already assigned to a node"));
           }
           pod["spec"]["nodeName"] = body["target"].value("name", "");
           Send(res, 201, StatusObject(201, "", "Success"));
         });

  s.Get(R"(/apis/resource.k8s.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+))",
        [this](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          const auto it = claims_.find(req.matches[1].str() + "/" + req.matches[2].str());
          if (it == claims_.end()) {
            return Send(res, 404,
                        StatusObject(404, "NotFound", "resourceclaims \"" + req.matches[2].str() + "\" not found"));
          }
          Send(res, 200, it->second);
        });
  s.Get(R"(/apis/resource.k8s.io/v1/resourceslices/([^/]+))",
        [this](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          const auto it = slices_.find(req.matches[1].str());
          if (it == slices_.end()) {
            return Send(res, 404,
                        StatusObject(404, "NotFound", "resourceslices \"" + req.matches[1].str() + "\" not found"));
          }
          Send(res, 200, it->second);
        });
  auto store_slice = [this](const std::string& name, bool create, const httplib::Request& req,
                            httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || body.value("kind", "") != "ResourceSlice" || !body.contains("spec")) {
      return Send(res, 400, StatusObject(400, "BadRequest", "not a ResourceSlice"));
    }
    const std::string body_name = body["metadata"].value("name", "");
    if (!create && body_name != name) return Send(res, 400, StatusObject(400, "BadRequest", "name mismatch"));
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = slices_.find(body_name);
    if (create && it != slices_.end()) return Send(res, 409, StatusObject(409, "AlreadyExists", "exists"));
    if (!create) {
      if (it == slices_.end()) return Send(res, 404, StatusObject(404, "NotFound", "resourceslices not found"));
      if (body["metadata"].value("resourceVersion", "") != it->second["metadata"].value("resourceVersion", "")) {
        return Send(res, 409, StatusObject(409, "Conflict", "the object has been modified"));
      }
    }
    body["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    slices_[body_name] = body;
    Send(res, create ? 201 : 200, body);
  };
  s.Post("/apis/resource.k8s.io/v1/resourceslices",
         [store_slice](const httplib::Request& req, httplib::Response& res) { store_slice("", true, req, res); });
  s.Put(R"(/apis/resource.k8s.io/v1/resourceslices/([^/]+))",
        [store_slice](const httplib::Request& req, httplib::Response& res) {
          store_slice(req.matches[1].str(), false, req, res);
        });

  const int port = s.bind_to_any_port("127.0.0.1");
  url_ = std::string(options_.tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // listen_after_bind accepts only once running; wait for that (bounded).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

FakeApiServer::~FakeApiServer() {
  server_->stop();
  thread_.join();
}

void FakeApiServer::PutPod(const json& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[pod["metadata"].value("namespace", "default") + "/" + pod["metadata"]["name"].get<std::string>()] = pod;
}

void FakeApiServer::PutNode(const json& node) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[node["metadata"]["name"].get<std::string>()] = node;
}

void FakeApiServer::DeletePod(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_.erase(ns + "/" + name);
}

void FakeApiServer::PutResourceClaim(const json& claim) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_[claim["metadata"].value("namespace", "default") + "/" + claim["metadata"]["name"].get<std::string>()] = claim;
}

json FakeApiServer::ResourceSlice(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = slices_.find(name);
  return it == slices_.end() ? json() : it->second;
}

json FakeApiServer::Pod(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = pods_.find(ns + "/" + name);
  return it == pods_.end() ? json() : it->second;
}

json FakeApiServer::Node(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = nodes_.find(name);
  return it == nodes_.end() ? json() : it->second;
}

std::string FakeApiServer::NodeAnnotation(const std::string& node, const std::string& key) const {
  const json n = Node(node);
  if (n.is_null() || !n["metadata"].contains("annotations")) return "";
  return n["metadata"]["annotations"].value(key, "");
}

std::vector<std::string> FakeApiServer::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeApiServer::FailNext(const std::string& prefix, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_[prefix] = status;
}

}  // namespace gpuslice::k8s::testing
