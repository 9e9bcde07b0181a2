#include "fake_kubelet.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "k8s/names.h"

namespace gpuslice::k8s::testing {

class FakeKubelet::Service final : public v1beta1::Registration::Service {
 public:
  explicit Service(FakeKubelet* owner) : owner_(owner) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request, v1beta1::Empty*) override {
    // The checks the real kubelet makes before it accepts a plugin.
    if (request->version() != kDevicePluginApiVersion) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + request->version()};
    }
    struct stat st;
    if (stat((owner_->dir_ + "/" + request->endpoint()).c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "no socket at endpoint " + request->endpoint()};
    }
    std::lock_guard<std::mutex> lock(owner_->mu_);
    owner_->registrations_.push_back(*request);
    return grpc::Status::OK;
  }

 private:
  FakeKubelet* owner_;
};

FakeKubelet::FakeKubelet(std::string plugin_dir) : dir_(std::move(plugin_dir)) {}

FakeKubelet::~FakeKubelet() { Stop(false); }

void FakeKubelet::Start() {
  const std::string socket = dir_ + "/" + kKubeletSocketName;
  unlink(socket.c_str());
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
}

void FakeKubelet::Stop(bool wipe_directory) {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_->Wait();
    server_.reset();
  }
  unlink((dir_ + "/" + kKubeletSocketName).c_str());
  if (!wipe_directory) return;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') unlink((dir_ + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::Registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

bool FakeKubelet::WaitForRegistrations(size_t count, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Registrations().size() >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling interval
  }
  return Registrations().size() >= count;
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::Dial(const std::string& endpoint) const {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
}

DeviceStream::DeviceStream(v1beta1::DevicePlugin::Stub* stub, std::chrono::seconds lifetime) {
  context_.set_deadline(std::chrono::system_clock::now() + lifetime);
  reader_ = stub->ListAndWatch(&context_, v1beta1::Empty());
}

DeviceStream::~DeviceStream() {
  context_.TryCancel();
  reader_->Finish();
}

bool DeviceStream::Next(v1beta1::ListAndWatchResponse* response) { return reader_->Read(response); }

HealthCount CountHealth(const v1beta1::ListAndWatchResponse& list, const std::string& uuid_prefix) {
  HealthCount count;
  for (const auto& d : list.devices()) {
    if (d.id().rfind(uuid_prefix, 0) != 0) continue;
    (d.health() == kHealthy ? count.healthy : count.unhealthy)++;
  }
  return count;
}

}  // namespace gpuslice::k8s::testing
