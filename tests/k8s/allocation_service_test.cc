// AllocationService as tables of request -> response: GetPreferredAllocation
// and Allocate for each resource, the vGPU they create (its limits file read
// back), and malformed requests, each answered with a gRPC error that names
// the problem and leaves no trace in the state directory.
#include "k8s/allocation_service.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "core/board_roster.h"
#include "core/shared_word.h"
#include "core/state_handout.h"
#include "core/vgpu_store.h"
#include "fake_kube_api.h"
#include "k8s/cdi.h"
#include "k8s/names.h"
#include "node/policy_file.h"
#include "node/power_cap_file.h"
#include "node/state_keeper.h"
#include "node/state_keeper_client.h"
#include "port/nvml_library.h"
#include "port/process.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::FakeKubeApi;
using testing::MakePod;
using testing::TempDir;

constexpr uint64_t kGpuMemory = 4ull << 30;  // 16 vmemory units per GPU
const char* const kUuids[] = {"GPU-face0000-0000-0000-0000-000000000000", "GPU-face0000-0000-0000-0000-000000000001"};

NodeTopology TwoGpus() {
  NodeTopology t;
  t.node = "node-a";
  for (uint32_t i = 0; i < 2; ++i) t.gpus.push_back({i, kUuids[i], "Fake H100", kGpuMemory, ""});
  t.links.push_back({0, 1, LinkType::kNvlink, 18});
  return t;
}

std::vector<std::string> Ids(Resource r, uint32_t gpu, uint32_t first, uint32_t count) {
  std::vector<std::string> ids;
  for (uint32_t u = first; u < first + count; ++u) ids.push_back(MakeDeviceId(r, kUuids[gpu], u));
  return ids;
}

v1beta1::AllocateRequest AllocateOf(const std::vector<std::vector<std::string>>& containers) {
  v1beta1::AllocateRequest req;
  for (const auto& ids : containers) {
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
  }
  return req;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class AllocationServiceTest : public ::testing::Test {
 protected:
  AllocationServiceTest()
      : resources_(TwoGpus(), "node-a"),
        provisioner_(NewStoreProvisioner(dir_ / "state")),
        store_(dir_ / "state/k8s/assignments") {
    std::filesystem::create_directories(dir_ / "lib/shim");
    std::filesystem::create_directories(dir_ / "dev");
    for (const char* f : {"lib/libgpuslice-cuda.so", "lib/shim/libcuda.so.1", "dev/nvidiactl", "dev/nvidia-uvm",
                          "dev/nvidia0", "dev/nvidia1"}) {
      testing::WriteFile(dir_ / f, "");
    }
    env_.library_dir = dir_ / "lib";
    env_.dev_root = dir_ / "dev";
    env_.proc_root = dir_ / "proc";
    MakeService();
  }

  void MakeService() {
    service_ = std::make_unique<AllocationService>(&resources_, &api_, provisioner_.get(), &store_, env_,
                                                   PackingPolicy::kBinpack, [] { return int64_t{1000}; });
  }

  grpc::Status Allocate(Resource r, const std::vector<std::vector<std::string>>& containers,
                        v1beta1::AllocateResponse* out = nullptr) {
    v1beta1::AllocateResponse response;
    grpc::Status s = service_->Allocate(r, AllocateOf(containers), &response);
    if (out != nullptr) *out = response;
    return s;
  }

  std::vector<std::string> Prefer(Resource r, const std::vector<std::string>& available, int size,
                                  const std::vector<std::string>& must = {}, grpc::Status* status = nullptr) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    for (const auto& id : must) c->add_must_include_deviceids(id);
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse response;
    grpc::Status s = service_->GetPreferredAllocation(r, req, &response);
    if (status != nullptr) *status = s;
    if (!s.ok() || response.container_responses_size() != 1) return {};
    return {response.container_responses(0).deviceids().begin(), response.container_responses(0).deviceids().end()};
  }

  // Everything an error must leave untouched.
  std::string StateFingerprint() const {
    std::string out;
    for (const auto& name : provisioner_->List()) out += name + ";";
    for (const auto& a : store_.LoadAll(nullptr)) out += AssignmentToJson(a);
    out += NodeUsageToJson(resources_.Usage());
    return out;
  }

  TempDir dir_;
  ResourceManager resources_;
  FakeKubeApi api_;
  std::unique_ptr<VgpuProvisioner> provisioner_;
  AssignmentStore store_;
  ContainerEnvironment env_;
  std::unique_ptr<AllocationService> service_;
};

std::map<std::string, std::pair<std::string, bool>> MountsOf(const v1beta1::ContainerAllocateResponse& r) {
  std::map<std::string, std::pair<std::string, bool>> out;  // container path -> (host path, read-only)
  for (const auto& m : r.mounts()) out[m.container_path()] = {m.host_path(), m.read_only()};
  return out;
}

// The plugins' way (commands.cc): each vGPU's ledger and boards are sealed
// memory that the node's state keeper holds and hands out on the vGPU's
// socket (node/state_keeper.h). The keeper serves from a thread of the test.
class SealedStateAllocationTest : public AllocationServiceTest {
 protected:
  void SetUp() override {
    const std::string root = dir_ / "state";
    ASSERT_TRUE(core::VgpuStore(root).EnsureRoot().ok());
    auto keeper = node::StateKeeper::Listen(root);
    ASSERT_TRUE(keeper.ok()) << keeper.status().message();
    keeper_.emplace(std::move(keeper.value()));
    keeper_thread_ = std::thread([this] {
      while (!stop_.load() && keeper_->Step(20)) {
      }
    });
    auto client = node::StateKeeperClient::Connect(root, "/nonexistent/gpuslice", {0666, std::nullopt});
    ASSERT_TRUE(client.ok()) << client.status().message();
    service_.reset();
    provisioner_ = NewStoreProvisioner(root, std::move(client.value()));
    MakeService();
  }
  void TearDown() override {
    service_.reset();
    provisioner_.reset();
    stop_ = true;
    if (keeper_thread_.joinable()) keeper_thread_.join();
  }

  std::optional<node::StateKeeper> keeper_;
  std::thread keeper_thread_;
  std::atomic<bool> stop_{false};
};

TEST_F(AllocationServiceTest, AllocateHonoursTheExtendersChoiceAndBuildsTheVgpu) {
  api_.PutPod(MakePod(
      "ml", "infer", "uid-infer", {{"main", 50, 8}},
      {{kPriorityAnnotation, "lc"}, {kPowerCapAnnotation, "150"}, {kGpusAnnotation, R"({"main": [1]})"},
       {kBindNodeAnnotation, "node-a"}},
      "node-a"));
  // The kubelet took IDs of GPU 0; the extender's annotation says GPU 1.
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 50)}, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  const auto& c = response.container_responses(0);

  const auto mounts = MountsOf(c);
  ASSERT_EQ(mounts.size(), 5u);
  const std::string vgpu_dir = dir_ / "state/vgpus/k8s-uid-infer-0";
  EXPECT_EQ(mounts.at("/run/gpuslice/vgpu/limits"), std::make_pair(vgpu_dir + "/limits", true));
  EXPECT_EQ(mounts.at("/run/gpuslice/vgpu/ledger"), std::make_pair(vgpu_dir + "/ledger", false));
  // The node's pacing boards, shared by every vGPU, and present for this GPU.
  EXPECT_EQ(mounts.at("/run/gpuslice/vgpu/boards"), std::make_pair(dir_ / "state/boards", false));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "state/boards"));
  // The node's roster, read-only, as a directory (core/board_roster.h).
  EXPECT_EQ(mounts.at("/run/gpuslice/vgpu/roster.d"), std::make_pair(dir_ / "state/roster.d", true));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "state/roster.d/roster"));
  EXPECT_EQ(mounts.at("/usr/local/gpuslice/lib/libgpuslice-cuda.so"),
            std::make_pair(dir_ / "lib/libgpuslice-cuda.so", true));

  const auto& envs = c.envs();
  EXPECT_EQ(envs.at("GPUSLICE_VGPU_DIR"), "/run/gpuslice/vgpu");
  EXPECT_EQ(envs.at("LD_PRELOAD"), "/usr/local/gpuslice/lib/libgpuslice-cuda.so");
  EXPECT_EQ(envs.at("GPUSLICE_REAL_DRIVER"), "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_EQ(envs.at("CUDA_VISIBLE_DEVICES"), kUuids[1]);
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), kUuids[1]);
  EXPECT_EQ(envs.count("LD_LIBRARY_PATH"), 0u);

  std::vector<std::string> devices;
  for (const auto& d : c.devices()) {
    devices.push_back(d.container_path());
    EXPECT_EQ(d.host_path(), dir_ / "dev" + d.container_path().substr(4));
    EXPECT_EQ(d.permissions(), "rw");
  }
  EXPECT_EQ(devices, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia1"}));

  // The vGPU itself: one GPU, 2 GiB, a 50% share, latency-critical.
  auto handle = core::VgpuHandle::Open(vgpu_dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  const core::Limits& limits = handle->limits();
  ASSERT_EQ(limits.device_count, 1u);
  std::array<uint8_t, 16> uuid{};
  ASSERT_TRUE(port::ParseGpuUuid(kUuids[1], &uuid));
  EXPECT_EQ(memcmp(limits.devices[0].uuid, uuid.data(), 16), 0);
  EXPECT_EQ(limits.devices[0].memory_limit_bytes, 8 * kVmemoryUnitBytes);
  EXPECT_EQ(limits.devices[0].compute_share_pct, 50u);
  EXPECT_EQ(limits.devices[0].priority, static_cast<uint32_t>(core::Priority::kLatencyCritical));
  struct stat st;
  ASSERT_EQ(stat((vgpu_dir + "/limits").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  ASSERT_EQ(stat((vgpu_dir + "/ledger").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  // The pod's power cap, beside the limits, for the node daemon to hold;
  // the directory is not mounted, only limits and ledger are (above).
  const auto power = node::LoadPowerCap(vgpu_dir);
  ASSERT_TRUE(power.has_value());
  EXPECT_EQ(power->watts, 150.0);
  EXPECT_EQ(power->user_cap_pct, 0u);

  // The container's other resource joins the same vGPU.
  ASSERT_TRUE(Allocate(Resource::kVmemory, {Ids(Resource::kVmemory, 1, 0, 8)}, &response).ok());
  EXPECT_EQ(MountsOf(response.container_responses(0)).at("/run/gpuslice/vgpu/limits").first, vgpu_dir + "/limits");
  EXPECT_EQ(provisioner_->List(), std::vector<std::string>{"k8s-uid-infer-0"});
  const auto records = store_.LoadAll(nullptr);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].device_ids.at(Resource::kVcore).size(), 50u);
  EXPECT_EQ(records[0].device_ids.at(Resource::kVmemory).size(), 8u);
  const NodeUsage usage = resources_.Usage();
  EXPECT_EQ(usage.gpus[1].vcore_used, 50u);
  EXPECT_EQ(usage.gpus[1].vmemory_used, 8u);
  EXPECT_EQ(usage.gpus[0].vcore_used, 0u);
  EXPECT_EQ(usage.pods, std::vector<std::string>{"uid-infer"});

  // A retried call gets the same answer and changes nothing.
  const std::string before = StateFingerprint();
  v1beta1::AllocateResponse again;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 50)}, &again).ok());
  EXPECT_EQ(MountsOf(again.container_responses(0)), mounts);
  EXPECT_EQ(StateFingerprint(), before);

  // The pod ends; the kubelet gives the same device IDs to a new pod before
  // the reclaimer has run. The new pod gets a vGPU of its own.
  api_.Clear();
  api_.PutPod(MakePod("ml", "next", "uid-next", {{"main", 50, 4}}, json::object(), "node-a"));
  v1beta1::AllocateResponse next;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 50)}, &next).ok());
  EXPECT_EQ(MountsOf(next.container_responses(0)).at("/run/gpuslice/vgpu/limits").first,
            dir_ / "state/vgpus/k8s-uid-next-0/limits");
  EXPECT_EQ(provisioner_->List(), (std::vector<std::string>{"k8s-uid-infer-0", "k8s-uid-next-0"}));
}

TEST_F(AllocationServiceTest, WithoutAnAnnotationTheKubeletsIdsOrTheAllocatorDecide) {
  api_.PutPod(MakePod("ml", "a", "uid-a", {{"main", 40, 4}}, json::object(), "node-a"));
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 1, 10, 40)}, &r).ok());
  EXPECT_EQ(r.container_responses(0).envs().at("CUDA_VISIBLE_DEVICES"), kUuids[1]);  // the IDs' GPU
  // IDs spread over both GPUs for a one-GPU container: binpack puts it with a.
  api_.PutPod(MakePod("ml", "b", "uid-b", {{"main", 30, 4}}, json::object(), "node-a"));
  ASSERT_TRUE(
      Allocate(Resource::kVcore, {Concat(Ids(Resource::kVcore, 0, 0, 15), Ids(Resource::kVcore, 1, 50, 15))}, &r).ok());
  EXPECT_EQ(r.container_responses(0).envs().at("CUDA_VISIBLE_DEVICES"), kUuids[1]);
  EXPECT_EQ(resources_.Usage().gpus[1].vcore_used, 70u);
}

TEST_F(AllocationServiceTest, ASuspendablePodsVgpuIsMarkedAndTakesTheDaemonsMemoryWait) {
  // The node daemon serves memory overcommit on this state directory.
  std::filesystem::create_directories(dir_ / "state");
  ASSERT_TRUE(node::StoreMemoryWait(dir_ / "state", 15000).ok());
  api_.PutPod(MakePod("ml", "train", "uid-train", {{"main", 40, 4}}, {{kSuspendableAnnotation, "true"}}, "node-a"));
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 1, 10, 40)}, &r).ok());
  const std::string dir = dir_ / "state/vgpus/k8s-uid-train-0";
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + core::kSuspendableMarker));
  auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->limits().memory_wait_ms, 15000u);
  // A pod without the annotation is not suspendable, and waits as well.
  api_.PutPod(MakePod("ml", "infer", "uid-infer", {{"main", 40, 4}}, {{kPriorityAnnotation, "lc"}}, "node-a"));
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 1, 60, 40)}, &r).ok());
  const std::string lc = dir_ / "state/vgpus/k8s-uid-infer-0";
  EXPECT_FALSE(std::filesystem::exists(lc + "/" + core::kSuspendableMarker));
  EXPECT_EQ(core::VgpuHandle::Open(lc, port::MappedFile::Access::kReadOnly)->limits().memory_wait_ms, 15000u);
}

TEST_F(AllocationServiceTest, WholeGpus) {
  api_.PutPod(MakePod("ml", "wide", "uid-wide", {{"main", 200, 16}}, json::object(), "node-a"));
  api_.PutPod(MakePod("ml", "solo", "uid-solo", {{"main", 100, 0}}, json::object(), "node-b"));
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(
      Allocate(Resource::kVcore, {Concat(Ids(Resource::kVcore, 0, 0, 100), Ids(Resource::kVcore, 1, 0, 100))}, &r)
          .ok());
  EXPECT_EQ(r.container_responses(0).envs().at("CUDA_VISIBLE_DEVICES"), std::string(kUuids[0]) + "," + kUuids[1]);
  EXPECT_EQ(r.container_responses(0).devices_size(), 4);  // ctl, uvm, nvidia0, nvidia1
  auto handle = core::VgpuHandle::Open(dir_ / "state/vgpus/k8s-uid-wide-0", port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok());
  ASSERT_EQ(handle->limits().device_count, 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(handle->limits().devices[i].memory_limit_bytes, 8 * kVmemoryUnitBytes);  // 16 units over 2 GPUs
    EXPECT_EQ(handle->limits().devices[i].compute_share_pct, 100u);
  }
}

TEST_F(AllocationServiceTest, AWholeGpuWithoutVmemoryIsNotCapped) {
  api_.PutPod(MakePod("ml", "solo", "uid-solo", {{"main", 100, 0}}, json::object(), "node-a"));
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 100)}).ok());
  auto handle = core::VgpuHandle::Open(dir_ / "state/vgpus/k8s-uid-solo-0", port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->limits().devices[0].memory_limit_bytes, core::kUnlimited);
}

TEST_F(AllocationServiceTest, LibpathModeAndNoNvidiaRuntime) {
  env_.inject = InjectMode::kLibraryPath;
  env_.set_nvidia_visible_devices = false;
  env_.container_driver_path = "";
  service_ = std::make_unique<AllocationService>(&resources_, &api_, provisioner_.get(), &store_, env_,
                                                 PackingPolicy::kBinpack);
  api_.PutPod(MakePod("ml", "a", "uid-a", {{"main", 40, 4}}, json::object(), "node-a"));
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(Allocate(Resource::kVmemory, {Ids(Resource::kVmemory, 0, 0, 4)}, &r).ok());
  const auto& envs = r.container_responses(0).envs();
  EXPECT_EQ(envs.at("LD_LIBRARY_PATH"), "/usr/local/gpuslice/lib/shim:/usr/local/nvidia/lib64:/usr/local/nvidia/lib");
  EXPECT_EQ(envs.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(envs.count("NVIDIA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(envs.count("GPUSLICE_REAL_DRIVER"), 0u);
  EXPECT_EQ(MountsOf(r.container_responses(0)).at("/usr/local/gpuslice/lib/shim/libcuda.so.1"),
            std::make_pair(dir_ / "lib/shim/libcuda.so.1", true));
}

// The pod's gpuslice.io/priority, as a table of annotation -> the level word
// of the vGPU it gets, under the node's levels: the defaults, then the
// daemon's stored ones (node/policy_file.h).
TEST_F(AllocationServiceTest, ThePriorityAnnotationNamesOneOfTheNodesLevels) {
  struct Case {
    const char* levels_yaml;  // "": the defaults
    const char* annotation;
    uint32_t word;
  } cases[] = {
      {"", "lc", core::LevelWord(core::Priority::kLatencyCritical, 0)},
      {"", "critical", core::LevelWord(core::Priority::kLatencyCritical, 1)},
      {"", "normal", core::LevelWord(core::Priority::kBestEffort, 1)},
      {"", "low", core::LevelWord(core::Priority::kBestEffort, 0)},
      {"levels:\n  - {name: gold, class: lc}\n  - {name: silver, class: lc}\n  - {name: bronze, class: be}\n", "gold",
       core::LevelWord(core::Priority::kLatencyCritical, 1)},
  };
  std::filesystem::create_directories(dir_ / "state");
  int n = 0;
  for (const Case& c : cases) {
    ASSERT_TRUE(node::StoreLevels(dir_ / "state", c.levels_yaml).ok());
    const std::string uid = "uid-" + std::to_string(n++);
    api_.Clear();
    api_.PutPod(MakePod("ml", "p", uid, {{"main", 10, 1}}, {{kPriorityAnnotation, c.annotation}}, "node-a"));
    const grpc::Status s = Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 10 * n, 10)});
    ASSERT_TRUE(s.ok()) << c.annotation << ": " << s.error_message();
    auto handle = core::VgpuHandle::Open(dir_ / ("state/vgpus/k8s-" + uid + "-0"), port::MappedFile::Access::kReadOnly);
    ASSERT_TRUE(handle.ok()) << handle.status().message();
    EXPECT_EQ(handle->limits().devices[0].priority, c.word) << c.annotation;
    const auto record = resources_.FindContainer(uid, "main");
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->level_name, c.annotation);
  }
}

TEST_F(AllocationServiceTest, PodsOnOneGpuGetTheNodeSchedulesSlicesAndItsRoster) {
  // An LC pod and a BE pod on GPU 0: like the daemon's and `gpuslice run`'s
  // vGPUs, each gets its hardware slice from the node schedule (LC's long,
  // BE's short beside it) and the node's roster, at Allocate; the BE pod's
  // slice comes back once the LC pod's vGPU is released.
  std::filesystem::create_directories(dir_ / "state");
  api_.PutPod(MakePod("ml", "serve", "uid-lc", {{"main", 10, 1}}, {{kPriorityAnnotation, "lc"}}, "node-a"));
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 10)}).ok());
  api_.PutPod(MakePod("ml", "train", "uid-be", {{"main", 10, 1}}, {{kPriorityAnnotation, "be"}}, "node-a"));
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 10, 10)}).ok());
  const std::filesystem::path lc = dir_ / "state/vgpus/k8s-uid-lc-0", be = dir_ / "state/vgpus/k8s-uid-be-0";
  auto slice = [](const std::filesystem::path& dir) {
    auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
    EXPECT_TRUE(handle.ok()) << handle.status().message();
    return handle.ok() ? core::LoadAcquire(handle->limits().devices[0].timeslice_us) : 0;
  };
  const uint64_t be_beside_lc = slice(be);
  EXPECT_GT(slice(lc), be_beside_lc) << "the LC pod's slice is the longer";
  EXPECT_GT(be_beside_lc, 0u) << "no schedule was applied";
  auto roster = core::ParseRoster(testing::ReadFile((be / core::kRosterFileName).string()));
  ASSERT_TRUE(roster.ok()) << roster.status().message();
  EXPECT_EQ(roster->size(), 2u);

  ASSERT_TRUE(provisioner_->Release("k8s-uid-lc-0", port::SystemProcessProbe()).value());
  EXPECT_NE(slice(be), be_beside_lc) << "releasing the LC pod's vGPU did not reschedule";
}

// A pod sees its vGPU directory read-only: limits, roster and the socket
// that hands out its sealed ledger and its GPU's board. There is no file of
// shared memory a container could truncate (before, `boards/` was mounted
// read-write into every pod, and one truncation killed every other pod's
// CUDA processes on that GPU with SIGBUS).
TEST_F(SealedStateAllocationTest, APodGetsItsVgpuDirectoryReadOnlyAndNothingItCanTruncate) {
  api_.PutPod(MakePod("ml", "infer", "uid-infer", {{"main", 50, 8}}, json::object(), "node-a"));
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 50)}, &response).ok());
  const auto mounts = MountsOf(response.container_responses(0));
  const std::string vgpu_dir = dir_ / "state/vgpus/k8s-uid-infer-0";
  EXPECT_EQ(mounts.size(), 2u) << "the vGPU directory and the library";
  EXPECT_EQ(mounts.at("/run/gpuslice/vgpu"), std::make_pair(vgpu_dir, true));
  EXPECT_EQ(response.container_responses(0).envs().at("GPUSLICE_VGPU_DIR"), "/run/gpuslice/vgpu");
  for (const char* gone : {"ledger", "boards"}) {
    EXPECT_FALSE(std::filesystem::exists(vgpu_dir + "/" + gone)) << gone;
    EXPECT_FALSE(std::filesystem::exists(dir_ / (std::string("state/") + gone))) << gone;
  }
  // Open to the container's users of any uid, and nothing writable but the socket.
  const std::pair<const char*, unsigned> modes[] = {
      {"", 0755u}, {"/limits", 0444u}, {"/roster", 0444u}, {"/state.sock", 0666u}};
  for (const auto& [file, mode] : modes) {
    struct stat st;
    ASSERT_EQ(stat((vgpu_dir + file).c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 0777, mode) << file;
  }

  // What a process of the pod is handed: its ledger and its GPU's board,
  // which no descriptor can resize.
  auto state = core::FetchState(vgpu_dir);
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->boards.size(), 1u);
  for (int fd : {state->ledger.get(), state->boards[0].fd.get()}) {
    EXPECT_EQ(ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
  }
  auto handle = core::VgpuHandle::Open(vgpu_dir, port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->limits().devices[0].memory_limit_bytes, 8 * kVmemoryUnitBytes);

  // The pod's other resource joins the same vGPU; its release removes it.
  ASSERT_TRUE(Allocate(Resource::kVmemory, {Ids(Resource::kVmemory, 0, 0, 8)}, &response).ok());
  EXPECT_EQ(MountsOf(response.container_responses(0)), mounts);
  ASSERT_TRUE(provisioner_->Release("k8s-uid-infer-0", port::SystemProcessProbe()).value());
  EXPECT_FALSE(std::filesystem::exists(vgpu_dir));
}

// With a CDI directory (preload mode), Allocate also writes the container's
// CDI spec and names its device; the mounts and env stay, for runtimes
// without CDI. The spec adds the library in /etc/ld.so.preload, so a process
// that drops LD_PRELOAD still loads it.
TEST_F(AllocationServiceTest, WithACdiDirectoryTheContainerAlsoGetsACdiSpecThatPreloadsTheLibrary) {
  env_.cdi_dir = dir_ / "cdi";
  std::filesystem::create_directories(env_.cdi_dir);
  MakeService();
  api_.PutPod(MakePod("ml", "infer", "uid-infer", {{"main", 50, 8}}, json::object(), "node-a"));
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 1, 0, 50)}, &response).ok());
  const auto& c = response.container_responses(0);
  ASSERT_EQ(c.cdi_devices_size(), 1);
  EXPECT_EQ(c.cdi_devices(0).name(), "gpu.gpuslice.io/vgpu=k8s-uid-infer-0");
  EXPECT_EQ(c.envs().at("LD_PRELOAD"), "/usr/local/gpuslice/lib/libgpuslice-cuda.so") << "the fallback stays";

  const json spec = json::parse(testing::ReadFile(CdiSpecPath(env_.cdi_dir, "k8s-uid-infer-0")));
  EXPECT_EQ(spec["cdiVersion"], "1.1.0");
  EXPECT_EQ(spec["kind"], "gpu.gpuslice.io/vgpu");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], "k8s-uid-infer-0");
  const json& edits = spec["devices"][0]["containerEdits"];
  std::map<std::string, json> mounts;
  for (const json& m : edits["mounts"]) mounts[m["containerPath"]] = m;
  ASSERT_EQ(mounts.count("/etc/ld.so.preload"), 1u);
  EXPECT_EQ(mounts["/etc/ld.so.preload"]["hostPath"], dir_ / "state/k8s/ld.so.preload");
  EXPECT_EQ(mounts["/etc/ld.so.preload"]["options"][0], "ro");
  EXPECT_EQ(testing::ReadFile(dir_ / "state/k8s/ld.so.preload"), "/usr/local/gpuslice/lib/libgpuslice-cuda.so\n");
  for (const auto& m : c.mounts()) {
    ASSERT_EQ(mounts.count(m.container_path()), 1u) << m.container_path();
    EXPECT_EQ(mounts[m.container_path()]["hostPath"], m.host_path());
    EXPECT_EQ(mounts[m.container_path()]["options"][0], m.read_only() ? "ro" : "rw");
  }
  std::set<std::string> envs(edits["env"].begin(), edits["env"].end());
  EXPECT_EQ(envs.count("GPUSLICE_VGPU_DIR=/run/gpuslice/vgpu"), 1u);
  EXPECT_EQ(envs.count(std::string("CUDA_VISIBLE_DEVICES=") + kUuids[1]), 1u);
  for (const std::string& e : envs) EXPECT_NE(e.rfind("LD_PRELOAD=", 0), 0u) << e;
  std::set<std::string> nodes;
  for (const json& n : edits["deviceNodes"]) nodes.insert(n["path"]);
  EXPECT_EQ(nodes, (std::set<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia1"}));

  // libpath mode writes none: a preloaded library beside the shim would
  // interpose twice.
  env_.inject = InjectMode::kLibraryPath;
  MakeService();
  api_.PutPod(MakePod("ml", "two", "uid-two", {{"main", 50, 8}}, json::object(), "node-a"));
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 50)}, &response).ok());
  EXPECT_EQ(response.container_responses(0).cdi_devices_size(), 0);
  EXPECT_FALSE(std::filesystem::exists(CdiSpecPath(env_.cdi_dir, "k8s-uid-two-0")));
}

TEST_F(AllocationServiceTest, ALevelTheNodeDoesNotHaveIsRefusedListingItsLevels) {
  std::filesystem::create_directories(dir_ / "state");
  ASSERT_TRUE(node::StoreLevels(dir_ / "state", "levels:\n  - {name: gold, class: lc}\n").ok());
  // `high` is a default level, but not one of this node's.
  api_.PutPod(MakePod("ml", "p", "uid-p", {{"main", 10, 1}}, {{kPriorityAnnotation, "high"}}, "node-a"));
  const std::string before = StateFingerprint();
  const grpc::Status s = Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 10)});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  for (const char* needle : {"pod ml/p", "gpuslice.io/priority", "\"high\"", "node node-a", "gold, lc, be"}) {
    EXPECT_NE(s.error_message().find(needle), std::string::npos) << needle << " in: " << s.error_message();
  }
  EXPECT_EQ(StateFingerprint(), before);
}

TEST_F(AllocationServiceTest, MalformedAndImpossibleRequestsAreRefusedWithoutTrace) {
  // Bound in this order by the extender: infer, then big.
  api_.PutPod(MakePod("ml", "infer", "uid-infer", {{"main", 50, 8}},
                      {{kGpusAnnotation, R"({"main": [1]})"}, {kBindTimeAnnotation, "1"}}, "node-a"));
  api_.PutPod(MakePod("ml", "big", "uid-big", {{"main", 90, 8}},
                      {{kGpusAnnotation, R"({"main": [1]})"}, {kBindTimeAnnotation, "2"}}, "node-a"));
  ASSERT_TRUE(Allocate(Resource::kVcore, {Ids(Resource::kVcore, 1, 0, 50)}).ok());  // GPU 1 now half full
  const std::string before = StateFingerprint();

  struct Case {
    const char* name;
    Resource resource;
    std::vector<std::vector<std::string>> containers;
    grpc::StatusCode code;
    const char* want;
  } cases[] = {
      {"no container requests", Resource::kVcore, {}, grpc::StatusCode::INVALID_ARGUMENT, "has no container requests"},
      {"no device IDs", Resource::kVcore, {{}}, grpc::StatusCode::INVALID_ARGUMENT, "Allocate is empty"},
      {"unknown ID",
       Resource::kVcore,
       {{"GPU-nope-vcore-1"}},
       grpc::StatusCode::INVALID_ARGUMENT,
       "unknown gpuslice.io/vcore device ID \"GPU-nope-vcore-1\""},
      {"garbage ID",
       Resource::kVmemory,
       {{std::string(300, 'x')}},
       grpc::StatusCode::INVALID_ARGUMENT,
       "unknown gpuslice.io/vmemory device ID"},
      {"vmemory unit past the GPU",
       Resource::kVmemory,
       {Ids(Resource::kVmemory, 0, 10, 7)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "unknown gpuslice.io/vmemory device ID"},
      {"the other resource's ID",
       Resource::kVcore,
       {Ids(Resource::kVmemory, 0, 0, 2)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "belongs to gpuslice.io/vmemory, not gpuslice.io/vcore"},
      {"duplicate IDs",
       Resource::kVcore,
       {Concat(Ids(Resource::kVcore, 0, 0, 3), Ids(Resource::kVcore, 0, 2, 1))},
       grpc::StatusCode::INVALID_ARGUMENT,
       "is listed twice"},
      {"oversize: 150 vcore",
       Resource::kVcore,
       {Concat(Ids(Resource::kVcore, 0, 0, 100), Ids(Resource::kVcore, 1, 0, 50))},
       grpc::StatusCode::INVALID_ARGUMENT,
       "neither a share of one GPU"},
      {"oversize: no pod wants 200 vcore",
       Resource::kVcore,
       {Concat(Ids(Resource::kVcore, 0, 0, 100), Ids(Resource::kVcore, 1, 0, 100))},
       grpc::StatusCode::FAILED_PRECONDITION,
       "no pod waiting on node node-a has a container asking for exactly 200"},
      {"the annotated GPU is full",
       Resource::kVcore,
       {Ids(Resource::kVcore, 1, 0, 90)},
       grpc::StatusCode::FAILED_PRECONDITION,
       "GPU 1 has 50 vcore free, the container needs 90; delete the pod"},
      {"a second container fails: the first is undone",
       Resource::kVmemory,
       {Ids(Resource::kVmemory, 1, 0, 8), Ids(Resource::kVmemory, 0, 0, 9)},
       grpc::StatusCode::FAILED_PRECONDITION,
       "container request 1: no pod waiting"},
  };
  for (const Case& c : cases) {
    v1beta1::AllocateResponse response;
    const grpc::Status s = service_->Allocate(c.resource, AllocateOf(c.containers), &response);
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.want), std::string::npos) << c.name << ": " << s.error_message();
    EXPECT_EQ(response.container_responses_size(), 0) << c.name;
    EXPECT_EQ(StateFingerprint(), before) << c.name;
  }

  // Without the API, and with an API that fails.
  api_.SetListError("connection refused");
  grpc::Status s = Allocate(Resource::kVmemory, {Ids(Resource::kVmemory, 1, 0, 8)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("connection refused"), std::string::npos);
  AllocationService offline(&resources_, nullptr, provisioner_.get(), &store_, env_, PackingPolicy::kBinpack);
  v1beta1::AllocateResponse response;
  s = offline.Allocate(Resource::kVmemory, AllocateOf({Ids(Resource::kVmemory, 1, 0, 8)}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("no Kubernetes API access"), std::string::npos);
  EXPECT_EQ(StateFingerprint(), before);

  // And the state still works: the pending vmemory half goes through.
  api_.SetListError("");
  ASSERT_TRUE(Allocate(Resource::kVmemory, {Ids(Resource::kVmemory, 1, 0, 8)}).ok());
  EXPECT_EQ(resources_.Usage().gpus[1].vmemory_used, 8u);
}

TEST_F(AllocationServiceTest, AMissingLibraryIsReportedAndNothingIsKept) {
  std::filesystem::remove(dir_ / "lib/libgpuslice-cuda.so");
  api_.PutPod(MakePod("ml", "a", "uid-a", {{"main", 40, 4}}, json::object(), "node-a"));
  const grpc::Status s = Allocate(Resource::kVcore, {Ids(Resource::kVcore, 0, 0, 40)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("the gpuslice library is missing on the host"), std::string::npos);
  EXPECT_TRUE(provisioner_->List().empty());
  EXPECT_TRUE(store_.LoadAll(nullptr).empty());
}

TEST_F(AllocationServiceTest, PreferredAllocationFollowsTheTargetGpus) {
  std::vector<std::string> all_vcore = Concat(Ids(Resource::kVcore, 0, 0, 100), Ids(Resource::kVcore, 1, 0, 100));
  // A pod the extender put on GPU 1.
  api_.PutPod(MakePod("ml", "a", "uid-a", {{"main", 30, 4}}, {{kGpusAnnotation, R"({"main": [1]})"}}, "node-a"));
  auto picked = Prefer(Resource::kVcore, all_vcore, 30);
  ASSERT_EQ(picked.size(), 30u);
  for (const auto& id : picked) EXPECT_EQ(ParseDeviceId(id)->gpu_uuid, kUuids[1]) << id;
  // must_include comes first, whatever its GPU.
  picked = Prefer(Resource::kVcore, all_vcore, 30, {Ids(Resource::kVcore, 0, 5, 1)[0]});
  ASSERT_EQ(picked.size(), 30u);
  EXPECT_EQ(picked[0], Ids(Resource::kVcore, 0, 5, 1)[0]);
  // Whole GPUs: half from each.
  api_.Clear();
  api_.PutPod(MakePod("ml", "w", "uid-w", {{"main", 200, 16}}, json::object(), "node-a"));
  picked = Prefer(Resource::kVmemory, Concat(Ids(Resource::kVmemory, 0, 0, 16), Ids(Resource::kVmemory, 1, 0, 16)), 16);
  ASSERT_EQ(picked.size(), 16u);
  int on_gpu0 = 0;
  for (const auto& id : picked) on_gpu0 += ParseDeviceId(id)->gpu_uuid == kUuids[0];
  EXPECT_EQ(on_gpu0, 8);
  // No pod known: one GPU that can hold it all, the fuller one (binpack).
  api_.Clear();
  picked = Prefer(Resource::kVcore, Concat(Ids(Resource::kVcore, 0, 0, 100), Ids(Resource::kVcore, 1, 60, 40)), 30);
  ASSERT_EQ(picked.size(), 30u);
  for (const auto& id : picked) EXPECT_EQ(ParseDeviceId(id)->gpu_uuid, kUuids[1]) << id;
}

TEST_F(AllocationServiceTest, PreferredAllocationRejectsBadRequests) {
  const auto available = Ids(Resource::kVcore, 0, 0, 10);
  struct Case {
    std::vector<std::string> available;
    int size;
    std::vector<std::string> must;
    const char* want;
  } cases[] = {
      {available, 0, {}, "allocation_size 0 must be between 1 and the 10"},
      {available, 11, {}, "allocation_size 11"},
      {available, 2, {Ids(Resource::kVcore, 1, 0, 1)}, "is not among available_deviceIDs"},
      {{"bogus"}, 1, {}, "unknown gpuslice.io/vcore device ID \"bogus\""},
      {{}, 1, {}, "available_deviceIDs is empty"},
  };
  for (const Case& c : cases) {
    grpc::Status s;
    EXPECT_TRUE(Prefer(Resource::kVcore, c.available, c.size, c.must, &s).empty());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.want;
    EXPECT_NE(s.error_message().find(c.want), std::string::npos) << s.error_message();
  }
  v1beta1::PreferredAllocationResponse response;
  EXPECT_EQ(service_->GetPreferredAllocation(Resource::kVcore, {}, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace gpuslice::k8s
