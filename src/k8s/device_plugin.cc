#include "k8s/device_plugin.h"

#include <spdlog/spdlog.h>

#include "port/fd_passing.h"

namespace gpuslice::k8s {
namespace {

// Records written before a GPU moved index (a reboot with a GPU removed)
// are re-pointed by UUID; records of GPUs that are gone keep their place
// until the reclaimer removes them.
Assignment Reindexed(Assignment a, const NodeTopology& topology) {
  for (size_t i = 0; i < a.uuids.size() && i < a.gpus.size(); ++i) {
    if (const TopologyGpu* g = topology.GpuByUuid(a.uuids[i])) {
      a.gpus[i] = g->index;
    } else {
      spdlog::warn("GPU {} of vGPU {} is no longer on this node", a.uuids[i], a.vgpu);
    }
  }
  return a;
}

}  // namespace

StatusOr<std::unique_ptr<DevicePlugin>> DevicePlugin::Start(DevicePluginOptions options, DevicePluginParts parts) {
  if (options.node_name.empty()) {
    return Status::Error(
        "the device plugin needs the node's name; pass --node-name (the DaemonSet sets it from "
        "spec.nodeName)");
  }
  if (!options.dra_registry_dir.empty()) {
    const std::string socket = options.dra_registry_dir + "/" + dra::kDriverName + "-reg.sock";
    if (port::UnixSocketAnswers(socket)) {
      return Status::Error("gpuslice's DRA plugin is serving this node's GPUs (" + socket +
                           " answers); run the device plugin or the DRA plugin on a node, not both: move the node's "
                           "label from gpuslice.io/dra to gpuslice.io/enabled, or pass --dra-registry-dir \"\" to "
                           "skip this check");
    }
  }
  std::string document;
  auto topology = parts.discovery->Discover(&document);
  if (!topology.ok()) return Status::Error("cannot list this node's GPUs: " + topology.status().message());
  if (topology->gpus.empty()) return Status::Error("this node has no GPUs; run the device plugin on GPU nodes only");

  std::unique_ptr<DevicePlugin> self(new DevicePlugin());
  self->options_ = options;
  self->parts_ = std::move(parts);
  self->resources_ = std::make_unique<ResourceManager>(*topology, options.node_name);
  self->store_ = std::make_unique<AssignmentStore>(options.state_dir + "/k8s/assignments");
  std::vector<std::string> problems;
  for (const Assignment& a : self->store_->LoadAll(&problems)) self->resources_->Put(Reindexed(a, *topology));
  for (const std::string& p : problems) spdlog::warn("{}", p);

  if (auto healthy = self->parts_.health->HealthyGpus(); healthy.ok()) {
    self->resources_->SetHealthy(*healthy);
  } else {
    spdlog::warn("GPU health unknown, all unhealthy: {}", healthy.status().message());
    self->resources_->SetHealthy({});
  }

  self->allocations_ = std::make_unique<AllocationService>(self->resources_.get(), self->parts_.api.get(),
                                                           self->parts_.provisioner.get(), self->store_.get(),
                                                           options.container, options.policy);
  self->registrar_ = std::make_unique<KubeletRegistrar>(options.plugin_dir,
                                                        std::vector<Resource>{Resource::kVcore, Resource::kVmemory},
                                                        self->resources_.get(), self->allocations_.get());
  self->probe_ = std::make_unique<HostProcessProbe>(options.proc_root);
  self->reclaimer_ = std::make_unique<Reclaimer>(
      self->resources_.get(), self->store_.get(), self->parts_.provisioner.get(), self->parts_.liveness.get(),
      self->probe_.get(), options.state_dir, options.container.cdi_dir, options.reclaim_grace);
  DevicePlugin* p = self.get();
  p->threads_.emplace_back([p] { p->registrar_->Run(p->stop_); });
  p->threads_.emplace_back([p] { p->HealthLoop(); });
  p->threads_.emplace_back([p] { p->reclaimer_->Run(p->stop_, p->options_.reclaim_interval); });
  if (p->parts_.api != nullptr) {
    p->publisher_ = std::make_unique<NodePublisher>(p->parts_.api.get(), p->resources_.get(), document);
    p->threads_.emplace_back([p] { p->publisher_->Run(p->stop_); });
  }
  spdlog::info("node {}, {} GPU(s), {} vcore and {} vmemory devices", options.node_name, topology->gpus.size(),
               p->resources_->DeviceCount(Resource::kVcore), p->resources_->DeviceCount(Resource::kVmemory));
  return self;
}

void DevicePlugin::HealthLoop() {
  bool failing = false;
  while (!stop_.load()) {
    auto healthy = parts_.health->HealthyGpus();
    if (!healthy.ok()) {
      if (!failing) {
        spdlog::warn("GPU health unknown, all unhealthy: {}", healthy.status().message());
      }
      failing = true;
      resources_->SetHealthy({});
    } else {
      failing = false;
      if (resources_->SetHealthy(*healthy)) {
        for (const TopologyGpu& g : resources_->topology().gpus) {
          spdlog::info("GPU {} ({}) is {}", g.index, g.uuid, resources_->IsHealthy(g.index) ? "healthy" : "UNHEALTHY");
        }
      }
    }
    // Wakes early only at shutdown (the usage counter moves then too).
    const auto deadline = std::chrono::steady_clock::now() + options_.health_interval;
    while (!stop_.load() && std::chrono::steady_clock::now() < deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      resources_->WaitForUsageChange(resources_->usage_version(), std::min(left, std::chrono::milliseconds(200)));
    }
  }
}

void DevicePlugin::Stop() {
  if (stop_.exchange(true)) return;
  resources_->Shutdown();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

DevicePlugin::~DevicePlugin() { Stop(); }

}  // namespace gpuslice::k8s
