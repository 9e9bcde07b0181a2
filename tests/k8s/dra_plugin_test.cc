// The DRA plugin, kubelet side: a fake kubelet client over the plugin's real
// unix sockets (registration GetInfo, NodePrepareResources and
// NodeUnprepareResources in v1 and v1beta1), against a fake API server over
// HTTPS that serves ResourceClaims and takes ResourceSlices. GPUs are
// scripted; vGPUs are made in a temporary state directory by the same
// provisioner the device plugin uses.
#include "k8s/dra/dra_plugin.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>

#include "core/vgpu_store.h"
#include "fake_api_server.h"
#include "k8s/dra/cdi_spec.h"
#include "k8s/dra/claim_allocation.h"
#include "k8s/dra/quantity.h"
#include "k8s/dra/resource_slice.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "k8s/dra/v1beta1/api.grpc.pb.h"
#include "k8s/kube_http_client.h"
#include "k8s/pluginregistration/v1/api.grpc.pb.h"
#include "node/policy_file.h"
#include "port/gpu_uuid.h"
#include "test_util.h"

namespace gpuslice::k8s::dra {
namespace {

using nlohmann::json;
using testing::FakeApiServer;
using testing::TempDir;
using testing::WaitFor;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

const char* const kUuids[] = {"GPU-face0000-0000-0000-0000-000000000000", "GPU-face0000-0000-0000-0000-000000000001"};
constexpr uint64_t kGiB = 1ull << 30;

class FakeDiscovery final : public GpuDiscovery {
 public:
  StatusOr<NodeTopology> Discover(std::string* document) override {
    NodeTopology t;
    t.node = "node-a";
    for (uint32_t i = 0; i < 2; ++i) t.gpus.push_back({i, kUuids[i], "Fake H100", 80 * kGiB, ""});
    t.links.push_back({0, 1, LinkType::kNvlink, 18});
    *document = TopologyToJson(t);
    return t;
  }
};

class ScriptedHealth final : public HealthSource {
 public:
  void Set(std::set<std::string> healthy) {
    std::lock_guard<std::mutex> lock(mu_);
    healthy_ = std::move(healthy);
  }
  StatusOr<std::set<std::string>> HealthyGpus() override {
    std::lock_guard<std::mutex> lock(mu_);
    return healthy_;
  }

 private:
  std::mutex mu_;
  std::set<std::string> healthy_ = {kUuids[0], kUuids[1]};
};

json Claim(const std::string& name, const std::string& uid, const std::string& device, const std::string& cores,
           const std::string& memory, const json& parameters) {
  return testing::MakeDraClaim("ml", name, uid, "node-a", device, cores, memory, parameters);
}

json LcConfig() {
  return {{"apiVersion", kConfigApiVersion}, {"kind", kConfigKind}, {"priority", "lc"}, {"computeCap", 40}};
}

class DraPluginTest : public ::testing::Test {
 protected:
  DraPluginTest() : api_({true, "tok-dra", dir_.path()}) {
    testing::WriteFile(dir_ / "token", "tok-dra\n");
    for (const char* d : {"lib", "dev", "registry", "plugins", "cdi"}) std::filesystem::create_directories(dir_ / d);
    for (const char* f : {"lib/libgpuslice-cuda.so", "dev/nvidiactl", "dev/nvidia0", "dev/nvidia1"}) {
      testing::WriteFile(dir_ / f, "");
    }
    api_.PutResourceClaim(Claim("train", "uid-train", "gpu-1", "30", "4Gi", LcConfig()));
  }

  std::unique_ptr<DraPlugin> StartPlugin() {
    DraPluginOptions options;
    options.node_name = "node-a";
    options.registry_dir = dir_ / "registry";
    options.plugins_dir = dir_ / "plugins";
    options.cdi_dir = dir_ / "cdi";
    options.state_dir = dir_ / "state";
    options.container.library_dir = dir_ / "lib";
    options.container.dev_root = dir_ / "dev";
    options.health_interval = std::chrono::milliseconds(10);
    options.device_plugin_dir = dir_ / "device-plugins";
    DraPluginParts parts;
    parts.discovery = std::make_unique<FakeDiscovery>();
    auto health = std::make_unique<ScriptedHealth>();
    health_ = health.get();
    parts.health = std::move(health);
    parts.api = NewKubeHttpClient({api_.url(), dir_ / "token", api_.ca_file()});
    parts.provisioner = NewStoreProvisioner(dir_ / "state");
    auto plugin = DraPlugin::Start(options, std::move(parts));
    EXPECT_TRUE(plugin.ok()) << plugin.status().message();
    return plugin.ok() ? std::move(*plugin) : nullptr;
  }

  std::shared_ptr<grpc::Channel> Dial(const std::string& socket) {
    return grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
  }

  drav1::NodePrepareResourcesResponse Prepare(DraPlugin& plugin, std::vector<std::string> names_uids) {
    auto stub = drav1::DRAPlugin::NewStub(Dial(plugin.dra_socket()));
    drav1::NodePrepareResourcesRequest request;
    for (size_t i = 0; i + 1 < names_uids.size(); i += 2) {
      auto* c = request.add_claims();
      c->set_namespace_("ml");
      c->set_name(names_uids[i]);
      c->set_uid(names_uids[i + 1]);
    }
    drav1::NodePrepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status status = stub->NodePrepareResources(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  drav1::NodeUnprepareResourcesResponse Unprepare(DraPlugin& plugin, const std::string& name, const std::string& uid) {
    auto stub = drav1::DRAPlugin::NewStub(Dial(plugin.dra_socket()));
    drav1::NodeUnprepareResourcesRequest request;
    auto* c = request.add_claims();
    c->set_namespace_("ml");
    c->set_name(name);
    c->set_uid(uid);
    drav1::NodeUnprepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    EXPECT_TRUE(stub->NodeUnprepareResources(&context, request, &response).ok());
    return response;
  }

  size_t ClaimGets(const std::string& name) const {
    size_t n = 0;
    for (const std::string& r : api_.Requests()) n += r == "GET /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/" + name;
    return n;
  }

  bool VgpuExists(const std::string& uid) const {
    return std::filesystem::exists(dir_ / ("state/vgpus/dra-" + uid));
  }

  TempDir dir_;
  FakeApiServer api_;
  ScriptedHealth* health_ = nullptr;
};

int Mode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
}

const json* MountAt(const json& spec, const std::string& container_path) {
  for (const json& m : spec["containerEdits"]["mounts"]) {
    if (m["containerPath"] == container_path) return &m;
  }
  return nullptr;
}

TEST(DraQuantity, ParsesWholeQuantitiesAndNamesTheFieldOfBadOnes) {
  EXPECT_EQ(*ParseWholeQuantity("4Gi", "f"), 4 * kGiB);
  EXPECT_EQ(*ParseWholeQuantity("30", "f"), 30u);
  EXPECT_EQ(*ParseWholeQuantity("2000m", "f"), 2u);
  EXPECT_EQ(*ParseWholeQuantity("1G", "f"), 1000000000u);
  auto bad = ParseWholeQuantity("1.5Gi", "x.memory");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.memory"), std::string::npos);
  EXPECT_FALSE(ParseWholeQuantity("1500m", "f").ok());
  EXPECT_FALSE(ParseWholeQuantity("99999999999999999999", "f").ok());
  EXPECT_EQ(FormatQuantity(4 * kGiB), "4Gi");
  EXPECT_EQ(FormatQuantity(100), "100");
}

TEST_F(DraPluginTest, RegistersAsDraPluginOnOwnerOnlySockets) {
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->registration_socket(), dir_ / "registry/gpu.gpuslice.io-reg.sock");
  EXPECT_EQ(plugin->dra_socket(), dir_ / "plugins/gpu.gpuslice.io/dra.sock");
  EXPECT_EQ(Mode(plugin->registration_socket()), 0600);
  EXPECT_EQ(Mode(plugin->dra_socket()), 0600);

  auto stub = ::pluginregistration::Registration::NewStub(Dial(plugin->registration_socket()));
  ::pluginregistration::PluginInfo info;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->GetInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.gpuslice.io");
  EXPECT_EQ(info.endpoint(), plugin->dra_socket());
  ASSERT_EQ(info.supported_versions_size(), 2);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  EXPECT_EQ(info.supported_versions(1), "v1beta1.DRAPlugin");

  ::pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(true);
  ::pluginregistration::RegistrationStatusResponse ack;
  grpc::ClientContext context2;
  ASSERT_TRUE(stub->NotifyRegistrationStatus(&context2, status, &ack).ok());
  EXPECT_TRUE(plugin->registered());
}

TEST_F(DraPluginTest, PublishesResourceSliceAndDropsAnUnhealthyGpu) {
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  ASSERT_TRUE(WaitFor([&] { return !api_.ResourceSlice("node-a-gpu.gpuslice.io").is_null(); }));
  const json slice = api_.ResourceSlice("node-a-gpu.gpuslice.io");
  EXPECT_EQ(slice["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(slice["spec"]["driver"], "gpu.gpuslice.io");
  EXPECT_EQ(slice["spec"]["nodeName"], "node-a");
  EXPECT_EQ(slice["spec"]["pool"]["name"], "node-a");
  EXPECT_EQ(slice["spec"]["pool"]["resourceSliceCount"], 1);
  ASSERT_EQ(slice["spec"]["devices"].size(), 2u);
  const json& d = slice["spec"]["devices"][1];
  EXPECT_EQ(d["name"], "gpu-1");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["attributes"]["uuid"]["string"], kUuids[1]);
  EXPECT_EQ(d["attributes"]["model"]["string"], "Fake H100");
  EXPECT_EQ(d["attributes"]["index"]["int"], 1);
  EXPECT_EQ(d["attributes"]["nvlinkPeers"]["string"], "0");
  EXPECT_EQ(d["attributes"]["priorityLevels"]["string"], "critical,high,lc,normal,low,be");  // the default levels
  EXPECT_EQ(d["capacity"]["cores"]["value"], "100");
  EXPECT_EQ(d["capacity"]["cores"]["requestPolicy"]["validRange"],
            json({{"min", "1"}, {"max", "100"}, {"step", "1"}}));
  EXPECT_EQ(d["capacity"]["memory"]["value"], "80Gi");
  EXPECT_EQ(d["capacity"]["memory"]["requestPolicy"]["validRange"]["step"], "256Mi");
  EXPECT_EQ(d["capacity"]["memory"]["requestPolicy"]["validRange"]["min"], "256Mi");
  const int64_t generation = slice["spec"]["pool"]["generation"];

  health_->Set({kUuids[0]});
  ASSERT_TRUE(WaitFor([&] { return api_.ResourceSlice("node-a-gpu.gpuslice.io")["spec"]["devices"].size() == 1; }));
  const json after = api_.ResourceSlice("node-a-gpu.gpuslice.io");
  EXPECT_EQ(after["spec"]["devices"][0]["name"], "gpu-0");
  EXPECT_GT(after["spec"]["pool"]["generation"].get<int64_t>(), generation);
}

TEST_F(DraPluginTest, PrepareCreatesTheClaimedVgpuAndAValidCdiSpec) {
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  auto response = Prepare(*plugin, {"train", "uid-train"});
  ASSERT_EQ(response.claims().count("uid-train"), 1u);
  const auto& claim = response.claims().at("uid-train");
  ASSERT_EQ(claim.error(), "");
  ASSERT_EQ(claim.devices_size(), 1);
  EXPECT_EQ(claim.devices(0).pool_name(), "node-a");
  EXPECT_EQ(claim.devices(0).device_name(), "gpu-1");
  EXPECT_EQ(claim.devices(0).request_names(0), "gpu");
  EXPECT_EQ(claim.devices(0).share_id(), "share-uid-train");
  ASSERT_EQ(claim.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(claim.devices(0).cdi_device_ids(0), "gpu.gpuslice.io/vgpu=uid-train-1");

  // The vGPU: GPU 1 only, 4 GiB, 30 cores, the opaque config's priority and cap.
  auto handle = core::VgpuHandle::Open(dir_ / "state/vgpus/dra-uid-train", port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  ASSERT_EQ(handle->limits().device_count, 1u);
  const core::DeviceLimit& limit = handle->limits().devices[0];
  EXPECT_EQ(limit.memory_limit_bytes, 4 * kGiB);
  EXPECT_EQ(limit.compute_share_pct, 30u);
  EXPECT_EQ(limit.compute_cap_pct, 40u);
  EXPECT_EQ(core::LevelClass(limit.priority), core::Priority::kLatencyCritical);
  std::array<uint8_t, 16> uuid{};
  port::ParseGpuUuid(kUuids[1], &uuid);
  EXPECT_EQ(0, memcmp(limit.uuid, uuid.data(), 16));

  // The CDI spec.
  const std::string path = dir_ / "cdi/gpu.gpuslice.io-vgpu_uid-train.json";
  const json spec = json::parse(testing::ReadFile(path));
  testing::ExpectValidCdi(spec);
  EXPECT_EQ(spec["kind"], "gpu.gpuslice.io/vgpu");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], "uid-train-1");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia1");
  const json* preload = MountAt(spec, "/etc/ld.so.preload");
  ASSERT_NE(preload, nullptr);
  EXPECT_EQ((*preload)["options"][0], "ro");
  EXPECT_EQ(testing::ReadFile((*preload)["hostPath"]), "/usr/local/gpuslice/lib/libgpuslice-cuda.so\n");
  const json* library = MountAt(spec, "/usr/local/gpuslice/lib/libgpuslice-cuda.so");
  ASSERT_NE(library, nullptr);
  EXPECT_EQ((*library)["options"][0], "ro");
  const json* limits = MountAt(spec, "/run/gpuslice/vgpu/limits");
  ASSERT_NE(limits, nullptr);
  EXPECT_EQ((*limits)["hostPath"], dir_ / "state/vgpus/dra-uid-train/limits");
  EXPECT_EQ((*limits)["options"][0], "ro");
  ASSERT_NE(MountAt(spec, "/run/gpuslice/vgpu/ledger"), nullptr);
  EXPECT_EQ((*MountAt(spec, "/run/gpuslice/vgpu/ledger"))["options"][0], "rw");
  const json env = spec["containerEdits"]["env"];
  auto has_env = [&](const std::string& e) { return std::find(env.begin(), env.end(), e) != env.end(); };
  EXPECT_TRUE(has_env("GPUSLICE_VGPU_DIR=/run/gpuslice/vgpu"));
  EXPECT_TRUE(has_env(std::string("CUDA_VISIBLE_DEVICES=") + kUuids[1]));
  for (const json& e : env) EXPECT_NE(e.get<std::string>().rfind("LD_PRELOAD=", 0), 0u) << "ld.so.preload replaces it";
  bool ctl = false;
  for (const json& n : spec["containerEdits"]["deviceNodes"]) ctl |= n["path"] == "/dev/nvidiactl";
  EXPECT_TRUE(ctl);

  // Unprepare: spec and vGPU gone; again: still fine.
  auto un = Unprepare(*plugin, "train", "uid-train");
  EXPECT_EQ(un.claims().at("uid-train").error(), "");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(VgpuExists("uid-train"));
  EXPECT_EQ(plugin->preparer().prepared(), 0u);
  EXPECT_EQ(Unprepare(*plugin, "train", "uid-train").claims().at("uid-train").error(), "");
}

TEST_F(DraPluginTest, PrepareIsIdempotentAndSurvivesARestart) {
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  const auto first = Prepare(*plugin, {"train", "uid-train"});
  ASSERT_EQ(first.claims().at("uid-train").error(), "");
  const auto again = Prepare(*plugin, {"train", "uid-train"});
  EXPECT_EQ(again.claims().at("uid-train").SerializeAsString(), first.claims().at("uid-train").SerializeAsString());
  EXPECT_EQ(ClaimGets("train"), 1u) << "a prepared claim is answered from the checkpoint";

  // A new plugin process (same directories) knows the claim without the API server.
  plugin.reset();
  plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->preparer().prepared(), 1u);
  const auto after = Prepare(*plugin, {"train", "uid-train"});
  EXPECT_EQ(after.claims().at("uid-train").SerializeAsString(), first.claims().at("uid-train").SerializeAsString());
  EXPECT_EQ(ClaimGets("train"), 1u);

  // A CDI spec lost meanwhile is written again.
  std::filesystem::remove(dir_ / "cdi/gpu.gpuslice.io-vgpu_uid-train.json");
  EXPECT_EQ(Prepare(*plugin, {"train", "uid-train"}).claims().at("uid-train").error(), "");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cdi/gpu.gpuslice.io-vgpu_uid-train.json"));

  EXPECT_EQ(Unprepare(*plugin, "train", "uid-train").claims().at("uid-train").error(), "");
  EXPECT_FALSE(VgpuExists("uid-train"));
}

TEST_F(DraPluginTest, RestartBetweenVgpuAndRecordIsFinishedByUnprepare) {
  // A crash after the vGPU was made but before the claim was recorded as
  // prepared leaves a "preparing" record; the restarted plugin's unprepare
  // removes the vGPU and the record.
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  ASSERT_EQ(Prepare(*plugin, {"train", "uid-train"}).claims().at("uid-train").error(), "");
  plugin.reset();
  const std::string checkpoint = dir_ / "state/dra/checkpoint.json";
  json c = json::parse(testing::ReadFile(checkpoint));
  c["claims"]["uid-train"]["state"] = "preparing";
  c["claims"]["uid-train"]["devices"] = json::array();
  testing::WriteFile(checkpoint, c.dump());
  std::filesystem::remove(dir_ / "cdi/gpu.gpuslice.io-vgpu_uid-train.json");

  plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->preparer().prepared(), 0u);
  EXPECT_EQ(Unprepare(*plugin, "train", "uid-train").claims().at("uid-train").error(), "");
  EXPECT_FALSE(VgpuExists("uid-train"));
  EXPECT_EQ(json::parse(testing::ReadFile(checkpoint))["claims"].size(), 0u);
}

TEST_F(DraPluginTest, MalformedClaimGetsItsOwnErrorAndChangesNothing) {
  json bad = LcConfig();
  bad["priority"] = "urgent";
  api_.PutResourceClaim(Claim("bad", "uid-bad", "gpu-0", "30", "4Gi", bad));
  json unknown = LcConfig();
  unknown["memoryLimit"] = "4Gi";
  api_.PutResourceClaim(Claim("unknown", "uid-unknown", "gpu-0", "30", "4Gi", unknown));
  api_.PutResourceClaim(Claim("odd", "uid-odd", "gpu-0", "30", "1000Mi", json()));
  api_.PutResourceClaim(Claim("elsewhere", "uid-elsewhere", "gpu-7", "30", "4Gi", json()));
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  const auto response = Prepare(*plugin, {"bad", "uid-bad", "unknown", "uid-unknown", "odd", "uid-odd", "elsewhere",
                                          "uid-elsewhere", "train", "uid-train", "missing", "uid-missing"});
  ASSERT_EQ(response.claims_size(), 6);
  auto error = [&](const std::string& uid) { return response.claims().at(uid).error(); };
  EXPECT_NE(error("uid-bad").find("opaque.parameters.priority"), std::string::npos) << error("uid-bad");
  EXPECT_NE(error("uid-bad").find("critical, high, lc, normal, low, be"), std::string::npos) << error("uid-bad");
  EXPECT_NE(error("uid-unknown").find("opaque.parameters.memoryLimit is not a field"), std::string::npos)
      << error("uid-unknown");
  EXPECT_NE(error("uid-odd").find("consumedCapacity.memory"), std::string::npos) << error("uid-odd");
  EXPECT_NE(error("uid-elsewhere").find("gpu-7"), std::string::npos) << error("uid-elsewhere");
  EXPECT_NE(error("uid-missing").find("HTTP 404"), std::string::npos) << error("uid-missing");
  EXPECT_EQ(error("uid-train"), "") << "one bad claim does not fail the others";
  for (const char* uid : {"uid-bad", "uid-unknown", "uid-odd", "uid-elsewhere", "uid-missing"}) {
    EXPECT_FALSE(VgpuExists(uid)) << uid;
    EXPECT_FALSE(std::filesystem::exists(dir_ / (std::string("cdi/gpu.gpuslice.io-vgpu_") + uid + ".json"))) << uid;
  }
  EXPECT_EQ(json::parse(testing::ReadFile(dir_ / "state/dra/checkpoint.json"))["claims"].size(), 1u);
}

// A claim's `priority`, as a table of name -> the level word of its vGPU,
// under the node's levels as the daemon stored them; a name the node does
// not have is refused, listing the node's levels.
TEST_F(DraPluginTest, ClaimPriorityNamesOneOfTheNodesLevels) {
  std::filesystem::create_directories(dir_ / "state");
  ASSERT_TRUE(node::StoreLevels(dir_ / "state",
                                "levels:\n  - {name: gold, class: lc}\n  - {name: silver, class: lc}\n"
                                "  - {name: bronze, class: be}\n")
                  .ok());
  struct Case {
    const char* priority;
    bool refused;
    uint32_t word;
  } cases[] = {
      {"gold", false, core::LevelWord(core::Priority::kLatencyCritical, 1)},
      {"silver", false, core::LevelWord(core::Priority::kLatencyCritical, 0)},
      {"bronze", false, core::LevelWord(core::Priority::kBestEffort, 0)},
      {"lc", false, core::LevelWord(core::Priority::kLatencyCritical, 0)},
      {"critical", true, 0},  // a default level, not one of this node's
  };
  std::vector<std::string> names_and_uids;
  for (const Case& c : cases) {
    json config = LcConfig();
    config["priority"] = c.priority;
    api_.PutResourceClaim(Claim(c.priority, std::string("uid-") + c.priority, "gpu-0", "10", "1Gi", config));
    names_and_uids.insert(names_and_uids.end(), {c.priority, std::string("uid-") + c.priority});
  }
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  const auto response = Prepare(*plugin, names_and_uids);
  for (const Case& c : cases) {
    const std::string uid = std::string("uid-") + c.priority;
    const std::string& error = response.claims().at(uid).error();
    if (c.refused) {
      for (const char* needle :
           {"opaque.parameters.priority", "\"critical\"", "node node-a", "gold, silver, lc, bronze, be"}) {
        EXPECT_NE(error.find(needle), std::string::npos) << needle << " in: " << error;
      }
      EXPECT_FALSE(VgpuExists(uid));
      continue;
    }
    ASSERT_EQ(error, "") << c.priority;
    auto handle = core::VgpuHandle::Open(dir_ / ("state/vgpus/dra-" + uid), port::MappedFile::Access::kReadOnly);
    ASSERT_TRUE(handle.ok()) << handle.status().message();
    EXPECT_EQ(handle->limits().devices[0].priority, c.word) << c.priority;
  }
  // The slice tells claim authors which levels this node has.
  EXPECT_TRUE(WaitFor([&] {
    const json slice = api_.ResourceSlice("node-a-gpu.gpuslice.io");
    return !slice.is_null() && !slice["spec"]["devices"].empty() &&
           slice["spec"]["devices"][0]["attributes"]["priorityLevels"]["string"] == "gold,silver,lc,bronze,be";
  }));
}

TEST(DraResourceSlice, PriorityLevelsAreCutAfterAWholeNameAt64Characters) {
  std::string yaml = "levels:\n";
  for (int i = 0; i < 8; ++i) yaml += "  - {name: level-number-" + std::to_string(i) + ", class: be}\n";
  auto levels = task::LevelTable::Parse(yaml, "test");
  ASSERT_TRUE(levels.ok()) << levels.status().message();
  const std::string attribute = PriorityLevelsAttribute(*levels);
  EXPECT_LE(attribute.size(), 64u);
  // Highest first: the built-in lc outranks every best-effort level.
  EXPECT_EQ(attribute, "lc,level-number-0,level-number-1,level-number-2,level-number-3");
}

TEST_F(DraPluginTest, RefusesToServeGpusTheDevicePluginServes) {
  std::filesystem::create_directories(dir_ / "device-plugins");
  // A listener on the device plugin's socket, as a running plugin has.
  {
    const std::string path = dir_ / "device-plugins/gpuslice-vcore.sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listener, 4), 0);
    DraPluginOptions options;
    options.node_name = "node-a";
    options.device_plugin_dir = dir_ / "device-plugins";
    DraPluginParts parts;
    parts.discovery = std::make_unique<FakeDiscovery>();
    parts.health = std::make_unique<ScriptedHealth>();
    parts.api = NewKubeHttpClient({api_.url(), dir_ / "token", api_.ca_file()});
    parts.provisioner = NewStoreProvisioner(dir_ / "state");
    auto refused = DraPlugin::Start(options, std::move(parts));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("not both"), std::string::npos) << refused.status().message();
    close(listener);
  }
  // The socket file is left behind, but nothing answers: a stale file does not count.
  auto plugin = StartPlugin();
  EXPECT_TRUE(plugin);
}

TEST_F(DraPluginTest, ServesV1beta1Too) {
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  auto stub = drav1beta1::DRAPlugin::NewStub(Dial(plugin->dra_socket()));
  drav1beta1::NodePrepareResourcesRequest request;
  auto* c = request.add_claims();
  c->set_namespace_("ml");
  c->set_name("train");
  c->set_uid("uid-train");
  drav1beta1::NodePrepareResourcesResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->NodePrepareResources(&context, request, &response).ok());
  ASSERT_EQ(response.claims().at("uid-train").error(), "");
  EXPECT_EQ(response.claims().at("uid-train").devices(0).cdi_device_ids(0), "gpu.gpuslice.io/vgpu=uid-train-1");
}

TEST(DraClaimAllocation, ClassConfigComesFirstAndClaimConfigOverridesIt) {
  NodeTopology t;
  t.gpus.push_back({0, kUuids[0], "Fake", 80 * kGiB, ""});
  json claim = Claim("c", "u", "gpu-0", "50", "8Gi", LcConfig());
  claim["status"]["allocation"]["devices"]["config"].push_back(
      {{"source", "FromClass"},
       {"opaque",
        {{"driver", kDriverName},
         {"parameters", {{"apiVersion", kConfigApiVersion}, {"kind", kConfigKind}, {"priority", "be"}, {"computeCap", 10}}}}}});
  auto parsed = ParseClaimAllocation(claim, kDriverName, "node-a", t);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->devices.size(), 1u);
  EXPECT_EQ(parsed->devices[0].config.priority_level, "lc");
  EXPECT_EQ(parsed->devices[0].config.priority_field, "status.allocation.devices.config[0].opaque.parameters.priority");
  EXPECT_EQ(parsed->devices[0].config.compute_cap_pct, 40u);
  EXPECT_EQ(parsed->devices[0].memory_bytes, 8 * kGiB);
  EXPECT_EQ(parsed->devices[0].cores, 50u);
}

TEST(DraClaimAllocation, SuspendableIsABoolean) {
  const json base = {{"apiVersion", kConfigApiVersion}, {"kind", kConfigKind}};
  json p = base;
  p["suspendable"] = true;
  auto config = ParseVgpuConfig(p, {}, "opaque.parameters");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->suspendable);
  EXPECT_FALSE(ParseVgpuConfig(base, {}, "opaque.parameters")->suspendable);  // absent: not
  p["suspendable"] = "true";
  auto bad = ParseVgpuConfig(p, {}, "opaque.parameters");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("opaque.parameters.suspendable is \"true\"; use true or false"),
            std::string::npos)
      << bad.status().message();
}

TEST(DraClaimAllocation, PowerCapWattsIsParsedAndBadValuesNameTheFix) {
  const json base = {{"apiVersion", kConfigApiVersion}, {"kind", kConfigKind}};
  json p = base;
  p["powerCapWatts"] = 150;
  auto config = ParseVgpuConfig(p, {}, "opaque.parameters");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->power_cap_watts, 150.0);
  EXPECT_EQ(ParseVgpuConfig(base, {}, "opaque.parameters")->power_cap_watts, 0.0);  // absent: none
  for (const json& bad : {json(-1), json(0), json("150W"), json(150000)}) {
    p["powerCapWatts"] = bad;
    auto r = ParseVgpuConfig(p, {}, "opaque.parameters");
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(r.status().message().find("opaque.parameters.powerCapWatts is " + bad.dump()), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace gpuslice::k8s::dra
