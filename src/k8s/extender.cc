#include "k8s/extender.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "k8s/json_fields.h"
#include "k8s/lc_slo.h"
#include "k8s/names.h"
#include "k8s/node_view.h"
#include "k8s/object_names.h"
#include "k8s/pod_request.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;

constexpr int64_t kMaxExtenderPriority = 10;  // k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority

HttpReply Reply(const json& body) { return {200, body.dump()}; }
HttpReply BadRequest(const std::string& reason) { return {400, json{{"Error", reason}}.dump()}; }

// The parts of ExtenderArgs gpuslice reads. Protocol errors only: a pod or
// node whose gpuslice content is wrong is judged later, per pod or node.
struct ExtenderArgs {
  json pod;
  bool by_names = false;
  std::vector<json> nodes;         // when !by_names
  std::vector<std::string> names;  // node names, both ways
};

StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return Status::Error("the request body is not valid JSON");
  if (!doc.is_object()) return Status::Error("the request body must be a JSON object (ExtenderArgs)");
  ExtenderArgs args;
  const json* pod = JsonFields::FindKey(doc, "Pod");
  if (pod == nullptr || !pod->is_object()) return Status::Error("ExtenderArgs.Pod is missing or not an object");
  args.pod = *pod;
  const json* nodes = JsonFields::FindKey(doc, "Nodes");
  const json* names = JsonFields::FindKey(doc, "NodeNames");
  if (nodes != nullptr && !nodes->is_null()) {
    if (!nodes->is_object()) return Status::Error("ExtenderArgs.Nodes must be a NodeList object");
    const json* items = JsonFields::FindKey(*nodes, "items");
    if (items != nullptr && !items->is_null() && !items->is_array()) {
      return Status::Error("ExtenderArgs.Nodes.items must be an array");
    }
    for (size_t i = 0; items != nullptr && items->is_array() && i < items->size(); ++i) {
      const json& node = (*items)[i];
      const json* metadata = node.is_object() ? JsonFields::FindKey(node, "metadata") : nullptr;
      const json* name =
          metadata != nullptr && metadata->is_object() ? JsonFields::FindKey(*metadata, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return Status::Error("ExtenderArgs.Nodes.items[" + std::to_string(i) + "] has no metadata.name");
      }
      args.nodes.push_back(node);
      args.names.push_back(name->get<std::string>());
    }
    return args;
  }
  if (names != nullptr && !names->is_null()) {
    if (!names->is_array()) return Status::Error("ExtenderArgs.NodeNames must be an array of strings");
    for (const json& n : *names) {
      if (!n.is_string()) return Status::Error("ExtenderArgs.NodeNames must be an array of strings");
      args.names.push_back(n.get<std::string>());
    }
    args.by_names = true;
    return args;
  }
  return Status::Error("ExtenderArgs has neither Nodes nor NodeNames");
}

}  // namespace

Extender::Extender(ExtenderConfig config, KubeApi* api, std::function<Clock::time_point()> now)
    : config_(config), api_(api), now_(std::move(now)), reservations_(config.reservation_ttl) {}

namespace {

struct NodeVerdict {
  std::string name;
  bool fits = false;
  bool unresolvable = false;
  std::string reason;
  double score = 0;
  bool meets_lc_slo = true;  // where it would be placed (lc_slo.h)
};

}  // namespace

// Judges every candidate node for the pod. Shared by filter and prioritize.
static std::vector<NodeVerdict> JudgeNodes(const ExtenderArgs& args, const PodRequest& pod, KubeApi* api,
                                           AssumedReservations& reservations,
                                           AssumedReservations::Clock::time_point now, PackingPolicy policy) {
  std::vector<NodeVerdict> verdicts;
  for (size_t i = 0; i < args.names.size(); ++i) {
    NodeVerdict v;
    v.name = args.names[i];
    json fetched;
    const json* node = nullptr;
    if (args.by_names) {
      if (api == nullptr) {
        v.reason = "the extender has no Kubernetes API access to read node " + v.name +
                   "; set nodeCacheCapable: false in the scheduler's extender configuration, or pass --kube-api-url";
        verdicts.push_back(v);
        continue;
      }
      auto got = api->GetNode(v.name);
      if (!got.ok()) {
        v.reason = got.status().message();
        verdicts.push_back(v);
        continue;
      }
      fetched = std::move(*got);
      node = &fetched;
    } else {
      node = &args.nodes[i];
    }
    auto view = ReadNodeView(*node, &v.unresolvable);
    if (!view.ok()) {
      v.reason = view.status().message();
      verdicts.push_back(v);
      continue;
    }
    reservations.ApplyTo(view->name, view->usage, view->gpus, now);
    auto placement = PlacePod(view->gpus, &view->topology, pod, policy);
    if (!placement.ok()) {
      v.reason = "node " + v.name + ": " + placement.status().message();
      verdicts.push_back(v);
      continue;
    }
    v.fits = true;
    v.score = placement->score;
    v.meets_lc_slo = PlacementMeetsLcSlo(pod, view->gpus, *placement);
    verdicts.push_back(v);
  }
  return verdicts;
}

HttpReply Extender::Filter(std::string_view body) {
  auto args = ParseExtenderArgs(body);
  if (!args.ok()) return BadRequest(args.status().message());
  json result = {{"Nodes", nullptr},
                 {"NodeNames", nullptr},
                 {"FailedNodes", json::object()},
                 {"FailedAndUnresolvableNodes", json::object()},
                 {"Error", ""}};
  auto pass_all = [&] {
    if (args->by_names) {
      result["NodeNames"] = args->names;
    } else {
      result["Nodes"] = {
          {"apiVersion", "v1"}, {"kind", "NodeList"}, {"metadata", json::object()}, {"items", args->nodes}};
    }
  };
  auto pod = ParsePodRequest(args->pod);
  if (!pod.ok()) {
    result["Error"] = pod.status().message();
    return Reply(result);
  }
  if (!pod->wants_gpuslice()) {
    pass_all();
    return Reply(result);
  }
  const auto verdicts = JudgeNodes(*args, *pod, api_, reservations_, now_(), config_.policy);
  json items = json::array();
  json names = json::array();
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const NodeVerdict& v = verdicts[i];
    if (v.fits) {
      if (!args->by_names) items.push_back(args->nodes[i]);
      names.push_back(v.name);
    } else {
      result[v.unresolvable ? "FailedAndUnresolvableNodes" : "FailedNodes"][v.name] = v.reason;
    }
  }
  if (args->by_names) {
    result["NodeNames"] = names;
  } else {
    result["Nodes"] = {{"apiVersion", "v1"}, {"kind", "NodeList"}, {"metadata", json::object()}, {"items", items}};
  }
  return Reply(result);
}

HttpReply Extender::Prioritize(std::string_view body) {
  auto args = ParseExtenderArgs(body);
  if (!args.ok()) return BadRequest(args.status().message());
  json list = json::array();
  auto pod = ParsePodRequest(args->pod);
  if (!pod.ok() || !pod->wants_gpuslice()) {
    for (const std::string& name : args->names) list.push_back({{"Host", name}, {"Score", 0}});
    return Reply(list);
  }
  for (const NodeVerdict& v : JudgeNodes(*args, *pod, api_, reservations_, now_(), config_.policy)) {
    // A node where the LC pod's predicted p99 breaks its SLO ranks last
    // among those that fit; it is not filtered out (the prediction is a
    // model's, docs/plan.md).
    const int64_t score = v.fits && v.meets_lc_slo ? std::llround(v.score * kMaxExtenderPriority) : 0;
    list.push_back({{"Host", v.name}, {"Score", std::clamp<int64_t>(score, 0, kMaxExtenderPriority)}});
  }
  return Reply(list);
}

HttpReply Extender::Bind(std::string_view body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return BadRequest("the request body is not valid JSON");
  if (!doc.is_object()) return BadRequest("the request body must be a JSON object (ExtenderBindingArgs)");
  std::string pod_name, pod_namespace, pod_uid, node;
  JsonFields f(doc, "ExtenderBindingArgs");
  for (auto [key, out] : {std::pair{"PodName", &pod_name}, std::pair{"Node", &node}}) {
    if (Status s = f.RequiredString(key, out); !s.ok()) return BadRequest(s.message());
  }
  if (Status s = f.OptionalString("PodNamespace", &pod_namespace); !s.ok()) return BadRequest(s.message());
  if (Status s = f.OptionalString("PodUID", &pod_uid); !s.ok()) return BadRequest(s.message());
  if (pod_name.empty() || node.empty()) return BadRequest("ExtenderBindingArgs.PodName and .Node must not be empty");
  if (pod_namespace.empty()) pod_namespace = "default";
  // The names go into API paths with the extender's token (object_names.h).
  for (const Status& s : {CheckLabelName("ExtenderBindingArgs.PodNamespace", pod_namespace),
                          CheckSubdomainName("ExtenderBindingArgs.PodName", pod_name),
                          CheckSubdomainName("ExtenderBindingArgs.Node", node)}) {
    if (!s.ok()) return BadRequest(s.message());
  }
  const std::string who = "pod " + pod_namespace + "/" + pod_name;
  auto fail = [](const std::string& message) { return Reply(json{{"Error", message}}); };
  if (api_ == nullptr) {
    return fail("the extender cannot bind " + who +
                " without Kubernetes API access; pass --kube-api-url (in a pod it is found automatically)");
  }

  port::MutexLock lock(&bind_mu_);
  auto pod_json = api_->GetPod(pod_namespace, pod_name);
  if (!pod_json.ok()) return fail(pod_json.status().message());
  auto pod = ParsePodRequest(*pod_json);
  if (!pod.ok()) return fail(pod.status().message());
  if (!pod_uid.empty() && !pod->uid.empty() && pod->uid != pod_uid) {
    return fail(who + " was replaced (UID " + pod->uid + ", the scheduler asked for " + pod_uid + ")");
  }
  bool reserved = false;
  if (pod->wants_gpuslice()) {
    auto node_json = api_->GetNode(node);
    if (!node_json.ok()) return fail(node_json.status().message());
    bool unresolvable = false;
    auto view = ReadNodeView(*node_json, &unresolvable);
    if (!view.ok()) return fail(view.status().message());
    reservations_.ApplyTo(view->name, view->usage, view->gpus, now_());
    auto placement = PlacePod(view->gpus, &view->topology, *pod, config_.policy);
    if (!placement.ok()) return fail("cannot bind " + who + " to node " + node + ": " + placement.status().message());
    reservations_.Add(*pod, node, *placement, now_());
    reserved = true;
    const auto bind_time =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    Status s = api_->AnnotatePod(pod_namespace, pod_name,
                                 {{kGpusAnnotation, BoundGpusToJson(placement->gpus)},
                                  {kBindNodeAnnotation, node},
                                  {kBindTimeAnnotation, std::to_string(bind_time)}});
    if (!s.ok()) {
      reservations_.Remove(pod->uid);
      return fail(s.message());
    }
  }
  if (Status s = api_->BindPod(pod_namespace, pod_name, pod->uid, node); !s.ok()) {
    if (reserved) reservations_.Remove(pod->uid);
    return fail(s.message());
  }
  return Reply(json{{"Error", ""}});
}

}  // namespace gpuslice::k8s
