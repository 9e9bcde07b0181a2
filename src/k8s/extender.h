// extender.h — kube-scheduler's extender protocol for gpuslice: filter,
// prioritize and bind, from request body to response body. The HTTP server
// (extender_server.h) only routes to these.
//
// Wire shapes are k8s.io/kube-scheduler/extender/v1's Go types, encoded by
// Go's encoding/json without tags, so keys are the Go field names ("Pod",
// "Nodes", "NodeNames", "FailedNodes", "Host", "Score", "PodName", ...);
// keys are matched case-insensitively on input, as Go does.
//
//   filter      ExtenderArgs -> ExtenderFilterResult: nodes whose GPUs fit
//               every gpuslice container of the pod.
//   prioritize  ExtenderArgs -> HostPriorityList: 0..10, from the allocator's
//               score (packing policy; for multi-GPU containers, the links);
//               0 where an LC pod's declared p99 SLO would break (lc_slo.h).
//   bind        ExtenderBindingArgs -> ExtenderBindingResult: chooses the
//               GPUs, records them in the pod's gpuslice.io/gpus annotation
//               (with gpuslice.io/node and gpuslice.io/bind-time), then
//               creates the pod's Binding.
//
// A body that is not the protocol's JSON is answered 400 with the reason. A
// pod whose gpuslice request is invalid is answered 200 with "Error" set, so
// that the scheduler reports the reason on the pod.
//
// Thread-safe: handlers run on the HTTP server's threads; binds are
// serialised (each re-checks capacity with what earlier binds reserved).
// Handlers block on the Kubernetes API (bind; filter with NodeNames) and
// allocate.
#ifndef GPUSLICE_K8S_EXTENDER_H_
#define GPUSLICE_K8S_EXTENDER_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "k8s/allocator.h"
#include "k8s/assumed_reservations.h"
#include "k8s/kube_api.h"
#include "port/mutex.h"

namespace gpuslice::k8s {

struct ExtenderConfig {
  PackingPolicy policy = PackingPolicy::kBinpack;
  // How long a bound pod's GPUs stay reserved if its node never reports it.
  std::chrono::seconds reservation_ttl{600};
};

struct HttpReply {
  int status = 200;
  std::string body;  // JSON
};

class Extender {
 public:
  using Clock = AssumedReservations::Clock;

  // `api` may be null: then bind, and filter by NodeNames, answer with an
  // error naming the missing --kube-api-url.
  Extender(ExtenderConfig config, KubeApi* api, std::function<Clock::time_point()> now = Clock::now);

  HttpReply Filter(std::string_view body);
  HttpReply Prioritize(std::string_view body);
  HttpReply Bind(std::string_view body) EXCLUDES(bind_mu_);

  const AssumedReservations& reservations() const { return reservations_; }

 private:
  ExtenderConfig config_;
  KubeApi* api_;
  std::function<Clock::time_point()> now_;
  AssumedReservations reservations_;
  port::Mutex bind_mu_;  // one bind at a time
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_EXTENDER_H_
