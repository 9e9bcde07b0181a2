// The scheduler extender: kube-scheduler-shaped request bodies (fixtures) in,
// ExtenderFilterResult / HostPriorityList / ExtenderBindingResult out; bind
// against a fake API server over HTTPS with a bearer token.
#include "k8s/extender.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "fake_api_server.h"
#include "k8s/extender_server.h"
#include "k8s/kube_http_client.h"
#include "k8s/names.h"
#include "k8s/node_usage.h"
#include "k8s/topology.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;
using testing::FixtureJson;
using testing::ReadFixture;
using testing::TempDir;

json Body(const HttpReply& reply) {
  EXPECT_EQ(reply.status, 200) << reply.body;
  return json::parse(reply.body);
}

std::vector<std::string> ItemNames(const json& result) {
  std::vector<std::string> names;
  for (const json& n : result["Nodes"]["items"]) names.push_back(n["metadata"]["name"]);
  return names;
}

std::map<std::string, int64_t> Scores(const json& list) {
  std::map<std::string, int64_t> scores;
  for (const json& h : list) scores[h["Host"]] = h["Score"];
  return scores;
}

// The scheduler's request with gpu-node-a described by the two-GPU NVLink
// fixture file itself (so that a captured topology dropped in its place is
// what these tests judge), with nothing allocated on it.
std::string TwoGpuArgs() {
  json args = FixtureJson("extender/filter_args_two_gpu_pod.json");
  const std::string topology = ReadFixture("devices-2gpu-nvlink.json");
  auto parsed = ParseTopology(topology);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  NodeUsage usage;
  usage.node = "gpu-node-a";
  for (const TopologyGpu& g : parsed->gpus) {
    usage.gpus.push_back({g.index, g.uuid, true, 0, 0, g.memory_total_bytes / kVmemoryUnitBytes});
  }
  json& annotations = args["Nodes"]["items"][0]["metadata"]["annotations"];
  EXPECT_EQ(args["Nodes"]["items"][0]["metadata"]["name"], "gpu-node-a");
  annotations[kTopologyAnnotation] = topology;
  annotations[kAllocatedAnnotation] = NodeUsageToJson(usage);
  return args.dump();
}

TEST(ExtenderFilter, TwoGpuPodOnFourKindsOfNode) {
  Extender extender({}, nullptr);
  const std::string args = TwoGpuArgs();
  const json result = Body(extender.Filter(args));
  EXPECT_EQ(result["Error"], "");
  EXPECT_TRUE(result["NodeNames"].is_null());
  EXPECT_EQ(ItemNames(result), (std::vector<std::string>{"gpu-node-a", "gpu-node-b"}));
  // Nodes that pass are handed back whole, as the scheduler sent them.
  EXPECT_EQ(result["Nodes"]["items"][0], json::parse(args)["Nodes"]["items"][0]);
  ASSERT_TRUE(result["FailedNodes"].contains("gpu-node-busy"));
  const std::string busy = result["FailedNodes"]["gpu-node-busy"];
  EXPECT_NE(busy.find("needs 2 GPU(s) with 100 vcore and 32 vmemory units free"), std::string::npos) << busy;
  EXPECT_NE(busy.find("GPU 1 50 vcore/"), std::string::npos) << busy;
  ASSERT_TRUE(result["FailedAndUnresolvableNodes"].contains("cpu-node"));
  EXPECT_NE(result["FailedAndUnresolvableNodes"]["cpu-node"].get<std::string>().find(
                "no gpuslice.io/topology annotation; run the gpuslice device plugin there"),
            std::string::npos);
}

TEST(ExtenderPrioritize, NvlinkBeatsPcieForTwoGpus) {
  Extender extender({}, nullptr);
  const json list = Body(extender.Prioritize(TwoGpuArgs()));
  ASSERT_TRUE(list.is_array());
  auto scores = Scores(list);
  ASSERT_EQ(scores.size(), 4u);  // every candidate gets a score
  EXPECT_GT(scores["gpu-node-a"], scores["gpu-node-b"]);
  EXPECT_EQ(scores["gpu-node-busy"], 0);
  EXPECT_EQ(scores["cpu-node"], 0);
  for (const auto& [host, score] : scores) {
    EXPECT_GE(score, 0) << host;
    EXPECT_LE(score, 10) << host;
  }
}

TEST(ExtenderPrioritize, BinpackAndSpreadDisagreeOnASharedGpu) {
  const std::string args = ReadFixture("extender/filter_args_shared_gpu_pod.json");
  Extender binpack({PackingPolicy::kBinpack}, nullptr);
  Extender spread({PackingPolicy::kSpread}, nullptr);
  auto packed = Scores(Body(binpack.Prioritize(args)));
  auto spreaded = Scores(Body(spread.Prioritize(args)));
  EXPECT_GT(packed["gpu-node-a"], packed["gpu-node-b"]);      // the fuller GPU
  EXPECT_GT(spreaded["gpu-node-b"], spreaded["gpu-node-a"]);  // the emptier one
  const json filtered = Body(binpack.Filter(args));
  EXPECT_EQ(ItemNames(filtered), (std::vector<std::string>{"gpu-node-a", "gpu-node-b"}));
}

TEST(ExtenderFilter, PodsWithoutGpusliceAndInvalidPods) {
  Extender extender({}, nullptr);
  json args = FixtureJson("extender/filter_args_two_gpu_pod.json");
  args["Pod"]["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "1"}}}};
  json result = Body(extender.Filter(args.dump()));
  EXPECT_EQ(result["Nodes"]["items"].size(), 4u);  // not ours to judge
  args["Pod"]["spec"]["containers"][0]["resources"] = {{"limits", {{"gpuslice.io/vcore", "150"}}}};
  result = Body(extender.Filter(args.dump()));
  EXPECT_NE(result["Error"].get<std::string>().find("asks for 150 gpuslice.io/vcore"), std::string::npos);
}

TEST(ExtenderProtocol, MalformedBodiesAre400WithAReason) {
  Extender extender({}, nullptr);
  struct Case {
    const char* verb;
    std::string body;
    const char* want;
  } cases[] = {
      {"filter", "{not json", "not valid JSON"},
      {"filter", "[]", "must be a JSON object"},
      {"filter", "{}", "ExtenderArgs.Pod is missing"},
      {"filter", R"({"Pod": 5, "NodeNames": []})", "ExtenderArgs.Pod is missing or not an object"},
      {"filter", R"({"Pod": {}})", "neither Nodes nor NodeNames"},
      {"filter", R"({"Pod": {}, "Nodes": "x"})", "Nodes must be a NodeList"},
      {"filter", R"({"Pod": {}, "Nodes": {"items": {}}})", "items must be an array"},
      {"filter", R"({"Pod": {}, "Nodes": {"items": [{"spec": {}}]}})", "items[0] has no metadata.name"},
      {"prioritize", R"({"Pod": {}, "NodeNames": [1]})", "array of strings"},
      {"prioritize", "", "not valid JSON"},
      {"bind", "nope", "not valid JSON"},
      {"bind", R"({"PodNamespace": "ml", "Node": "n"})", "ExtenderBindingArgs.PodName is missing"},
      {"bind", R"({"PodName": "p", "Node": 3})", "ExtenderBindingArgs.Node must be a string"},
      {"bind", R"({"PodName": "", "Node": "n"})", "must not be empty"},
  };
  for (const Case& c : cases) {
    const std::string verb = c.verb;
    const HttpReply reply = verb == "filter"       ? extender.Filter(c.body)
                            : verb == "prioritize" ? extender.Prioritize(c.body)
                                                   : extender.Bind(c.body);
    EXPECT_EQ(reply.status, 400) << verb << " " << c.body;
    const json body = json::parse(reply.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << reply.body;
    EXPECT_NE(body["Error"].get<std::string>().find(c.want), std::string::npos)
        << verb << " " << c.body << " -> " << reply.body;
  }
}

TEST(ExtenderProtocol, HostileBodiesDoNotCrashIt) {
  Extender extender({}, nullptr);
  const std::string deep = std::string(50000, '[') + std::string(50000, ']');
  EXPECT_EQ(extender.Filter(deep).status, 400);
  EXPECT_EQ(extender.Bind(deep).status, 400);
  const std::string deep_pod =
      R"({"Pod": {"metadata": )" + std::string(50000, '[') + std::string(50000, ']') + R"(}, "NodeNames": []})";
  const HttpReply reply = extender.Filter(deep_pod);
  EXPECT_EQ(reply.status, 200);
  EXPECT_NE(json::parse(reply.body)["Error"].get<std::string>().find("pod.metadata must be an object"),
            std::string::npos);
  EXPECT_EQ(
      extender.Prioritize(std::string("{\"Pod\": {}, \"NodeNames\": [\"") + std::string(1 << 20, 'x') + "\"]}").status,
      200);
}

TEST(ExtenderProtocol, KeysAreMatchedAsGoDoes) {
  Extender extender({}, nullptr);
  json args = FixtureJson("extender/filter_args_shared_gpu_pod.json");
  json lower = {{"pod", args["Pod"]}, {"nodes", args["Nodes"]}};
  EXPECT_EQ(ItemNames(Body(extender.Filter(lower.dump()))), (std::vector<std::string>{"gpu-node-a", "gpu-node-b"}));
}

// A fake API server over HTTPS with a token, holding the fixture's pod and nodes.
class ExtenderBindTest : public ::testing::Test {
 protected:
  ExtenderBindTest() : api_({true, "s3cret", dir_.path()}) {
    testing::WriteFile(dir_ / "token", "s3cret\n");
    const json args = FixtureJson("extender/filter_args_two_gpu_pod.json");
    pod_ = args["Pod"];
    for (const json& node : args["Nodes"]["items"]) api_.PutNode(node);
    api_.PutPod(pod_);
    client_ = NewKubeHttpClient({api_.url(), dir_ / "token", api_.ca_file()});
  }

  TempDir dir_;
  FakeApiServer api_;
  json pod_;
  std::unique_ptr<KubeApi> client_;
  Extender::Clock::time_point now_ = Extender::Clock::now();
};

TEST_F(ExtenderBindTest, BindRecordsTheGpusThenBinds) {
  Extender extender({}, client_.get(), [this] { return now_; });
  const json result = Body(extender.Bind(ReadFixture("extender/bind_args_train.json")));
  EXPECT_EQ(result["Error"], "");
  const json pod = api_.Pod("ml", "train");
  EXPECT_EQ(pod["spec"]["nodeName"], "gpu-node-a");
  const json& annotations = pod["metadata"]["annotations"];
  EXPECT_EQ(json::parse(annotations[kGpusAnnotation].get<std::string>()), json::parse(R"({"trainer": [0, 1]})"));
  EXPECT_EQ(annotations[kBindNodeAnnotation], "gpu-node-a");
  EXPECT_GT(std::stoll(annotations[kBindTimeAnnotation].get<std::string>()), 0);
  const auto requests = api_.Requests();
  const std::vector<std::string> want = {"GET /api/v1/namespaces/ml/pods/train", "GET /api/v1/nodes/gpu-node-a",
                                         "PATCH /api/v1/namespaces/ml/pods/train",
                                         "POST /api/v1/namespaces/ml/pods/train/binding"};
  EXPECT_EQ(requests, want);
  EXPECT_EQ(extender.reservations().size(), 1u);

  // The node has not reported the pod yet: a twin pod no longer fits there.
  json args = FixtureJson("extender/filter_args_two_gpu_pod.json");
  args["Pod"]["metadata"]["uid"] = "11111111-2222-4333-8444-555555555555";
  json filtered = Body(extender.Filter(args.dump()));
  EXPECT_EQ(ItemNames(filtered), std::vector<std::string>{"gpu-node-b"});
  EXPECT_TRUE(filtered["FailedNodes"].contains("gpu-node-a"));

  // Once the node's usage lists the pod, the reservation gives way to it.
  NodeUsage usage =
      *ParseNodeUsage(args["Nodes"]["items"][0]["metadata"]["annotations"][kAllocatedAnnotation].get<std::string>());
  for (GpuUsage& g : usage.gpus) {
    g.vcore_used = 100;
    g.vmemory_used = 32;
  }
  usage.pods = {pod_["metadata"]["uid"]};
  args["Nodes"]["items"][0]["metadata"]["annotations"][kAllocatedAnnotation] = NodeUsageToJson(usage);
  filtered = Body(extender.Filter(args.dump()));
  EXPECT_EQ(ItemNames(filtered), std::vector<std::string>{"gpu-node-b"});
  EXPECT_EQ(extender.reservations().size(), 0u);
}

TEST_F(ExtenderBindTest, ReservationsExpire) {
  Extender extender({PackingPolicy::kBinpack, std::chrono::seconds(60)}, client_.get(), [this] { return now_; });
  ASSERT_EQ(Body(extender.Bind(ReadFixture("extender/bind_args_train.json")))["Error"], "");
  json args = FixtureJson("extender/filter_args_two_gpu_pod.json");
  args["Pod"]["metadata"]["uid"] = "11111111-2222-4333-8444-555555555555";
  EXPECT_EQ(ItemNames(Body(extender.Filter(args.dump()))), std::vector<std::string>{"gpu-node-b"});
  now_ += std::chrono::seconds(61);  // the pod never started on the node
  EXPECT_EQ(ItemNames(Body(extender.Filter(args.dump()))), (std::vector<std::string>{"gpu-node-a", "gpu-node-b"}));
}

TEST_F(ExtenderBindTest, MultiGpuBindPicksTheNvlinkPair) {
  const json four = FixtureJson("extender/filter_args_four_gpu_node.json");
  api_.PutNode(four["Nodes"]["items"][0]);
  json pod = four["Pod"];
  api_.PutPod(pod);
  Extender extender({}, client_.get());
  const json result = Body(extender.Bind(
      json{{"PodName", "wide"}, {"PodNamespace", "ml"}, {"PodUID", pod["metadata"]["uid"]}, {"Node", "gpu-node-c"}}
          .dump()));
  ASSERT_EQ(result["Error"], "");
  const json bound = api_.Pod("ml", "wide");
  EXPECT_EQ(json::parse(bound["metadata"]["annotations"][kGpusAnnotation].get<std::string>()),
            json::parse(R"({"trainer": [2, 3]})"));
}

TEST_F(ExtenderBindTest, NamesThatAreNotKubernetesNamesNeverReachTheApiServer) {
  Extender extender({}, client_.get());
  for (const json& args :
       {json{{"PodName", "p/../../../api/v1/namespaces/kube-system/secrets"},
             {"PodNamespace", "ml"},
             {"Node", "gpu-node-a"}},
        json{{"PodName", "train"}, {"PodNamespace", "ml/pods/train/../../../kube-system"}, {"Node", "gpu-node-a"}},
        json{{"PodName", "train"}, {"PodNamespace", "ml"}, {"Node", "gpu-node-a/../../namespaces/kube-system"}},
        json{{"PodName", "train?dryRun=All"}, {"PodNamespace", "ml"}, {"Node", "gpu-node-a"}}}) {
    const HttpReply reply = extender.Bind(args.dump());
    EXPECT_EQ(reply.status, 400) << args;
    EXPECT_NE(json::parse(reply.body)["Error"].get<std::string>().find("is not a Kubernetes"), std::string::npos)
        << reply.body;
  }
  EXPECT_TRUE(api_.Requests().empty());
  EXPECT_EQ(extender.reservations().size(), 0u);
}

TEST_F(ExtenderBindTest, BindFailuresAreReportedAndLeaveNoReservation) {
  Extender extender({}, client_.get());
  // The pod is gone.
  json r = Body(extender.Bind(R"({"PodName": "ghost", "PodNamespace": "ml", "Node": "gpu-node-a"})"));
  EXPECT_NE(r["Error"].get<std::string>().find("HTTP 404"), std::string::npos) << r;
  // The scheduler's pod was replaced by a same-named one.
  r = Body(extender.Bind(R"({"PodName": "train", "PodNamespace": "ml", "PodUID": "other", "Node": "gpu-node-a"})"));
  EXPECT_NE(r["Error"].get<std::string>().find("was replaced"), std::string::npos) << r;
  // The node cannot take it.
  r = Body(extender.Bind(R"({"PodName": "train", "PodNamespace": "ml", "Node": "gpu-node-busy"})"));
  EXPECT_NE(r["Error"].get<std::string>().find("cannot bind pod ml/train to node gpu-node-busy"), std::string::npos)
      << r;
  // The API server refuses the binding: the reservation is given back.
  api_.FailNext("POST /api/v1/namespaces/ml/pods/train/binding", 500);
  r = Body(extender.Bind(ReadFixture("extender/bind_args_train.json")));
  EXPECT_NE(r["Error"].get<std::string>().find("HTTP 500"), std::string::npos) << r;
  EXPECT_EQ(extender.reservations().size(), 0u);
  EXPECT_TRUE(api_.Pod("ml", "train")["spec"].value("nodeName", "").empty());
  // Without API access, bind says what is missing.
  Extender offline({}, nullptr);
  r = Body(offline.Bind(ReadFixture("extender/bind_args_train.json")));
  EXPECT_NE(r["Error"].get<std::string>().find("--kube-api-url"), std::string::npos);
}

TEST_F(ExtenderBindTest, NodeNamesAreLookedUpThroughTheApi) {
  Extender extender({}, client_.get());
  json args = {{"Pod", pod_}, {"NodeNames", {"gpu-node-a", "gpu-node-busy", "missing-node"}}};
  const json result = Body(extender.Filter(args.dump()));
  EXPECT_TRUE(result["Nodes"].is_null());
  EXPECT_EQ(result["NodeNames"], json({"gpu-node-a"}));
  EXPECT_NE(result["FailedNodes"]["missing-node"].get<std::string>().find("HTTP 404"), std::string::npos);
  Extender offline({}, nullptr);
  const json no_api = Body(offline.Filter(args.dump()));
  EXPECT_NE(no_api["FailedNodes"]["gpu-node-a"].get<std::string>().find("nodeCacheCapable: false"), std::string::npos);
}

TEST(ExtenderServer, ServesTheVerbsOnLoopback) {
  Extender extender({}, nullptr);
  auto server = ExtenderServer::Start({"127.0.0.1:0", false, "/gpuslice/"}, &extender);
  ASSERT_TRUE(server.ok()) << server.status().message();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto ok = client.Post("/gpuslice/filter", ReadFixture("extender/filter_args_two_gpu_pod.json"), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ItemNames(json::parse(ok->body)), (std::vector<std::string>{"gpu-node-a", "gpu-node-b"}));
  auto bad = client.Post("/gpuslice/prioritize", "{", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("not valid JSON"), std::string::npos);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto unknown = client.Post("/gpuslice/preempt", "{}", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  (*server)->Stop();
}

TEST(ExtenderServer, RefusesNonLoopbackUnlessAllowed) {
  Extender extender({}, nullptr);
  auto refused = ExtenderServer::Start({"0.0.0.0:0", false, "/gpuslice"}, &extender);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--allow-remote"), std::string::npos);
  auto bad = ExtenderServer::Start({"localhost", false, "/gpuslice"}, &extender);
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace gpuslice::k8s
