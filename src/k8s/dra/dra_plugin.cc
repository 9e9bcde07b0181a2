#include "k8s/dra/dra_plugin.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "k8s/dra/resource_slice.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "k8s/dra/v1beta1/api.grpc.pb.h"
#include "k8s/plugin_server.h"
#include "k8s/pluginregistration/v1/api.grpc.pb.h"
#include "port/fd_passing.h"

namespace gpuslice::k8s::dra {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// Both API versions have the same messages (v1 adds Device.share_id), so
// one body serves both.
template <typename Request, typename Response>
void PrepareAll(ClaimPreparer& preparer, const Request& request, Response* response) {
  for (const auto& claim : request.claims()) {
    auto& out = (*response->mutable_claims())[claim.uid()];
    auto devices = preparer.Prepare(claim.namespace_(), claim.uid(), claim.name());
    if (!devices.ok()) {
      out.set_error(devices.status().message());
      std::cerr << "gpuslice dra-plugin: prepare " << claim.namespace_() << "/" << claim.name() << ": "
                << devices.status().message() << "\n";
      continue;
    }
    for (const PreparedDevice& d : *devices) {
      auto* device = out.add_devices();
      for (const std::string& r : d.requests) device->add_request_names(r);
      device->set_pool_name(d.pool);
      device->set_device_name(d.device);
      for (const std::string& id : d.cdi_device_ids) device->add_cdi_device_ids(id);
      if constexpr (requires { device->set_share_id(std::string()); }) {
        if (d.share_id) device->set_share_id(*d.share_id);
      }
    }
  }
}

template <typename Request, typename Response>
void UnprepareAll(ClaimPreparer& preparer, const Request& request, Response* response) {
  for (const auto& claim : request.claims()) {
    auto& out = (*response->mutable_claims())[claim.uid()];
    if (Status s = preparer.Unprepare(claim.uid()); !s.ok()) out.set_error(s.message());
  }
}

StatusOr<std::unique_ptr<grpc::Server>> Serve(const std::string& socket_path, std::vector<grpc::Service*> services) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(socket_path).parent_path(), ec);
  if (ec) return Status::Error("cannot create the directory of " + socket_path + ": " + ec.message());
  unlink(socket_path.c_str());  // a previous run's socket
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Status::Error("cannot serve on " + socket_path + "; is the directory writable (hostPath mount)?");
  if (chmod(socket_path.c_str(), 0600) != 0) {
    return Status::Error("cannot make " + socket_path + " owner-only: " + strerror(errno));
  }
  return server;
}

}  // namespace

class DraPlugin::RegistrationService final : public ::pluginregistration::Registration::Service {
 public:
  explicit RegistrationService(DraPlugin* plugin) : plugin_(plugin) {}
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type(kDraPluginType);
    info->set_name(plugin_->options_.driver);
    info->set_endpoint(plugin_->dra_socket());
    info->add_supported_versions(kDraV1Version);
    info->add_supported_versions(kDraV1beta1Version);
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
                                        ::pluginregistration::RegistrationStatusResponse*) override {
    plugin_->registered_ = status->plugin_registered();
    if (!status->plugin_registered()) {
      std::cerr << "gpuslice dra-plugin: the kubelet refused the registration: " << status->error() << "\n";
    }
    return grpc::Status::OK;
  }

 private:
  DraPlugin* plugin_;
};

class DraPlugin::V1Service final : public drav1::DRAPlugin::Service {
 public:
  explicit V1Service(ClaimPreparer* preparer) : preparer_(preparer) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*, const drav1::NodePrepareResourcesRequest* request,
                                    drav1::NodePrepareResourcesResponse* response) override {
    PrepareAll(*preparer_, *request, response);
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const drav1::NodeUnprepareResourcesRequest* request,
                                      drav1::NodeUnprepareResourcesResponse* response) override {
    UnprepareAll(*preparer_, *request, response);
    return grpc::Status::OK;
  }

 private:
  ClaimPreparer* preparer_;
};

class DraPlugin::V1beta1Service final : public drav1beta1::DRAPlugin::Service {
 public:
  explicit V1beta1Service(ClaimPreparer* preparer) : preparer_(preparer) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*, const drav1beta1::NodePrepareResourcesRequest* request,
                                    drav1beta1::NodePrepareResourcesResponse* response) override {
    PrepareAll(*preparer_, *request, response);
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const drav1beta1::NodeUnprepareResourcesRequest* request,
                                      drav1beta1::NodeUnprepareResourcesResponse* response) override {
    UnprepareAll(*preparer_, *request, response);
    return grpc::Status::OK;
  }

 private:
  ClaimPreparer* preparer_;
};

std::string DraPlugin::registration_socket() const {
  return options_.registry_dir + "/" + options_.driver + "-reg.sock";
}

std::string DraPlugin::dra_socket() const { return options_.plugins_dir + "/" + options_.driver + "/dra.sock"; }

StatusOr<std::unique_ptr<DraPlugin>> DraPlugin::Start(DraPluginOptions options, DraPluginParts parts) {
  if (options.node_name.empty()) return Status::Error("no node name; pass --node-name or set NODE_NAME (downward API)");
  if (!parts.discovery || !parts.health || !parts.api || !parts.provisioner) {
    return Status::Error("the DRA plugin needs GPU discovery, health, the API client and a provisioner");
  }
  if (!options.device_plugin_dir.empty()) {
    for (Resource r : {Resource::kVcore, Resource::kVmemory}) {
      const std::string socket = options.device_plugin_dir + "/" + PluginSocketName(r);
      if (port::UnixSocketAnswers(socket)) {
        return Status::Error("gpuslice's device plugin is serving this node's GPUs (" + socket +
                             " answers); run the device plugin or the DRA plugin on a node, not both: move the "
                             "node's label from gpuslice.io/enabled to gpuslice.io/dra, or pass --device-plugin-dir "
                             "\"\" to skip this check");
      }
    }
  }
  std::unique_ptr<DraPlugin> p(new DraPlugin());
  p->options_ = std::move(options);
  p->parts_ = std::move(parts);
  std::string document;
  auto topology = p->parts_.discovery->Discover(&document);
  if (!topology.ok()) return topology.status();
  if (topology->gpus.empty()) return Status::Error("no GPUs found on this node; is the NVIDIA driver loaded?");
  p->topology_ = *topology;

  PreparerOptions po;
  po.driver = p->options_.driver;
  po.pool = p->options_.node_name;
  po.cdi_dir = p->options_.cdi_dir;
  po.vgpu_state_dir = p->options_.state_dir;
  po.plugin_state_dir = p->options_.state_dir + "/dra";
  po.container = p->options_.container;
  po.proc_root = p->options_.container.proc_root;
  auto preparer = ClaimPreparer::Open(po, p->topology_, p->parts_.api.get(), p->parts_.provisioner.get());
  if (!preparer.ok()) return preparer.status();
  p->preparer_ = std::move(*preparer);

  // The DRA service first: the kubelet dials it as soon as it sees the
  // registration socket.
  p->v1_service_ = std::make_unique<V1Service>(p->preparer_.get());
  p->v1beta1_service_ = std::make_unique<V1beta1Service>(p->preparer_.get());
  auto dra = Serve(p->dra_socket(), {p->v1_service_.get(), p->v1beta1_service_.get()});
  if (!dra.ok()) return dra.status();
  p->dra_server_ = std::move(*dra);
  p->registration_service_ = std::make_unique<RegistrationService>(p.get());
  auto reg = Serve(p->registration_socket(), {p->registration_service_.get()});
  if (!reg.ok()) return reg.status();
  p->registration_server_ = std::move(*reg);

  p->health_thread_ = std::thread([raw = p.get()] { raw->HealthLoop(); });
  return p;
}

DraPlugin::~DraPlugin() { Stop(); }

void DraPlugin::Stop() {
  {
    port::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  stop_cv_.NotifyAll();
  if (health_thread_.joinable()) health_thread_.join();
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
  if (registration_server_) {
    registration_server_->Shutdown(deadline);
    registration_server_.reset();
    unlink(registration_socket().c_str());
  }
  if (dra_server_) {
    dra_server_->Shutdown(deadline);
    dra_server_.reset();
    unlink(dra_socket().c_str());
  }
}

Status DraPlugin::Publish(const std::set<std::string>& healthy) {
  // The node's levels as claims may name them now; unreadable stored levels
  // are the daemon's to fix, and claims naming them fail at prepare with
  // that reason, so the slice falls back to the defaults rather than
  // withholding the GPUs.
  auto levels = parts_.provisioner->Levels();
  if (!levels.ok()) {
    std::cerr << "gpuslice dra-plugin: " << levels.status().message() << " (publishing the default levels)\n";
    levels = task::LevelTable::Defaults();
  }
  ++generation_;
  auto stored =
      parts_.api->ApplyResourceSlice(BuildResourceSlice(options_.node_name, topology_, healthy, generation_, *levels));
  if (!stored.ok()) return stored.status();
  ++publications_;
  return Status::Ok();
}

void DraPlugin::HealthLoop() {
  std::optional<std::set<std::string>> published;
  while (true) {
    auto healthy = parts_.health->HealthyGpus();
    // An error means nothing can be told: no GPU is offered until a poll works.
    const std::set<std::string> now = healthy.ok() ? *healthy : std::set<std::string>();
    if (!published || *published != now) {
      if (Status s = Publish(now); s.ok()) {
        published = now;
      } else {
        std::cerr << "gpuslice dra-plugin: publishing the ResourceSlice: " << s.message() << " (retrying)\n";
      }
    }
    port::MutexLock lock(&stop_mu_);
    if (stop_cv_.WaitFor(&stop_mu_, options_.health_interval, [this] {
          stop_mu_.AssertHeld();
          return stop_;
        })) {
      return;
    }
  }
}

}  // namespace gpuslice::k8s::dra
