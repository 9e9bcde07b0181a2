#include "k8s/plugin_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "k8s/names.h"

namespace gpuslice::k8s {
namespace {

// How often a ListAndWatch stream looks up from its wait to notice a
// hang-up or a stopping server.
constexpr std::chrono::milliseconds kStreamWakeup{250};

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(Resource resource, ResourceManager* resources, AllocationService* allocations)
      : resource_(resource), resources_(resources), allocations_(allocations) {}

  void Stop() { stopping_.store(true); }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* options) override {
    options->set_pre_start_required(false);
    options->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    uint64_t sent = 0;
    for (;;) {
      if (stopping_.load() || context->IsCancelled() || resources_->shut_down()) return grpc::Status::OK;
      const uint64_t version = resources_->health_version();
      if (version != sent) {
        v1beta1::ListAndWatchResponse response;
        for (const ResourceManager::Device& d : resources_->Devices(resource_)) {
          v1beta1::Device* device = response.add_devices();
          device->set_id(d.id);
          device->set_health(d.healthy ? kHealthy : kUnhealthy);
        }
        if (!writer->Write(response)) return grpc::Status::OK;  // the kubelet hung up
        sent = version;
      }
      resources_->WaitForHealthChange(sent, kStreamWakeup);
    }
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    return allocations_->GetPreferredAllocation(resource_, *request, response);
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    grpc::Status s = allocations_->Allocate(resource_, *request, response);
    if (!s.ok()) {
      spdlog::warn("Allocate {} refused: {}", ResourceName(resource_), s.error_message());
    }
    return s;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const Resource resource_;
  ResourceManager* resources_;
  AllocationService* allocations_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

struct PluginServer::Impl {
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<grpc::Server> server;
};

std::string PluginSocketName(Resource resource) {
  return resource == Resource::kVcore ? "gpuslice-vcore.sock" : "gpuslice-vmemory.sock";
}

StatusOr<std::unique_ptr<PluginServer>> PluginServer::Start(Resource resource, const std::string& socket_path,
                                                            ResourceManager* resources,
                                                            AllocationService* allocations) {
  unlink(socket_path.c_str());
  std::unique_ptr<PluginServer> self(new PluginServer());
  self->impl_ = std::make_unique<Impl>();
  self->resource_ = resource;
  self->socket_path_ = socket_path;
  self->impl_->service = std::make_unique<DevicePluginService>(resource, resources, allocations);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(self->impl_->service.get());
  self->impl_->server = builder.BuildAndStart();
  if (self->impl_->server == nullptr) {
    return Status::Error("cannot serve " + std::string(ResourceName(resource)) + " on " + socket_path +
                         "; is the kubelet's device-plugins directory mounted and writable?");
  }
  struct stat st;
  if (chmod(socket_path.c_str(), 0600) != 0 || stat(socket_path.c_str(), &st) != 0) {
    self->Stop();
    return Status::Error("cannot restrict " + socket_path + " to its owner");
  }
  self->socket_inode_ = st.st_ino;
  return self;
}

void PluginServer::Stop() {
  if (impl_ == nullptr || impl_->server == nullptr) return;
  impl_->service->Stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
  impl_->server.reset();
  struct stat st;
  if (stat(socket_path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) unlink(socket_path_.c_str());
}

PluginServer::~PluginServer() { Stop(); }

Status RegisterWithKubelet(const std::string& kubelet_socket, Resource resource, std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + kubelet_socket, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(kDevicePluginApiVersion);
  request.set_endpoint(PluginSocketName(resource));
  request.set_resource_name(ResourceName(resource));
  request.mutable_options()->set_pre_start_required(false);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1beta1::Empty reply;
  const grpc::Status s = stub->Register(&context, request, &reply);
  if (!s.ok()) {
    return Status::Error("registering " + std::string(ResourceName(resource)) + " with the kubelet at " +
                         kubelet_socket + " failed: " + s.error_message());
  }
  return Status::Ok();
}

}  // namespace gpuslice::k8s
