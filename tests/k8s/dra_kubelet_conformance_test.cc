// Kubelet-side conformance of the real `gpuslice dra-plugin` process: this
// program plays the kubelet over the plugin's unix sockets, against a fake
// API server over HTTPS that serves ResourceClaims and takes ResourceSlices.
// The GPUs are the fake NVML's (two, 4 GiB each). dra_plugin_test.cc covers
// the plugin's logic in-process; this covers the binary as deployed:
//   - registration (GetInfo, NotifyRegistrationStatus) on owner-only sockets;
//   - the ResourceSlice published, one device per GPU;
//   - prepare: the claimed vGPU, a CDI spec, and, where an application image
//     is given, a CUDA application in a container set up by that spec alone
//     keeping its limit;
//   - unprepare: vGPU and spec gone;
//   - SIGTERM: a clean exit.
// tests/k8s/image_test.sh runs it with the plugin in a container of the
// built image (container_runner.h).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>

#include "container_runner.h"
#include "core/vgpu_store.h"
#include "fake_api_server.h"
#include "k8s/cdi.h"
#include "k8s/dra/names.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "k8s/pluginregistration/v1/api.grpc.pb.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;
using testing::TempDir;
using testing::WaitFor;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr uint64_t kGpuMemory = 4ull << 30;
constexpr char kSlice[] = "node-a-gpu.gpuslice.io";

int Mode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
}

class DraKubeletConformance : public ::testing::Test {
 protected:
  DraKubeletConformance() : api_({true, "dra-token", dir_.path()}) {}

  void SetUp() override {
    for (const char* d : {"registry", "plugins", "cdi", "dev", "device-plugins"}) {
      std::filesystem::create_directories(dir_ / d);
    }
    for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"}) {
      testing::WriteFile(dir_ / ("dev/" + std::string(node)), "");
    }
    testing::WriteFile(dir_ / "token", "dra-token\n");
    // GPU 0: the fake driver shows an application every GPU whatever
    // CUDA_VISIBLE_DEVICES says, so the vGPU's must be its first.
    api_.PutResourceClaim(testing::MakeDraClaim(
        "ml", "app", "uid-app", "node-a", "gpu-0", "30", "1Gi",
        {{"apiVersion", dra::kConfigApiVersion}, {"kind", dra::kConfigKind}, {"priority", "be"}}));
    testing::GpusliceProcess::Options o;
    o.binary = GPUSLICE_BINARY;
    o.args = {"dra-plugin",
              "--node-name=node-a",
              "--registry-dir=" + dir_ / "registry",
              "--plugins-dir=" + dir_ / "plugins",
              "--cdi-dir=" + dir_ / "cdi",
              "--device-plugin-dir=" + dir_ / "device-plugins",
              "--state-dir=" + dir_ / "state",
              "--library-dir=" + std::string(GPUSLICE_LIBRARY_DIR),
              "--dev-root=" + dir_ / "dev",
              "--health-interval=1",
              "--kube-api-url=" + api_.url(),
              "--kube-token-file=" + dir_ / "token",
              "--kube-ca-file=" + api_.ca_file()};
    o.env = {"PATH=/usr/bin:/bin", "GPUSLICE_REAL_NVML=" + std::string(FAKE_NVML_LIBRARY), "FAKE_GPU_COUNT=2",
             "FAKE_GPU_MEMORY=" + std::to_string(kGpuMemory), "GPUSLICE_LOG=info"};
    o.shared_paths = {dir_.path(), GPUSLICE_LIBRARY_DIR, FAKE_NVML_LIBRARY};
    o.log_file = dir_ / "plugin.log";
    ASSERT_TRUE(plugin_.Start(o)) << Log();
    // Served once its mode is owner-only (the plugin narrows it after the
    // bind).
    ASSERT_TRUE(WaitFor([&] { return Mode(RegistrationSocket()) == 0600 && Mode(DraSocket()) == 0600; })) << Log();
  }

  void TearDown() override {
    if (!plugin_.running()) return;
    const int status = plugin_.Stop();
    EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n" << Log();
  }

  std::string Log() const { return testing::ReadFile(dir_ / "plugin.log"); }
  std::string RegistrationSocket() const { return dir_ / "registry/gpu.gpuslice.io-reg.sock"; }
  std::string DraSocket() const { return dir_ / "plugins/gpu.gpuslice.io/dra.sock"; }
  static std::shared_ptr<grpc::Channel> Dial(const std::string& socket) {
    return grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
  }

  template <typename Request, typename Response, typename Call>
  grpc::Status CallDra(Call call, const Request& request, Response* response) {
    auto stub = drav1::DRAPlugin::NewStub(Dial(DraSocket()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ((*stub).*call)(&context, request, response);
  }

  TempDir dir_;
  FakeApiServer api_;
  testing::GpusliceProcess plugin_;
};

TEST_F(DraKubeletConformance, RegistersPublishesPreparesAndUnpreparesAClaim) {
  // Registration, as the kubelet's plugin watcher does it.
  auto registration = ::pluginregistration::Registration::NewStub(Dial(RegistrationSocket()));
  ::pluginregistration::PluginInfo info;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(registration->GetInfo(&context, {}, &info).ok()) << Log();
  }
  EXPECT_EQ(info.type(), dra::kDraPluginType);
  EXPECT_EQ(info.name(), dra::kDriverName);
  EXPECT_EQ(info.endpoint(), DraSocket());
  ::pluginregistration::RegistrationStatus registered;
  registered.set_plugin_registered(true);
  ::pluginregistration::RegistrationStatusResponse ack;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(registration->NotifyRegistrationStatus(&context, registered, &ack).ok());
  }

  // The ResourceSlice: the fake NVML's two GPUs.
  ASSERT_TRUE(WaitFor([&] { return !api_.ResourceSlice(kSlice).is_null(); })) << Log();
  const json slice = api_.ResourceSlice(kSlice);
  ASSERT_EQ(slice["spec"]["devices"].size(), 2u) << slice.dump(2);
  EXPECT_EQ(slice["spec"]["devices"][1]["capacity"]["memory"]["value"], "4Gi");
  EXPECT_EQ(slice["spec"]["devices"][1]["allowMultipleAllocations"], true);

  // Prepare: the claimed vGPU and its CDI spec.
  drav1::NodePrepareResourcesRequest prepare;
  auto* claim = prepare.add_claims();
  claim->set_namespace_("ml");
  claim->set_name("app");
  claim->set_uid("uid-app");
  drav1::NodePrepareResourcesResponse prepared;
  const grpc::Status s = CallDra(&drav1::DRAPlugin::Stub::NodePrepareResources, prepare, &prepared);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << Log();
  ASSERT_EQ(prepared.claims().count("uid-app"), 1u);
  const auto& result = prepared.claims().at("uid-app");
  ASSERT_EQ(result.error(), "") << Log();
  ASSERT_EQ(result.devices_size(), 1);
  ASSERT_EQ(result.devices(0).cdi_device_ids_size(), 1);
  const std::string id = result.devices(0).cdi_device_ids(0);
  EXPECT_EQ(id, "gpu.gpuslice.io/vgpu=uid-app-0");
  auto handle = core::VgpuHandle::Open(dir_ / "state/vgpus/dra-uid-app", port::MappedFile::Access::kReadOnly);
  ASSERT_TRUE(handle.ok()) << handle.status().message() << "\n" << Log();
  ASSERT_EQ(handle->limits().device_count, 1u);
  EXPECT_EQ(handle->limits().devices[0].memory_limit_bytes, 1ull << 30);
  EXPECT_EQ(handle->limits().devices[0].compute_share_pct, 30u);
  const std::string spec_path = CdiSpecPath(dir_ / "cdi", "uid-app");
  const json spec = json::parse(testing::ReadFile(spec_path));
  testing::ExpectValidCdi(spec);

  if (!testing::AppImage().empty()) {
    const std::string device = id.substr(id.find('=') + 1);
    std::string output;
    const int rc = testing::RunWithCdiDevice(
        spec, device, {"/usr/local/bin/cuda_app", "init", "meminfo", "alloc", "768M", "alloc", "512M"},
        {"FAKE_GPU_COUNT=2", "FAKE_GPU_MEMORY=" + std::to_string(kGpuMemory)}, &output);
    ASSERT_EQ(rc, 0) << output;
    EXPECT_NE(output.find("meminfo 1073741824 1073741824"), std::string::npos) << output;
    EXPECT_TRUE(testing::InOrder(output, {"alloc ok", "alloc oom"})) << output;
  }

  // Unprepare: the vGPU and the spec are gone; a second call is a no-op.
  drav1::NodeUnprepareResourcesRequest unprepare;
  auto* gone = unprepare.add_claims();
  gone->set_namespace_("ml");
  gone->set_name("app");
  gone->set_uid("uid-app");
  for (int i = 0; i < 2; ++i) {
    drav1::NodeUnprepareResourcesResponse unprepared;
    ASSERT_TRUE(CallDra(&drav1::DRAPlugin::Stub::NodeUnprepareResources, unprepare, &unprepared).ok()) << Log();
    ASSERT_EQ(unprepared.claims().count("uid-app"), 1u);
    EXPECT_EQ(unprepared.claims().at("uid-app").error(), "") << Log();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "state/vgpus/dra-uid-app"));
  EXPECT_FALSE(std::filesystem::exists(spec_path));
}

}  // namespace
}  // namespace gpuslice::k8s
