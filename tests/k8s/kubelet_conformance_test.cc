// Kubelet-side conformance test: this program plays the kubelet against the
// real `gpuslice device-plugin` process. The GPUs are the fake NVML's (two,
// 4 GiB each, NVLink), the API server is a fake one over HTTPS with a token.
//
//   - serves Registration on a temporary kubelet.sock and accepts the
//     plugin's two Register calls (vcore, vmemory);
//   - consumes ListAndWatch: GPUs x 100 vcore and memory / 256 MiB vmemory;
//   - calls GetPreferredAllocation and Allocate as the kubelet would for a
//     pod, and checks the mounts, environment, device nodes and the created
//     vGPU's limits file;
//   - sends malformed requests (unknown IDs, oversize, empty): each is a gRPC
//     error with a clear message, and the plugin's state is unchanged;
//   - restarts "the kubelet" (sockets wiped) and sees the plugin register
//     again;
//   - stops the plugin with SIGTERM and expects a clean exit.
//
// tests/k8s/image_test.sh runs it again with the plugin in a container of
// the built image (container_runner.h), and a CUDA application in a second
// container with the CDI spec's edits applied by hand.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <set>

#include "container_runner.h"
#include "core/state_handout.h"
#include "core/vgpu_store.h"
#include "fake_api_server.h"
#include "fake_kubelet.h"
#include "k8s/cdi.h"
#include "k8s/device_ids.h"
#include "k8s/names.h"
#include "k8s/node_usage.h"
#include "k8s/topology.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::CountHealth;
using testing::DeviceStream;
using testing::FakeApiServer;
using testing::FakeKubelet;
using testing::MakeNode;
using testing::MakePod;
using testing::TempDir;
using testing::WaitFor;

constexpr uint64_t kGpuMemory = 4ull << 30;
const std::string kGpu0 = "GPU-face0000-0000-0000-0000-000000000000";
const std::string kGpu1 = "GPU-face0000-0000-0000-0000-000000000001";

class KubeletConformance : public ::testing::Test {
 protected:
  KubeletConformance() : api_({true, "conformance-token", dir_.path()}), kubelet_(dir_ / "device-plugins") {}

  void SetUp() override {
    namespace fs = std::filesystem;
    fs::create_directories(dir_ / "device-plugins");
    fs::create_directories(dir_ / "dev");
    fs::create_directories(dir_ / "cdi");
    fs::create_directories(dir_ / "cgroup/kubepods.slice");
    for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1"}) {
      testing::WriteFile(dir_ / ("dev/" + std::string(node)), "");
    }
    testing::WriteFile(dir_ / "token", "conformance-token\n");
    api_.PutNode(MakeNode("node-a"));
    kubelet_.Start();
    StartPlugin();
    ASSERT_TRUE(kubelet_.WaitForRegistrations(2)) << Log();
  }

  void TearDown() override {
    if (!plugin_.running()) return;
    const int status = plugin_.Stop();
    EXPECT_NE(status, -1) << "the plugin did not stop within 10 s of SIGTERM\n" << Log();
    EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n" << Log();
    if (HasFailure()) std::cerr << "--- plugin log ---\n" << Log();
  }

  void StartPlugin() {
    testing::GpusliceProcess::Options o;
    o.binary = GPUSLICE_BINARY;
    o.args = {"device-plugin",
              "--node-name=node-a",
              "--kubelet-dir=" + dir_ / "device-plugins",
              "--state-dir=" + dir_ / "state",
              "--library-dir=" + std::string(GPUSLICE_LIBRARY_DIR),
              "--dev-root=" + dir_ / "dev",
              "--kube-api-url=" + api_.url(),
              "--kube-token-file=" + dir_ / "token",
              "--kube-ca-file=" + api_.ca_file(),
              "--pod-liveness=cgroup",
              "--cgroup-root=" + dir_ / "cgroup",
              "--reclaim-interval=3600",
              "--cdi-dir=" + dir_ / "cdi"};
    o.env = {"PATH=/usr/bin:/bin", "GPUSLICE_REAL_NVML=" + std::string(FAKE_NVML_LIBRARY),
             "FAKE_GPU_COUNT=2",   "FAKE_GPU_MEMORY=" + std::to_string(kGpuMemory),
             "FAKE_GPU_NVLINK=1",  "GPUSLICE_LOG=info"};
    o.shared_paths = {dir_.path(), GPUSLICE_LIBRARY_DIR, FAKE_NVML_LIBRARY};
    o.log_file = dir_ / "plugin.log";
    ASSERT_TRUE(plugin_.Start(o)) << Log();
  }

  std::string Log() const { return testing::ReadFile(dir_ / "plugin.log"); }

  std::vector<std::string> Devices(Resource resource) {
    auto stub = kubelet_.Dial(resource == Resource::kVcore ? "gpuslice-vcore.sock" : "gpuslice-vmemory.sock");
    DeviceStream stream(stub.get());
    v1beta1::ListAndWatchResponse list;
    EXPECT_TRUE(stream.Next(&list));
    std::vector<std::string> ids;
    for (const auto& d : list.devices()) ids.push_back(d.id());
    return ids;
  }

  StatusOr<NodeUsage> PublishedUsage() const {
    const std::string text = api_.NodeAnnotation("node-a", kAllocatedAnnotation);
    if (text.empty()) return Status::Error("not published");
    return ParseNodeUsage(text);
  }

  grpc::Status Allocate(Resource resource, const std::vector<std::vector<std::string>>& containers,
                        v1beta1::AllocateResponse* response) {
    auto stub = kubelet_.Dial(resource == Resource::kVcore ? "gpuslice-vcore.sock" : "gpuslice-vmemory.sock");
    v1beta1::AllocateRequest request;
    for (const auto& ids : containers) {
      auto* c = request.add_container_requests();
      for (const auto& id : ids) c->add_devices_ids(id);
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return stub->Allocate(&context, request, response);
  }

  std::vector<std::string> Prefer(Resource resource, const std::vector<std::string>& available, int size,
                                  grpc::Status* status = nullptr) {
    auto stub = kubelet_.Dial(resource == Resource::kVcore ? "gpuslice-vcore.sock" : "gpuslice-vmemory.sock");
    v1beta1::PreferredAllocationRequest request;
    auto* c = request.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    c->set_allocation_size(size);
    grpc::ClientContext context;
    v1beta1::PreferredAllocationResponse response;
    const grpc::Status s = stub->GetPreferredAllocation(&context, request, &response);
    if (status != nullptr) *status = s;
    if (!s.ok() || response.container_responses_size() != 1) return {};
    return {response.container_responses(0).deviceids().begin(), response.container_responses(0).deviceids().end()};
  }

  // Sets up one pod's container the way the kubelet does: preferred IDs for
  // each resource, then Allocate with them. Returns the vcore response.
  v1beta1::ContainerAllocateResponse AdmitPod(const json& pod) {
    api_.PutPod(pod);
    const int vcore = std::stoi(pod["spec"]["containers"][0]["resources"]["limits"][kVcoreResource].get<std::string>());
    const int vmem =
        std::stoi(pod["spec"]["containers"][0]["resources"]["limits"][kVmemoryResource].get<std::string>());
    v1beta1::AllocateResponse response;
    const grpc::Status s =
        Allocate(Resource::kVcore, {Prefer(Resource::kVcore, Devices(Resource::kVcore), vcore)}, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    v1beta1::AllocateResponse memory;
    const grpc::Status m =
        Allocate(Resource::kVmemory, {Prefer(Resource::kVmemory, Devices(Resource::kVmemory), vmem)}, &memory);
    EXPECT_TRUE(m.ok()) << m.error_message();
    return response.container_responses_size() == 1 ? response.container_responses(0)
                                                    : v1beta1::ContainerAllocateResponse();
  }

  TempDir dir_;
  FakeApiServer api_;
  FakeKubelet kubelet_;
  testing::GpusliceProcess plugin_;
};

TEST_F(KubeletConformance, RegistersBothResourcesAndAdvertisesEveryUnit) {
  std::map<std::string, v1beta1::RegisterRequest> by_resource;
  for (const auto& r : kubelet_.Registrations()) by_resource[r.resource_name()] = r;
  ASSERT_EQ(by_resource.size(), 2u);
  EXPECT_EQ(by_resource[kVcoreResource].endpoint(), "gpuslice-vcore.sock");
  EXPECT_EQ(by_resource[kVmemoryResource].endpoint(), "gpuslice-vmemory.sock");
  for (const auto& [name, r] : by_resource) {
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
    EXPECT_FALSE(r.options().pre_start_required());
    struct stat st;
    ASSERT_EQ(stat((dir_ / ("device-plugins/" + r.endpoint())).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "plugin sockets are owner-only";
  }
  auto stub = kubelet_.Dial("gpuslice-vcore.sock");
  grpc::ClientContext context;
  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());

  const auto vcore = Devices(Resource::kVcore);
  const auto vmemory = Devices(Resource::kVmemory);
  EXPECT_EQ(vcore.size(), 2u * 100);
  EXPECT_EQ(vmemory.size(), 2 * kGpuMemory / kVmemoryUnitBytes);
  EXPECT_EQ(std::set<std::string>(vcore.begin(), vcore.end()).size(), vcore.size()) << "IDs are unique";
  for (const auto& id : vcore) EXPECT_LE(id.size(), kMaxDeviceIdLength);

  // The node is annotated for the scheduler extender.
  ASSERT_TRUE(WaitFor([&] { return PublishedUsage().ok(); })) << Log();
  auto topology = ParseTopology(api_.NodeAnnotation("node-a", kTopologyAnnotation));
  ASSERT_TRUE(topology.ok()) << topology.status().message();
  ASSERT_EQ(topology->gpus.size(), 2u);
  EXPECT_EQ(topology->gpus[1].uuid, kGpu1);
  EXPECT_EQ(topology->gpus[0].memory_total_bytes, kGpuMemory);
  auto usage = PublishedUsage();
  EXPECT_EQ(usage->gpus.size(), 2u);
  EXPECT_EQ(usage->gpus[0].vcore_used, 0u);
  EXPECT_EQ(usage->gpus[0].vmemory_total, kGpuMemory / kVmemoryUnitBytes);
}

TEST_F(KubeletConformance, AllocatesTheContainersVgpuOnTheSchedulersGpu) {
  api_.PutPod(MakePod("ml", "train", "conf-uid-1", {{"main", 50, 8}},
                      {{kPriorityAnnotation, "lc"},
                       {kGpusAnnotation, R"({"main": [1]})"},
                       {kBindNodeAnnotation, "node-a"},
                       {kBindTimeAnnotation, "1"}},
                      "node-a"));
  // The kubelet asks for a preference among everything free...
  const auto preferred = Prefer(Resource::kVcore, Devices(Resource::kVcore), 50);
  ASSERT_EQ(preferred.size(), 50u);
  for (const auto& id : preferred) EXPECT_EQ(ParseDeviceId(id)->gpu_uuid, kGpu1) << "the scheduler chose GPU 1";
  const auto preferred_memory = Prefer(Resource::kVmemory, Devices(Resource::kVmemory), 8);
  ASSERT_EQ(preferred_memory.size(), 8u);
  for (const auto& id : preferred_memory) EXPECT_EQ(ParseDeviceId(id)->gpu_uuid, kGpu1);

  // ...then allocates those IDs.
  v1beta1::AllocateResponse response;
  grpc::Status s = Allocate(Resource::kVcore, {preferred}, &response);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << Log();
  ASSERT_EQ(response.container_responses_size(), 1);
  const auto& c = response.container_responses(0);

  std::map<std::string, v1beta1::Mount> mounts;
  for (const auto& m : c.mounts()) mounts[m.container_path()] = m;
  ASSERT_EQ(mounts.count("/run/gpuslice/vgpu"), 1u);
  ASSERT_EQ(mounts.count("/usr/local/gpuslice/lib/libgpuslice-cuda.so"), 1u);
  EXPECT_EQ(mounts.size(), 2u);
  EXPECT_TRUE(mounts["/run/gpuslice/vgpu"].read_only()) << "a container must not be able to write its limits";
  EXPECT_TRUE(mounts["/usr/local/gpuslice/lib/libgpuslice-cuda.so"].read_only());
  const std::string library = mounts["/usr/local/gpuslice/lib/libgpuslice-cuda.so"].host_path();
  EXPECT_TRUE(std::filesystem::exists(library)) << library;
  const std::string vgpu_dir = mounts["/run/gpuslice/vgpu"].host_path();
  EXPECT_EQ(vgpu_dir, dir_ / "state/vgpus/k8s-conf-uid-1-0");
  // Its ledger and board are sealed memory that the state keeper the plugin
  // started hands out on the vGPU's socket: no file a container could truncate.
  EXPECT_FALSE(std::filesystem::exists(vgpu_dir + "/ledger"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "state/boards"));
  auto state = core::FetchState(vgpu_dir);
  ASSERT_TRUE(state.ok()) << state.status().message() << "\n" << Log();
  EXPECT_EQ(state->boards.size(), 1u);
  // And a CDI spec for runtimes with CDI, which adds /etc/ld.so.preload.
  ASSERT_EQ(c.cdi_devices_size(), 1);
  EXPECT_EQ(c.cdi_devices(0).name(), "gpu.gpuslice.io/vgpu=k8s-conf-uid-1-0");
  const json spec = json::parse(testing::ReadFile(dir_ / "cdi/gpu.gpuslice.io-vgpu_k8s-conf-uid-1-0.json"));
  testing::ExpectValidCdi(spec);
  bool preload = false;
  for (const json& m : spec["devices"][0]["containerEdits"]["mounts"]) {
    preload |= m["containerPath"] == "/etc/ld.so.preload" && m["options"][0] == "ro";
  }
  EXPECT_TRUE(preload) << spec.dump(2);

  const auto& envs = c.envs();
  EXPECT_EQ(envs.at("GPUSLICE_VGPU_DIR"), "/run/gpuslice/vgpu");
  EXPECT_EQ(envs.at("LD_PRELOAD"), "/usr/local/gpuslice/lib/libgpuslice-cuda.so");
  EXPECT_EQ(envs.at("CUDA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_FALSE(envs.at("GPUSLICE_REAL_DRIVER").empty());

  std::set<std::string> devices;
  for (const auto& d : c.devices()) {
    devices.insert(d.container_path());
    EXPECT_EQ(d.host_path(), dir_ / ("dev/" + d.container_path().substr(5)));
  }
  EXPECT_EQ(devices,
            (std::set<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia1"}));

  // The vGPU: GPU 1 only, 8 x 256 MiB, a 50% share, latency-critical.
  auto handle = core::VgpuHandle::Open(vgpu_dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  ASSERT_EQ(handle->limits().device_count, 1u);
  EXPECT_EQ(handle->limits().devices[0].uuid[15], 1);  // fake GPU i has UUID bytes fa ce 00 .. 00 i
  EXPECT_EQ(handle->limits().devices[0].memory_limit_bytes, 8 * kVmemoryUnitBytes);
  EXPECT_EQ(handle->limits().devices[0].compute_share_pct, 50u);
  EXPECT_EQ(handle->limits().devices[0].priority, static_cast<uint32_t>(core::Priority::kLatencyCritical));

  v1beta1::AllocateResponse memory;
  s = Allocate(Resource::kVmemory, {preferred_memory}, &memory);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(memory.container_responses(0).mounts(0).host_path(), vgpu_dir) << "both resources share one vGPU";

  // The node's usage now shows the container.
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->gpus[1].vcore_used == 50 && usage->gpus[1].vmemory_used == 8 &&
           usage->HasPod("conf-uid-1") && usage->gpus[0].vcore_used == 0;
  })) << api_.NodeAnnotation("node-a", kAllocatedAnnotation);
}

TEST_F(KubeletConformance, MalformedRequestsAreRefusedAndChangeNothing) {
  AdmitPod(MakePod("ml", "first", "conf-uid-1", {{"main", 30, 4}}, json::object(), "node-a"));
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->HasPod("conf-uid-1");
  }));
  const auto vcore = Devices(Resource::kVcore);
  const auto vmemory = Devices(Resource::kVmemory);
  auto fingerprint = [&] {
    std::string out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "state/vgpus"))
      out += e.path().filename().string() + ";";
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "state/k8s/assignments")) {
      out += testing::ReadFile(e.path());
    }
    return out;
  };
  const std::string before = fingerprint();
  const std::string annotation_before = api_.NodeAnnotation("node-a", kAllocatedAnnotation);

  std::vector<std::string> oversize(vcore.begin(), vcore.begin() + 150);
  struct Case {
    const char* name;
    Resource resource;
    std::vector<std::vector<std::string>> containers;
    grpc::StatusCode code;
    const char* want;
  } cases[] = {
      {"empty request", Resource::kVcore, {}, grpc::StatusCode::INVALID_ARGUMENT, "no container requests"},
      {"empty container", Resource::kVmemory, {{}}, grpc::StatusCode::INVALID_ARGUMENT, "is empty"},
      {"unknown device ID",
       Resource::kVcore,
       {{"GPU-0000-not-ours-vcore-3"}},
       grpc::StatusCode::INVALID_ARGUMENT,
       "unknown gpuslice.io/vcore device ID"},
      {"a vmemory ID sent to vcore",
       Resource::kVcore,
       {{vmemory[0]}},
       grpc::StatusCode::INVALID_ARGUMENT,
       "belongs to gpuslice.io/vmemory"},
      {"duplicate IDs", Resource::kVcore, {{vcore[0], vcore[0]}}, grpc::StatusCode::INVALID_ARGUMENT, "listed twice"},
      {"oversize: 150 vcore",
       Resource::kVcore,
       {oversize},
       grpc::StatusCode::INVALID_ARGUMENT,
       "neither a share of one GPU"},
      {"oversize: more vmemory than any pod asked",
       Resource::kVmemory,
       {vmemory},
       grpc::StatusCode::FAILED_PRECONDITION,
       "no pod waiting on node node-a"},
  };
  for (const Case& c : cases) {
    v1beta1::AllocateResponse response;
    const grpc::Status s = Allocate(c.resource, c.containers, &response);
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.want), std::string::npos) << c.name << ": " << s.error_message();
    EXPECT_EQ(fingerprint(), before) << c.name;
  }
  grpc::Status s;
  EXPECT_TRUE(Prefer(Resource::kVcore, vcore, 0, &s).empty());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Prefer(Resource::kVcore, {"junk"}, 1, &s).empty());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(api_.NodeAnnotation("node-a", kAllocatedAnnotation), annotation_before);

  // The plugin still works: a second pod is admitted next to the first.
  AdmitPod(MakePod("ml", "second", "conf-uid-2", {{"main", 60, 8}}, json::object(), "node-a"));
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->HasPod("conf-uid-2") && usage->gpus[0].vcore_used + usage->gpus[1].vcore_used == 90;
  })) << api_.NodeAnnotation("node-a", kAllocatedAnnotation);
}

TEST_F(KubeletConformance, RegistersAgainWhenTheKubeletRestarts) {
  AdmitPod(MakePod("ml", "before", "conf-uid-1", {{"main", 40, 4}}, json::object(), "node-a"));
  kubelet_.Stop(/*wipe_directory=*/true);  // the kubelet dies; its successor empties the directory
  kubelet_.Start();
  ASSERT_TRUE(kubelet_.WaitForRegistrations(4)) << Log();
  std::set<std::string> again;
  const auto all = kubelet_.Registrations();
  for (size_t i = 2; i < all.size(); ++i) again.insert(all[i].resource_name());
  EXPECT_EQ(again, (std::set<std::string>{kVcoreResource, kVmemoryResource}));
  EXPECT_EQ(Devices(Resource::kVcore).size(), 200u);
  EXPECT_EQ(Devices(Resource::kVmemory).size(), 2 * kGpuMemory / kVmemoryUnitBytes);
  // What was given out before the restart is still accounted.
  ASSERT_TRUE(WaitFor([&] {
    auto usage = PublishedUsage();
    return usage.ok() && usage->HasPod("conf-uid-1");
  }));
}

// The init container's step: the library lands on the node, whole.
TEST_F(KubeletConformance, InstallLibraryPutsTheLibraryOnTheNode) {
  std::string output;
  const int rc =
      testing::RunGpuslice(GPUSLICE_BINARY, {"install-library", "--to=" + dir_ / "node-lib"}, {dir_.path()}, &output);
  ASSERT_EQ(rc, 0) << output;
  for (const char* file : {"node-lib/libgpuslice-cuda.so", "node-lib/shim/libcuda.so.1"}) {
    struct stat st;
    ASSERT_EQ(stat((dir_ / file).c_str(), &st), 0) << file << "\n" << output;
    EXPECT_EQ(st.st_mode & 0777, 0755u) << file;
    EXPECT_EQ(testing::ReadFile(dir_ / file).substr(0, 4),
              "\x7f"
              "ELF")
        << file;
  }
}

// A CUDA application in its own container, set up only by the CDI spec (as a
// runtime with CDI applies it), with no LD_PRELOAD: /etc/ld.so.preload loads
// the library, and the vGPU's limit holds. Without that mount the same
// container allocates past the limit, so the mount is what enforces it.
TEST_F(KubeletConformance, AContainerSetUpByTheCdiSpecKeepsItsLimitWithoutLdPreload) {
  if (testing::AppImage().empty()) {
    GTEST_SKIP() << "GPUSLICE_TEST_APP_IMAGE is not set: tests/k8s/image_test.sh builds the images and sets it";
  }
  const auto c = AdmitPod(MakePod("ml", "app", "conf-uid-app", {{"main", 30, 4}}, json::object(), "node-a"));
  ASSERT_EQ(c.cdi_devices_size(), 1) << Log();
  const std::string id = c.cdi_devices(0).name();
  const std::string device = id.substr(id.find('=') + 1);
  json spec = json::parse(testing::ReadFile(CdiSpecPath(dir_ / "cdi", device)));
  for (const json& e : spec["devices"][0]["containerEdits"]["env"]) {
    ASSERT_NE(e.get<std::string>().rfind("LD_PRELOAD=", 0), 0u) << "the spec must not rely on LD_PRELOAD";
  }
  const std::vector<std::string> app = {"/usr/local/bin/cuda_app", "init", "meminfo", "alloc", "768M", "alloc", "512M"};
  const std::vector<std::string> gpus = {"FAKE_GPU_COUNT=2", "FAKE_GPU_MEMORY=" + std::to_string(kGpuMemory)};

  std::string output;
  int rc = testing::RunWithCdiDevice(spec, device, app, gpus, &output);
  ASSERT_EQ(rc, 0) << output << Log();
  EXPECT_NE(output.find("meminfo 1073741824 1073741824"), std::string::npos)
      << "the app sees its 4 x 256 MiB as the GPU\n"
      << output;
  EXPECT_TRUE(testing::InOrder(output, {"alloc ok", "alloc oom"})) << output;

  // The control: the same spec without /etc/ld.so.preload.
  json& mounts = spec["devices"][0]["containerEdits"]["mounts"];
  for (auto m = mounts.begin(); m != mounts.end();) {
    m = (*m)["containerPath"] == kContainerPreloadPath ? mounts.erase(m) : m + 1;
  }
  rc = testing::RunWithCdiDevice(spec, device, app, gpus, &output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("meminfo " + std::to_string(kGpuMemory)), std::string::npos) << "nothing loaded the library\n"
                                                                                     << output;
  EXPECT_TRUE(testing::InOrder(output, {"alloc ok", "alloc ok"})) << output;
}

}  // namespace
}  // namespace gpuslice::k8s
