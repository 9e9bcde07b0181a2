// The whole device plugin in-process, with scripted GPUs and health: its
// ListAndWatch health transitions (a GPU going unhealthy, NVML failing, and
// recovery), registration again after a kubelet restart, the node
// annotations it publishes, and its memory of assignments across restarts.
#include "k8s/device_plugin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "fake_kube_api.h"
#include "fake_kubelet.h"
#include "k8s/names.h"
#include "k8s/node_usage.h"
#include "port/fd_passing.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::CountHealth;
using testing::DeviceStream;
using testing::FakeKubeApi;
using testing::FakeKubelet;
using testing::MakePod;
using testing::TempDir;
using testing::WaitFor;

const char* const kUuids[] = {"GPU-face0000-0000-0000-0000-000000000000", "GPU-face0000-0000-0000-0000-000000000001"};

class FakeDiscovery final : public GpuDiscovery {
 public:
  StatusOr<NodeTopology> Discover(std::string* document) override {
    NodeTopology t;
    t.node = "node-a";
    for (uint32_t i = 0; i < 2; ++i) t.gpus.push_back({i, kUuids[i], "Fake H100", 4ull << 30, ""});
    t.links.push_back({0, 1, LinkType::kNvlink, 18});
    *document = TopologyToJson(t);
    return t;
  }
};

// Health the test scripts; the plugin polls it.
class ScriptedHealth final : public HealthSource {
 public:
  void Set(std::set<std::string> healthy) {
    std::lock_guard<std::mutex> lock(mu_);
    healthy_ = std::move(healthy);
    failing_ = false;
  }
  void Fail() {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = true;
  }
  StatusOr<std::set<std::string>> HealthyGpus() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (failing_) return Status::Error("NVML: driver not loaded");
    return healthy_;
  }

 private:
  std::mutex mu_;
  std::set<std::string> healthy_ = {kUuids[0], kUuids[1]};
  bool failing_ = false;
};

class NoPodsGone final : public PodLiveness {
 public:
  StatusOr<std::vector<LivePod>> List() override { return Status::Error("not in this test"); }
};

class DevicePluginTest : public ::testing::Test {
 protected:
  DevicePluginTest() : kubelet_(dir_ / "plugins") {
    std::filesystem::create_directories(dir_ / "plugins");
    std::filesystem::create_directories(dir_ / "lib");
    std::filesystem::create_directories(dir_ / "dev");
    for (const char* f : {"lib/libgpuslice-cuda.so", "dev/nvidiactl", "dev/nvidia0", "dev/nvidia1"}) {
      testing::WriteFile(dir_ / f, "");
    }
  }

  std::unique_ptr<DevicePlugin> StartPlugin() {
    auto plugin = TryStartPlugin();
    EXPECT_TRUE(plugin.ok()) << plugin.status().message();
    return plugin.ok() ? std::move(*plugin) : nullptr;
  }

  StatusOr<std::unique_ptr<DevicePlugin>> TryStartPlugin() {
    DevicePluginOptions options;
    options.dra_registry_dir = dir_ / "registry";
    options.node_name = "node-a";
    options.plugin_dir = dir_ / "plugins";
    options.state_dir = dir_ / "state";
    options.container.library_dir = dir_ / "lib";
    options.container.dev_root = dir_ / "dev";
    options.health_interval = std::chrono::milliseconds(10);
    options.reclaim_interval = std::chrono::hours(1);
    DevicePluginParts parts;
    parts.discovery = std::make_unique<FakeDiscovery>();
    auto health = std::make_unique<ScriptedHealth>();
    health_ = health.get();
    parts.health = std::move(health);
    auto api = std::make_unique<FakeKubeApi>();
    api_ = api.get();
    parts.api = std::move(api);
    parts.liveness = std::make_unique<NoPodsGone>();
    parts.provisioner = NewStoreProvisioner(dir_ / "state");
    return DevicePlugin::Start(options, std::move(parts));
  }

  StatusOr<NodeUsage> PublishedUsage() const {
    const auto annotations = api_->NodeAnnotations();
    const auto it = annotations.find(kAllocatedAnnotation);
    if (it == annotations.end()) return Status::Error("not published");
    return ParseNodeUsage(it->second);
  }

  TempDir dir_;
  FakeKubelet kubelet_;
  ScriptedHealth* health_ = nullptr;
  FakeKubeApi* api_ = nullptr;
};

// One of the two plugins per node: both would hand out the same GPUs. A
// registration socket of the DRA plugin that answers stops the device
// plugin; one left behind by a dead DRA plugin does not.
TEST_F(DevicePluginTest, RefusesToStartWhileGpuslicesDraPluginServesTheNode) {
  std::filesystem::create_directories(dir_ / "registry");
  const std::string socket = dir_ / "registry/gpu.gpuslice.io-reg.sock";
  auto listening = port::ListenUnix(socket, 0600);
  ASSERT_TRUE(listening.ok()) << listening.status().message();
  auto refused = TryStartPlugin();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("DRA plugin is serving this node's GPUs"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--dra-registry-dir"), std::string::npos);

  close(listening.value());  // the DRA plugin died; its socket file stays
  ASSERT_TRUE(std::filesystem::exists(socket));
  EXPECT_NE(StartPlugin(), nullptr);
}

TEST_F(DevicePluginTest, ListAndWatchFollowsHealthDownAndBackUp) {
  kubelet_.Start();
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2));
  auto stub = kubelet_.Dial("gpuslice-vcore.sock");
  DeviceStream stream(stub.get());
  v1beta1::ListAndWatchResponse list;

  ASSERT_TRUE(stream.Next(&list));
  EXPECT_EQ(CountHealth(list).healthy, 200);
  EXPECT_EQ(CountHealth(list).unhealthy, 0);

  health_->Set({kUuids[0]});  // GPU 1 falls off the bus
  ASSERT_TRUE(stream.Next(&list));
  EXPECT_EQ(CountHealth(list, kUuids[0]).healthy, 100);
  EXPECT_EQ(CountHealth(list, kUuids[1]).unhealthy, 100);
  EXPECT_EQ(CountHealth(list, kUuids[1]).healthy, 0);
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->gpus.size() == 2 && !usage->gpus[1].healthy && usage->gpus[0].healthy;
  })) << "the node annotation reports GPU 1 unhealthy";

  health_->Fail();  // NVML stops answering: nothing can be vouched for
  ASSERT_TRUE(stream.Next(&list));
  EXPECT_EQ(CountHealth(list).unhealthy, 200);

  health_->Set({kUuids[0], kUuids[1]});  // recovery
  ASSERT_TRUE(stream.Next(&list));
  EXPECT_EQ(CountHealth(list).healthy, 200);
  EXPECT_EQ(CountHealth(list).unhealthy, 0);
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->gpus[0].healthy && usage->gpus[1].healthy;
  }));

  // The vmemory stream saw the same history; a new stream starts from now.
  auto mem_stub = kubelet_.Dial("gpuslice-vmemory.sock");
  DeviceStream mem(mem_stub.get());
  ASSERT_TRUE(mem.Next(&list));
  EXPECT_EQ(CountHealth(list).healthy, 32);  // 2 GPUs x 4 GiB / 256 MiB
  health_->Set({kUuids[1]});
  ASSERT_TRUE(mem.Next(&list));
  EXPECT_EQ(CountHealth(list, kUuids[0]).unhealthy, 16);
  EXPECT_EQ(CountHealth(list, kUuids[1]).healthy, 16);
  ASSERT_TRUE(stream.Next(&list));  // the vcore stream got the same news
  EXPECT_EQ(CountHealth(list, kUuids[0]).unhealthy, 100);
  // The streams end when the plugin stops (well before their 60 s deadline).
  const auto stopping = std::chrono::steady_clock::now();
  plugin->Stop();
  EXPECT_FALSE(stream.Next(&list));
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(5));
}

TEST_F(DevicePluginTest, RegistersAgainWhenTheKubeletRestarts) {
  auto plugin = StartPlugin();  // before any kubelet: it waits
  ASSERT_TRUE(plugin);
  kubelet_.Start();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2));
  std::set<std::string> resources;
  for (const auto& r : kubelet_.Registrations()) {
    resources.insert(r.resource_name());
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
  }
  EXPECT_EQ(resources, (std::set<std::string>{kVcoreResource, kVmemoryResource}));

  kubelet_.Stop(/*wipe_directory=*/true);  // the kubelet restarts: sockets gone
  kubelet_.Start();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(4));
  auto stub = kubelet_.Dial("gpuslice-vcore.sock");
  DeviceStream stream(stub.get());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream.Next(&list));
  EXPECT_EQ(list.devices_size(), 200);
  // The plugin counts a registration once the kubelet's reply is back, which
  // may be after the kubelet has counted it (a loaded CI run saw 3 here).
  EXPECT_TRUE(WaitFor([&] { return plugin->registrations() >= 4u; })) << plugin->registrations();
}

TEST_F(DevicePluginTest, AssignmentsSurviveAPluginRestart) {
  kubelet_.Start();
  auto plugin = StartPlugin();
  ASSERT_TRUE(plugin);
  ASSERT_TRUE(kubelet_.WaitForRegistrations(2));
  api_->PutPod(MakePod("ml", "a", "uid-a", {{"main", 40, 4}}, json::object(), "node-a"));
  auto stub = kubelet_.Dial("gpuslice-vcore.sock");
  v1beta1::AllocateRequest request;
  auto* c = request.add_container_requests();
  for (int u = 0; u < 40; ++u) c->add_devices_ids(MakeDeviceId(Resource::kVcore, kUuids[1], u));
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(stub->Allocate(&context, request, &response).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->gpus[1].vcore_used == 40 && usage->HasPod("uid-a");
  }));
  plugin.reset();

  auto again = StartPlugin();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->resources().Usage().gpus[1].vcore_used, 40u);
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->gpus[1].vcore_used == 40 && usage->HasPod("uid-a");
  }));
}

}  // namespace
}  // namespace gpuslice::k8s
