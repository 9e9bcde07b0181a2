// fake_api_server.h — a Kubernetes API server for tests: pods and nodes held
// in memory, served over HTTP or HTTPS (cpp-httplib) on 127.0.0.1 with the
// few endpoints gpuslice uses:
//   GET   /api/v1/namespaces/NS/pods/NAME     GET /api/v1/pods?fieldSelector=spec.nodeName=N
//   GET   /api/v1/nodes/NAME
//   PATCH /api/v1/namespaces/NS/pods/NAME, /api/v1/nodes/NAME  (merge patches only)
//   POST  /api/v1/namespaces/NS/pods/NAME/binding
//   GET   /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME
//   GET   /apis/resource.k8s.io/v1/resourceslices/NAME, POST .../resourceslices,
//   PUT   .../resourceslices/NAME (resourceVersion must match: 409 otherwise)
// With a token set, requests without "Authorization: Bearer <token>" get 401.
// Errors are v1 Status objects, as the real server sends.
//
// Thread-safe: the server's threads and the test share one mutex.
#ifndef GPUSLICE_TESTS_K8S_FAKE_API_SERVER_H_
#define GPUSLICE_TESTS_K8S_FAKE_API_SERVER_H_

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace gpuslice::k8s::testing {

class FakeApiServer {
 public:
  struct Options {
    bool tls = false;
    std::string token;     // empty: no authentication
    std::string cert_dir;  // where the TLS certificate is written (tls only)
  };
  explicit FakeApiServer(Options options);
  ~FakeApiServer();

  std::string url() const { return url_; }
  std::string ca_file() const { return ca_file_; }

  void PutPod(const nlohmann::json& pod);
  void PutNode(const nlohmann::json& node);
  void DeletePod(const std::string& ns, const std::string& name);
  void PutResourceClaim(const nlohmann::json& claim);
  nlohmann::json ResourceSlice(const std::string& name) const;  // null when absent
  nlohmann::json Pod(const std::string& ns, const std::string& name) const;           // null when absent
  nlohmann::json Node(const std::string& name) const;                                 // null when absent
  std::string NodeAnnotation(const std::string& node, const std::string& key) const;  // "" when absent
  std::vector<std::string> Requests() const;                                          // "METHOD /path", in order
  // The next request whose "METHOD /path" starts with `prefix` fails with `status`.
  void FailNext(const std::string& prefix, int status);

 private:
  void Serve();
  Options options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string url_;
  std::string ca_file_;
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> pods_;  // "ns/name"
  std::map<std::string, nlohmann::json> nodes_;
  std::map<std::string, nlohmann::json> claims_;  // "ns/name"
  std::map<std::string, nlohmann::json> slices_;
  int64_t resource_version_ = 0;
  std::vector<std::string> requests_;
  std::map<std::string, int> fail_next_;
};

}  // namespace gpuslice::k8s::testing

#endif  // GPUSLICE_TESTS_K8S_FAKE_API_SERVER_H_
