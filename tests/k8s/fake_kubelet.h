// fake_kubelet.h — the kubelet's side of the device-plugin protocol, for
// tests: serves Registration on <plugin dir>/kubelet.sock, records each
// Register, and dials plugins back the way the kubelet does. Stop() can
// empty the directory as a restarting kubelet does (plugin sockets included).
//
// Thread-safe. Start/Stop block until the server is up/down.
#ifndef GPUSLICE_TESTS_K8S_FAKE_KUBELET_H_
#define GPUSLICE_TESTS_K8S_FAKE_KUBELET_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace gpuslice::k8s::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string plugin_dir);
  ~FakeKubelet();

  void Start();
  // Stops serving and removes kubelet.sock; with `wipe_directory`, also every
  // other socket in the directory, as the kubelet's device manager does when
  // it starts again.
  void Stop(bool wipe_directory);

  std::vector<v1beta1::RegisterRequest> Registrations() const;
  bool WaitForRegistrations(size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;

  // A client of the plugin serving `endpoint` (a file name in the directory).
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Dial(const std::string& endpoint) const;

 private:
  class Service;
  std::string dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::vector<v1beta1::RegisterRequest> registrations_;
};

// One ListAndWatch stream, read with a bound on the whole stream's life.
class DeviceStream {
 public:
  DeviceStream(v1beta1::DevicePlugin::Stub* stub, std::chrono::seconds lifetime = std::chrono::seconds(60));
  ~DeviceStream();
  // The next list the plugin sends; false when the stream ended.
  bool Next(v1beta1::ListAndWatchResponse* response);

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader_;
};

// Counts of (healthy, unhealthy) devices in a list, per GPU UUID prefix.
struct HealthCount {
  int healthy = 0;
  int unhealthy = 0;
};
HealthCount CountHealth(const v1beta1::ListAndWatchResponse& list, const std::string& uuid_prefix = "");

}  // namespace gpuslice::k8s::testing

#endif  // GPUSLICE_TESTS_K8S_FAKE_KUBELET_H_
