#include "k8s/kube_http_client.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "k8s/object_names.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;

std::string ReadTrimmed(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = static_cast<bool>(in);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// A namespaced object's names, checked before they go into a path.
Status CheckNamespaced(const std::string& what, const std::string& ns, const std::string& name) {
  if (Status s = CheckLabelName("namespace", ns); !s.ok()) return s;
  return CheckSubdomainName(what, name);
}

bool FileExists(const std::string& path) {
  std::ifstream in(path);
  return static_cast<bool>(in);
}

class KubeHttpClient final : public KubeApi {
 public:
  explicit KubeHttpClient(KubeClientConfig config) : config_(std::move(config)) {}

  // Every name is checked before it goes into a path or query
  // (object_names.h): none may lead the token to another object.
  StatusOr<json> GetPod(const std::string& ns, const std::string& name) override {
    if (Status s = CheckNamespaced("pod name", ns, name); !s.ok()) return s;
    return Call("GET", "/api/v1/namespaces/" + ns + "/pods/" + name, "", "");
  }

  StatusOr<json> ListPodsOnNode(const std::string& node) override {
    if (Status s = CheckSubdomainName("node name", node); !s.ok()) return s;
    auto list = Call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node, "", "");
    if (!list.ok()) return list;
    const auto items = list->find("items");
    if (items == list->end() || !items->is_array()) return json::array();
    return *items;
  }

  StatusOr<json> GetNode(const std::string& name) override {
    if (Status s = CheckSubdomainName("node name", name); !s.ok()) return s;
    return Call("GET", "/api/v1/nodes/" + name, "", "");
  }

  Status AnnotatePod(const std::string& ns, const std::string& name,
                     const std::map<std::string, std::string>& annotations) override {
    if (Status s = CheckNamespaced("pod name", ns, name); !s.ok()) return s;
    json patch = {{"metadata", {{"annotations", annotations}}}};
    auto r = Call("PATCH", "/api/v1/namespaces/" + ns + "/pods/" + name, patch.dump(), "application/merge-patch+json");
    return r.ok() ? Status::Ok() : r.status();
  }

  Status AnnotateNode(const std::string& name, const std::map<std::string, std::string>& annotations) override {
    if (Status s = CheckSubdomainName("node name", name); !s.ok()) return s;
    json patch = {{"metadata", {{"annotations", annotations}}}};
    auto r = Call("PATCH", "/api/v1/nodes/" + name, patch.dump(), "application/merge-patch+json");
    return r.ok() ? Status::Ok() : r.status();
  }

  Status BindPod(const std::string& ns, const std::string& name, const std::string& uid,
                 const std::string& node) override {
    if (Status s = CheckNamespaced("pod name", ns, name); !s.ok()) return s;
    if (Status s = CheckSubdomainName("node name", node); !s.ok()) return s;
    json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", name}, {"namespace", ns}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
    if (!uid.empty()) binding["metadata"]["uid"] = uid;
    auto r =
        Call("POST", "/api/v1/namespaces/" + ns + "/pods/" + name + "/binding", binding.dump(), "application/json");
    return r.ok() ? Status::Ok() : r.status();
  }

  StatusOr<json> GetResourceClaim(const std::string& ns, const std::string& name) override {
    if (Status s = CheckNamespaced("resource claim name", ns, name); !s.ok()) return s;
    return Call("GET", std::string(kResourceApi) + "/namespaces/" + ns + "/resourceclaims/" + name, "", "");
  }

  // GET, then POST (absent) or PUT with the stored resourceVersion: the API
  // server refuses a PUT that creates a ResourceSlice, and a PUT without
  // resourceVersion would overwrite a concurrent writer blindly.
  StatusOr<json> ApplyResourceSlice(const json& slice) override {
    const std::string name = slice.value("/metadata/name"_json_pointer, std::string());
    if (Status s = CheckSubdomainName("resource slice name", name); !s.ok()) return s;
    const std::string collection = std::string(kResourceApi) + "/resourceslices";
    auto existing = Call("GET", collection + "/" + name, "", "");
    if (!existing.ok()) {
      if (existing.status().message().find("HTTP 404") == std::string::npos) return existing.status();
      return Call("POST", collection, slice.dump(), "application/json");
    }
    json replacement = slice;
    replacement["metadata"]["resourceVersion"] =
        existing->value("/metadata/resourceVersion"_json_pointer, std::string());
    return Call("PUT", collection + "/" + name, replacement.dump(), "application/json");
  }

 private:
  static constexpr char kResourceApi[] = "/apis/resource.k8s.io/v1";

  StatusOr<json> Call(const std::string& method, const std::string& path, const std::string& body,
                      const std::string& content_type) {
    const std::string what = "kube API " + method + " " + path.substr(0, path.find('?'));
    httplib::Client client(config_.server);
    if (!client.is_valid()) {
      return Status::Error(what + ": cannot use API server address \"" + config_.server +
                           "\"; pass --kube-api-url https://HOST:PORT");
    }
    client.set_connection_timeout(std::chrono::milliseconds(config_.connect_timeout_ms));
    client.set_read_timeout(std::chrono::milliseconds(config_.read_timeout_ms));
    client.set_write_timeout(std::chrono::milliseconds(config_.read_timeout_ms));
    if (!config_.ca_file.empty()) client.set_ca_cert_path(config_.ca_file);
    client.enable_server_certificate_verification(true);
    if (!config_.token_file.empty()) {
      bool ok = false;
      const std::string token = ReadTrimmed(config_.token_file, &ok);
      if (!ok || token.empty()) {
        return Status::Error(what + ": cannot read the service-account token " + config_.token_file +
                             "; mount the service account or pass --kube-token-file");
      }
      client.set_bearer_token_auth(token);
    }
    httplib::Headers headers = {{"Accept", "application/json"}, {"User-Agent", "gpuslice"}};
    httplib::Result result = method == "GET"     ? client.Get(path, headers)
                             : method == "PATCH" ? client.Patch(path, headers, body, content_type)
                             : method == "PUT"   ? client.Put(path, headers, body, content_type)
                                                 : client.Post(path, headers, body, content_type);
    if (!result) {
      return Status::Error(what + ": no answer from " + config_.server + " (" + httplib::to_string(result.error()) +
                           "); check the address, the CA file and network policy");
    }
    json answer = json::parse(result->body, nullptr, false);
    if (result->status < 200 || result->status >= 300) {
      std::string message = result->body.substr(0, 300);
      if (!answer.is_discarded() && answer.is_object() && answer.contains("message") && answer["message"].is_string()) {
        message = answer["message"].get<std::string>();
      }
      std::string fix;
      if (result->status == 401) fix = "; the token was refused: check the service account";
      if (result->status == 403) fix = "; grant it in the gpuslice ClusterRole (deploy/k8s/rbac.yaml)";
      if (result->status == 404) fix = "; the object does not exist (deleted meanwhile?)";
      if (result->status == 409) fix = "; the object changed or is already bound: retry";
      return Status::Error(what + ": HTTP " + std::to_string(result->status) + ": " + message + fix);
    }
    if (answer.is_discarded()) return Status::Error(what + ": the API server answered with something that is not JSON");
    return answer;
  }

  KubeClientConfig config_;
};

}  // namespace

Status CompleteFromCluster(KubeClientConfig& config) {
  if (config.server.empty()) {
    const char* host = getenv("KUBERNETES_SERVICE_HOST");
    const char* port = getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') {
      return Status::Error(
          "no Kubernetes API server: KUBERNETES_SERVICE_HOST is not set (not running in a pod?); "
          "pass --kube-api-url https://HOST:PORT");
    }
    std::string h = host;
    if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
    config.server = "https://" + h + ":" + (port != nullptr && *port != '\0' ? port : "443");
  }
  const std::string sa = kServiceAccountDir;
  if (config.token_file.empty() && FileExists(sa + "/token")) config.token_file = sa + "/token";
  if (config.ca_file.empty() && FileExists(sa + "/ca.crt")) config.ca_file = sa + "/ca.crt";
  return Status::Ok();
}

std::unique_ptr<KubeApi> NewKubeHttpClient(const KubeClientConfig& config) {
  return std::make_unique<KubeHttpClient>(config);
}

}  // namespace gpuslice::k8s
