// Wire formats shared with Kubernetes: device IDs, the topology and usage
// annotations, and pods' gpuslice requests. Each parser is fed good input
// (including the fixtures) and bad input, and each error must name the field.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "k8s/assignment.h"
#include "k8s/device_ids.h"
#include "k8s/gpu_sources.h"
#include "k8s/names.h"
#include "k8s/node_usage.h"
#include "k8s/pod_request.h"
#include "k8s/topology.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::FixtureJson;
using testing::MakePod;
using testing::ReadFixture;

TEST(DeviceIds, RoundTripAndRejects) {
  const std::string uuid = "GPU-3f1c2a9e-8b7d-4c21-9a0e-5d6f7a8b9c01";
  const std::string vcore = MakeDeviceId(Resource::kVcore, uuid, 42);
  EXPECT_EQ(vcore, uuid + "-vcore-42");
  EXPECT_LE(vcore.size(), kMaxDeviceIdLength);
  auto parsed = ParseDeviceId(vcore);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->resource, Resource::kVcore);
  EXPECT_EQ(parsed->gpu_uuid, uuid);
  EXPECT_EQ(parsed->unit, 42u);
  auto mem = ParseDeviceId(MakeDeviceId(Resource::kVmemory, uuid, 561));
  ASSERT_TRUE(mem);
  EXPECT_EQ(mem->resource, Resource::kVmemory);
  EXPECT_EQ(mem->unit, 561u);

  for (const char* bad :
       {"", "vcore-1", "-vcore-1", "GPU-x-vcore-", "GPU-x-vcore-100", "GPU-x-vcore-01", "GPU-x-vcore-1a",
        "GPU-x-vmem--1", "GPU-x-gpu-1", "GPU-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-vcore-1"}) {
    EXPECT_FALSE(ParseDeviceId(bad)) << bad;
  }
  EXPECT_EQ(ResourceFromName("gpuslice.io/vmemory"), Resource::kVmemory);
  EXPECT_FALSE(ResourceFromName("nvidia.com/gpu"));
}

TEST(Topology, ParsesTheTwoGpuFixture) {
  auto topo = ParseTopology(ReadFixture("devices-2gpu-nvlink.json"));
  ASSERT_TRUE(topo.ok()) << topo.status().message();
  const json raw = FixtureJson("devices-2gpu-nvlink.json");
  ASSERT_EQ(topo->gpus.size(), raw["gpus"].size());
  EXPECT_EQ(topo->gpus[0].uuid, raw["gpus"][0]["uuid"]);
  EXPECT_EQ(topo->gpus[1].memory_total_bytes, raw["gpus"][1]["memory_total_bytes"].get<uint64_t>());
  auto link = topo->LinkBetween(1, 0);
  ASSERT_TRUE(link);
  EXPECT_EQ(link->type, LinkType::kNvlink);
  EXPECT_GT(link->nvlinks, 0u);
  // What the plugin publishes for itself parses back to the same.
  auto again = ParseTopology(TopologyToJson(*topo));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->gpus.size(), topo->gpus.size());
  EXPECT_EQ(again->LinkBetween(0, 1)->type, LinkType::kNvlink);
}

TEST(Topology, LinkRankIsTheContract) {
  const LinkType order[] = {LinkType::kBoard,
                            LinkType::kNvlink,
                            LinkType::kPcieSingleSwitch,
                            LinkType::kPcieMultipleSwitches,
                            LinkType::kPcieHostBridge,
                            LinkType::kNumaNode,
                            LinkType::kSystem};
  for (size_t i = 0; i + 1 < std::size(order); ++i) {
    EXPECT_GT(LinkQuality(order[i], 1), LinkQuality(order[i + 1], 18)) << LinkTypeName(order[i]);
    EXPECT_EQ(LinkTypeFromName(LinkTypeName(order[i])), order[i]);
  }
  EXPECT_GT(LinkQuality(LinkType::kNvlink, 18), LinkQuality(LinkType::kNvlink, 4));
}

TEST(Topology, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* want;
  } cases[] = {
      {"not json", "not valid JSON"},
      {"[]", "JSON object"},
      {R"({"links": []})", "gpus is missing"},
      {R"({"gpus": {}})", "gpus must be an array"},
      {R"({"gpus": [{"uuid": "GPU-a", "memory_total_bytes": 1}]})", "gpus[0].index is missing"},
      {R"({"gpus": [{"index": -1, "uuid": "GPU-a", "memory_total_bytes": 1}]})", "gpus[0].index must not be negative"},
      {R"({"gpus": [{"index": 16, "uuid": "GPU-a", "memory_total_bytes": 1}]})", "out of range"},
      {R"({"gpus": [{"index": 0, "uuid": 7, "memory_total_bytes": 1}]})", "gpus[0].uuid must be a string"},
      {R"({"gpus": [{"index": 0, "uuid": "GPU-a", "memory_total_bytes": 0}]})", "memory_total_bytes must be positive"},
      {R"({"gpus": [{"index": 0, "uuid": "GPU-a", "memory_total_bytes": 1},
                    {"index": 0, "uuid": "GPU-b", "memory_total_bytes": 1}]})",
       "gpus[1].index: 0 is listed twice"},
      {R"({"gpus": [{"index": 0, "uuid": "GPU-a", "memory_total_bytes": 1},
                    {"index": 1, "uuid": "GPU-b", "memory_total_bytes": 1}],
           "links": [{"a": 1, "b": 0, "type": "nvlink"}]})",
       "a must be less than b"},
      {R"({"gpus": [{"index": 0, "uuid": "GPU-a", "memory_total_bytes": 1},
                    {"index": 1, "uuid": "GPU-b", "memory_total_bytes": 1}],
           "links": [{"a": 0, "b": 1, "type": "infiniband"}]})",
       "unknown link type \"infiniband\"; expected one of board, nvlink"},
      {R"({"gpus": [{"index": 0, "uuid": "GPU-a", "memory_total_bytes": 1}],
           "links": [{"a": 0, "b": 3, "type": "nvlink"}]})",
       "not both in \"gpus\""},
  };
  for (const Case& c : cases) {
    auto topo = ParseTopology(c.json);
    ASSERT_FALSE(topo.ok()) << c.json;
    EXPECT_NE(topo.status().message().find(c.want), std::string::npos)
        << "input " << c.json << "\nerror " << topo.status().message();
  }
}

TEST(Topology, TheDaemonsXidHealthTakesGpusOut) {
  // `gpuslice devices --json` of a daemon that saw XID 79 on GPU 1 and an
  // application XID (13) on GPU 0; the device plugin drops GPU 1 only.
  json doc = FixtureJson("devices-2gpu-nvlink.json");
  doc["gpus"][0]["healthy"] = true;
  doc["gpus"][0]["xid_errors"] = json::array({{{"xid", 13}, {"count", 1}, {"critical", false}}});
  doc["gpus"][1]["healthy"] = false;
  doc["gpus"][1]["last_xid"] = 79;
  EXPECT_EQ(UnhealthyGpusInDevicesJson(doc.dump()), std::set<std::string>{doc["gpus"][1]["uuid"].get<std::string>()});
  // The devices document still parses as the topology.
  EXPECT_TRUE(ParseTopology(doc.dump()).ok());
  // An older daemon (no "healthy") or an unreadable document: nothing removed.
  EXPECT_TRUE(UnhealthyGpusInDevicesJson(ReadFixture("devices-2gpu-nvlink.json")).empty());
  EXPECT_TRUE(UnhealthyGpusInDevicesJson("not json").empty());
  EXPECT_TRUE(UnhealthyGpusInDevicesJson(R"({"gpus": [{"healthy": false}]})").empty());
}

Assignment OneGpuAssignment() {
  Assignment a;
  a.vgpu = "k8s-u-0";
  a.pod_uid = "u";
  a.namespace_name = "ns";
  a.pod = "p";
  a.container = "c";
  a.gpus = {0};
  a.uuids = {"GPU-x"};
  a.vcore_per_gpu = 50;
  return a;
}

TEST(Assignment, ThePowerCapRoundTripsAndOlderRecordsHaveNone) {
  Assignment a = OneGpuAssignment();
  a.power_cap_watts = 87.5;
  auto back = ParseAssignment(AssignmentToJson(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->power_cap_watts, 87.5);
  a.power_cap_watts = 0;
  const std::string older = AssignmentToJson(a);
  EXPECT_EQ(older.find("power_cap_watts"), std::string::npos);
  EXPECT_EQ(ParseAssignment(older)->power_cap_watts, 0.0);
  json bad = json::parse(older);
  bad["power_cap_watts"] = "lots";
  EXPECT_FALSE(ParseAssignment(bad.dump()).ok());
}

TEST(Assignment, SuspendableRoundTripsAndOlderRecordsAreNot) {
  Assignment a = OneGpuAssignment();
  a.suspendable = true;
  auto back = ParseAssignment(AssignmentToJson(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->suspendable);
  a.suspendable = false;
  const std::string older = AssignmentToJson(a);
  EXPECT_EQ(older.find("suspendable"), std::string::npos);
  EXPECT_FALSE(ParseAssignment(older)->suspendable);
  json bad = json::parse(older);
  bad["suspendable"] = "true";
  EXPECT_FALSE(ParseAssignment(bad.dump()).ok());
}

TEST(NodeUsage, RoundTripAndErrors) {
  NodeUsage usage;
  usage.node = "n";
  usage.gpus.push_back({0, "GPU-a", true, 50, 16, 561});
  usage.gpus.push_back({1, "GPU-b", false, 0, 0, 561});
  usage.pods = {"uid-2", "uid-1"};
  auto back = ParseNodeUsage(NodeUsageToJson(usage));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->gpus.size(), 2u);
  EXPECT_EQ(back->gpus[0].vcore_used, 50u);
  EXPECT_FALSE(back->gpus[1].healthy);
  EXPECT_TRUE(back->HasPod("uid-1"));
  EXPECT_FALSE(back->HasPod("uid-3"));

  EXPECT_NE(ParseNodeUsage(R"({"version": 2, "gpus": []})").status().message().find("version 2 is not supported"),
            std::string::npos);
  EXPECT_NE(ParseNodeUsage(R"({"version": 1, "gpus": [{"index": 0, "vcore_used": 101, "vmemory_used": 0}]})")
                .status()
                .message()
                .find("exceeds 100"),
            std::string::npos);
  EXPECT_FALSE(ParseNodeUsage("{").ok());
}

TEST(PodRequest, ReadsASchedulerShapedPod) {
  const json args = FixtureJson("extender/filter_args_shared_gpu_pod.json");
  auto pod = ParsePodRequest(args["Pod"]);
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ(pod->Describe(), "serving/infer");
  EXPECT_EQ(pod->priority_level, "lc");
  ASSERT_EQ(pod->containers.size(), 1u);
  EXPECT_EQ(pod->containers[0].vcore, 30u);
  EXPECT_EQ(pod->containers[0].vmemory_units, 16u);
  EXPECT_EQ(pod->containers[0].GpuCount(), 1u);
  EXPECT_EQ(pod->phase, "Pending");
}

TEST(PodRequest, RulesAndTheirMessages) {
  struct Case {
    std::vector<std::tuple<std::string, int, int>> containers;
    json annotations;
    const char* want;  // nullptr: valid
  } cases[] = {
      {{{"a", 50, 8}}, json::object(), nullptr},
      {{{"a", 100, 0}}, json::object(), nullptr},   // a whole GPU, uncapped
      {{{"a", 300, 30}}, json::object(), nullptr},  // three whole GPUs, 10 units each
      {{{"a", 0, 0}}, json::object(), nullptr},     // no gpuslice request at all
      {{{"a", 150, 8}}, json::object(), "asks for 150 gpuslice.io/vcore; request gpuslice.io/vcore from 1 to 100"},
      {{{"a", 0, 8}}, json::object(), "without gpuslice.io/vcore"},
      {{{"a", 50, 0}}, json::object(), "share of a GPU without gpuslice.io/vmemory"},
      {{{"a", 200, 7}}, json::object(), "make it a multiple of 2"},
      {{{"a", 1700, 0}}, json::object(), "at most 16"},
      // Any level name is the pod's to give; the node judges it (priority_level.h).
      {{{"a", 50, 8}}, {{"gpuslice.io/priority", "high"}}, nullptr},
      {{{"a", 50, 8}}, {{"gpuslice.io/priority", "gold-tier_2"}}, nullptr},
      {{{"a", 50, 8}}, {{"gpuslice.io/priority", "High!"}}, "is not a priority level's name (1 to 32 of a-z"},
      {{{"a", 50, 8}}, {{"gpuslice.io/priority", std::string(33, 'a')}}, "is not a priority level's name"},
      {{{"a", 50, 8}},
       {{"gpuslice.io/priority", "be"}, {"gpuslice.io/lc-slo-p99-us", "800"}, {"gpuslice.io/lc-alone-p99-us", "300"}},
       "are for latency-critical pods"},
      {{{"a", 50, 8}},
       {{"gpuslice.io/priority", "critical"},
        {"gpuslice.io/lc-slo-p99-us", "800"},
        {"gpuslice.io/lc-alone-p99-us", "300"}},
       nullptr},
      {{{"a", 50, 8}}, {{"gpuslice.io/gpus", "[0]"}}, "must be a JSON object"},
      {{{"a", 50, 8}}, {{"gpuslice.io/power-cap-watts", "150"}}, nullptr},
      {{{"a", 50, 8}},
       {{"gpuslice.io/power-cap-watts", "150W"}},
       "is \"150W\": it is not a number; set it to the watts"},
      {{{"a", 50, 8}}, {{"gpuslice.io/power-cap-watts", "-1"}}, "a power cap must be a positive number of watts"},
      {{{"a", 50, 8}}, {{"gpuslice.io/power-cap-watts", "150000"}}, "watts, not milliwatts"},
      {{{"a", 50, 8}}, {{"gpuslice.io/gpus", R"({"a": [99]})"}}, "not a GPU index"},
      {{{"a", 50, 8}}, {{"gpuslice.io/suspendable", "true"}}, nullptr},
      {{{"a", 50, 8}}, {{"gpuslice.io/suspendable", "false"}}, nullptr},
      {{{"a", 50, 8}}, {{"gpuslice.io/suspendable", "yes"}}, "is \"yes\"; set it to \"true\""},
      {{{"a", 50, 8}},
       {{"gpuslice.io/suspendable", "true"}, {"gpuslice.io/priority", "lc"}},
       "is for best-effort pods; a latency-critical one is never suspended"},
  };
  for (const Case& c : cases) {
    auto pod = ParsePodRequest(MakePod("ns", "p", "uid", c.containers, c.annotations));
    if (c.want == nullptr) {
      EXPECT_TRUE(pod.ok()) << pod.status().message();
      continue;
    }
    ASSERT_FALSE(pod.ok()) << c.want;
    EXPECT_NE(pod.status().message().find(c.want), std::string::npos) << pod.status().message();
    EXPECT_NE(pod.status().message().find("ns/p"), std::string::npos) << "names the pod: " << pod.status().message();
  }
}

TEST(PodRequest, QuantitiesMustBeWholeNumbers) {
  json pod = MakePod("ns", "p", "uid", {{"a", 50, 8}});
  pod["spec"]["containers"][0]["resources"]["limits"]["gpuslice.io/vcore"] = "0.5";
  auto parsed = ParsePodRequest(pod);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("\"0.5\" is not a whole number"), std::string::npos);
  // A JSON number is accepted too (hand-made objects).
  pod["spec"]["containers"][0]["resources"]["limits"]["gpuslice.io/vcore"] = 50;
  EXPECT_TRUE(ParsePodRequest(pod).ok());
}

TEST(PodRequest, AdmissionOrderAndBindAnnotations) {
  json pod = MakePod("ns", "p", "uid", {{"main", 50, 8}, {"side", 100, 0}},
                     {{"gpuslice.io/gpus", R"({"main": [1], "side": [0]})"},
                      {"gpuslice.io/node", "n1"},
                      {"gpuslice.io/bind-time", "1700000000000000000"}});
  pod["spec"]["initContainers"] = json::array(
      {{{"name", "setup"}, {"resources", {{"limits", {{"gpuslice.io/vcore", "10"}, {"gpuslice.io/vmemory", "1"}}}}}}});
  auto parsed = ParsePodRequest(pod);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->containers.size(), 3u);
  EXPECT_EQ(parsed->containers[0].name, "setup");
  EXPECT_TRUE(parsed->containers[0].init);
  EXPECT_EQ(parsed->containers[2].name, "side");
  EXPECT_EQ(parsed->containers[2].ordinal, 2u);
  EXPECT_EQ(parsed->bound_gpus.at("main"), std::vector<uint32_t>{1});
  EXPECT_EQ(parsed->bound_node, "n1");
  EXPECT_EQ(parsed->bind_time_ns, 1700000000000000000);
}

}  // namespace
}  // namespace gpuslice::k8s
