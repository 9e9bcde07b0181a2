// kube_api.h — the few Kubernetes API calls gpuslice makes, as an interface:
// the real client (kube_http_client.h) speaks HTTPS to the API server; tests
// stand a fake API server (or a fake of this interface) in its place.
//
// Objects come back as the API server's JSON. Every error is one line naming
// the call, the HTTP status and the server's message, and the likely fix
// (RBAC, connectivity). Implementations are thread-safe; calls block on the
// network (bounded by the client's timeouts) and allocate.
#ifndef GPUSLICE_K8S_KUBE_API_H_
#define GPUSLICE_K8S_KUBE_API_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace gpuslice::k8s {

class KubeApi {
 public:
  virtual ~KubeApi() = default;

  virtual StatusOr<nlohmann::json> GetPod(const std::string& namespace_name, const std::string& name) = 0;
  // Every pod whose spec.nodeName is `node`: the items of a PodList.
  virtual StatusOr<nlohmann::json> ListPodsOnNode(const std::string& node) = 0;
  virtual StatusOr<nlohmann::json> GetNode(const std::string& name) = 0;
  // JSON merge patches of metadata.annotations (an empty value is written
  // as an empty string, not removed).
  virtual Status AnnotatePod(const std::string& namespace_name, const std::string& name,
                             const std::map<std::string, std::string>& annotations) = 0;
  virtual Status AnnotateNode(const std::string& name, const std::map<std::string, std::string>& annotations) = 0;
  // Creates the pod's Binding to `node` (what kube-scheduler's own bind does).
  virtual Status BindPod(const std::string& namespace_name, const std::string& name, const std::string& uid,
                         const std::string& node) = 0;

  // resource.k8s.io/v1, for the DRA driver (src/k8s/dra). They default to an
  // error so that implementations serving only pods and nodes need not
  // define them.
  virtual StatusOr<nlohmann::json> GetResourceClaim(const std::string& namespace_name, const std::string& name) {
    return Status::Error("kube API: ResourceClaims (" + namespace_name + "/" + name + ") are not served by this client");
  }
  // Creates the cluster-scoped ResourceSlice metadata.name, or replaces the
  // existing one (carrying over its resourceVersion). Returns the stored object.
  virtual StatusOr<nlohmann::json> ApplyResourceSlice(const nlohmann::json& slice) {
    (void)slice;
    return Status::Error("kube API: ResourceSlices are not served by this client");
  }
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_KUBE_API_H_
