// kube_http_client.h — KubeApi over HTTPS (cpp-httplib with OpenSSL), the way
// a pod talks to its API server: a bearer token and the cluster CA from the
// service account, the server from KUBERNETES_SERVICE_HOST/PORT.
//
// The token file is re-read before each call: bound service-account tokens
// are rotated by the kubelet (hourly), and a cached one would expire.
//
// Thread-safe (each call makes its own connection). Calls block, bounded by
// the connect and read timeouts below, and allocate.
#ifndef GPUSLICE_K8S_KUBE_HTTP_CLIENT_H_
#define GPUSLICE_K8S_KUBE_HTTP_CLIENT_H_

#include <memory>
#include <string>

#include "k8s/kube_api.h"

namespace gpuslice::k8s {

struct KubeClientConfig {
  std::string server;      // "https://10.0.0.1:443"; http:// only for tests
  std::string token_file;  // empty: no Authorization header
  std::string ca_file;     // empty with https: the system's trust store
  int connect_timeout_ms = 5000;
  int read_timeout_ms = 15000;
};

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// Fills the empty fields of `config` from the in-cluster environment: the
// server from KUBERNETES_SERVICE_HOST/PORT, the token and CA from the service
// account directory. Errors name what is missing and the flag that replaces it.
Status CompleteFromCluster(KubeClientConfig& config);

std::unique_ptr<KubeApi> NewKubeHttpClient(const KubeClientConfig& config);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_KUBE_HTTP_CLIENT_H_
